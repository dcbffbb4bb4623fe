"""Builders for the volume plugins' tests (PVs, PVCs, StorageClasses, CSINodes, a snapshot with
them), after upstream's ``test_utils.go``; and the storage helpers of ``kubesched.api`` they use."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import (
    ANN_BIND_COMPLETED,
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    TopologySelectorTerm,
    ephemeral_claim_name,
    ephemeral_volume_is_for_pod,
    persistent_volume_claim_class,
    persistent_volume_class,
    pod_claim_names,
    topology_selector_terms_match,
    volume_node_affinity_matches,
)
from kubesched.framework import APIClient, Handle, PodInfo, Snapshot

WAIT = "WaitForFirstConsumer"
IMMEDIATE = "Immediate"
HOSTNAME = "kubernetes.io/hostname"

_uids = itertools.count(1)


def node(name: str, labels: Mapping[str, str] | None = None, **kwargs: Any) -> Node:
    """``makeNode``: a node labelled with its hostname."""
    return make_node(name, labels={HOSTNAME: name, **(labels or {})}, **kwargs)


def pv(
    name: str,
    storage_class: str = "",
    *,
    capacity: str | None = None,
    phase: str = "",
    access_modes: Sequence[str] = (),
    node_affinity: Mapping[str, Sequence[str]] | None = None,
    claim: PersistentVolumeClaim | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    resource_version: str = "1",
    spec: Mapping[str, Any] | None = None,
) -> PersistentVolume:
    """``makePV``; ``node_affinity`` is one term with an ``In`` requirement per key."""
    raw: dict[str, Any] = {"storageClassName": storage_class, "accessModes": list(access_modes)}
    if capacity is not None:
        raw["capacity"] = {"storage": capacity}
    if node_affinity is not None:
        exprs = [{"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()]
        raw["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if claim is not None:
        m = claim.metadata
        raw["claimRef"] = {"namespace": m.namespace, "name": m.name, "uid": m.uid}
    raw.update(spec or {})
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "uid": f"pv-uid-{next(_uids)}",
                "resourceVersion": resource_version,
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": raw,
            "status": {"phase": phase},
        },
        PersistentVolume,
    )


def pvc(
    name: str,
    storage_class: str | None = "",
    *,
    namespace: str = "default",
    request: str | None = None,
    bound_to: str = "",
    volume_name: str = "",
    phase: str = "",
    access_modes: Sequence[str] = (),
    annotations: Mapping[str, str] | None = None,
    selector: Mapping[str, Any] | None = None,
    owner: Pod | None = None,
    resource_version: str = "1",
) -> PersistentVolumeClaim:
    """``makePVC``; ``bound_to`` is ``withBoundPV`` (volumeName and bind-completed)."""
    ann = dict(annotations or {})
    if bound_to:
        ann[ANN_BIND_COMPLETED] = "true"
    spec: dict[str, Any] = {
        "accessModes": list(access_modes),
        "volumeName": bound_to or volume_name,
    }
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if request is not None:
        spec["resources"] = {"requests": {"storage": request}}
    if selector is not None:
        spec["selector"] = dict(selector)
    owners = []
    if owner is not None:
        owners = [
            {
                "kind": "Pod",
                "name": owner.metadata.name,
                "uid": owner.metadata.uid,
                "controller": True,
            }
        ]
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"pvc-uid-{next(_uids)}",
                "resourceVersion": resource_version,
                "annotations": ann,
                "ownerReferences": owners,
            },
            "spec": spec,
            "status": {"phase": phase},
        },
        PersistentVolumeClaim,
    )


def storage_class(
    name: str,
    mode: str | None = WAIT,
    *,
    provisioner: str = "",
    allowed_topologies: Sequence[Mapping[str, Sequence[str]]] = (),
) -> StorageClass:
    """A class; each ``allowed_topologies`` entry is one term (key -> values)."""
    raw: dict[str, Any] = {"metadata": {"name": name}, "provisioner": provisioner}
    if mode is not None:
        raw["volumeBindingMode"] = mode
    raw["allowedTopologies"] = [
        {"matchLabelExpressions": [{"key": k, "values": list(v)} for k, v in term.items()]}
        for term in allowed_topologies
    ]
    return msgspec.convert(raw, StorageClass)


def csi_node(
    name: str, drivers: Mapping[str, int | None], *, migrated: Sequence[str] = ()
) -> CSINode:
    """A CSINode; a driver's value is its ``allocatable.count`` (``None``: no limit)."""
    annotations = {}
    if migrated:
        annotations["storage.alpha.kubernetes.io/migrated-plugins"] = ",".join(migrated)
    return msgspec.convert(
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "drivers": [
                    {
                        "name": d,
                        "nodeID": name,
                        **({"allocatable": {"count": c}} if c is not None else {}),
                    }
                    for d, c in drivers.items()
                ]
            },
        },
        CSINode,
    )


def claim_pod(
    name: str,
    *claims: str,
    namespace: str = "default",
    node_name: str = "",
    volumes: Sequence[Mapping[str, Any]] = (),
) -> Pod:
    """``makePod(...).withPVCVolume``: one volume per claim, plus raw ``volumes``."""
    vols = [
        {"name": f"vol{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    vols.extend(dict(v) for v in volumes)
    return make_pod(name, namespace=namespace, node_name=node_name, spec={"volumes": vols})


class FakeHandle:
    """What the volume plugins use of a Handle: the snapshot and the API client."""

    def __init__(self, snapshot: Snapshot, client: APIClient | None = None) -> None:
        self.snapshot = snapshot
        self.client = client
        self.profile_name = "test"


def cluster(
    nodes: Iterable[Node] = (),
    objects: Iterable[Any] = (),
    running: Iterable[Pod] = (),
) -> Snapshot:
    """A snapshot with nodes, stored objects and pods running where their nodeName says."""
    snapshot = Snapshot()
    for n in nodes:
        snapshot.set_node(n)
    for obj in objects:
        snapshot.objects.set(obj)
    for p in running:
        snapshot.add_pod(PodInfo.of(p), p.spec.node_name)
    return snapshot


def handle(snapshot: Snapshot, client: APIClient | None = None) -> Handle:
    return cast(Handle, FakeHandle(snapshot, client))


# --- the storage helpers --------------------------------------------------------------------


def test_claim_class_prefers_the_beta_annotation() -> None:
    claim = pvc("a", "gold", annotations={"volume.beta.kubernetes.io/storage-class": "silver"})
    assert persistent_volume_claim_class(claim) == "silver"
    assert persistent_volume_claim_class(pvc("b", None)) == ""
    assert persistent_volume_claim_class(pvc("c", "gold")) == "gold"
    volume = pv("v", "gold", annotations={"volume.beta.kubernetes.io/storage-class": "x"})
    assert persistent_volume_class(volume) == "x"
    assert persistent_volume_class(pv("w", "gold")) == "gold"


def test_volume_node_affinity() -> None:
    volume = pv("v", node_affinity={HOSTNAME: ["a", "b"]})
    assert volume_node_affinity_matches(volume, {HOSTNAME: "a"})
    assert not volume_node_affinity_matches(volume, {HOSTNAME: "c"})
    assert not volume_node_affinity_matches(volume, {})
    assert volume_node_affinity_matches(pv("free"), {})
    by_name = pv(
        "named",
        spec={
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["a"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    # The node is known by its labels only: a field selector sees no name.
    assert not volume_node_affinity_matches(by_name, {HOSTNAME: "a"})


@pytest.mark.parametrize(
    ("terms", "labels", "want"),
    [
        pytest.param([], {}, True, id="no terms"),
        pytest.param([{"zone": ["a"]}], {"zone": "a"}, True, id="match"),
        pytest.param([{"zone": ["a"]}], {"zone": "b"}, False, id="other value"),
        pytest.param([{"zone": ["a"]}], {}, False, id="no label"),
        pytest.param([{"zone": ["a"], "region": ["r"]}], {"zone": "a"}, False, id="all required"),
        pytest.param([{"zone": ["a"]}, {"zone": ["b"]}], {"zone": "b"}, True, id="terms ORed"),
        pytest.param([{"zone": []}], {"zone": ""}, False, id="no values never match"),
    ],
)
def test_topology_selector_terms(
    terms: list[dict[str, list[str]]], labels: dict[str, str], want: bool
) -> None:
    parsed = msgspec.convert(
        [{"matchLabelExpressions": [{"key": k, "values": v} for k, v in t.items()]} for t in terms],
        list[TopologySelectorTerm],
    )
    assert topology_selector_terms_match(parsed, labels) is want


def test_ephemeral_claims() -> None:
    pod = claim_pod("web", "data", volumes=[{"name": "scratch", "ephemeral": {}}])
    assert pod_claim_names(pod) == [("data", False), ("web-scratch", True)]
    assert ephemeral_claim_name(pod, pod.spec.volumes[1]) == "web-scratch"
    owned = pvc("web-scratch", "sc", owner=pod)
    assert ephemeral_volume_is_for_pod(pod, owned) is None
    stray = pvc("web-scratch", "sc")
    assert ephemeral_volume_is_for_pod(pod, stray) == (
        "PVC default/web-scratch was not created for pod default/web (pod is not owner)"
    )
