"""FloatColumns: the table's resource columns as floats, kept in step with the table, and the
scores read from them equal to the scores read from the table."""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt

from builders import NodeWrapper, req_pod
from kubesched.config import LEAST_ALLOCATED, MOST_ALLOCATED
from kubesched.framework import PodInfo, Snapshot
from kubesched.plugins.node_resources._allocation import (
    FLOAT_EXACT_LIMIT,
    FloatColumns,
    Scratch,
    WeightedResource,
    balanced_scores,
    strategy_scores,
)

# allocatable CPU and memory, requested CPU, non-zero requested memory
SOURCES = ((0, 0), (0, 1), (1, 0), (2, 1))
GPU = "example.com/gpu"
RESOURCES = [WeightedResource("cpu", 1), WeightedResource("memory", 1)]
WITH_GPU = [*RESOURCES, WeightedResource(GPU, 2)]


def _node(name: str, memory: int, gpus: int = 0) -> NodeWrapper:
    capacity: dict[str, str | int] = {"cpu": "8", "memory": memory, "pods": 110}
    if gpus:
        capacity[GPU] = gpus
    return NodeWrapper(name).capacity(capacity)


def _fresh(snap: Snapshot) -> npt.NDArray[np.float64]:
    t = snap.table
    arrays = (t.allocatable, t.requested, t.non_zero_requested)
    return np.array([arrays[a][:, c] for a, c in SOURCES], dtype=np.float64)


def _change(snap: Snapshot, rng: random.Random, placed: list[str], step: int) -> None:
    """One change of the table: pods come and go, nodes change, come (the table grows) and
    go, a new resource column appears, or more rows change at once than are converted one by
    one."""
    names = [info.name for info in snap.node_infos()]
    roll = rng.random()
    if roll < 0.5 or not placed:
        pod = req_pod({"cpu": f"{rng.randrange(1, 900)}m"} if rng.random() < 0.8 else {})
        snap.add_pod(PodInfo.of(pod), rng.choice(names))
        placed.append(pod.metadata.uid)
    elif roll < 0.65:
        snap.remove_pod(placed.pop(rng.randrange(len(placed))))
    elif roll < 0.75:
        snap.set_node(_node(rng.choice(names), 2**33 + step).obj())
    elif roll < 0.85:
        snap.set_node(_node(f"new{step}", 2**34, gpus=rng.randrange(3)).obj())
    elif roll < 0.92 and len(names) > 20:
        snap.remove_node(rng.choice(names))
    else:
        for name in names:
            pod = req_pod({"cpu": "1m"})
            snap.add_pod(PodInfo.of(pod), name)
            placed.append(pod.metadata.uid)


def test_columns_follow_every_change_of_the_table() -> None:
    rng = random.Random(3)
    snap = Snapshot()
    # Past 256 nodes the table grows; past 256 changed rows they are converted afresh.
    for i in range(250):
        snap.set_node(_node(f"n{i}", 2**34).obj())
    columns = FloatColumns()
    placed: list[str] = []
    layouts = set()
    for step in range(400):
        _change(snap, rng, placed, step)
        if rng.random() < 0.5:
            got = columns.get(snap.table, SOURCES)
            assert got is not None
            assert np.array_equal(got, _fresh(snap)), step
            layouts.add(snap.table.layout)
    # The table grew or gained a column more than once in the run.
    assert len(layouts) > 2


def test_scores_from_columns_equal_scores_from_the_table() -> None:
    rng = random.Random(8)
    snap = Snapshot()
    for i in range(60):
        snap.set_node(_node(f"n{i}", rng.choice((2**33, 2**34, 2**36)), gpus=i % 3).obj())
    columns = {name: FloatColumns() for name in ("least", "most", "balanced")}
    placed: list[str] = []
    compared = 0
    for step in range(300):
        _change(snap, rng, placed, step)
        present = snap.table.present_slots()
        # Most nodes (computed over the rows in place) or a few (gathered), in any order.
        k = len(present) if rng.random() < 0.5 else rng.randrange(17, len(present))
        slots = np.array(rng.sample(present.tolist(), k), dtype=np.int64)
        resources = rng.choice((RESOURCES, WITH_GPU))
        pod = [rng.randrange(0, 4000), rng.randrange(0, 2**33), rng.randrange(0, 2)]
        pod = pod[: len(resources)]
        t = snap.table
        for name, strategy in (("least", LEAST_ALLOCATED), ("most", MOST_ALLOCATED)):
            want = strategy_scores(t, slots, resources, pod, strategy)
            got = strategy_scores(
                t, slots, resources, pod, strategy, None, Scratch(), columns[name]
            )
            assert got.tolist() == want.tolist(), (step, name)
        want = balanced_scores(t, slots, resources, pod)
        got = balanced_scores(t, slots, resources, pod, Scratch(), columns["balanced"])
        assert got.tolist() == want.tolist(), step
        compared += 1
    assert compared == 300


def test_a_value_not_held_exactly_as_a_float_is_not_read_from_there() -> None:
    snap = Snapshot()
    snap.set_node(_node("a", 2**30).obj())
    snap.set_node(_node("b", 2**30).obj())
    columns = FloatColumns()
    got = columns.get(snap.table, SOURCES)
    assert got is not None
    # Read-only: a reader writing into them would corrupt every later reader.
    assert not got.flags.writeable
    # Updated row by row: the large value is seen there too.
    snap.set_node(_node("b", FLOAT_EXACT_LIMIT).obj())
    assert columns.get(snap.table, SOURCES) is None
    # Converted afresh (another reader): the same.
    assert FloatColumns().get(snap.table, SOURCES) is None
