"""FloatColumns: the table's resource columns as floats, kept in step with the table."""

from __future__ import annotations

import random

import numpy as np

from builders import NodeWrapper, req_pod
from kubesched.framework import PodInfo, Snapshot
from kubesched.plugins.node_resources._allocation import FLOAT_EXACT_LIMIT, FloatColumns

# allocatable CPU and memory, requested CPU, non-zero requested memory
SOURCES = ((0, 0), (0, 1), (1, 0), (2, 1))


def _node(name: str, memory: int) -> NodeWrapper:
    return NodeWrapper(name).capacity({"cpu": "8", "memory": memory, "pods": 110})


def _fresh(snap: Snapshot) -> np.ndarray:
    t = snap.table
    arrays = (t.allocatable, t.requested, t.non_zero_requested)
    return np.array([arrays[a][:, c] for a, c in SOURCES], dtype=np.float64)


def test_columns_follow_every_change_of_the_table() -> None:
    rng = random.Random(3)
    snap = Snapshot()
    for i in range(30):
        snap.set_node(_node(f"n{i}", 2**34).obj())
    columns = FloatColumns()
    placed: list[str] = []
    for step in range(300):
        roll = rng.random()
        if roll < 0.6 or not placed:
            pod = req_pod({"cpu": f"{rng.randrange(1, 900)}m"} if rng.random() < 0.8 else {})
            snap.add_pod(PodInfo.of(pod), f"n{rng.randrange(30)}")
            placed.append(pod.metadata.uid)
        elif roll < 0.8:
            snap.remove_pod(placed.pop(rng.randrange(len(placed))))
        elif roll < 0.9:
            snap.set_node(_node(f"n{rng.randrange(30)}", 2**33 + step).obj())
        else:
            # Many rows at once (beyond what is converted row by row), or a new node.
            for _ in range(300 if rng.random() < 0.5 else 1):
                pod = req_pod({"cpu": "1m"})
                snap.add_pod(PodInfo.of(pod), f"n{rng.randrange(30)}")
                placed.append(pod.metadata.uid)
        if rng.random() < 0.5:
            got = columns.get(snap.table, SOURCES)
            assert got is not None
            assert np.array_equal(got, _fresh(snap)), step


def test_a_value_not_held_exactly_as_a_float_is_not_read_from_there() -> None:
    snap = Snapshot()
    snap.set_node(_node("a", 2**30).obj())
    snap.set_node(_node("b", 2**30).obj())
    columns = FloatColumns()
    assert columns.get(snap.table, SOURCES) is not None
    # Updated row by row: the large value is seen there too.
    snap.set_node(_node("b", FLOAT_EXACT_LIMIT).obj())
    assert columns.get(snap.table, SOURCES) is None
    # Converted afresh (another reader): the same.
    assert FloatColumns().get(snap.table, SOURCES) is None
