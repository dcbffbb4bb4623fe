"""VolumeBinding: upstream's plugin table (volume_binding_test.go), the binder's FindPodVolumes,
AssumePodVolumes and BindPodVolumes cases (binder_test.go), the queueing hints, and the vectorized
Filter against a per-node rendering of FindPodVolumes on random clusters."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest
from test_volume_builders import (
    HOSTNAME,
    IMMEDIATE,
    WAIT,
    claim_pod,
    cluster,
    handle,
    node,
    pv,
    pvc,
    storage_class,
)

from kubesched.api import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    persistent_volume_claim_class,
    persistent_volume_class,
    topology_selector_terms_match,
    volume_node_affinity_matches,
)
from kubesched.config import UtilizationShapePoint, VolumeBindingArgs
from kubesched.framework import (
    ActionType,
    Code,
    CycleState,
    Nodes,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins import in_tree_registry
from kubesched.plugins.volume_binding import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_REASON_UNBOUND_IMMEDIATE,
    STATE_KEY,
    VolumeBinding,
)
from kubesched.plugins.volume_binding._binder import storage_capacity, storage_request

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"

IMMEDIATE_SC = storage_class("immediate-sc", IMMEDIATE)
WAIT_SC = storage_class("wait-sc", WAIT)
WAIT_HDD_SC = storage_class("wait-hdd-sc", WAIT)
CLASSES = [IMMEDIATE_SC, WAIT_SC, WAIT_HDD_SC]

#: StorageCapacityScoring as upstream's plugin table scores: fuller PVs score higher.
FULLER_FIRST = [
    UtilizationShapePoint(utilization=0, score=0),
    UtilizationShapePoint(utilization=100, score=10),
]


def plugin_for(
    snapshot: Snapshot, args: VolumeBindingArgs | None = None, client: Any = None
) -> VolumeBinding:
    return VolumeBinding(
        handle(snapshot, client), args or VolumeBindingArgs(bind_timeout_seconds=300)
    )


def all_nodes(snapshot: Snapshot) -> Nodes:
    return Nodes(snapshot, snapshot.present_slots())


def statuses(
    plugin: VolumeBinding, state: CycleState, pod: Pod, nodes: Nodes
) -> list[Status | None]:
    verdict = plugin.filter_nodes(state, pod, nodes)
    return [verdict.statuses[i] for i in verdict.ids.tolist()]


def uu(*reasons: str) -> Status:
    return Status(UU, *reasons)


# --- upstream's TestVolumeBinding ------------------------------------------------------------

ZONE_NODES = [
    node(f"zone-{z}-node-{n}", {REGION: f"region-{z}", ZONE: f"zone-{z}"})
    for z in "abc"
    for n in "ab"
]
ZONAL_PVS = [
    pv(
        f"pv-{z}-{i}",
        "wait-sc",
        phase="Available",
        capacity=cap,
        node_affinity={REGION: [f"region-{z}"], ZONE: [f"zone-{z}"]},
    )
    for z, cap in (("a", "200Gi"), ("b", "100Gi"))
    for i in range(2)
]


def local_pvs(classes: Sequence[str]) -> list[PersistentVolume]:
    out = []
    for node_name, cap in (("node-a", "200Gi"), ("node-b", "100Gi")):
        i = 0
        for cls in classes:
            for _ in range(2):
                out.append(
                    pv(
                        f"pv-{node_name[-1]}-{i}",
                        cls,
                        phase="Available",
                        capacity=cap,
                        node_affinity={HOSTNAME: [node_name]},
                    )
                )
                i += 1
    return out


PLUGIN_CASES: list[Any] = [
    pytest.param(
        claim_pod("pod-a"),
        [node("node-a")],
        [],
        [],
        None,
        "skip",
        [None],
        [0],
        id="pod has not pvcs",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a")],
        [pv("pv-a", "wait-sc", phase="Available")],
        None,
        None,
        [None],
        [0],
        id="all bound",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [],
        [],
        None,
        uu('persistentvolumeclaim "pvc-a" not found'),
        None,
        None,
        id="PVC does not exist",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a", "pvc-b"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a")],
        [],
        None,
        uu('persistentvolumeclaim "pvc-b" not found'),
        None,
        None,
        id="Part of PVCs do not exist",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "immediate-sc")],
        [],
        None,
        uu("pod has unbound immediate PersistentVolumeClaims"),
        None,
        None,
        id="immediate claims not bound",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc")],
        [],
        None,
        None,
        [uu(ERR_REASON_BIND_CONFLICT)],
        [0],
        id="unbound claims no matches",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a", "pvc-b"),
        [node("node-a", {"foo": "barbar"})],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a"), pvc("pvc-b", "wait-sc")],
        [pv("pv-a", "wait-sc", phase="Available", node_affinity={"foo": ["bar"]})],
        None,
        None,
        [uu(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)],
        [0],
        id="bound and unbound unsatisfied",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a")],
        [],
        None,
        None,
        [uu("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")],
        [0],
        id="pv not found",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a")],
        [pvc("pvc-a", "wait-sc", bound_to="pv-a", phase="Lost")],
        [],
        None,
        uu('persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"'),
        None,
        None,
        id="pv not found claim lost",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        [node("node-a"), node("node-b"), node("node-c")],
        [pvc("pvc-a", "wait-sc", request="50Gi")],
        local_pvs(["wait-sc"]),
        VolumeBindingArgs(bind_timeout_seconds=300, shape=FULLER_FIRST),
        None,
        [None, None, uu(ERR_REASON_BIND_CONFLICT)],
        [25, 50, 0],
        id="local volumes with close capacity are preferred",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-0", "pvc-1"),
        [node("node-a"), node("node-b"), node("node-c")],
        [
            pvc("pvc-0", "wait-sc", request="50Gi"),
            pvc("pvc-1", "wait-hdd-sc", request="100Gi"),
        ],
        local_pvs(["wait-sc", "wait-hdd-sc"]),
        VolumeBindingArgs(bind_timeout_seconds=300, shape=FULLER_FIRST),
        None,
        [None, None, uu(ERR_REASON_BIND_CONFLICT)],
        [38, 75, 0],
        id="local volumes with close capacity are preferred (multiple pvcs)",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        ZONE_NODES,
        [pvc("pvc-a", "wait-sc", request="50Gi")],
        ZONAL_PVS,
        VolumeBindingArgs(bind_timeout_seconds=300, shape=FULLER_FIRST),
        None,
        [None, None, None, None, uu(ERR_REASON_BIND_CONFLICT), uu(ERR_REASON_BIND_CONFLICT)],
        [25, 25, 50, 50, 0, 0],
        id="zonal volumes with close capacity are preferred",
    ),
    pytest.param(
        claim_pod("pod-a", "pvc-a"),
        ZONE_NODES,
        [pvc("pvc-a", "wait-sc", request="50Gi")],
        ZONAL_PVS,
        VolumeBindingArgs(
            bind_timeout_seconds=300,
            shape=[
                UtilizationShapePoint(utilization=0, score=0),
                UtilizationShapePoint(utilization=50, score=3),
                UtilizationShapePoint(utilization=100, score=5),
            ],
        ),
        None,
        [None, None, None, None, uu(ERR_REASON_BIND_CONFLICT), uu(ERR_REASON_BIND_CONFLICT)],
        [15, 15, 30, 30, 0, 0],
        id="zonal volumes with close capacity are preferred (custom shape)",
    ),
]


@pytest.mark.parametrize(
    ("pod", "nodes", "pvcs", "pvs", "args", "want_pre_filter", "want_filter", "want_scores"),
    PLUGIN_CASES,
)
def test_volume_binding(
    pod: Pod,
    nodes: list[Node],
    pvcs: list[PersistentVolumeClaim],
    pvs: list[PersistentVolume],
    args: VolumeBindingArgs | None,
    want_pre_filter: Status | str | None,
    want_filter: list[Status | None] | None,
    want_scores: list[int] | None,
) -> None:
    snapshot = cluster(nodes, [*CLASSES, *pvcs, *pvs])
    plugin = plugin_for(snapshot, args)
    state = CycleState()
    everything = all_nodes(snapshot)
    _, status = plugin.pre_filter(state, pod, everything)
    if want_pre_filter == "skip":
        assert status is not None
        assert status.code == Code.SKIP
    else:
        assert status == want_pre_filter
    if status is not None and status.code != Code.SKIP:
        return
    assert want_filter is not None
    assert want_scores is not None
    assert statuses(plugin, state, pod, everything) == want_filter
    # Per node too, as preemption asks.
    for info, want in zip(everything.infos(), want_filter, strict=True):
        assert plugin.filter(state, pod, info) == want
    pre_score = plugin.pre_score(state, pod, everything)
    if plugin.shape is None:
        assert pre_score is not None
        assert pre_score.code == Code.SKIP
    else:
        assert pre_score is None
    scores, s = plugin.score_nodes(state, pod, everything)
    assert s is None
    assert scores.tolist() == want_scores


def test_without_the_storage_capacity_scoring_gate_prescore_skips() -> None:
    snapshot = cluster([node("node-a")], [*CLASSES, pvc("pvc-a", "wait-sc")])
    plugin = plugin_for(snapshot)
    s = plugin.pre_score(CycleState(), claim_pod("p", "pvc-a"), all_nodes(snapshot))
    assert s is not None
    assert s.code == Code.SKIP


def test_the_default_shape_prefers_free_capacity() -> None:
    """With StorageCapacityScoring on, the defaulted shape (0% -> 10, 100% -> 0) scores the
    emptier volumes higher."""
    from kubesched.config import FeatureGates, load_config_from_dict

    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "s"}],
        },
        features=FeatureGates(storage_capacity_scoring=True),
    )
    [args] = [pc.args for pc in config.profiles[0].plugin_config if pc.name == "VolumeBinding"]
    assert isinstance(args, VolumeBindingArgs)
    snapshot = cluster(
        [node("node-a"), node("node-b")],
        [*CLASSES, pvc("pvc-a", "wait-sc", request="50Gi"), *local_pvs(["wait-sc"])],
    )
    plugin = plugin_for(snapshot, args)
    state = CycleState()
    pod = claim_pod("pod-a", "pvc-a")
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    scores, _ = plugin.score_nodes(state, pod, all_nodes(snapshot))
    # 50Gi of 200Gi: 25% used -> 75; of 100Gi: 50% -> 50.
    assert scores.tolist() == [75, 50]
    # A cycle whose Filter verdicts were kept (no node filtered in it) scores alike.
    kept = CycleState()
    plugin.pre_filter(kept, pod, all_nodes(snapshot))
    assert plugin.score_nodes(kept, pod, all_nodes(snapshot))[0].tolist() == [75, 50]


# --- the binder: FindPodVolumes --------------------------------------------------------------

NODE_KEY = "nodeKey"
PROVISIONER = "test-provisioner"
BINDER_CLASSES = [
    storage_class(
        "waitClassWithProvisioner",
        WAIT,
        provisioner=PROVISIONER,
        allowed_topologies=[{NODE_KEY: ["node1", "reference-value"]}],
    ),
    storage_class("immediateClass", IMMEDIATE),
    storage_class("waitClass", WAIT, provisioner="kubernetes.io/no-provisioner"),
    storage_class(
        "topoMismatchClass",
        WAIT,
        provisioner=PROVISIONER,
        allowed_topologies=[{NODE_KEY: ["reference-value"]}],
    ),
]


def make_test_pvc(
    name: str, size: str, cls: str, *, bound: str = "", prebound: str = "", selected: str = ""
) -> PersistentVolumeClaim:
    """``makeTestPVC`` in namespace testns."""
    return pvc(
        name,
        cls,
        namespace="testns",
        request=size,
        bound_to=bound,
        volume_name=prebound,
        annotations={ANN_SELECTED_NODE: selected} if selected else None,
    )


UNBOUND = make_test_pvc("unbound-pvc", "1G", "waitClass")
UNBOUND2 = make_test_pvc("unbound-pvc2", "5G", "waitClass")
PREBOUND = make_test_pvc("prebound-pvc", "1G", "waitClass", prebound="pv-node1a")
BOUND = make_test_pvc("bound-pvc", "1G", "waitClass", bound="pv-bound")
IMMEDIATE_UNBOUND = make_test_pvc("immediate-unbound-pvc", "1G", "immediateClass")
IMMEDIATE_BOUND = make_test_pvc(
    "immediate-bound-pvc", "1G", "immediateClass", bound="pv-bound-immediate"
)
PROVISIONED = make_test_pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner")
NO_PROVISIONER = make_test_pvc("no-provisioner-pvc", "1Gi", "waitClass")
TOPO_MISMATCH = make_test_pvc("topo-mismatch-pvc", "1Gi", "topoMismatchClass")
SELECTED_NODE = make_test_pvc(
    "provisioned-pvc", "1Gi", "waitClassWithProvisioner", selected="node1"
)


def make_test_pv(
    name: str, on: str, capacity: str, cls: str, claim: PersistentVolumeClaim | None = None
) -> PersistentVolume:
    """``makeTestPV``: node affinity ``nodeKey In [on]``; Available unless bound to ``claim``."""
    return pv(
        name,
        cls,
        capacity=capacity,
        phase="Bound" if claim is not None else "Available",
        node_affinity={NODE_KEY: [on]} if on else None,
        claim=claim,
    )


PV_NODE1A = make_test_pv("pv-node1a", "node1", "5G", "waitClass")
PV_NODE1B = make_test_pv("pv-node1b", "node1", "10G", "waitClass")
PV_NODE2 = make_test_pv("pv-node2", "node2", "1G", "waitClass")
PV_BOUND = make_test_pv("pv-bound", "node1", "1G", "waitClass", BOUND)
PV_BOUND_IMMEDIATE = make_test_pv(
    "pv-bound-immediate", "node1", "1G", "immediateClass", IMMEDIATE_BOUND
)
PV_BOUND_IMMEDIATE_NODE2 = make_test_pv(
    "pv-bound-immediate", "node2", "1G", "immediateClass", IMMEDIATE_BOUND
)
NODE1 = node("node1", {NODE_KEY: "node1"})


def binder_pod(*claims: PersistentVolumeClaim, volumes: Sequence[Mapping[str, Any]] = ()) -> Pod:
    return claim_pod(
        "test-pod", *(c.metadata.name for c in claims), namespace="testns", volumes=volumes
    )


def find(
    claims: Sequence[PersistentVolumeClaim],
    pvs: Sequence[PersistentVolume],
    *,
    pod: Pod | None = None,
    extra: Sequence[Any] = (),
) -> tuple[Status | None, list[tuple[str, str]], list[str]]:
    """PreFilter and Filter on node1: the status, the static bindings and the provisioned
    claims Reserve would take."""
    snapshot = cluster([NODE1], [*BINDER_CLASSES, *claims, *pvs, *extra])
    plugin = plugin_for(snapshot)
    pod = pod or binder_pod(*claims)
    state = CycleState()
    nodes = all_nodes(snapshot)
    _, status = plugin.pre_filter(state, pod, nodes)
    if status is not None and status.code == Code.SKIP:
        return None, [], []
    if status is not None:
        return status, [], []
    [filtered] = statuses(plugin, state, pod, nodes)
    finder = state.read(STATE_KEY, object).finder  # type: ignore[attr-defined]
    volumes = finder.pod_volumes(int(nodes.slots[0]))
    if volumes is None:
        return filtered, [], []
    return (
        filtered,
        [(c.metadata.name, v.metadata.name) for c, v in volumes.static],
        [c.metadata.name for c in volumes.dynamic],
    )


FIND_WITHOUT_PROVISIONING = [
    pytest.param([], [], None, [], id="no-volumes"),
    pytest.param([BOUND], [PV_BOUND], None, [], id="bound-pvc"),
    pytest.param([BOUND], [], uu(ERR_REASON_PV_NOT_EXIST), [], id="bound-pvc,pv-not-exists"),
    pytest.param(
        [UNBOUND],
        [PV_NODE2, PV_NODE1A, PV_NODE1B],
        None,
        [("unbound-pvc", "pv-node1a")],
        id="unbound-pvc,pv-same-node",
    ),
    pytest.param(
        [UNBOUND], [PV_NODE2], uu(ERR_REASON_BIND_CONFLICT), [], id="unbound-pvc,pv-different-node"
    ),
    pytest.param(
        [UNBOUND, UNBOUND2],
        [PV_NODE1A, PV_NODE1B],
        None,
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")],
        id="two-unbound-pvcs",
    ),
    pytest.param(
        [UNBOUND2, UNBOUND],
        [PV_NODE1A, PV_NODE1B],
        None,
        [("unbound-pvc", "pv-node1a"), ("unbound-pvc2", "pv-node1b")],
        id="two-unbound-pvcs,order-by-size",
    ),
    pytest.param(
        [UNBOUND, UNBOUND2],
        [PV_NODE1A],
        uu(ERR_REASON_BIND_CONFLICT),
        [],
        id="two-unbound-pvcs,partial-match",
    ),
    pytest.param(
        [UNBOUND, BOUND],
        [PV_BOUND, PV_NODE1A],
        None,
        [("unbound-pvc", "pv-node1a")],
        id="one-bound,one-unbound",
    ),
    pytest.param(
        [UNBOUND, BOUND],
        [PV_BOUND, PV_NODE2],
        uu(ERR_REASON_BIND_CONFLICT),
        [],
        id="one-bound,one-unbound,no-match",
    ),
    pytest.param([IMMEDIATE_BOUND], [PV_BOUND_IMMEDIATE], None, [], id="immediate-bound-pvc"),
    pytest.param(
        [IMMEDIATE_BOUND],
        [PV_BOUND_IMMEDIATE_NODE2],
        uu(ERR_REASON_NODE_CONFLICT),
        [],
        id="immediate-bound-pvc-wrong-node",
    ),
]


@pytest.mark.parametrize(("claims", "pvs", "want", "bindings"), FIND_WITHOUT_PROVISIONING)
def test_find_pod_volumes_without_provisioning(
    claims: list[PersistentVolumeClaim],
    pvs: list[PersistentVolume],
    want: Status | None,
    bindings: list[tuple[str, str]],
) -> None:
    status, static, dynamic = find(claims, pvs)
    assert status == want
    assert static == bindings
    assert dynamic == []


@pytest.mark.parametrize(
    "claims",
    [
        pytest.param([PREBOUND], id="prebound-pvc"),
        pytest.param([UNBOUND, PREBOUND], id="one-prebound,one-unbound"),
        pytest.param([IMMEDIATE_UNBOUND], id="immediate-unbound-pvc"),
        pytest.param([IMMEDIATE_UNBOUND, BOUND], id="immediate-unbound-pvc,delayed-mode-bound"),
        pytest.param([IMMEDIATE_UNBOUND, UNBOUND], id="immediate-unbound-pvc,delayed-mode-unbound"),
    ],
)
def test_unbound_immediate_claims_fail(claims: list[PersistentVolumeClaim]) -> None:
    status, _, _ = find(claims, [PV_NODE1A, PV_NODE1B, PV_BOUND])
    assert status == uu(ERR_REASON_UNBOUND_IMMEDIATE)


def test_generic_ephemeral_volumes() -> None:
    pod = claim_pod(
        "test-pod", namespace="testns", volumes=[{"name": "test-volume", "ephemeral": {}}]
    )
    status, _, _ = find([], [], pod=pod)
    assert status == uu(
        "waiting for ephemeral volume controller to create the persistentvolumeclaim "
        '"test-pod-test-volume"'
    )
    owned = pvc(
        "test-pod-test-volume", "waitClass", namespace="testns", owner=pod, bound_to="pv-bound"
    )
    bound_pv = make_test_pv("pv-bound", "node1", "1G", "waitClass", owned)
    status, _, _ = find([], [bound_pv], pod=pod, extra=[owned])
    assert status is None
    stray = pvc("test-pod-test-volume", "waitClass", namespace="testns", bound_to="pv-bound")
    status, _, _ = find([], [bound_pv], pod=pod, extra=[stray])
    assert status == uu(
        "PVC testns/test-pod-test-volume was not created for pod testns/test-pod (pod is not owner)"
    )


FIND_WITH_PROVISIONING = [
    pytest.param([PROVISIONED], [], None, [], ["provisioned-pvc"], id="one-provisioned"),
    pytest.param(
        [UNBOUND, PROVISIONED],
        [PV_NODE1A],
        None,
        [("unbound-pvc", "pv-node1a")],
        ["provisioned-pvc"],
        id="two-unbound-pvcs,one-matched,one-provisioned",
    ),
    pytest.param(
        [BOUND, PROVISIONED],
        [PV_BOUND],
        None,
        [],
        ["provisioned-pvc"],
        id="one-bound,one-provisioned",
    ),
    pytest.param(
        [BOUND, SELECTED_NODE],
        [PV_BOUND],
        None,
        [],
        ["provisioned-pvc"],
        id="one-binding,one-selected-node",
    ),
    pytest.param(
        [IMMEDIATE_BOUND, PROVISIONED],
        [PV_BOUND_IMMEDIATE],
        None,
        [],
        ["provisioned-pvc"],
        id="one-immediate-bound,one-provisioned",
    ),
    pytest.param(
        [NO_PROVISIONER], [], uu(ERR_REASON_BIND_CONFLICT), [], [], id="invalid-provisioner"
    ),
    pytest.param(
        [TOPO_MISMATCH], [], uu(ERR_REASON_BIND_CONFLICT), [], [], id="volume-topology-unsatisfied"
    ),
]


@pytest.mark.parametrize(
    ("claims", "pvs", "want", "bindings", "provisions"), FIND_WITH_PROVISIONING
)
def test_find_pod_volumes_with_provisioning(
    claims: list[PersistentVolumeClaim],
    pvs: list[PersistentVolume],
    want: Status | None,
    bindings: list[tuple[str, str]],
    provisions: list[str],
) -> None:
    status, static, dynamic = find(claims, pvs)
    assert status == want
    assert static == bindings
    assert dynamic == provisions


def test_a_claim_selected_for_another_node_fits_nowhere_else() -> None:
    claim = make_test_pvc("provisioned-pvc", "1Gi", "waitClassWithProvisioner", selected="node2")
    status, _, _ = find([claim], [])
    assert status == uu(ERR_REASON_BIND_CONFLICT)
    # With a bound claim out of reach too, both reasons, in upstream's order.
    status, _, _ = find(
        [claim, BOUND], [make_test_pv("pv-bound", "node2", "1G", "waitClass", BOUND)]
    )
    assert status == uu(ERR_REASON_NODE_CONFLICT, ERR_REASON_BIND_CONFLICT)


PREBOUND_CLAIM = pvc("c", "waitClass")


@pytest.mark.parametrize(
    ("volume", "claim", "fits"),
    [
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available", access_modes=["ReadWriteOnce"]),
            pvc("c", "waitClass", request="1Gi", access_modes=["ReadWriteOnce"]),
            True,
            id="equal size and modes",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available"),
            pvc("c", "waitClass", request="2Gi"),
            False,
            id="too small",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available", access_modes=["ReadWriteOnce"]),
            pvc("c", "waitClass", access_modes=["ReadWriteMany"]),
            False,
            id="access modes",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Released"),
            pvc("c", "waitClass"),
            False,
            id="not available",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available", spec={"volumeMode": "Block"}),
            pvc("c", "waitClass"),
            False,
            id="volume mode",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available", labels={"tier": "gold"}),
            pvc("c", "waitClass", selector={"matchLabels": {"tier": "silver"}}),
            False,
            id="selector",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Available", labels={"tier": "gold"}),
            pvc("c", "waitClass", selector={"matchLabels": {"tier": "gold"}}),
            True,
            id="selector matches",
        ),
        pytest.param(
            pv(
                "v",
                "waitClass",
                capacity="1Gi",
                phase="Available",
                spec={"volumeAttributesClassName": "fast"},
            ),
            pvc("c", "waitClass"),
            False,
            id="volume attributes class",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Bound", claim=PREBOUND_CLAIM),
            PREBOUND_CLAIM,
            True,
            id="prebound to the claim",
        ),
        pytest.param(
            pv("v", "waitClass", capacity="1Gi", phase="Bound", claim=pvc("other", "waitClass")),
            pvc("c", "waitClass"),
            False,
            id="bound to another claim",
        ),
    ],
)
def test_find_matching_volume(
    volume: PersistentVolume, claim: PersistentVolumeClaim, fits: bool
) -> None:
    snapshot = cluster([node("node1")], [*BINDER_CLASSES, volume, claim])
    plugin = plugin_for(snapshot)
    state = CycleState()
    pod = claim_pod("p", claim.metadata.name)
    nodes = all_nodes(snapshot)
    assert plugin.pre_filter(state, pod, nodes)[1] is None
    assert statuses(plugin, state, pod, nodes) == [None if fits else uu(ERR_REASON_BIND_CONFLICT)]


def test_the_smallest_fitting_volume_is_taken_and_not_taken_twice() -> None:
    big = pv("big", "waitClass", capacity="10Gi", phase="Available")
    small = pv("small", "waitClass", capacity="2Gi", phase="Available")
    tiny = pv("tiny", "waitClass", capacity="500Mi", phase="Available")
    a = pvc("a", "waitClass", request="1Gi")
    b = pvc("b", "waitClass", request="1Gi")
    snapshot = cluster([node("n")], [*BINDER_CLASSES, big, small, tiny, a, b])
    plugin = plugin_for(snapshot)
    state = CycleState()
    pod = claim_pod("p", "a", "b")
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    assert statuses(plugin, state, pod, all_nodes(snapshot)) == [None]
    assert plugin.reserve(state, pod, "n") is None
    reserved = state.read(STATE_KEY, object).reserved  # type: ignore[attr-defined]
    assert [(c.metadata.name, v.metadata.name) for c, v in reserved.static] == [
        ("a", "small"),
        ("b", "big"),
    ]


def test_a_prebound_volume_out_of_reach_is_no_match() -> None:
    claim = pvc("c", "waitClass")
    prebound = pv(
        "mine",
        "waitClass",
        capacity="1Gi",
        phase="Available",
        claim=claim,
        node_affinity={HOSTNAME: ["other"]},
    )
    free = pv("free", "waitClass", capacity="1Gi", phase="Available")
    snapshot = cluster([node("n"), node("other")], [*BINDER_CLASSES, claim, prebound, free])
    plugin = plugin_for(snapshot)
    state = CycleState()
    pod = claim_pod("p", "c")
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    # On n the prebound PV decides (no match) although "free" would fit.
    assert statuses(plugin, state, pod, all_nodes(snapshot)) == [uu(ERR_REASON_BIND_CONFLICT), None]


def test_binding_mode_not_set_is_an_error() -> None:
    snapshot = cluster([node("n")], [storage_class("odd", None), pvc("c", "odd")])
    plugin = plugin_for(snapshot)
    _, status = plugin.pre_filter(CycleState(), claim_pod("p", "c"), all_nodes(snapshot))
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == 'VolumeBindingMode not set for StorageClass "odd"'


def test_a_claim_being_deleted_is_unresolvable() -> None:
    claim = msgspec.structs.replace(
        pvc("c", "waitClass"),
        metadata=msgspec.structs.replace(
            pvc("c", "waitClass").metadata, deletion_timestamp="2026-01-01T00:00:00Z"
        ),
    )
    snapshot = cluster([node("n")], [*BINDER_CLASSES, claim])
    _, status = plugin_for(snapshot).pre_filter(
        CycleState(), claim_pod("p", "c"), all_nodes(snapshot)
    )
    assert status == uu('persistentvolumeclaim "c" is being deleted')


# --- the binder: Assume, Revert, Bind -----------------------------------------------------


class FakeClient:
    """The StorageAPIClient of a front end: merge patches applied to the store's objects (as the
    API server would, and the informer then reports), or failing on request."""

    def __init__(self, snapshot: Snapshot, *, informer: bool = True, fail: str = "") -> None:
        self.snapshot = snapshot
        self.informer = informer
        self.fail = fail
        self.calls: list[tuple[str, str, dict[str, Any], bool]] = []
        self.rv = 100

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise AssertionError("not here")

    def _apply(self, obj: Any, patch: Mapping[str, Any]) -> Any:
        want = patch.get("metadata", {}).get("resourceVersion")
        if want is not None and want != obj.metadata.resource_version:
            raise RuntimeError(f"conflict: {want} != {obj.metadata.resource_version}")
        raw = msgspec.to_builtins(obj)
        merge(raw, patch)
        self.rv += 1
        raw["metadata"]["resourceVersion"] = str(self.rv)
        new = msgspec.convert(raw, type(obj))
        if self.informer:
            self.snapshot.objects.set(new)
        return new

    async def patch_persistent_volume(
        self, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolume:
        self.calls.append(("pv", name, dict(patch), status))
        if self.fail == "pv":
            raise RuntimeError("the API server said no")
        current = self.snapshot.objects.get(PersistentVolume, name)
        assert current is not None
        out: PersistentVolume = self._apply(current, patch)
        return out

    async def patch_persistent_volume_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolumeClaim:
        self.calls.append(("pvc", f"{namespace}/{name}", dict(patch), status))
        if self.fail == "pvc":
            raise RuntimeError("the API server said no")
        current = self.snapshot.objects.get(PersistentVolumeClaim, name, namespace)
        assert current is not None
        out: PersistentVolumeClaim = self._apply(current, patch)
        return out


def merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        elif isinstance(v, Mapping) and isinstance(target.get(k), dict):
            merge(target[k], v)
        else:
            target[k] = msgspec.to_builtins(v)


def reserve(
    objects: Sequence[Any], pod: Pod, *, client: Any = None, nodes: Sequence[Node] = (NODE1,)
) -> tuple[VolumeBinding, CycleState, Snapshot]:
    snapshot = cluster(nodes, [*BINDER_CLASSES, *objects])
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    assert plugin.pre_filter(state, pod, all_nodes(snapshot))[1] is None
    assert set(statuses(plugin, state, pod, all_nodes(snapshot))) == {None}
    assert plugin.reserve(state, pod, nodes[0].metadata.name) is None
    return plugin, state, snapshot


def test_assume_all_bound() -> None:
    _, state, _ = reserve([BOUND, PV_BOUND], binder_pod(BOUND))
    assert state.read(STATE_KEY, object).all_bound  # type: ignore[attr-defined]


def test_assume_one_binding_then_unreserve() -> None:
    plugin, state, snapshot = reserve([UNBOUND, PV_NODE1A], binder_pod(UNBOUND))
    s = state.read(STATE_KEY, object)
    assert not s.all_bound  # type: ignore[attr-defined]
    assumed = plugin.cache.pvs.get("pv-node1a")
    assert assumed is not None
    assert assumed.spec.claim_ref is not None
    assert (assumed.spec.claim_ref.namespace, assumed.spec.claim_ref.name) == (
        "testns",
        "unbound-pvc",
    )
    assert assumed.metadata.annotations[ANN_BOUND_BY_CONTROLLER] == "yes"
    # The store still holds what the API server said; the next pod sees the PV as taken.
    stored = snapshot.objects.get(PersistentVolume, "pv-node1a")
    assert stored is not None
    assert stored.spec.claim_ref is None
    other = make_test_pvc("other", "1G", "waitClass")
    snapshot.objects.set(other)
    state2 = CycleState()
    pod2 = binder_pod(other)
    plugin.pre_filter(state2, pod2, all_nodes(snapshot))
    assert statuses(plugin, state2, pod2, all_nodes(snapshot)) == [uu(ERR_REASON_BIND_CONFLICT)]
    plugin.unreserve(state, binder_pod(UNBOUND), "node1")
    assert plugin.cache.pvs.get("pv-node1a") is stored


def test_assume_provisioning_annotates_the_claim() -> None:
    plugin, state, _ = reserve([PROVISIONED], binder_pod(PROVISIONED))
    assumed = plugin.cache.pvcs.get("provisioned-pvc", "testns")
    assert assumed is not None
    assert assumed.metadata.annotations[ANN_SELECTED_NODE] == "node1"
    plugin.unreserve(state, binder_pod(PROVISIONED), "node1")
    restored = plugin.cache.pvcs.get("provisioned-pvc", "testns")
    assert restored is not None
    assert ANN_SELECTED_NODE not in restored.metadata.annotations


def test_an_informer_update_replaces_the_assumption() -> None:
    plugin, _, snapshot = reserve([UNBOUND, PV_NODE1A], binder_pod(UNBOUND))
    newer = make_test_pv("pv-node1a", "node1", "5G", "waitClass")
    snapshot.objects.set(
        msgspec.structs.replace(
            newer, metadata=msgspec.structs.replace(newer.metadata, resource_version="7")
        )
    )
    current = plugin.cache.pvs.get("pv-node1a")
    assert current is not None
    assert current.spec.claim_ref is None


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_pre_bind_writes_the_claim_ref_then_the_claim() -> None:
    pod = binder_pod(UNBOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, UNBOUND, PV_NODE1A])
    client = FakeClient(snapshot)
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    assert plugin.reserve(state, pod, "node1") is None
    assert run(plugin.pre_bind(state, pod, "node1")) is None
    kinds = [(kind, name, status) for kind, name, _, status in client.calls]
    assert kinds == [
        ("pv", "pv-node1a", False),
        ("pvc", "testns/unbound-pvc", False),
        ("pv", "pv-node1a", True),
        ("pvc", "testns/unbound-pvc", True),
    ]
    first = client.calls[0][2]
    assert first["metadata"]["resourceVersion"] == "1"  # the version the decision was made on
    assert first["spec"]["claimRef"]["name"] == "unbound-pvc"
    assert first["spec"]["claimRef"]["uid"] == UNBOUND.metadata.uid
    volume = snapshot.objects.get(PersistentVolume, "pv-node1a")
    claim = snapshot.objects.get(PersistentVolumeClaim, "unbound-pvc", "testns")
    assert volume is not None
    assert claim is not None
    assert volume.spec.claim_ref is not None
    assert volume.spec.claim_ref.uid == claim.metadata.uid
    assert volume.status.phase == "Bound"
    assert claim.spec.volume_name == "pv-node1a"
    assert claim.metadata.annotations[ANN_BIND_COMPLETED] == "yes"
    assert claim.status.phase == "Bound"


def test_pre_bind_provisioning_waits_until_the_timeout() -> None:
    pod = binder_pod(PROVISIONED)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, PROVISIONED])
    client = FakeClient(snapshot)
    plugin = plugin_for(snapshot, VolumeBindingArgs(bind_timeout_seconds=0), client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")
    status = run(plugin.pre_bind(state, pod, "node1"))
    assert status == Status(Code.ERROR, "binding volumes: context deadline exceeded")
    [(kind, name, patch, _)] = client.calls
    assert (kind, name) == ("pvc", "testns/provisioned-pvc")
    assert patch["metadata"]["annotations"] == {ANN_SELECTED_NODE: "node1"}


def test_pre_bind_provisioning_done_by_the_provisioner() -> None:
    """A provisioner creates a PV for the claim and the PV controller binds them meanwhile."""
    pod = binder_pod(PROVISIONED)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, PROVISIONED])
    client = FakeClient(snapshot)
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")

    async def main() -> Status | None:
        task = asyncio.create_task(plugin.pre_bind(state, pod, "node1"))
        await asyncio.sleep(0.05)
        assert not task.done()
        claim = snapshot.objects.get(PersistentVolumeClaim, "provisioned-pvc", "testns")
        assert claim is not None
        snapshot.objects.set(
            make_test_pv("pvc-1234", "node1", "1Gi", "waitClassWithProvisioner", claim)
        )
        bound = msgspec.structs.replace(
            claim,
            spec=msgspec.structs.replace(claim.spec, volume_name="pvc-1234"),
            metadata=msgspec.structs.replace(
                claim.metadata,
                annotations={**claim.metadata.annotations, ANN_BIND_COMPLETED: "yes"},
                resource_version="999",
            ),
        )
        snapshot.objects.set(bound)
        return await task

    assert run(main()) is None


def test_pre_bind_fails_when_the_provisioner_gives_up() -> None:
    pod = binder_pod(PROVISIONED)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, PROVISIONED])
    plugin = plugin_for(snapshot, client=FakeClient(snapshot))
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")

    async def main() -> Status | None:
        task = asyncio.create_task(plugin.pre_bind(state, pod, "node1"))
        await asyncio.sleep(0.05)
        claim = snapshot.objects.get(PersistentVolumeClaim, "provisioned-pvc", "testns")
        assert claim is not None
        annotations = {"other": "x"}
        snapshot.objects.set(
            msgspec.structs.replace(
                claim,
                metadata=msgspec.structs.replace(
                    claim.metadata, annotations=annotations, resource_version="999"
                ),
            )
        )
        return await task

    assert run(main()) == Status(
        Code.ERROR, 'binding volumes: provisioning failed for PVC "provisioned-pvc"'
    )


def test_pre_bind_api_error_reverts_the_assumption() -> None:
    pod = binder_pod(UNBOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, UNBOUND, PV_NODE1A])
    plugin = plugin_for(snapshot, client=FakeClient(snapshot, fail="pv"))
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")
    status = run(plugin.pre_bind(state, pod, "node1"))
    assert status == Status(Code.ERROR, "the API server said no")
    current = plugin.cache.pvs.get("pv-node1a")
    assert current is not None
    assert current.spec.claim_ref is None


def test_pre_bind_conflict_on_a_changed_volume() -> None:
    pod = binder_pod(UNBOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, UNBOUND, PV_NODE1A])
    client = FakeClient(snapshot, informer=False)
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")
    # Someone else changed the PV after the decision (the informer has not told us yet).
    client.snapshot = cluster(
        [NODE1],
        [
            msgspec.structs.replace(
                PV_NODE1A,
                metadata=msgspec.structs.replace(PV_NODE1A.metadata, resource_version="5"),
            )
        ],
    )
    status = run(plugin.pre_bind(state, pod, "node1"))
    assert status is not None
    assert status.code == Code.ERROR
    assert "conflict" in status.message


def test_pre_bind_without_a_storage_client() -> None:
    pod = binder_pod(UNBOUND)
    plugin, state, _ = reserve([UNBOUND, PV_NODE1A], pod)
    assert run(plugin.pre_bind(state, pod, "node1")) == Status(
        Code.ERROR, "binding volumes: the front end cannot write volumes"
    )


def test_pre_bind_with_everything_bound_does_nothing() -> None:
    pod = binder_pod(BOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, BOUND, PV_BOUND])
    client = FakeClient(snapshot)
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")
    assert run(plugin.pre_bind(state, pod, "node1")) is None
    assert client.calls == []


def test_check_bindings_claim_ref_reset() -> None:
    pod = binder_pod(UNBOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, UNBOUND, PV_NODE1A])

    class Resetting(FakeClient):
        async def patch_persistent_volume(
            self, name: str, patch: Mapping[str, Any], *, status: bool = False
        ) -> PersistentVolume:
            out = await super().patch_persistent_volume(name, patch, status=status)
            # The PV controller unbinds it right away.
            self.snapshot.objects.set(
                msgspec.structs.replace(
                    out,
                    spec=msgspec.structs.replace(out.spec, claim_ref=None),
                    metadata=msgspec.structs.replace(out.metadata, resource_version="10000"),
                )
            )
            return out

    assert _pre_bind(snapshot, pod, Resetting(snapshot)) == Status(
        Code.ERROR, 'binding volumes: ClaimRef got reset for pv "pv-node1a"'
    )


def _pre_bind(snapshot: Snapshot, pod: Pod, client: FakeClient) -> Status | None:
    """PreBind on node1 after the cycle that chose it, writing through ``client``."""
    plugin = plugin_for(snapshot, client=client)
    state = CycleState()
    plugin.pre_filter(state, pod, all_nodes(snapshot))
    plugin.filter_nodes(state, pod, all_nodes(snapshot))
    plugin.reserve(state, pod, "node1")
    return run(plugin.pre_bind(state, pod, "node1"))


def test_check_bindings_pv_deleted_meanwhile() -> None:
    """The assume cache's wording of an object it no longer has, as upstream's
    ``NotFoundError`` (``could not find v1.PersistentVolume "name"``)."""
    pod = binder_pod(UNBOUND)
    snapshot = cluster([NODE1], [*BINDER_CLASSES, UNBOUND, PV_NODE1A])

    class Deleting(FakeClient):
        async def patch_persistent_volume(
            self, name: str, patch: Mapping[str, Any], *, status: bool = False
        ) -> PersistentVolume:
            out = await super().patch_persistent_volume(name, patch, status=status)
            self.snapshot.objects.delete(PersistentVolume, name)
            return out

    assert _pre_bind(snapshot, pod, Deleting(snapshot)) == Status(
        Code.ERROR,
        'binding volumes: failed to check binding: could not find v1.PersistentVolume "pv-node1a"',
    )


# --- queueing hints -----------------------------------------------------------------------------


def events(plugin: VolumeBinding) -> dict[str, ActionType]:
    return {e.event.resource: e.event.action for e in plugin.events_to_register()}


def test_events_to_register() -> None:
    plugin = plugin_for(cluster())
    assert events(plugin) == {
        "storage.k8s.io/StorageClass": ActionType.ADD | ActionType.UPDATE,
        "PersistentVolumeClaim": ActionType.ADD | ActionType.UPDATE,
        "PersistentVolume": ActionType.ADD | ActionType.UPDATE,
        "Node": ActionType.ADD | ActionType.UPDATE_NODE_LABEL,
        "storage.k8s.io/CSINode": ActionType.ADD | ActionType.UPDATE,
    }


def test_hints() -> None:
    plugin = plugin_for(cluster())
    pod = claim_pod("p", "a", volumes=[{"name": "scratch", "ephemeral": {}}])
    q, skip = QueueingHint.QUEUE, QueueingHint.SKIP
    hint = plugin.is_schedulable_after_persistent_volume_claim_change
    assert hint(pod, None, pvc("a", "sc")) == q
    assert hint(pod, None, pvc("p-scratch", "sc")) == q
    assert hint(pod, None, pvc("b", "sc")) == skip
    assert hint(pod, None, pvc("a", "sc", namespace="other")) == skip
    sc_hint = plugin.is_schedulable_after_storage_class_change
    assert sc_hint(pod, None, WAIT_SC) == q
    assert sc_hint(pod, WAIT_SC, WAIT_SC) == skip
    topo = storage_class("wait-sc", WAIT, allowed_topologies=[{"zone": ["a"]}])
    assert sc_hint(pod, WAIT_SC, topo) == q
    csi_hint = plugin.is_schedulable_after_csi_node_change
    plain = msgspec.convert({"metadata": {"name": "n"}}, CSINode)
    migrated = msgspec.convert(
        {
            "metadata": {
                "name": "n",
                "annotations": {
                    "storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/gce-pd"
                },
            }
        },
        CSINode,
    )
    assert csi_hint(pod, None, plain) == q
    assert csi_hint(pod, plain, plain) == skip
    assert csi_hint(pod, plain, migrated) == q
    assert hint(pod, None, object()) == q  # a misrouted event: queue to be safe


def test_registered_in_tree() -> None:
    assert in_tree_registry()["VolumeBinding"] is VolumeBinding


# --- vectorized Filter against FindPodVolumes node by node -----------------------------------


def reference(
    pod_claims: list[PersistentVolumeClaim],
    pvs: list[PersistentVolume],
    classes: Mapping[str, StorageClass],
    n: Node,
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """FindPodVolumes for one node, written as upstream's loops."""
    labels = n.metadata.labels
    reasons: list[str] = []
    bound = [c for c in pod_claims if c.spec.volume_name]
    delay = [c for c in pod_claims if not c.spec.volume_name]
    by_name = {v.metadata.name: v for v in pvs}
    bound_ok, found = True, True
    for c in bound:
        v = by_name.get(c.spec.volume_name)
        if v is None:
            found = False
            break
        if not volume_node_affinity_matches(v, labels):
            bound_ok = False
            break
    unbound_ok = True
    static: list[tuple[str, str]] = []
    dynamic: list[str] = []
    to_provision = [c for c in delay if ANN_SELECTED_NODE in c.metadata.annotations]
    if any(c.metadata.annotations[ANN_SELECTED_NODE] != n.metadata.name for c in to_provision):
        unbound_ok = False
    else:
        chosen: set[str] = set()
        for c in sorted((c for c in delay if c not in to_provision), key=storage_request):
            best = None
            for v in pvs:
                if v.metadata.name in chosen or persistent_volume_class(
                    v
                ) != persistent_volume_claim_class(c):
                    continue
                if storage_capacity(v) < storage_request(c):
                    continue
                if v.status.phase != "Available" or not volume_node_affinity_matches(v, labels):
                    continue
                if not set(c.spec.access_modes) <= set(v.spec.access_modes):
                    continue
                if best is None or storage_capacity(best) > storage_capacity(v):
                    best = v
            if best is None:
                unbound_ok = False
                to_provision.append(c)
            else:
                chosen.add(best.metadata.name)
                static.append((c.metadata.name, best.metadata.name))
        if to_provision:
            unbound_ok = True
            for c in to_provision:
                sc = classes[persistent_volume_claim_class(c)]
                if sc.provisioner in (
                    "",
                    "kubernetes.io/no-provisioner",
                ) or not topology_selector_terms_match(sc.allowed_topologies, labels):
                    unbound_ok = False
                    break
                dynamic.append(c.metadata.name)
    if not bound_ok:
        reasons.append(ERR_REASON_NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(ERR_REASON_BIND_CONFLICT)
    if not found:
        reasons.append(ERR_REASON_PV_NOT_EXIST)
    if reasons:
        return reasons, [], []
    return reasons, static, dynamic


@pytest.mark.parametrize("seed", range(40))
def test_vectorized_filter_matches_per_node_loops(seed: int) -> None:
    rng = random.Random(seed)
    zones = ["z1", "z2", "z3"]
    nodes = [
        node(f"n{i}", {ZONE: rng.choice(zones), "rack": rng.choice(["r1", "r2"])})
        for i in range(rng.randint(1, 12))
    ]
    classes = {
        "local": storage_class("local", WAIT, provisioner="kubernetes.io/no-provisioner"),
        "dyn": storage_class(
            "dyn",
            WAIT,
            provisioner="csi.example.com",
            allowed_topologies=[{ZONE: rng.sample(zones, 2)}],
        ),
    }
    sizes = ["1Gi", "2Gi", "5Gi", "10Gi"]
    pvs = []
    for i in range(rng.randint(0, 15)):
        affinity = rng.choice(
            [
                {HOSTNAME: [rng.choice(nodes).metadata.name]},
                {ZONE: [rng.choice(zones)]},
                {ZONE: rng.sample(zones, 2), "rack": ["r1"]},
                None,
            ]
        )
        pvs.append(
            pv(
                f"pv{i}",
                rng.choice(["local", "dyn"]),
                capacity=rng.choice(sizes),
                phase=rng.choice(["Available", "Available", "Available", "Released"]),
                access_modes=rng.choice([["ReadWriteOnce"], ["ReadWriteOnce", "ReadOnlyMany"]]),
                node_affinity=affinity,
            )
        )
    claims = []
    for j in range(rng.randint(1, 4)):
        if rng.random() < 0.25 and pvs:
            target = rng.choice(pvs).metadata.name if rng.random() < 0.9 else "gone"
            claims.append(pvc(f"c{j}", "local", bound_to=target))
        else:
            annotations = {}
            if rng.random() < 0.15:
                annotations[ANN_SELECTED_NODE] = rng.choice(nodes).metadata.name
            claims.append(
                pvc(
                    f"c{j}",
                    rng.choice(["local", "dyn"]),
                    request=rng.choice(sizes),
                    access_modes=rng.choice([["ReadWriteOnce"], ["ReadOnlyMany"], []]),
                    annotations=annotations,
                )
            )
    snapshot = cluster(nodes, [*classes.values(), *pvs, *claims])
    plugin = plugin_for(snapshot)
    pod = claim_pod("p", *(c.metadata.name for c in claims))
    state = CycleState()
    everything = all_nodes(snapshot)
    _, status = plugin.pre_filter(state, pod, everything)
    assert status is None
    got = statuses(plugin, state, pod, everything)
    finder = state.read(STATE_KEY, object).finder  # type: ignore[attr-defined]
    for n, s, slot in zip(nodes, got, everything.slots.tolist(), strict=True):
        want_reasons, want_static, want_dynamic = reference(claims, pvs, classes, n)
        assert (list(s.reasons) if s is not None else []) == want_reasons, n.metadata.name
        volumes = finder.pod_volumes(slot)
        if want_reasons:
            assert volumes is None
            continue
        assert volumes is not None
        # Equal capacities may tie: compare what each claim got by size.
        got_static = [(c.metadata.name, storage_capacity(v)) for c, v in volumes.static]
        by_name = {v.metadata.name: v for v in pvs}
        assert sorted(got_static) == sorted(
            (c, storage_capacity(by_name[v])) for c, v in want_static
        )
        assert sorted(c.metadata.name for c in volumes.dynamic) == sorted(want_dynamic)
    assert np.array_equal(
        np.array([s is None for s in got]),
        np.array([plugin.filter(state, pod, info) is None for info in everything.infos()]),
    )


@pytest.mark.parametrize("seed", range(30))
def test_node_affinity_masks_match_check_node_affinity(seed: int) -> None:
    """Every operator, valid or not, over the node table as CheckNodeAffinity per node."""
    from kubesched.plugins.volume_binding._binder import pv_affinity_mask

    rng = random.Random(seed)
    keys = ["zone", "rack", "gen", "bad key!"]
    values = ["a", "b", "1", "7", "x y"]
    nodes = [
        node(f"n{i}", {k: rng.choice(values) for k in keys[:3] if rng.random() < 0.6})
        for i in range(rng.randint(1, 12))
    ]
    ops = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Near"]
    terms = []
    for _ in range(rng.randint(0, 3)):
        exprs = []
        for _ in range(rng.randint(0, 3)):
            op = rng.choice(ops)
            n_values = {"Exists": 0, "DoesNotExist": 0, "Gt": 1, "Lt": 1}.get(op, 2)
            if rng.random() < 0.1:
                n_values += 1  # sometimes invalid
            exprs.append(
                {"key": rng.choice(keys), "operator": op, "values": rng.sample(values, n_values)}
            )
        terms.append({"matchExpressions": exprs})
    volume = pv("v", spec={"nodeAffinity": {"required": {"nodeSelectorTerms": terms}}})
    snapshot = cluster(nodes)
    everything = all_nodes(snapshot)
    got = pv_affinity_mask(volume, everything).tolist()
    want = [volume_node_affinity_matches(volume, n.metadata.labels) for n in nodes]
    assert got == want


def test_claims_read_as_their_volumes_reach() -> None:
    """A fully bound claim is read for its volume's node affinity alone; a claim still to bind
    for itself (``None``)."""
    other = make_test_pvc("other-pvc", "1G", "waitClass", bound="pv-other")
    far = make_test_pvc("far-pvc", "1G", "waitClass", bound="pv-far")
    objects = [
        *BINDER_CLASSES,
        BOUND,
        PV_BOUND,
        other,
        make_test_pv("pv-other", "node1", "5G", "waitClass", other),
        far,
        make_test_pv("pv-far", "node2", "1G", "waitClass", far),
        UNBOUND,
    ]
    plugin = plugin_for(cluster([NODE1], objects))
    read = plugin.node_local_claims
    assert read(binder_pod(BOUND)) == read(binder_pod(other))
    assert read(binder_pod(BOUND)) != read(binder_pod(far))
    assert read(binder_pod(BOUND, far)) == read(binder_pod(other, far))
    assert read(binder_pod(BOUND, UNBOUND)) is None


def test_reserve_finds_the_volumes_of_a_node_filtered_in_an_earlier_cycle() -> None:
    """A node whose verdict was kept from an earlier cycle was not filtered in this one: its
    volumes are found at Reserve, not taken as all bound."""
    node2 = node("node2", {NODE_KEY: "node2"})
    snapshot = cluster([NODE1, node2], [*BINDER_CLASSES, UNBOUND, PV_NODE1A, PV_NODE2])
    plugin = plugin_for(snapshot)
    pod = binder_pod(UNBOUND)
    state = CycleState()
    assert plugin.pre_filter(state, pod, all_nodes(snapshot))[1] is None
    slot = snapshot.slot_of("node2")
    assert slot is not None
    plugin.filter_nodes(state, pod, Nodes(snapshot, np.array([slot], dtype=np.int64)))
    assert plugin.reserve(state, pod, "node1") is None
    s = state.read(STATE_KEY, object)
    assert not s.all_bound  # type: ignore[attr-defined]
    assumed = plugin.cache.pvs.get("pv-node1a")
    assert assumed is not None
    assert assumed.spec.claim_ref is not None
