"""NodeResourcesFit: kube-scheduler's table tests (fit_test.go, least_allocated_test.go,
most_allocated_test.go, requested_to_capacity_ratio_test.go) with their expected reasons and
scores, and randomized checks that the vectorized filter and score equal the per-node forms."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from builders import NodeWrapper, req_pod
from kubesched.api import Node, Pod
from kubesched.config import (
    ConfigError,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from kubesched.framework import (
    ActionType,
    BindPlugin,
    Code,
    CycleState,
    FitError,
    Framework,
    NodeInfo,
    Nodes,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    QueueSortPlugin,
    Registry,
    Snapshot,
    Status,
)
from kubesched.plugins.node_resources._allocation import broken_linear
from kubesched.plugins.node_resources.fit import (
    NAME,
    PRE_FILTER_STATE_KEY,
    PRE_SCORE_STATE_KEY,
    REASON_TOO_MANY_PODS,
    InsufficientResource,
    NodeResourcesFit,
    PreScoreState,
    _LeastFree,
    fits,
    have_any_requested_resources_increased,
    is_fit,
)

EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_IO_A = "kubernetes.io/something"
K8S_IO_B = "subdomain.kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
EXT_RES = "abc.com/xyz"

UNSCHED = Code.UNSCHEDULABLE
UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- builders ---------------------------------------------------------------------------------


def res(
    cpu_m: int = 0, mem: int = 0, eph: int = 0, scalars: Mapping[str, int] | None = None
) -> dict[str, str]:
    """A container's requests as upstream's ``newResourcePod`` writes them (zeros included)."""
    out = {"cpu": f"{cpu_m}m", "memory": str(mem), "ephemeral-storage": str(eph)}
    out.update({k: str(v) for k, v in (scalars or {}).items()})
    return out


def node(name: str, allocatable: Mapping[str, str | int]) -> Node:
    return NodeWrapper(name).uid(f"node-{name}").capacity(allocatable).obj()


def st_node(name: str, capacity: Mapping[str, str | int]) -> Node:
    """``st.MakeNode().Capacity(...)``: 32 pods unless given."""
    return node(name, {"pods": 32, **capacity})


def cluster(nodes: Sequence[Node], pods: Sequence[Pod] = ()) -> Snapshot:
    s = Snapshot()
    for n in nodes:
        s.set_node(n)
    for p in pods:
        s.add_pod(PodInfo.of(p), p.spec.node_name)
    return s


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


def plugin(snapshot: Snapshot | None = None, args: NodeResourcesFitArgs | None = None) -> Any:
    return NodeResourcesFit(_Handle(snapshot or Snapshot()), args)  # type: ignore[arg-type]


def strategy(
    kind: str, resources: Sequence[tuple[str, int]] | None, shape: Sequence[tuple[int, int]] = ()
) -> NodeResourcesFitArgs:
    rtcr = None
    if shape:
        rtcr = RequestedToCapacityRatioParam(
            shape=[UtilizationShapePoint(utilization=u, score=s) for u, s in shape]
        )
    return NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type=kind,
            resources=[ResourceSpec(name=n, weight=w) for n, w in (resources or [])],
            requested_to_capacity_ratio=rtcr,
        )
    )


DEFAULT_RESOURCES = [("cpu", 1), ("memory", 1)]
EXTENDED_RESOURCE_SET = [("cpu", 1), ("memory", 1), (EXT_RES, 1)]


def filter_all(p: NodeResourcesFit, incoming: Pod, snap: Snapshot) -> list[Status | None]:
    """Run PreFilter, then Filter per node and vectorized; both must agree."""
    state = CycleState()
    nodes = Nodes(snap, snap.present_slots())
    assert p.pre_filter(state, incoming, nodes) == (None, None)
    per_node = [p.filter(state, incoming, info) for info in nodes.infos()]
    verdict = p.filter_nodes(state, incoming, nodes)
    vectorized = [verdict.statuses[i] for i in verdict.ids.tolist()]
    assert vectorized == per_node
    return per_node


def score_all(
    p: NodeResourcesFit, incoming: Pod, snap: Snapshot, pre_score: bool = True
) -> list[int]:
    state = CycleState()
    nodes = Nodes(snap, snap.present_slots())
    if pre_score:
        assert p.pre_score(state, incoming, nodes) is None
    per_node = []
    for info in nodes.infos():
        v, s = p.score(state, incoming, info)
        assert s is None
        per_node.append(v)
    scores, s = p.score_nodes(state, incoming, nodes)
    assert s is None
    assert scores.tolist() == per_node
    return per_node


# --- Filter: TestEnoughRequests ---------------------------------------------------------------

ENOUGH_NODE: dict[str, str | int] = {
    "cpu": "10m",
    "memory": 20,
    "pods": 32,
    EXT_A: 5,
    "ephemeral-storage": 20,
    HUGE_A: 5,
}

IR = InsufficientResource

ENOUGH_REQUESTS: list[tuple[str, Pod, Pod | None, Status | None, list[IR], dict[str, Any]]] = [
    ("no resources requested always fits", req_pod(), req_pod(res(10, 20)), None, [], {}),
    (
        "too many resources fails",
        req_pod(res(1, 1)),
        req_pod(res(10, 20)),
        Status(UNSCHED, "Insufficient cpu", "Insufficient memory"),
        [IR("cpu", "Insufficient cpu", 1, 10, 10), IR("memory", "Insufficient memory", 1, 20, 20)],
        {},
    ),
    (
        "too many resources fails due to init container cpu",
        req_pod(res(1, 1), init=[res(3, 1)]),
        req_pod(res(8, 19)),
        Status(UNSCHED, "Insufficient cpu"),
        [IR("cpu", "Insufficient cpu", 3, 8, 10)],
        {},
    ),
    (
        "too many resources fails due to highest init container cpu",
        req_pod(res(1, 1), init=[res(3, 1), res(2, 1)]),
        req_pod(res(8, 19)),
        Status(UNSCHED, "Insufficient cpu"),
        [IR("cpu", "Insufficient cpu", 3, 8, 10)],
        {},
    ),
    (
        "too many resources fails due to init container memory",
        req_pod(res(1, 1), init=[res(1, 3)]),
        req_pod(res(9, 19)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 3, 19, 20)],
        {},
    ),
    (
        "too many resources fails due to highest init container memory",
        req_pod(res(1, 1), init=[res(1, 3), res(1, 2)]),
        req_pod(res(9, 19)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 3, 19, 20)],
        {},
    ),
    (
        "init container fits because it's the max, not sum, of containers and init containers",
        req_pod(res(1, 1), init=[res(1, 1)]),
        req_pod(res(9, 19)),
        None,
        [],
        {},
    ),
    (
        "multiple init containers fit because it's the max, not sum, of containers and init "
        "containers",
        req_pod(res(1, 1), init=[res(1, 1), res(1, 1)]),
        req_pod(res(9, 19)),
        None,
        [],
        {},
    ),
    ("both resources fit", req_pod(res(1, 1)), req_pod(res(5, 5)), None, [], {}),
    (
        "one resource memory fits",
        req_pod(res(2, 1)),
        req_pod(res(9, 5)),
        Status(UNSCHED, "Insufficient cpu"),
        [IR("cpu", "Insufficient cpu", 2, 9, 10)],
        {},
    ),
    (
        "one resource cpu fits",
        req_pod(res(1, 2)),
        req_pod(res(5, 19)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 2, 19, 20)],
        {},
    ),
    ("equal edge case", req_pod(res(5, 1)), req_pod(res(5, 19)), None, [], {}),
    (
        "equal edge case for init container",
        req_pod(res(4, 1), init=[res(5, 1)]),
        req_pod(res(5, 19)),
        None,
        [],
        {},
    ),
    ("extended resource fits", req_pod(res(scalars={EXT_A: 1})), req_pod(res()), None, [], {}),
    (
        "extended resource fits for init container",
        req_pod(res(), init=[res(scalars={EXT_A: 1})]),
        req_pod(res()),
        None,
        [],
        {},
    ),
    (
        "extended resource capacity enforced",
        req_pod(res(1, 1, scalars={EXT_A: 10})),
        req_pod(res(0, 0, scalars={EXT_A: 0})),
        Status(UNRESOLVABLE, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 10, 0, 5, True)],
        {},
    ),
    (
        "extended resource capacity enforced for init container",
        req_pod(res(), init=[res(1, 1, scalars={EXT_A: 10})]),
        req_pod(res(0, 0, scalars={EXT_A: 0})),
        Status(UNRESOLVABLE, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 10, 0, 5, True)],
        {},
    ),
    (
        "extended resource allocatable enforced",
        req_pod(res(1, 1, scalars={EXT_A: 1})),
        req_pod(res(0, 0, scalars={EXT_A: 5})),
        Status(UNSCHED, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 1, 5, 5)],
        {},
    ),
    (
        "extended resource allocatable enforced for init container",
        req_pod(res(), init=[res(1, 1, scalars={EXT_A: 1})]),
        req_pod(res(0, 0, scalars={EXT_A: 5})),
        Status(UNSCHED, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 1, 5, 5)],
        {},
    ),
    (
        "extended resource allocatable enforced for multiple containers",
        req_pod(res(1, 1, scalars={EXT_A: 3}), res(1, 1, scalars={EXT_A: 3})),
        req_pod(res(0, 0, scalars={EXT_A: 2})),
        Status(UNRESOLVABLE, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 6, 2, 5, True)],
        {},
    ),
    (
        "extended resource allocatable admits multiple init containers",
        req_pod(res(), init=[res(1, 1, scalars={EXT_A: 3}), res(1, 1, scalars={EXT_A: 3})]),
        req_pod(res(0, 0, scalars={EXT_A: 2})),
        None,
        [],
        {},
    ),
    (
        "extended resource allocatable enforced for multiple init containers",
        req_pod(res(), init=[res(1, 1, scalars={EXT_A: 6}), res(1, 1, scalars={EXT_A: 3})]),
        req_pod(res(0, 0, scalars={EXT_A: 2})),
        Status(UNRESOLVABLE, f"Insufficient {EXT_A}"),
        [IR(EXT_A, f"Insufficient {EXT_A}", 6, 2, 5, True)],
        {},
    ),
    (
        "extended resource allocatable enforced for unknown resource",
        req_pod(res(1, 1, scalars={EXT_B: 1})),
        req_pod(res()),
        Status(UNRESOLVABLE, f"Insufficient {EXT_B}"),
        [IR(EXT_B, f"Insufficient {EXT_B}", 1, 0, 0, True)],
        {},
    ),
    (
        "extended resource allocatable enforced for unknown resource for init container",
        req_pod(res(), init=[res(1, 1, scalars={EXT_B: 1})]),
        req_pod(res()),
        Status(UNRESOLVABLE, f"Insufficient {EXT_B}"),
        [IR(EXT_B, f"Insufficient {EXT_B}", 1, 0, 0, True)],
        {},
    ),
    (
        "kubernetes.io resource capacity enforced",
        req_pod({**res(1, 1), K8S_IO_A: "10"}),
        req_pod(res()),
        Status(UNRESOLVABLE, f"Insufficient {K8S_IO_A}"),
        [IR(K8S_IO_A, f"Insufficient {K8S_IO_A}", 10, 0, 0, True)],
        {},
    ),
    (
        "kubernetes.io resource capacity enforced for init container",
        req_pod(res(), init=[{**res(1, 1), K8S_IO_B: "10"}]),
        req_pod(res()),
        Status(UNRESOLVABLE, f"Insufficient {K8S_IO_B}"),
        [IR(K8S_IO_B, f"Insufficient {K8S_IO_B}", 10, 0, 0, True)],
        {},
    ),
    (
        "hugepages resource capacity enforced",
        req_pod(res(1, 1, scalars={HUGE_A: 10})),
        req_pod(res(0, 0, scalars={HUGE_A: 0})),
        Status(UNRESOLVABLE, f"Insufficient {HUGE_A}"),
        [IR(HUGE_A, f"Insufficient {HUGE_A}", 10, 0, 5, True)],
        {},
    ),
    (
        "hugepages resource capacity enforced for init container",
        req_pod(res(), init=[res(1, 1, scalars={HUGE_A: 10})]),
        req_pod(res(0, 0, scalars={HUGE_A: 0})),
        Status(UNRESOLVABLE, f"Insufficient {HUGE_A}"),
        [IR(HUGE_A, f"Insufficient {HUGE_A}", 10, 0, 5, True)],
        {},
    ),
    (
        "hugepages resource allocatable enforced for multiple containers",
        req_pod(res(1, 1, scalars={HUGE_A: 3}), res(1, 1, scalars={HUGE_A: 3})),
        req_pod(res(0, 0, scalars={HUGE_A: 2})),
        Status(UNRESOLVABLE, f"Insufficient {HUGE_A}"),
        [IR(HUGE_A, f"Insufficient {HUGE_A}", 6, 2, 5, True)],
        {},
    ),
    (
        "skip checking ignored extended resource",
        req_pod(res(1, 1, scalars={EXT_B: 1})),
        req_pod(res()),
        None,
        [IR(EXT_B, f"Insufficient {EXT_B}", 1, 0, 0, True)],
        {"ignored_resources": [EXT_B]},
    ),
    (
        "resources + pod overhead fits",
        req_pod(res(1, 1), overhead={"cpu": "3m", "memory": "13"}),
        req_pod(res(5, 5)),
        None,
        [],
        {},
    ),
    (
        "requests + overhead does not fit for memory",
        req_pod(res(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        req_pod(res(5, 5)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 16, 5, 20)],
        {},
    ),
    (
        "skip checking ignored extended resource via resource groups",
        req_pod({**res(1, 1), EXT_B: "1", K8S_IO_A: "1"}),
        req_pod(res()),
        Status(UNRESOLVABLE, f"Insufficient {K8S_IO_A}"),
        [
            IR(EXT_B, f"Insufficient {EXT_B}", 1, 0, 0, True),
            IR(K8S_IO_A, f"Insufficient {K8S_IO_A}", 1, 0, 0, True),
        ],
        {"ignored_resource_groups": ["example.com"]},
    ),
    (
        "skip checking extended resource request with quantity zero via resource groups",
        req_pod(res(1, 1, scalars={EXT_A: 0})),
        req_pod(res(0, 0, scalars={EXT_A: 6})),
        None,
        [],
        {},
    ),
    (
        "skip checking resource request with quantity zero",
        req_pod(res(scalars={EXT_A: 1})),
        req_pod(res(20, 30, scalars={EXT_A: 1})),
        None,
        [],
        {},
    ),
    (
        "both pod-level and container-level resources fit",
        req_pod(res(1, 1), pod_level={"cpu": "1m", "memory": "2"}),
        req_pod(res(5, 5)),
        None,
        [],
        {},
    ),
    (
        "pod-level cpu resource not fit",
        req_pod(res(1, 1), pod_level={"cpu": "7m", "memory": "2"}),
        req_pod(res(5, 5)),
        Status(UNSCHED, "Insufficient cpu"),
        [IR("cpu", "Insufficient cpu", 7, 5, 10)],
        {},
    ),
    (
        "pod-level memory resource not fit",
        req_pod(res(1, 1), pod_level={"cpu": "3m", "memory": "2"}),
        req_pod(res(5, 19)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 2, 19, 20)],
        {},
    ),
    (
        "pod-level hugepages resource fit",
        req_pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}),
        None,
        None,
        [],
        {},
    ),
    (
        "both pod-level and container-level hugepages resource fit",
        req_pod(
            res(1, 1, scalars={HUGE_A: 3}), pod_level={"cpu": "3m", "memory": "2", HUGE_A: "5"}
        ),
        None,
        None,
        [],
        {},
    ),
    (
        "pod-level hugepages resource not fit",
        req_pod(pod_level={"cpu": "3m", "memory": "2", HUGE_A: "10"}),
        None,
        Status(UNRESOLVABLE, f"Insufficient {HUGE_A}"),
        [IR(HUGE_A, f"Insufficient {HUGE_A}", 10, 0, 5, True)],
        {},
    ),
    (
        "one pod-level cpu resource fits and all init and non-init containers resources fit",
        req_pod(res(1, 1), init=[res(1, 1)], pod_level={"cpu": "3m", "memory": "2"}),
        req_pod(res(5, 19)),
        Status(UNSCHED, "Insufficient memory"),
        [IR("memory", "Insufficient memory", 2, 19, 20)],
        {},
    ),
    (
        "extended resource no node offers (DRA extended resources off, as by default)",
        req_pod({**res(1, 1), "extended.resource.dra.io/something": "1"}),
        req_pod(res()),
        Status(UNRESOLVABLE, "Insufficient extended.resource.dra.io/something"),
        [
            IR(
                "extended.resource.dra.io/something",
                "Insufficient extended.resource.dra.io/something",
                1,
                0,
                0,
                True,
            )
        ],
        {},
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "want_status", "want_insufficient", "args"),
    [c[1:] for c in ENOUGH_REQUESTS],
    ids=[c[0] for c in ENOUGH_REQUESTS],
)
def test_enough_requests(
    incoming: Pod,
    existing: Pod | None,
    want_status: Status | None,
    want_insufficient: list[InsufficientResource],
    args: dict[str, Any],
) -> None:
    pods = [] if existing is None else [existing]
    for p in pods:
        p.spec.node_name = "n"
    snap = cluster([node("n", ENOUGH_NODE)], pods)
    fit_args = NodeResourcesFitArgs(
        **args, scoring_strategy=strategy("LeastAllocated", DEFAULT_RESOURCES).scoring_strategy
    )
    [got] = filter_all(plugin(snap, fit_args), incoming, snap)
    assert got == want_status
    info = snap.get("n")
    assert info is not None
    assert fits(incoming, info) == want_insufficient


def test_filter_without_pre_filter_is_an_error() -> None:
    snap = cluster([node("n", {})])
    p = plugin(snap)
    info = snap.get("n")
    assert info is not None
    want = Status(Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found')
    assert p.filter(CycleState(), req_pod(), info) == want
    verdict = p.filter_nodes(CycleState(), req_pod(), Nodes(snap, snap.present_slots()))
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_pods_of_one_request_shape_share_their_checks() -> None:
    snap = cluster([node("n", {"cpu": "1", "memory": "1Gi", "pods": 10})])
    p = plugin(snap)
    nodes = Nodes(snap, snap.present_slots())

    def checks(incoming: Pod) -> Any:
        state = CycleState()
        p.pre_filter(state, incoming, nodes)
        return state.get(PRE_FILTER_STATE_KEY).checks

    first = checks(req_pod({"cpu": "100m", "memory": "1Ki"}))
    assert [(c.name, c.amount) for c in first] == [("cpu", 100), ("memory", 1024)]
    assert checks(req_pod({"cpu": "100m", "memory": "1Ki"})) is first
    other = checks(req_pod({"cpu": "2"}))
    assert [(c.name, c.amount) for c in other] == [("cpu", 2000)]
    # Still filtered by their own requests.
    assert filter_all(p, req_pod({"cpu": "2"}), snap)[0] is not None
    assert filter_all(p, req_pod({"cpu": "100m", "memory": "1Ki"}), snap) == [None]


NOT_ENOUGH = [
    (
        "even without specified resources, predicate fails when there's no space for additional "
        "pod",
        req_pod(),
        req_pod(res(10, 20)),
    ),
    (
        "even if both resources fit, predicate fails when there's no space for additional pod",
        req_pod(res(1, 1)),
        req_pod(res(5, 5)),
    ),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod",
        req_pod(res(5, 1)),
        req_pod(res(5, 19)),
    ),
    (
        "even for equal edge case, predicate fails when there's no space for additional pod due "
        "to init container",
        req_pod(res(5, 1), init=[res(5, 1)]),
        req_pod(res(5, 19)),
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing"), [c[1:] for c in NOT_ENOUGH], ids=[c[0] for c in NOT_ENOUGH]
)
def test_not_enough_requests(incoming: Pod, existing: Pod) -> None:
    existing.spec.node_name = "n"
    snap = cluster([node("n", {"cpu": "10m", "memory": 20, "pods": 1})], [existing])
    assert filter_all(plugin(snap), incoming, snap) == [Status(UNSCHED, REASON_TOO_MANY_PODS)]


STORAGE = [
    ("empty storage requested, and pod fits", req_pod(res(1, 1)), req_pod(res(2, 10)), None),
    (
        "storage ephemeral local storage request exceeds allocatable",
        req_pod(res(eph=25)),
        req_pod(res(2, 2)),
        Status(UNRESOLVABLE, "Insufficient ephemeral-storage"),
    ),
    (
        "ephemeral local storage is sufficient",
        req_pod(res(eph=5)),
        req_pod(res(2, 2, eph=10)),
        None,
    ),
    ("pod fits", req_pod(res(eph=10)), req_pod(res(2, 2)), None),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "want"), [c[1:] for c in STORAGE], ids=[c[0] for c in STORAGE]
)
def test_storage_requests(incoming: Pod, existing: Pod, want: Status | None) -> None:
    existing.spec.node_name = "n"
    snap = cluster([node("n", ENOUGH_NODE)], [existing])
    assert filter_all(plugin(snap), incoming, snap) == [want]


@pytest.mark.parametrize(
    ("incoming", "want"),
    [
        (req_pod({}), None),
        (req_pod({}, sidecars=[{}]), None),
        (req_pod({"cpu": "1m"}, sidecars=[{"cpu": "1m"}]), None),
        (
            req_pod({"cpu": "1m"}, sidecars=[{"cpu": "2m"}]),
            Status(UNRESOLVABLE, "Insufficient cpu"),
        ),
    ],
    ids=[
        "allow pod without restartable init containers",
        "allow pod with restartable init containers",
        "allow pod if the total requested resources do not exceed the node's allocatable",
        "not allow pod if the total requested resources do exceed the node's allocatable",
    ],
)
def test_restartable_init_containers(incoming: Pod, want: Status | None) -> None:
    snap = cluster([node("n", {"cpu": "2m", "memory": 0, "pods": 1})])
    assert filter_all(plugin(snap), incoming, snap) == [want]


def test_sidecar_started_before_an_init_container_adds_to_it() -> None:
    # Init container i needs its own request plus every sidecar started before it.
    snap = cluster([node("n", {"cpu": "10m", "memory": 100, "pods": 5})])
    fitting = req_pod({"cpu": "1m"}, sidecars=[{"cpu": "3m"}], init=[{"cpu": "7m"}])
    assert filter_all(plugin(snap), fitting, snap) == [None]  # max(1+3, 3+7) = 10
    over = req_pod({"cpu": "1m"}, sidecars=[{"cpu": "4m"}], init=[{"cpu": "7m"}])
    assert filter_all(plugin(snap), over, snap) == [Status(UNRESOLVABLE, "Insufficient cpu")]


def test_node_failing_several_ways_carries_every_reason_in_order() -> None:
    snap = cluster(
        [node("n", {"cpu": "1", "memory": "1Gi", "pods": 1, "ephemeral-storage": "1Gi", EXT_A: 1})],
        [req_pod(res(500, 2**29), node_name="n")],
    )
    incoming = req_pod({"cpu": "600m", "memory": "600Mi", "ephemeral-storage": "2Gi", EXT_A: "1"})
    assert filter_all(plugin(snap), incoming, snap) == [
        Status(
            UNRESOLVABLE,
            REASON_TOO_MANY_PODS,
            "Insufficient cpu",
            "Insufficient memory",
            "Insufficient ephemeral-storage",
        )
    ]


# --- FailedScheduling message through the runtime ---------------------------------------------


class _Sort(QueueSortPlugin):
    name = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class _Binder(BindPlugin):
    name = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


def test_failed_scheduling_message_counts_each_reason() -> None:
    snap = cluster(
        [
            node("a", {"cpu": "1", "memory": "1Gi", "pods": 10}),
            node("b", {"cpu": "4", "memory": "1Gi", "pods": 10}),
            node("c", {"cpu": "1", "memory": "8Gi", "pods": 0}),
        ]
    )
    fw = Framework(
        profile_name="test",
        registry=Registry({"Sort": _Sort, "Binder": _Binder, NAME: NodeResourcesFit}),
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "preFilter": [(NAME, 1)],
            "filter": [(NAME, 1)],
        },
        snapshot=snap,
    )
    with pytest.raises(FitError) as e:
        fw.schedule_pod(CycleState(), req_pod({"cpu": "2", "memory": "2Gi"}))
    assert str(e.value) == (
        "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu, 2 Insufficient memory."
    )
    statuses = e.value.diagnosis.node_statuses(snap)
    assert statuses["a"].code == UNRESOLVABLE
    assert statuses["c"].reasons == (REASON_TOO_MANY_PODS, "Insufficient cpu")


# --- Score: TestFitScore, least/most/requested-to-capacity-ratio tables -------------------------


def req(cpu: str | None = None, memory: str | None = None, **extra: str) -> dict[str, str]:
    """``st.MakePod().Req(...)``: one container with exactly these requests."""
    out = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    out.update({k.replace("__", "/"): v for k, v in extra.items()})
    return out


def on(
    node_name: str, *containers: Mapping[str, str], sidecars: Sequence[Mapping[str, str]] = ()
) -> Pod:
    return req_pod(*containers, sidecars=sidecars, node_name=node_name)


NODES_4_6 = [
    st_node("node1", {"cpu": "4000", "memory": "10000"}),
    st_node("node2", {"cpu": "6000", "memory": "10000"}),
]
EXISTING_2_1 = [on("node1", req("2000", "4000")), on("node2", req("1000", "2000"))]

FIT_SCORE = [
    (
        "RequestedToCapacityRatio case1",
        strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES, [(0, 10), (100, 0)]),
        req_pod(req("3000", "5000")),
        NODES_4_6,
        EXISTING_2_1,
        [10, 32],
    ),
    (
        "RequestedToCapacityRatio case2",
        strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES, [(0, 0), (100, 10)]),
        req_pod(req("3000", "5000")),
        NODES_4_6,
        EXISTING_2_1,
        [95, 68],
    ),
    (
        "MostAllocated",
        strategy("MostAllocated", DEFAULT_RESOURCES),
        req_pod(req("1000", "2000")),
        NODES_4_6,
        EXISTING_2_1,
        [67, 36],
    ),
    (
        "LeastAllocated",
        strategy("LeastAllocated", DEFAULT_RESOURCES),
        req_pod(req("1000", "2000")),
        NODES_4_6,
        EXISTING_2_1,
        [32, 63],
    ),
    (
        "MostAllocated with sidecar container",
        strategy("MostAllocated", DEFAULT_RESOURCES),
        req_pod(req("1000", "2000")),
        [
            st_node("node1", {"cpu": "4000", "memory": "10000"}),
            st_node("node2", {"cpu": "4000", "memory": "10000"}),
        ],
        [
            on("node1", req("1000", "2000"), sidecars=[req("1000", "2000")]),
            on("node2", req("1000", "2000")),
        ],
        [67, 45],
    ),
    (
        "LeastAllocated with sidecar container",
        strategy("LeastAllocated", DEFAULT_RESOURCES),
        req_pod(req("1000", "2000")),
        [
            st_node("node1", {"cpu": "4000", "memory": "10000"}),
            st_node("node2", {"cpu": "4000", "memory": "10000"}),
        ],
        [
            on("node1", req("1000", "2000"), sidecars=[req("1000", "2000")]),
            on("node2", req("1000", "2000")),
        ],
        [32, 55],
    ),
]


@pytest.mark.parametrize("pre_score", [True, False], ids=["PreScore", "PreScore not called"])
@pytest.mark.parametrize(
    ("args", "incoming", "nodes", "existing", "want"),
    [c[1:] for c in FIT_SCORE],
    ids=[c[0] for c in FIT_SCORE],
)
def test_fit_score(
    args: NodeResourcesFitArgs,
    incoming: Pod,
    nodes: list[Node],
    existing: list[Pod],
    want: list[int],
    pre_score: bool,
) -> None:
    snap = cluster(nodes, existing)
    assert score_all(plugin(snap, args), incoming, snap, pre_score) == want


N_4_4 = [
    st_node("node1", {"cpu": "4000", "memory": "10000"}),
    st_node("node2", {"cpu": "4000", "memory": "10000"}),
]
N_10_20 = [
    st_node("node1", {"cpu": "10000", "memory": "20000"}),
    st_node("node2", {"cpu": "10000", "memory": "20000"}),
]
TWO_CONTAINERS = req_pod(req("1000", "2000"), req("2000", "3000"))
EXT_NODES = [
    st_node("node1", {"cpu": "6000", "memory": "10000"}),
    st_node("node2", {"cpu": "6000", "memory": "10000", EXT_RES: "4"}),
]
EXT_REQ_NODES = [
    st_node("node1", {"cpu": "6000", "memory": "10000", EXT_RES: "4"}),
    st_node("node2", {"cpu": "6000", "memory": "10000", EXT_RES: "10"}),
]

LEAST = [
    ("nothing scheduled, nothing requested", req_pod(), N_4_4, [], DEFAULT_RESOURCES, [100, 100]),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        TWO_CONTAINERS,
        NODES_4_6,
        [],
        DEFAULT_RESOURCES,
        [37, 50],
    ),
    (
        "no resources requested, pods scheduled",
        req_pod(),
        N_4_4,
        [on("node1"), on("node1"), on("node2"), on("node2")],
        DEFAULT_RESOURCES,
        [100, 100],
    ),
    (
        "no resources requested, pods scheduled with resources",
        req_pod(),
        N_10_20,
        [
            on("node1", req("3000", "0")),
            on("node1", req("3000", "0")),
            on("node2", req("3000", "0")),
            on("node2", req("3000", "5000")),
        ],
        DEFAULT_RESOURCES,
        [70, 57],
    ),
    (
        "resources requested, pods scheduled with resources",
        TWO_CONTAINERS,
        N_10_20,
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        DEFAULT_RESOURCES,
        [57, 45],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        TWO_CONTAINERS,
        [
            st_node("node1", {"cpu": "10000", "memory": "20000"}),
            st_node("node2", {"cpu": "10000", "memory": "50000"}),
        ],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        DEFAULT_RESOURCES,
        [57, 60],
    ),
    (
        "requested resources exceed node capacity",
        req_pod(req("3000", "0")),
        N_4_4,
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        DEFAULT_RESOURCES,
        [50, 25],
    ),
    (
        "zero node resources, pods scheduled with resources",
        req_pod(),
        [st_node("node1", {}), st_node("node2", {})],
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        DEFAULT_RESOURCES,
        [0, 0],
    ),
    (
        "nothing scheduled, resources requested with different weight on CPU and memory, "
        "differently sized nodes",
        TWO_CONTAINERS,
        NODES_4_6,
        [],
        [("memory", 2), ("cpu", 1)],
        [41, 50],
    ),
    (
        "bypass extended resource if the pod does not request",
        TWO_CONTAINERS,
        EXT_NODES,
        [],
        EXTENDED_RESOURCE_SET,
        [50, 50],
    ),
    (
        "honor extended resource if the pod requests",
        req_pod({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
        EXT_REQ_NODES,
        [],
        EXTENDED_RESOURCE_SET,
        [50, 60],
    ),
    (
        "if the node doesn't have a resource",
        req_pod(req("3000", "4000")),
        EXT_NODES,
        [],
        [(EXT_RES, 2), ("cpu", 1), ("memory", 1)],
        [55, 55],
    ),
]

MOST = [
    ("nothing scheduled, nothing requested", req_pod(), N_4_4, [], DEFAULT_RESOURCES, [0, 0]),
    (
        "nothing scheduled, resources requested, differently sized nodes",
        TWO_CONTAINERS,
        NODES_4_6,
        [],
        DEFAULT_RESOURCES,
        [62, 50],
    ),
    (
        "no resources requested, pods scheduled with resources",
        req_pod(),
        N_10_20,
        [
            on("node1", req("3000", "0")),
            on("node1", req("3000", "0")),
            on("node2", req("3000", "0")),
            on("node2", req("3000", "5000")),
        ],
        DEFAULT_RESOURCES,
        [30, 42],
    ),
    (
        "resources requested, pods scheduled with resources",
        TWO_CONTAINERS,
        N_10_20,
        [on("node1", req("3000", "0")), on("node2", req("3000", "5000"))],
        DEFAULT_RESOURCES,
        [42, 55],
    ),
    (
        "resources requested equal node capacity",
        req_pod(req("2000", "4000"), req("3000", "5000")),
        [
            st_node("node1", {"cpu": "5000", "memory": "10000"}),
            st_node("node2", {"cpu": "10000", "memory": "9000"}),
        ],
        [],
        DEFAULT_RESOURCES,
        [95, 75],
    ),
    (
        "nothing scheduled, resources requested, differently sized nodes, weighted",
        TWO_CONTAINERS,
        NODES_4_6,
        [],
        [("memory", 2), ("cpu", 1)],
        [58, 50],
    ),
    (
        "no resources requested, pods scheduled, nonzero request for resource",
        req_pod({}),
        [
            st_node("node1", {"cpu": "250m", "memory": "1000Mi"}),
            st_node("node2", {"cpu": "250m", "memory": "1000Mi"}),
        ],
        [on("node1", {}), on("node1", {})],
        DEFAULT_RESOURCES,
        [80, 30],
    ),
    (
        "bypass extended resource if the pod does not request",
        TWO_CONTAINERS,
        EXT_NODES,
        [],
        EXTENDED_RESOURCE_SET,
        [50, 50],
    ),
    (
        "honor extended resource if the pod request",
        req_pod({"cpu": "3000", "memory": "5000", EXT_RES: "2"}),
        EXT_REQ_NODES,
        [],
        EXTENDED_RESOURCE_SET,
        [50, 40],
    ),
    (
        "if the node doesn't have a resource",
        req_pod(req("3000", "4000")),
        EXT_NODES,
        [],
        [(EXT_RES, 2), ("cpu", 1), ("memory", 1)],
        [45, 45],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "resources", "want"),
    [c[1:] for c in LEAST],
    ids=[c[0] for c in LEAST],
)
def test_least_allocated(
    incoming: Pod,
    nodes: list[Node],
    existing: list[Pod],
    resources: list[tuple[str, int]],
    want: list[int],
) -> None:
    snap = cluster(nodes, existing)
    p = plugin(snap, strategy("LeastAllocated", resources))
    assert score_all(p, incoming, snap) == want


@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "resources", "want"),
    [c[1:] for c in MOST],
    ids=[c[0] for c in MOST],
)
def test_most_allocated(
    incoming: Pod,
    nodes: list[Node],
    existing: list[Pod],
    resources: list[tuple[str, int]],
    want: list[int],
) -> None:
    snap = cluster(nodes, existing)
    p = plugin(snap, strategy("MostAllocated", resources))
    assert score_all(p, incoming, snap) == want


@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
@pytest.mark.parametrize(
    ("resources", "path"),
    [
        ([("memory", -1), ("cpu", 1)], "scoringStrategy.resources[0].weight"),
        ([("memory", 1), ("cpu", 0)], "scoringStrategy.resources[1].weight"),
        ([("memory", 1), ("cpu", 101)], "scoringStrategy.resources[1].weight"),
    ],
    ids=["negative weight", "zero weight", "weight larger than MaxNodeScore"],
)
def test_invalid_weights_are_rejected(
    kind: str, resources: list[tuple[str, int]], path: str
) -> None:
    with pytest.raises(ConfigError) as e:
        plugin(None, strategy(kind, resources))
    assert path in str(e.value)


@pytest.mark.parametrize("kind", ["LeastAllocated", "MostAllocated"])
def test_resources_not_set_is_a_score_error(kind: str) -> None:
    snap = cluster(NODES_4_6)
    p = plugin(snap, strategy(kind, []))
    state = CycleState()
    nodes = Nodes(snap, snap.present_slots())
    p.pre_score(state, TWO_CONTAINERS, nodes)
    want = Status(Code.ERROR, "resources not found")
    for info in nodes.infos():
        assert p.score(state, TWO_CONTAINERS, info) == (0, want)
    scores, status = p.score_nodes(state, TWO_CONTAINERS, nodes)
    assert status == want
    assert scores.tolist() == [0, 0]


RTCR_SHAPE = [(0, 10), (100, 0)]


@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "want"),
    [
        (req_pod(), N_4_4, [on("node1"), on("node1")], [100, 100]),
        (TWO_CONTAINERS, NODES_4_6, [on("node1"), on("node1")], [38, 50]),
        (
            req_pod(),
            NODES_4_6,
            [on("node1", req("3000", "5000")), on("node2", req("3000", "5000"))],
            [38, 50],
        ),
    ],
    ids=[
        "nothing scheduled, nothing requested",
        "nothing scheduled, resources requested, differently sized nodes",
        "no resources requested, pods scheduled with resources",
    ],
)
def test_requested_to_capacity_ratio(
    incoming: Pod, nodes: list[Node], existing: list[Pod], want: list[int]
) -> None:
    snap = cluster(nodes, existing)
    p = plugin(snap, strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES, RTCR_SHAPE))
    assert score_all(p, incoming, snap) == want


@pytest.mark.parametrize(
    ("points", "assertions"),
    [
        (
            [(10, 1), (90, 9)],
            [
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        ),
        (
            [(0, 2), (40, 10), (100, 0)],
            [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
        ),
        (
            [(0, 2), (40, 2), (100, 2)],
            [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)],
        ),
    ],
)
def test_broken_linear_function(
    points: list[tuple[int, int]], assertions: list[tuple[int, int]]
) -> None:
    for p, want in assertions:
        assert broken_linear(points, p) == want


def test_broken_linear_function_truncates_toward_zero_on_falling_segments() -> None:
    # (0 - 100) * 1 / 3 is -33.3: Go gives -33, flooring would give -34.
    assert broken_linear([(0, 100), (3, 0)], 1) == 67


def make_node(name: str, milli_cpu: int, memory: int, extended: Mapping[str, int]) -> Node:
    """upstream's ``makeNode``: no pods entry."""
    return node(name, {"cpu": f"{milli_cpu}m", "memory": memory, **extended})


FOO = "intel.com/foo"
BAR = "intel.com/bar"


@pytest.mark.parametrize(
    ("incoming", "existing", "want"),
    [
        (req_pod(), [], [0, 0]),
        (req_pod({FOO: "2"}), [], [2, 5]),
        (req_pod({FOO: "2"}), [on("node2", {FOO: "2"})], [2, 10]),
        (req_pod({FOO: "4"}), [], [5, 10]),
    ],
    ids=[
        "nothing scheduled, nothing requested",
        "resources requested, pods scheduled with less resources",
        "resources requested, pods scheduled with resources, on node with existing pod running",
        "resources requested, pods scheduled with more resources",
    ],
)
def test_resource_bin_packing_single_extended(
    incoming: Pod, existing: list[Pod], want: list[int]
) -> None:
    nodes = [
        make_node("node1", 4000, 10000 * 1024 * 1024, {FOO: 8}),
        make_node("node2", 4000, 10000 * 1024 * 1024, {FOO: 4}),
    ]
    snap = cluster(nodes, existing)
    p = plugin(snap, strategy("RequestedToCapacityRatio", [(FOO, 1)], [(0, 0), (100, 1)]))
    assert score_all(p, incoming, snap) == want


@pytest.mark.parametrize(
    ("incoming", "existing", "want"),
    [
        (req_pod(), [], [0, 0]),
        (req_pod({FOO: "2", BAR: "2"}), [], [4, 3]),
        (req_pod({FOO: "2", BAR: "2"}), [on("node2", {FOO: "4", BAR: "2"})], [4, 7]),
        (req_pod({FOO: "4", BAR: "2"}), [], [5, 5]),
    ],
    ids=[
        "nothing scheduled, nothing requested",
        "resources requested, pods scheduled with less resources",
        "resources requested, pods scheduled with resources, on node with existing pod running",
        "resources requested, pods scheduled with more resources",
    ],
)
def test_resource_bin_packing_multiple_extended(
    incoming: Pod, existing: list[Pod], want: list[int]
) -> None:
    nodes = [
        make_node("node1", 4000, 10000 * 1024 * 1024, {FOO: 8, BAR: 4}),
        make_node("node2", 4000, 10000 * 1024 * 1024, {FOO: 4, BAR: 8}),
    ]
    snap = cluster(nodes, existing)
    p = plugin(snap, strategy("RequestedToCapacityRatio", [(FOO, 3), (BAR, 5)], [(0, 0), (100, 1)]))
    assert score_all(p, incoming, snap) == want


@pytest.mark.parametrize(
    ("incoming", "cpu", "memory"),
    [
        (req_pod(overhead={"cpu": "1", "memory": "1Mi"}), 1000, 2**20),
        (req_pod({}), 100, 200 * 2**20),
        (req_pod({}, {}), 200, 400 * 2**20),
        (req_pod({"cpu": "1", "memory": "1Mi"}, {}), 1100, 2**20 + 200 * 2**20),
        (
            req_pod({"cpu": "1", "memory": "1Mi"}, {}, overhead={"cpu": "1", "memory": "1Mi"}),
            2100,
            2 * 2**20 + 200 * 2**20,
        ),
        (
            req_pod(
                {"cpu": "1", "memory": "1Mi"},
                {},
                init=[{"cpu": "3"}],
                overhead={"cpu": "1", "memory": "1Mi"},
            ),
            4000,
            2 * 2**20 + 200 * 2**20,
        ),
        (
            req_pod({"cpu": "3m", "memory": "3"}, init=[{}, {"cpu": "1m", "memory": "1"}]),
            100,
            200 * 2**20,
        ),
        (
            req_pod({"cpu": "3m", "memory": "3"}, {}, init=[{}, {"cpu": "1m", "memory": "1"}]),
            103,
            3 + 200 * 2**20,
        ),
    ],
    ids=[
        "overhead only",
        "1x requestless container",
        "2x requestless container",
        "request container + requestless container",
        "container + requestless container + overhead",
        "init container + container + requestless container + overhead",
        "requestless init container + small init container + small container",
        "requestless init container + small init container + small container + requestless "
        "container",
    ],
)
def test_score_counts_the_pods_non_zero_request(incoming: Pod, cpu: int, memory: int) -> None:
    """``TestResourceAllocationScorerCalculateRequests``: what PreScore records for the pod."""
    snap = cluster([node("n", {"cpu": "100", "memory": 10**12, "pods": 10})])
    p = plugin(snap)
    state = CycleState()
    assert p.pre_score(state, incoming, Nodes(snap, snap.present_slots())) is None
    s = state.get(PRE_SCORE_STATE_KEY)
    assert isinstance(s, PreScoreState)
    assert s.pod_requests == [cpu, memory]
    # MostAllocated over exactly the request shows it in the score: 100 for both.
    snap = cluster([node("n", {"cpu": f"{cpu}m", "memory": memory, "pods": 10})])
    assert score_all(
        plugin(snap, strategy("MostAllocated", DEFAULT_RESOURCES)), incoming, snap
    ) == [100]


def test_default_args_are_least_allocated_on_cpu_and_memory() -> None:
    snap = cluster(NODES_4_6, EXISTING_2_1)
    p = plugin(snap)
    assert p.strategy == "LeastAllocated"
    assert [(r.name, r.weight) for r in p.resources] == DEFAULT_RESOURCES
    assert score_all(p, req_pod(req("1000", "2000")), snap) == [32, 63]


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ConfigError):
        plugin(None, strategy("Spread", DEFAULT_RESOURCES))


def test_rtcr_without_shape_is_rejected() -> None:
    with pytest.raises(ConfigError):
        plugin(None, strategy("RequestedToCapacityRatio", DEFAULT_RESOURCES))


def test_huge_allocatable_takes_the_exact_integer_path() -> None:
    # 2**55 bytes of memory: beyond float64's exact range for these formulas, and still small
    # enough that Go's int64 products (value * 100) do not overflow.
    big = 2**55
    nodes = [
        node("a", {"cpu": "4", "memory": big, "pods": 10}),
        node("b", {"cpu": "4", "memory": big - 12345, "pods": 10}),
    ]
    snap = cluster(nodes, [on("a", {"cpu": "1", "memory": str(big // 3)})])
    incoming = req_pod({"cpu": "1", "memory": str(big // 7)})
    for kind, shape in (
        ("LeastAllocated", ()),
        ("MostAllocated", ()),
        ("RequestedToCapacityRatio", ((0, 0), (50, 7), (100, 10))),
    ):
        p = plugin(snap, strategy(kind, DEFAULT_RESOURCES, shape))
        got = score_all(p, incoming, snap)
        assert got == [p.score(CycleState(), incoming, i)[0] for i in snap.node_infos()]
    least = plugin(snap, strategy("LeastAllocated", DEFAULT_RESOURCES))
    a_mem = (big - big // 3 - big // 7) * 100 // big
    assert score_all(least, incoming, snap)[0] == (50 + a_mem) // 2


def test_huge_allocatable_is_exact_where_float64_is_not() -> None:
    # 2**54 + 1 of 2**55 bytes requested: (2**54 - 1) * 100 // 2**55 = 49, while float64
    # rounds 2**54 + 1 to 2**54 and would give 50.
    snap = cluster([node("a", {"cpu": "4", "memory": 2**55, "pods": 10})])
    incoming = req_pod({"memory": str(2**54 + 1)})
    p = plugin(snap, strategy("LeastAllocated", [("memory", 1)]))
    assert score_all(p, incoming, snap) == [49]


def test_many_requested_resources_intern_through_unique() -> None:
    names = [f"example.com/r{i}" for i in range(14)]
    nodes = [
        node(f"n{j}", {"cpu": "1", "memory": "1Gi", "pods": 10, **dict.fromkeys(names, j % 3)})
        for j in range(9)
    ]
    snap = cluster(nodes)
    incoming = req_pod({r: str(1 + i % 2) for i, r in enumerate(names)})
    got = filter_all(plugin(snap), incoming, snap)
    assert got[0] == Status(UNRESOLVABLE, *(f"Insufficient {r}" for r in names))
    assert got[1] == Status(UNRESOLVABLE, *(f"Insufficient {r}" for r in names[1::2]))
    assert got[2] is None


# --- queueing hints ---------------------------------------------------------------------------


def test_events_to_register() -> None:
    events = plugin().events_to_register()
    assert [(e.event.resource, e.event.action) for e in events] == [
        ("Pod", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        ("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
    ]
    assert all(e.hint is not None for e in events)


def cpu_pod(cpu: str, *, name_uid: str = "", node_name: str = "", level: bool = False) -> Pod:
    if level:
        return req_pod(pod_level={"cpu": cpu}, uid=name_uid or None, node_name=node_name)
    return req_pod({"cpu": cpu}, uid=name_uid or None, node_name=node_name)


QUEUE = QueueingHint.QUEUE
SKIP = QueueingHint.SKIP

POD_HINTS: list[tuple[str, Pod, Any, Any, QueueingHint]] = [
    ("backoff-wrong-old-object", req_pod(), "not-a-pod", None, QUEUE),
    ("backoff-wrong-new-object", req_pod(), None, "not-a-pod", QUEUE),
    ("queue-on-other-pod-deleted", cpu_pod("1"), cpu_pod("1", node_name="fake"), None, QUEUE),
    ("skip-queue-on-unscheduled-pod-deleted", req_pod(), req_pod(), None, SKIP),
    (
        "queue-on-nominated-pod-deleted",
        cpu_pod("1"),
        req_pod({"cpu": "1"}, nominated="fake"),
        None,
        QUEUE,
    ),
    (
        "skip-queue-on-other-unscheduled-pod",
        cpu_pod("1", name_uid="uid0"),
        cpu_pod("2", name_uid="uid1"),
        cpu_pod("1", name_uid="uid1"),
        SKIP,
    ),
    (
        "skip-queue-on-other-pod-unrelated-resource-scaled-down",
        cpu_pod("1", name_uid="pod1"),
        req_pod({"memory": "2"}, uid="pod2", node_name="fake"),
        req_pod({"memory": "1"}, uid="pod2", node_name="fake"),
        SKIP,
    ),
    (
        "skip-queue-on-other-pod-unrelated-pod-level-resource-scaled-down",
        cpu_pod("1", name_uid="pod1", level=True),
        req_pod(pod_level={"memory": "2"}, uid="pod2", node_name="fake"),
        req_pod(pod_level={"memory": "1"}, uid="pod2", node_name="fake"),
        SKIP,
    ),
    (
        "queue-on-other-pod-some-resource-scale-down",
        cpu_pod("1", name_uid="pod1"),
        cpu_pod("2", name_uid="pod2", node_name="fake"),
        cpu_pod("1", name_uid="pod2", node_name="fake"),
        QUEUE,
    ),
    (
        "queue-on-other-pod-some-pod-level-resource-scale-down",
        cpu_pod("1", name_uid="pod1", level=True),
        cpu_pod("2", name_uid="pod2", node_name="fake", level=True),
        cpu_pod("1", name_uid="pod2", node_name="fake", level=True),
        QUEUE,
    ),
    (
        "queue-on-target-pod-some-resource-scale-down",
        cpu_pod("1", name_uid="pod1"),
        cpu_pod("2", name_uid="pod1"),
        cpu_pod("1", name_uid="pod1"),
        QUEUE,
    ),
    (
        "queue-on-target-pod-some-pod-level-resource-scale-down",
        cpu_pod("1", name_uid="pod1", level=True),
        cpu_pod("2", name_uid="pod1", level=True),
        cpu_pod("1", name_uid="pod1", level=True),
        QUEUE,
    ),
]


@pytest.mark.parametrize(
    ("target", "old", "new", "want"), [c[1:] for c in POD_HINTS], ids=[c[0] for c in POD_HINTS]
)
def test_is_schedulable_after_pod_event(
    target: Pod, old: Any, new: Any, want: QueueingHint
) -> None:
    assert plugin().is_schedulable_after_pod_event(target, old, new) == want


MEM2_A1 = req_pod({"memory": "2", EXT_A: "1"})

NODE_HINTS: list[tuple[str, Pod, Any, Any, QueueingHint]] = [
    ("backoff-wrong-new-object", req_pod(), None, "not-a-node", QUEUE),
    ("backoff-wrong-old-object", req_pod(), "not-a-node", st_node("n", {}), QUEUE),
    (
        "skip-queue-on-node-add-without-sufficient-resources",
        req_pod({"memory": "2"}),
        None,
        st_node("n", {"memory": "1"}),
        SKIP,
    ),
    (
        "skip-queue-on-node-add-without-required-resource-type",
        req_pod({EXT_A: "1"}),
        None,
        st_node("n", {EXT_B: "1"}),
        SKIP,
    ),
    (
        "queue-on-node-add-with-sufficient-resources",
        MEM2_A1,
        None,
        st_node("n", {"memory": "4", EXT_A: "2"}),
        QUEUE,
    ),
    (
        "skip-queue-on-node-unrelated-changes",
        MEM2_A1,
        st_node("n", {"memory": "2", EXT_A: "2"}),
        st_node("n", {"memory": "2", EXT_A: "1", EXT_B: "2"}),
        SKIP,
    ),
    (
        "queue-on-pod-requested-resources-increase",
        MEM2_A1,
        st_node("n", {"memory": "2", EXT_A: "1"}),
        st_node("n", {"memory": "2", EXT_A: "2"}),
        QUEUE,
    ),
    (
        "skip-queue-on-node-changes-from-suitable-to-unsuitable",
        MEM2_A1,
        st_node("n", {"memory": "4", EXT_A: "2"}),
        st_node("n", {"memory": "1", EXT_A: "2"}),
        SKIP,
    ),
    (
        "queue-on-node-changes-from-unsuitable-to-suitable",
        MEM2_A1,
        st_node("n", {"memory": "1", EXT_A: "2"}),
        st_node("n", {"memory": "4", EXT_A: "2"}),
        QUEUE,
    ),
]


@pytest.mark.parametrize(
    ("target", "old", "new", "want"), [c[1:] for c in NODE_HINTS], ids=[c[0] for c in NODE_HINTS]
)
def test_is_schedulable_after_node_change(
    target: Pod, old: Any, new: Any, want: QueueingHint
) -> None:
    assert plugin().is_schedulable_after_node_change(target, old, new) == want


@pytest.mark.parametrize(
    ("incoming", "n", "want"),
    [
        (req_pod(), None, False),
        (req_pod({"cpu": "2"}), st_node("n", {"cpu": "1"}), False),
        (req_pod({"cpu": "1"}), st_node("n", {"cpu": "2"}), True),
        (req_pod(pod_level={"cpu": "2"}), st_node("n", {"cpu": "1"}), False),
        (req_pod(pod_level={"cpu": "2"}), st_node("n", {"cpu": "2"}), True),
        (req_pod(pod_level={HUGE_A: "2Mi"}), st_node("n", {HUGE_A: "2Mi"}), True),
        (req_pod(pod_level={HUGE_A: "4Mi"}), st_node("n", {HUGE_A: "2Mi"}), False),
    ],
    ids=[
        "nil node",
        "insufficient resource",
        "sufficient resource",
        "insufficient pod-level resource",
        "sufficient pod-level resource",
        "sufficient pod-level resource hugepages",
        "insufficient pod-level resource hugepages",
    ],
)
def test_is_fit(incoming: Pod, n: Node | None, want: bool) -> None:
    assert is_fit(incoming, n) is want


@pytest.mark.parametrize(
    ("incoming", "before", "after", "want"),
    [
        (
            req_pod(res()),
            {"pods": "1", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"},
            {"pods": "1", "cpu": "2", "memory": "2", "ephemeral-storage": "2", EXT_A: "2"},
            False,
        ),
        (
            req_pod(res()),
            {"pods": "1", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"},
            {"pods": "2", "cpu": "1", "memory": "1", "ephemeral-storage": "1", EXT_A: "1"},
            True,
        ),
        (
            req_pod(res(2, 2, 2, scalars={EXT_A: 2})),
            {"cpu": "1", "memory": "2", "ephemeral-storage": "3"},
            {"cpu": "1", "memory": "2", "ephemeral-storage": "1"},
            False,
        ),
        (
            req_pod(res(2, 2, 2, scalars={EXT_A: 2})),
            {"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"},
            {"cpu": "1", "memory": "2", "ephemeral-storage": "1", EXT_A: "1"},
            False,
        ),
        (
            req_pod(res(2, 2, 2, scalars={EXT_A: 2})),
            {"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"},
            {"cpu": "3", "memory": "4", "ephemeral-storage": "3", EXT_A: "4"},
            True,
        ),
        (
            req_pod(res(2, 2)),
            {"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"},
            {"cpu": "1", "memory": "2", "ephemeral-storage": "1", EXT_A: "1"},
            False,
        ),
        (
            req_pod(res(2, 2)),
            {"cpu": "1", "memory": "2", "ephemeral-storage": "3", EXT_A: "4"},
            {"cpu": "1", "memory": "2", "ephemeral-storage": "5", EXT_A: "6"},
            False,
        ),
    ],
    ids=[
        "no-requested-resources",
        "no-requested-resources-pods-increased",
        "scalar-resources-not-in-node",
        "requested-resources-decreased",
        "requested-resources-increased",
        "non-requested-resources-decreased",
        "non-requested-resources-increased",
    ],
)
def test_have_any_requested_resources_increased(
    incoming: Pod, before: dict[str, str], after: dict[str, str], want: bool
) -> None:
    got = have_any_requested_resources_increased(
        incoming, st_node("a", before), st_node("b", after)
    )
    assert got is want


# --- randomized: vectorized == per node -------------------------------------------------------

SCALARS = [EXT_A, EXT_B, K8S_IO_A, HUGE_A, "nvidia.com/gpu"]


def random_requests(rng: random.Random, scale: float) -> dict[str, str]:
    out: dict[str, str] = {}
    if rng.random() < 0.8:
        out["cpu"] = f"{int(rng.randint(0, 4000) * scale)}m"
    if rng.random() < 0.8:
        out["memory"] = str(int(rng.randint(0, 8 * 2**30) * scale))
    if rng.random() < 0.2:
        out["ephemeral-storage"] = str(int(rng.randint(0, 10 * 2**30) * scale))
    for s in SCALARS:
        if rng.random() < 0.15:
            out[s] = str(rng.randint(0, 4))
    return out


def random_pod(rng: random.Random, node_name: str = "", scale: float = 1.0) -> Pod:
    containers = [random_requests(rng, scale) for _ in range(rng.randint(0, 3))]
    sidecars = [random_requests(rng, scale / 2) for _ in range(rng.randint(0, 1))]
    init = [random_requests(rng, scale) for _ in range(rng.randint(0, 2))]
    overhead = {"cpu": "50m", "memory": "10Mi"} if rng.random() < 0.1 else None
    level = {"cpu": f"{rng.randint(1, 2000)}m"} if rng.random() < 0.1 else None
    return req_pod(
        *containers,
        sidecars=sidecars,
        init=init,
        overhead=overhead,
        pod_level=level,
        node_name=node_name,
    )


def random_cluster(rng: random.Random, n: int) -> Snapshot:
    nodes = []
    for i in range(n):
        alloc: dict[str, str | int] = {}
        if rng.random() < 0.95:
            alloc["cpu"] = f"{rng.choice([0, 500, 2000, 4000, 16000, 64000])}m"
        if rng.random() < 0.95:
            alloc["memory"] = rng.choice([0, 2**30, 8 * 2**30, 64 * 2**30, 2**50])
        if rng.random() < 0.5:
            alloc["ephemeral-storage"] = rng.choice([0, 10 * 2**30, 100 * 2**30])
        alloc["pods"] = rng.choice([0, 1, 3, 110])
        for s in SCALARS:
            if rng.random() < 0.3:
                alloc[s] = rng.randint(0, 8)
        nodes.append(node(f"n{i}", alloc))
    pods = [random_pod(rng, f"n{rng.randrange(n)}", 0.5) for _ in range(3 * n)]
    snap = cluster(nodes, pods)
    # Some deleted nodes leave holes in the slots.
    for i in rng.sample(range(n), n // 10):
        snap.remove_node(f"n{i}")
    return snap


def random_args(rng: random.Random) -> NodeResourcesFitArgs:
    kind = rng.choice(["LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"])
    names = ["cpu", "memory", "ephemeral-storage", "pods", "storage", *SCALARS]
    chosen = rng.sample(names, rng.randint(1, 5))
    resources = [(r, rng.randint(1, 100)) for r in chosen]
    shape: list[tuple[int, int]] = []
    if kind == "RequestedToCapacityRatio":
        utils = sorted(rng.sample(range(101), rng.randint(1, 4)))
        shape = [(u, rng.randint(0, 10)) for u in utils]
    args = strategy(kind, resources, shape)
    if rng.random() < 0.3:
        args.ignored_resources = [EXT_B]
    if rng.random() < 0.3:
        args.ignored_resource_groups = ["example.com"]
    return args


def test_random_vectorized_filter_equals_per_node() -> None:
    rng = random.Random(20240601)
    seen_codes: set[Code] = set()
    seen_multi = 0
    for _ in range(40):
        snap = random_cluster(rng, rng.randint(1, 60))
        p = plugin(snap, random_args(rng))
        for _ in range(10):
            got = filter_all(p, random_pod(rng), snap)
            for s in got:
                if s is not None:
                    seen_codes.add(s.code)
                    seen_multi += len(s.reasons) > 1
    # The data exercised passing and both failure codes, with several reasons per node.
    assert seen_codes == {UNSCHED, UNRESOLVABLE}
    assert seen_multi > 50


def test_random_vectorized_scores_equal_per_node() -> None:
    rng = random.Random(7)
    distinct: set[int] = set()
    for _ in range(60):
        snap = random_cluster(rng, rng.randint(1, 60))
        p = plugin(snap, random_args(rng))
        for _ in range(5):
            distinct.update(score_all(p, random_pod(rng), snap, pre_score=rng.random() < 0.5))
    assert len(distinct) > 50


def test_vectorized_filter_over_a_subset_of_slots() -> None:
    rng = random.Random(3)
    snap = random_cluster(rng, 50)
    p = plugin(snap)
    incoming = random_pod(rng)
    state = CycleState()
    all_nodes = Nodes(snap, snap.present_slots())
    p.pre_filter(state, incoming, all_nodes)
    subset = Nodes(snap, all_nodes.slots[::3][::-1].copy())
    verdict = p.filter_nodes(state, incoming, subset)
    want = [p.filter(state, incoming, info) for info in subset.infos()]
    assert [verdict.statuses[i] for i in verdict.ids.tolist()] == want
    scores, _ = p.score_nodes(state, incoming, subset)
    assert scores.tolist() == [p.score(state, incoming, i)[0] for i in subset.infos()]


def test_vectorized_over_most_slots_in_any_order() -> None:
    # Most of the rows: computed over all of them in place, the slots' results picked after.
    rng = random.Random(12)
    for _ in range(20):
        snap = random_cluster(rng, rng.randint(30, 60))
        p = plugin(snap, random_args(rng))
        incoming = random_pod(rng)
        state = CycleState()
        all_nodes = Nodes(snap, snap.present_slots())
        p.pre_filter(state, incoming, all_nodes)
        slots = all_nodes.slots.tolist()
        kept = rng.sample(slots, len(slots) - rng.randint(0, 2))
        subset = Nodes(snap, np.array(kept, dtype=np.int64))
        verdict = p.filter_nodes(state, incoming, subset)
        want = [p.filter(state, incoming, info) for info in subset.infos()]
        assert [verdict.statuses[i] for i in verdict.ids.tolist()] == want
        scores, _ = p.score_nodes(state, incoming, subset)
        assert scores.tolist() == [p.score(state, incoming, i)[0] for i in subset.infos()]


def test_filter_per_node_on_node_info_directly() -> None:
    info = NodeInfo(name="x", slot=0, allocatable={"cpu": 1000, "memory": 100, "pods": 2})
    info.add_pod(PodInfo.of(req_pod({"cpu": "600m"})))
    p = plugin()
    state = CycleState()
    incoming = req_pod({"cpu": "500m"})
    p.pre_filter(state, incoming, Nodes(Snapshot(), np.zeros(0, dtype=np.int64)))
    assert p.filter(state, incoming, info) == Status(UNSCHED, "Insufficient cpu")


# --- results kept per pod shape across cycles ---------------------------------------------------


def mutate(rng: random.Random, snap: Snapshot, step: int, counted: list[Pod]) -> None:
    """One random change to ``snap``: pods counted or removed (sometimes many at once, so that
    the vectorized forms bring the kept results up to date), a node resized, removed, or added
    offering a resource no node had (new table columns)."""
    names = [info.name for info in snap.node_infos()]
    kind = rng.randrange(6)
    if kind <= 1 and names:
        for _ in range(1 if kind == 0 else 20):
            p = random_pod(rng, rng.choice(names), 0.3)
            snap.add_pod(PodInfo.of(p), p.spec.node_name)
            counted.append(p)
    elif kind == 2 and counted:
        snap.remove_pod(counted.pop(rng.randrange(len(counted))).metadata.uid)
    elif kind == 3 and names:
        cpu = rng.choice([500, 4000, 64000])
        snap.set_node(node(rng.choice(names), {"cpu": f"{cpu}m", "memory": 2**33, "pods": 9}))
    elif kind == 4 and len(names) > 1:
        snap.remove_node(rng.choice(names))
    else:
        snap.set_node(node(f"new{step}", {"cpu": "8", f"example.com/r{step}": 2, "pods": 110}))


def test_kept_results_follow_every_change_of_the_snapshot() -> None:
    rng = random.Random(31)
    seen_failures = 0
    for _ in range(12):
        snap = random_cluster(rng, rng.randint(10, 60))
        args = random_args(rng)
        kept = plugin(snap, args)
        shapes = [random_pod(rng) for _ in range(3)]
        counted: list[Pod] = []
        for step in range(30):
            mutate(rng, snap, step, counted)
            incoming = rng.choice(shapes)
            # A new plugin derives every node afresh; filter_all and score_all also compare each
            # with the per-node forms.
            fresh = plugin(snap, args)
            got = filter_all(kept, incoming, snap)
            assert got == filter_all(fresh, incoming, snap)
            seen_failures += sum(s is not None for s in got)
            assert score_all(kept, incoming, snap) == score_all(fresh, incoming, snap)
    assert seen_failures > 100


def test_a_pod_that_fits_everywhere_is_told_from_the_least_room_as_nodes_fill_and_empty() -> None:
    # Roomy nodes, so that the pass over every node is skipped at first; pods then fill some
    # nodes, leave them (the node with the least room gets more), nodes come and go, and pods
    # are counted on a node that has no Node object. The kept plugin follows each change.
    rng = random.Random(11)
    everywhere = somewhere = 0
    for _ in range(6):
        roomy = {"cpu": "64", "memory": 2**38, "ephemeral-storage": 2**40, "pods": 110}
        snap = cluster([node(f"n{i}", roomy) for i in range(rng.randint(20, 40))])
        kept = plugin(snap)
        counted: list[Pod] = []
        incoming = [random_pod(rng, scale=s) for s in (0.1, 1.0, 4.0)]
        for step in range(60):
            names = [info.name for info in snap.node_infos()]
            kind = rng.randrange(8)
            if kind <= 3 and names:
                p = random_pod(rng, rng.choice(names), 8.0)
                snap.add_pod(PodInfo.of(p), p.spec.node_name)
                counted.append(p)
            elif kind <= 5 and counted:
                snap.remove_pod(counted.pop(rng.randrange(len(counted))).metadata.uid)
            elif kind == 6 and len(names) > 1:
                snap.remove_node(rng.choice(names))
            elif step % 2:
                snap.set_node(node(f"new{step}", roomy))
            else:
                p = random_pod(rng, f"gone{step}", 8.0)
                snap.add_pod(PodInfo.of(p), p.spec.node_name)
            for pod in incoming:
                got = filter_all(kept, pod, snap)
                assert got == filter_all(plugin(snap), pod, snap)
                if all(s is None for s in got):
                    everywhere += 1
                else:
                    somewhere += 1
            # Exact, not only on the safe side (less room than there is would skip nothing).
            assert kept._least_free.least(snap.table) == _LeastFree().least(snap.table)
    assert everywhere > 200
    assert somewhere > 200
