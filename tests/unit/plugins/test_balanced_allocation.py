"""NodeResourcesBalancedAllocation: kube-scheduler's balanced_allocation_test.go table with its
expected scores, and randomized checks that the vectorized score equals the per-node one bit for
bit (the float64 standard deviation computed in Go's order)."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from builders import NodeWrapper, req_pod
from kubesched.api import Node, Pod, pod_requests
from kubesched.config import ConfigError, NodeResourcesBalancedAllocationArgs, ResourceSpec
from kubesched.framework import Code, CycleState, Nodes, PodInfo, Snapshot, Status
from kubesched.plugins.node_resources._allocation import (
    WeightedResource,
    balanced_resource_score,
    pod_request_list,
)
from kubesched.plugins.node_resources.balanced_allocation import (
    PRE_SCORE_STATE_KEY,
    BalancedAllocation,
    PreScoreState,
)

GPU = "nvidia.com/gpu"


def node(name: str, allocatable: Mapping[str, str | int]) -> Node:
    return NodeWrapper(name).capacity(allocatable).obj()


def make_node(name: str, milli_cpu: int, memory: int, extended: Mapping[str, int] | None) -> Node:
    """upstream's ``makeNode``."""
    return node(name, {"cpu": f"{milli_cpu}m", "memory": memory, **(extended or {})})


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


def plugin(snapshot: Snapshot, resources: Sequence[str] | None = None) -> BalancedAllocation:
    args = None
    if resources is not None:
        args = NodeResourcesBalancedAllocationArgs(
            resources=[ResourceSpec(name=r, weight=1) for r in resources]
        )
    return BalancedAllocation(_Handle(snapshot), args)  # type: ignore[arg-type]


def scores(
    p: BalancedAllocation, incoming: Pod, snap: Snapshot, pre_score: bool = True
) -> list[int] | Status:
    """PreScore (unless told not to), then Score per node and vectorized, which must agree."""
    state = CycleState()
    nodes = Nodes(snap, snap.present_slots())
    if pre_score:
        s = p.pre_score(state, incoming, nodes)
        if s is not None:
            return s
    per_node = []
    for info in nodes.infos():
        v, st = p.score(state, incoming, info)
        assert st is None
        per_node.append(v)
    vec, st = p.score_nodes(state, incoming, nodes)
    assert st is None
    assert vec.tolist() == per_node
    return per_node


CPU_AND_MEMORY = ({"cpu": "1000m", "memory": "2000"}, {"cpu": "2000m", "memory": "3000"})
CPU_AND_MEMORY_AND_GPU = (
    {"cpu": "1000m", "memory": "2000"},
    {"cpu": "2000m", "memory": "3000", GPU: "3"},
)
CPU_ONLY = ({"cpu": "1000m", "memory": "0"}, {"cpu": "2000m", "memory": "0"})

DEFAULT = ["cpu", "memory"]
WITH_GPU = ["cpu", "memory", GPU]

CASES: list[tuple[str, Pod, list[Node], list[Pod], list[str], list[int]]] = [
    (
        "nothing scheduled, resources requested, differently sized nodes",
        req_pod(*CPU_AND_MEMORY),
        [make_node("node1", 4000, 10000, None), make_node("node2", 6000, 10000, None)],
        [],
        DEFAULT,
        [87, 100],
    ),
    (
        "resources requested, pods scheduled with resources",
        req_pod(*CPU_AND_MEMORY),
        [make_node("node1", 10000, 20000, None), make_node("node2", 10000, 20000, None)],
        [req_pod(*CPU_ONLY, node_name="node1"), req_pod(*CPU_AND_MEMORY, node_name="node2")],
        DEFAULT,
        [82, 95],
    ),
    (
        "resources requested, pods scheduled with resources, differently sized nodes",
        req_pod(*CPU_AND_MEMORY),
        [make_node("node1", 10000, 20000, None), make_node("node2", 10000, 50000, None)],
        [req_pod(*CPU_ONLY, node_name="node1"), req_pod(*CPU_AND_MEMORY, node_name="node2")],
        DEFAULT,
        [82, 80],
    ),
    (
        "requested resources at node capacity",
        req_pod(*CPU_ONLY),
        [make_node("node1", 6000, 10000, None), make_node("node2", 6000, 10000, None)],
        [req_pod(*CPU_ONLY, node_name="node1"), req_pod(*CPU_AND_MEMORY, node_name="node2")],
        DEFAULT,
        [50, 75],
    ),
    (
        "include scalar resource on a node for balanced resource allocation",
        req_pod({"memory": "0", GPU: "1"}),
        [make_node("node1", 3500, 40000, {GPU: 8}), make_node("node2", 3500, 40000, {GPU: 8})],
        [
            req_pod(*CPU_AND_MEMORY, node_name="node2"),
            req_pod(*CPU_AND_MEMORY_AND_GPU, node_name="node1"),
        ],
        WITH_GPU,
        [70, 65],
    ),
    (
        "node without the scalar resource should skip the scalar resource",
        req_pod(*CPU_AND_MEMORY),
        [make_node("node1", 3500, 40000, {GPU: 8}), make_node("node2", 3500, 40000, None)],
        [],
        WITH_GPU,
        [63, 63],
    ),
]


@pytest.mark.parametrize("pre_score", [True, False], ids=["PreScore", "PreScore not called"])
@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "resources", "want"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_balanced_allocation(
    incoming: Pod,
    nodes: list[Node],
    existing: list[Pod],
    resources: list[str],
    want: list[int],
    pre_score: bool,
) -> None:
    snap = cluster(nodes, existing)
    assert scores(plugin(snap, resources), incoming, snap, pre_score) == want


def test_best_effort_pod_is_skipped_in_pre_score() -> None:
    snap = cluster([make_node("node1", 4000, 10000, None), make_node("node2", 4000, 10000, None)])
    p = plugin(snap, DEFAULT)
    assert scores(p, req_pod(), snap) == Status(Code.SKIP)
    # A container without requests is best-effort too (no 100m/200Mi defaults here).
    assert scores(p, req_pod({}), snap) == Status(Code.SKIP)
    # Without PreScore the score is 0 everywhere.
    assert scores(p, req_pod({}), snap, pre_score=False) == [0, 0]


def test_pod_requesting_only_an_unscored_resource_is_skipped() -> None:
    snap = cluster([make_node("node1", 4000, 10000, {GPU: 8})])
    assert scores(plugin(snap, DEFAULT), req_pod({GPU: "1"}), snap) == Status(Code.SKIP)
    # cpu 0, memory 0, gpu 1/8: sqrt(((1/24)**2 * 2 + (1/12)**2) / 3) = 0.0589 -> 94
    assert scores(plugin(snap, WITH_GPU), req_pod({GPU: "1"}), snap) == [94]


def test_pre_score_records_requests_as_written() -> None:
    snap = cluster([make_node("node1", 4000, 10000, None)])
    p = plugin(snap)  # defaults: cpu and memory
    state = CycleState()
    incoming = req_pod({"cpu": "250m"}, {}, init=[{"memory": "1Ki"}], overhead={"cpu": "10m"})
    assert p.pre_score(state, incoming, Nodes(snap, snap.present_slots())) is None
    s = state.get(PRE_SCORE_STATE_KEY)
    assert isinstance(s, PreScoreState)
    assert s.pod_requests == [260, 1024]


def test_sidecar_counts_in_the_node_and_the_pod() -> None:
    # Existing pod: 1 CPU app + 1 CPU sidecar = 2 of 4 CPUs; memory 4000 of 10000.
    snap = cluster(
        [make_node("node1", 4000, 10000, None)],
        [
            req_pod(
                {"cpu": "1", "memory": "2000"},
                sidecars=[{"cpu": "1", "memory": "2000"}],
                node_name="node1",
            )
        ],
    )
    # cpu 3/4, memory 6000/10000: std = (0.75 - 0.6) / 2 = 0.075 -> 92
    assert scores(plugin(snap), req_pod({"cpu": "1", "memory": "2000"}), snap) == [92]


def test_fractions_over_one_are_capped() -> None:
    snap = cluster(
        [make_node("node1", 1000, 10000, None)], [req_pod({"cpu": "5"}, node_name="node1")]
    )
    # cpu 6/1 -> 1; memory 5000/10000 = 0.5: std 0.25 -> 75
    assert scores(plugin(snap), req_pod({"cpu": "1", "memory": "5000"}), snap) == [75]


def test_float64_arithmetic_as_go_not_exact_arithmetic() -> None:
    # cpu 1/2, memory 17/25: exactly (1 - 0.09) * 100 = 91, but in float64 (1 - std) * 100 is
    # 90.99999999999999, which Go truncates to 90.
    snap = cluster([make_node("node1", 2000, 25, None)])
    assert scores(plugin(snap), req_pod({"cpu": "1", "memory": "17"}), snap) == [90]


def test_weights_other_than_one_are_rejected() -> None:
    args = NodeResourcesBalancedAllocationArgs(resources=[ResourceSpec(name="cpu", weight=2)])
    with pytest.raises(ConfigError):
        BalancedAllocation(_Handle(Snapshot()), args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("requested", "allocatable", "want"),
    [
        ([3000, 5000], [4000, 10000], 87),
        ([0, 0], [0, 0], 100),
        ([1, 0], [2, 0], 100),
        ([3000, 5000, 4], [3500, 40000, 8], 70),
        ([3000, 5000, 1], [3500, 40000, 8], 65),
        # 1, 0.25, 0.125 (the last resource has no allocatable): std 0.3864 -> 61
        ([2, 1, 1, 1], [2, 4, 8, 0], 61),
    ],
)
def test_balanced_resource_scorer(requested: list[int], allocatable: list[int], want: int) -> None:
    assert balanced_resource_score(requested, allocatable) == want


# --- randomized: vectorized == per node -------------------------------------------------------

NAMES = ["cpu", "memory", "ephemeral-storage", GPU, "example.com/foo", "hugepages-1Gi", "pods"]


def random_requests(rng: random.Random, scale: float) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, top in (("cpu", 4000), ("memory", 8 * 2**30), ("ephemeral-storage", 2**34)):
        if rng.random() < 0.7:
            v = int(rng.randint(0, top) * scale)
            out[name] = f"{v}m" if name == "cpu" else str(v)
    for name in (GPU, "example.com/foo", "hugepages-1Gi"):
        if rng.random() < 0.2:
            out[name] = str(rng.randint(0, 3))
    return out


def random_cluster(rng: random.Random, n: int) -> Snapshot:
    nodes = []
    for i in range(n):
        alloc: dict[str, str | int] = {"pods": 110}
        options: tuple[tuple[str, list[str | int]], ...] = (
            ("cpu", ["0", "1", "3500m", "16", "96"]),
            ("memory", [0, 2**30, 40000, 64 * 2**30, 2**52]),
            ("ephemeral-storage", [0, 2**35, 2**40]),
            (GPU, [0, 1, 8]),
            ("example.com/foo", [0, 3]),
            ("hugepages-1Gi", [0, 4]),
        )
        for name, choices in options:
            if rng.random() < 0.8:
                alloc[name] = rng.choice(choices)
        nodes.append(node(f"n{i}", alloc))
    existing = []
    for _ in range(3 * n):
        containers = [random_requests(rng, 0.3) for _ in range(rng.randint(0, 2))]
        sidecars = [random_requests(rng, 0.1)] if rng.random() < 0.2 else []
        existing.append(req_pod(*containers, sidecars=sidecars, node_name=f"n{rng.randrange(n)}"))
    snap = cluster(nodes, existing)
    for i in rng.sample(range(n), n // 8):
        snap.remove_node(f"n{i}")
    return snap


def test_random_vectorized_equals_per_node() -> None:
    rng = random.Random(99)
    distinct: set[int] = set()
    for _ in range(80):
        snap = random_cluster(rng, rng.randint(1, 50))
        resources = rng.sample(NAMES, rng.randint(1, len(NAMES)))
        p = plugin(snap, resources)
        for _ in range(5):
            incoming = req_pod(
                *[random_requests(rng, 1.0) for _ in range(rng.randint(1, 3))],
                init=[random_requests(rng, 1.0)] if rng.random() < 0.3 else [],
            )
            got = scores(p, incoming, snap, pre_score=rng.random() < 0.7)
            if isinstance(got, list):
                distinct.update(got)
    # Scores spread over the range; the comparison was not vacuous.
    assert len(distinct) > 40


def test_vectorized_over_a_subset_of_slots() -> None:
    rng = random.Random(5)
    snap = random_cluster(rng, 40)
    p = plugin(snap, WITH_GPU)
    incoming = req_pod({"cpu": "1", "memory": "1Gi", GPU: "1"})
    subset = Nodes(snap, snap.present_slots()[::2][::-1].copy())
    state = CycleState()
    vec, _ = p.score_nodes(state, incoming, subset)
    assert vec.tolist() == [p.score(state, incoming, i)[0] for i in subset.infos()]
    assert vec.dtype == np.int64


def test_vectorized_over_most_slots_in_any_order() -> None:
    # Most of the rows: computed over all of them in place, the slots' scores picked after.
    rng = random.Random(11)
    for _ in range(20):
        snap = random_cluster(rng, rng.randint(30, 60))
        p = plugin(snap, rng.sample(NAMES, rng.randint(1, len(NAMES))))
        slots = snap.present_slots().tolist()
        kept = rng.sample(slots, len(slots) - rng.randint(0, 2))
        subset = Nodes(snap, np.array(kept, dtype=np.int64))
        incoming = req_pod(random_requests(rng, 1.0))
        state = CycleState()
        vec, _ = p.score_nodes(state, incoming, subset)
        assert vec.tolist() == [p.score(state, incoming, i)[0] for i in subset.infos()]


def test_kept_scores_follow_every_change_of_the_snapshot() -> None:
    rng = random.Random(17)
    for _ in range(12):
        snap = random_cluster(rng, rng.randint(10, 50))
        resources = rng.sample(NAMES, rng.randint(1, len(NAMES)))
        kept = plugin(snap, resources)
        shapes = [req_pod(random_requests(rng, 1.0), random_requests(rng, 1.0)) for _ in range(3)]
        counted: list[Pod] = []
        for step in range(30):
            names = [info.name for info in snap.node_infos()]
            kind = rng.randrange(4)
            if kind <= 1:
                # One pod, or enough at once for the vectorized form to update the kept scores.
                for _ in range(1 if kind == 0 else 20):
                    p = req_pod(random_requests(rng, 0.2), node_name=rng.choice(names))
                    snap.add_pod(PodInfo.of(p), p.spec.node_name)
                    counted.append(p)
            elif kind == 2 and counted:
                snap.remove_pod(counted.pop(rng.randrange(len(counted))).metadata.uid)
            else:
                snap.set_node(node(f"new{step}", {"cpu": "8", GPU: 2, f"example.com/r{step}": 1}))
            incoming = rng.choice(shapes)
            # ``scores`` also compares with the per-node form.
            assert scores(kept, incoming, snap) == scores(plugin(snap, resources), incoming, snap)


@pytest.mark.parametrize(
    "incoming",
    [
        pytest.param(req_pod({}), id="no requests"),
        pytest.param(req_pod({"cpu": "250m"}, {GPU: "1"}), id="one container without requests"),
        pytest.param(
            req_pod({"cpu": "250m"}, init=[{"memory": "1Ki"}], overhead={"cpu": "10m"}),
            id="init container and overhead",
        ),
        pytest.param(req_pod({"memory": "1Gi"}, sidecars=[{}], init=[{"cpu": "2"}]), id="sidecar"),
    ],
)
@pytest.mark.parametrize("use_requested", [True, False])
def test_pod_request_list_from_the_pod_info_equals_the_pod_requests(
    incoming: Pod, use_requested: bool
) -> None:
    resources = [WeightedResource(r, 1) for r in ("cpu", "memory", GPU, "ephemeral-storage")]
    want = pod_requests(incoming, non_missing=not use_requested)
    got = pod_request_list(PodInfo.of(incoming), resources, use_requested)
    assert got == [want.get(r.name, 0) for r in resources]
