"""VolumeZone: upstream's TestSingleZone, TestMultiZone and TestWithBinding tables and the
queueing hints (volume_zone_test.go), and the vectorized Filter against the per-node rule."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from test_volume_builders import claim_pod, cluster, handle, pv, pvc, storage_class

from builders import make_node
from kubesched.api import PersistentVolume, Pod
from kubesched.framework import ActionType, Code, CycleState, Nodes, QueueingHint, Status
from kubesched.plugins.volume_zone import (
    ERR_REASON_CONFLICT,
    VolumeZone,
    label_zones_to_set,
    node_fits,
    pv_topologies,
)

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
CONFLICT = Status(UU, ERR_REASON_CONFLICT)
SKIP = Status(Code.SKIP)


def labelled_pv(name: str, labels: Mapping[str, str]) -> PersistentVolume:
    return pv(name, labels=labels)


def pod_with(claim: str) -> Pod:
    return claim_pod("pod_1", claim)


def run(
    pvs: list[PersistentVolume],
    claims: list[Any],
    classes: list[Any],
    pod: Pod,
    labels: Mapping[str, str],
) -> tuple[Status | None, Status | None]:
    """PreFilter, then Filter on one node (as upstream, after PreFilter whatever it said)."""
    snapshot = cluster([make_node("host1", labels=labels)], [*pvs, *claims, *classes])
    plugin = VolumeZone(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    _, pre = plugin.pre_filter(state, pod, nodes)
    [info] = nodes.infos()
    got = plugin.filter(state, pod, info)
    verdict = plugin.filter_nodes(state, pod, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == got  # the vectorized form agrees
    return pre, got


SINGLE_PVS = [
    labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    labelled_pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    labelled_pv("Vol_3", {BETA_REGION: "us-west1"}),
    labelled_pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    labelled_pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    labelled_pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
]
SINGLE_PVCS = [
    pvc(c, None, volume_name=v)
    for c, v in [
        ("PVC_1", "Vol_1"),
        ("PVC_2", "Vol_2"),
        ("PVC_3", "Vol_3"),
        ("PVC_4", "Vol_not_exist"),
        ("PVC_Stable_1", "Vol_Stable_1"),
        ("PVC_Stable_2", "Vol_Stable_2"),
        ("PVC_Stable_3", "Vol_Stable_3"),
    ]
]


@pytest.mark.parametrize(
    ("pod", "labels", "want_pre", "want_filter"),
    [
        pytest.param(
            claim_pod("pod_1"), {BETA_ZONE: "us-west1-a"}, SKIP, None, id="pod without volume"
        ),
        pytest.param(pod_with("PVC_1"), {}, None, None, id="node without labels"),
        pytest.param(
            pod_with("PVC_1"),
            {BETA_ZONE: "us-west1-a", "uselessLabel": "none"},
            None,
            None,
            id="beta zone label matched",
        ),
        pytest.param(
            pod_with("PVC_2"),
            {BETA_REGION: "us-west1", "uselessLabel": "none"},
            None,
            None,
            id="beta region label matched",
        ),
        pytest.param(
            pod_with("PVC_2"),
            {BETA_REGION: "no_us-west1", "uselessLabel": "none"},
            None,
            CONFLICT,
            id="beta region label doesn't match",
        ),
        pytest.param(
            pod_with("PVC_1"),
            {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"},
            None,
            CONFLICT,
            id="beta zone label doesn't match",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            {ZONE: "us-west1-a", "uselessLabel": "none"},
            None,
            None,
            id="zone label matched",
        ),
        pytest.param(
            pod_with("PVC_Stable_2"),
            {REGION: "us-west1", "uselessLabel": "none"},
            None,
            None,
            id="region label matched",
        ),
        pytest.param(
            pod_with("PVC_Stable_2"),
            {REGION: "no_us-west1", "uselessLabel": "none"},
            None,
            CONFLICT,
            id="region label doesn't match",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            {ZONE: "no_us-west1-a", "uselessLabel": "none"},
            None,
            CONFLICT,
            id="zone label doesn't match",
        ),
        pytest.param(
            pod_with("PVC_Stable_3"),
            {ZONE: "us-west1-a"},
            None,
            CONFLICT,
            id="pv with zone and region, node with only zone",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            {BETA_ZONE: "us-west1-a"},
            None,
            CONFLICT,
            id="pv with zone,node with beta zone",
        ),
        pytest.param(
            pod_with("PVC_1"),
            {ZONE: "us-west1-a"},
            None,
            None,
            id="pv with beta label,node with ga label, matched",
        ),
        pytest.param(
            pod_with("PVC_1"),
            {ZONE: "us-west1-b"},
            None,
            CONFLICT,
            id="pv with beta label,node with ga label, don't match",
        ),
    ],
)
def test_single_zone(
    pod: Pod, labels: dict[str, str], want_pre: Status | None, want_filter: Status | None
) -> None:
    assert run(SINGLE_PVS, SINGLE_PVCS, [], pod, labels) == (want_pre, want_filter)


MULTI_PVS = [
    labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    labelled_pv("Vol_2", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    labelled_pv("Vol_3", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    labelled_pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    labelled_pv("Vol_Stable_2", {ZONE: "us-west1-c__us-west1-a"}),
]
MULTI_PVCS = [
    pvc(c, None, volume_name=v)
    for c, v in [
        ("PVC_1", "Vol_1"),
        ("PVC_2", "Vol_2"),
        ("PVC_3", "Vol_3"),
        ("PVC_4", "Vol_not_exist"),
        ("PVC_Stable_1", "Vol_Stable_1"),
        ("PVC_Stable_2", "Vol_Stable_2"),
    ]
]


@pytest.mark.parametrize(
    ("pod", "labels", "want_filter"),
    [
        pytest.param(pod_with("PVC_3"), {}, None, id="node without labels"),
        pytest.param(
            pod_with("PVC_3"),
            {BETA_ZONE: "us-west1-a", "uselessLabel": "none"},
            None,
            id="beta zone label matched",
        ),
        pytest.param(
            pod_with("PVC_1"),
            {BETA_ZONE: "us-west1-b", "uselessLabel": "none"},
            CONFLICT,
            id="beta zone label doesn't match",
        ),
        pytest.param(
            pod_with("PVC_Stable_2"),
            {ZONE: "us-west1-a", "uselessLabel": "none"},
            None,
            id="zone label matched",
        ),
        pytest.param(
            pod_with("PVC_Stable_1"),
            {ZONE: "us-west1-b", "uselessLabel": "none"},
            CONFLICT,
            id="zone label doesn't match",
        ),
    ],
)
def test_multi_zone(pod: Pod, labels: dict[str, str], want_filter: Status | None) -> None:
    assert run(MULTI_PVS, MULTI_PVCS, [], pod, labels) == (None, want_filter)


BINDING_CLASSES = [storage_class("Class_Immediate", None), storage_class("Class_Wait")]
BINDING_PVCS = [
    pvc("PVC_1", None, volume_name="Vol_1"),
    pvc("PVC_NoSC", "Class_0"),
    pvc("PVC_EmptySC", None),
    pvc("PVC_WaitSC", "Class_Wait"),
    pvc("PVC_ImmediateSC", "Class_Immediate"),
]


@pytest.mark.parametrize(
    ("pod", "want_pre", "want_filter"),
    [
        pytest.param(pod_with("PVC_1"), None, None, id="label zone failure domain matched"),
        pytest.param(
            pod_with("PVC_EmptySC"),
            Status(UU, "PersistentVolumeClaim had no pv name and storageClass name"),
            Status(UU, "PersistentVolumeClaim had no pv name and storageClass name"),
            id="unbound volume empty storage class",
        ),
        pytest.param(
            pod_with("PVC_NoSC"),
            Status(UU, 'storageclass.storage.k8s.io "Class_0" not found'),
            Status(UU, 'storageclass.storage.k8s.io "Class_0" not found'),
            id="unbound volume no storage class",
        ),
        pytest.param(
            pod_with("PVC_ImmediateSC"),
            Status(UU, 'VolumeBindingMode not set for StorageClass "Class_Immediate"'),
            Status(UU, 'VolumeBindingMode not set for StorageClass "Class_Immediate"'),
            id="unbound volume immediate binding mode",
        ),
        pytest.param(pod_with("PVC_WaitSC"), SKIP, None, id="unbound volume wait binding mode"),
        pytest.param(
            pod_with("PVC_missing"),
            Status(UU, 'persistentvolumeclaim "PVC_missing" not found'),
            Status(UU, 'persistentvolumeclaim "PVC_missing" not found'),
            id="claim not found",
        ),
    ],
)
def test_with_binding(pod: Pod, want_pre: Status | None, want_filter: Status | None) -> None:
    pvs = [labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"})]
    labels = {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}
    assert run(pvs, BINDING_PVCS, BINDING_CLASSES, pod, labels) == (want_pre, want_filter)


def test_a_bound_volume_that_does_not_exist() -> None:
    pre, _ = run(SINGLE_PVS, SINGLE_PVCS, [], pod_with("PVC_4"), {})
    assert pre == Status(UU, 'persistentvolume "Vol_not_exist" not found')


def test_label_zones_to_set() -> None:
    assert label_zones_to_set("a__b") == {"a", "b"}
    assert label_zones_to_set(" a ") == {"a"}
    assert label_zones_to_set("a____b") is None
    assert label_zones_to_set("") is None
    # An unparsable label is ignored.
    assert pv_topologies(labelled_pv("v", {ZONE: "a____b", REGION: "r"}))[0].key == REGION


# --- queueing hints -------------------------------------------------------------------------


def test_events_to_register() -> None:
    plugin = VolumeZone(handle(cluster()))
    assert {e.event.resource: e.event.action for e in plugin.events_to_register()} == {
        "storage.k8s.io/StorageClass": ActionType.ADD,
        "Node": ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
        "PersistentVolumeClaim": ActionType.ADD | ActionType.UPDATE,
        "PersistentVolume": ActionType.ADD | ActionType.UPDATE,
    }


Q, S = QueueingHint.QUEUE, QueueingHint.SKIP


@pytest.mark.parametrize(
    ("pod", "old", "new", "want"),
    [
        pytest.param(pod_with("PVC_1"), None, "not-a-pvc", Q, id="error-wrong-new-object"),
        pytest.param(
            claim_pod("pod_1"),
            None,
            pvc("PVC_1", None, volume_name="Vol_1"),
            S,
            id="pod refers no pvc",
        ),
        pytest.param(
            pod_with("PVC_2"), None, pvc("PVC_1", None, volume_name="Vol_1"), S, id="different pvc"
        ),
        pytest.param(
            pod_with("PVC_1"),
            None,
            pvc("PVC_1", None, namespace="ns1", volume_name="Vol_1"),
            S,
            id="different namespace",
        ),
        pytest.param(
            pod_with("PVC_1"), None, pvc("PVC_1", None, volume_name="Vol_1"), Q, id="the pvc added"
        ),
        pytest.param(
            pod_with("PVC_1"),
            pvc("PVC_1", None),
            pvc("PVC_1", None, volume_name="Vol_1"),
            Q,
            id="the pvc updated",
        ),
    ],
)
def test_hint_pvc(pod: Pod, old: Any, new: Any, want: QueueingHint) -> None:
    plugin = VolumeZone(handle(cluster()))
    assert plugin.is_schedulable_after_persistent_volume_claim_change(pod, old, new) == want


def test_hint_storage_class() -> None:
    plugin = VolumeZone(handle(cluster()))
    hint = plugin.is_schedulable_after_storage_class_added
    assert hint(pod_with("PVC_1"), None, "not-a-storageclass") == Q
    assert hint(pod_with("PVC_1"), None, storage_class("SC_1", None)) == S
    assert hint(pod_with("PVC_1"), None, storage_class("SC_1", "Immediate")) == S
    assert hint(pod_with("PVC_1"), None, storage_class("SC_1")) == Q


def test_hint_persistent_volume() -> None:
    plugin = VolumeZone(handle(cluster()))
    hint = plugin.is_schedulable_after_persistent_volume_change
    pod = pod_with("PVC_1")
    a = labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"})
    b = labelled_pv("Vol_1", {BETA_ZONE: "us-west1-b"})
    both = labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a", ZONE: "zone"})
    assert hint(pod, None, "not-a-pv") == Q
    assert hint(pod, "not-a-pv", a) == Q
    assert hint(pod, None, b) == Q
    assert hint(pod, a, b) == Q
    assert hint(pod, a, both) == Q
    assert hint(pod, both, msgspec.structs.replace(both)) == S


# --- vectorized Filter ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(30))
def test_vectorized_filter_matches_the_per_node_rule(seed: int) -> None:
    rng = random.Random(seed)
    values = ["a", "b", "c"]
    keys = [BETA_ZONE, BETA_REGION, ZONE, REGION]
    nodes = []
    for i in range(rng.randint(1, 15)):
        labels = {k: rng.choice(values) for k in keys if rng.random() < 0.4}
        nodes.append(make_node(f"n{i}", labels=labels))
    pvs, claims = [], []
    for j in range(rng.randint(1, 3)):
        labels = {
            k: "__".join(rng.sample(values, rng.randint(1, 2))) for k in keys if rng.random() < 0.4
        }
        pvs.append(labelled_pv(f"v{j}", labels))
        claims.append(pvc(f"c{j}", None, volume_name=f"v{j}"))
    snapshot = cluster(nodes, [*pvs, *claims])
    plugin = VolumeZone(handle(snapshot))
    pod = claim_pod("p", *(c.metadata.name for c in claims))
    state = CycleState()
    everything = Nodes(snapshot, snapshot.present_slots())
    plugin.pre_filter(state, pod, everything)
    verdict = plugin.filter_nodes(state, pod, everything)
    topologies = [t for v in pvs for t in pv_topologies(v)]
    for n, i in zip(nodes, verdict.ids.tolist(), strict=True):
        assert (i == 0) == node_fits(topologies, n.metadata.labels), n.metadata.labels
