"""Plugins timed by wrapping: every Filter and Score call observed, results passed through,
on the ordinary path and through the per-shape cache alike."""

from __future__ import annotations

import random

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.config import default_config
from kubesched.framework import (
    Code,
    CycleState,
    FilterPlugin,
    NodeInfo,
    Nodes,
    PodInfo,
    ScorePlugin,
    Snapshot,
    Status,
    build_frameworks,
)
from kubesched.framework._instrumented import InstrumentedFilter, InstrumentedScore
from kubesched.framework._table import IntArray
from kubesched.plugins import in_tree_registry


class Recorded:
    """Metrics that remember what was reported."""

    def __init__(self) -> None:
        self.points: list[str] = []
        self.plugins: list[tuple[str, str, Code]] = []

    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None:
        self.points.append(point)

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        assert seconds >= 0
        self.plugins.append((plugin, point, status))


class Odd(FilterPlugin, ScorePlugin):
    """Rejects nodes whose slot is odd; scores a node by its slot, normalized to twice it."""

    name = "Odd"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return Status(Code.UNSCHEDULABLE, "odd") if node.slot % 2 else None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return node.slot, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        scores *= 2
        return None


POD = make_pod("p")
STATE = CycleState()


@pytest.fixture
def snapshot() -> Snapshot:
    s = Snapshot()
    for i in range(4):
        s.set_node(make_node(f"n{i}"))
    return s


def test_every_filter_call_is_timed_and_its_answer_passed_through(snapshot: Snapshot) -> None:
    plugin, metrics = Odd(_Handle(snapshot)), Recorded()
    timed = InstrumentedFilter(plugin, metrics)
    nodes = Nodes(snapshot, snapshot.present_slots())
    verdict = timed.filter_nodes(STATE, POD, nodes)
    assert verdict.ids.tolist() == plugin.filter_nodes(STATE, POD, nodes).ids.tolist()
    assert timed.filter_one(STATE, POD, snapshot.at(1)) == Status(Code.UNSCHEDULABLE, "odd")
    assert timed.filter_one(STATE, POD, snapshot.at(2)) is None
    assert timed.name == "Odd"
    assert metrics.plugins == [("Odd", "Filter", Code.SUCCESS)] * 3


def test_score_calls_are_timed_and_normalize_score_is_not(snapshot: Snapshot) -> None:
    metrics = Recorded()
    timed = InstrumentedScore(Odd(_Handle(snapshot)), metrics)
    nodes = Nodes(snapshot, snapshot.present_slots())
    scores, status = timed.score_nodes(STATE, POD, nodes)
    assert (scores.tolist(), status) == ([0, 1, 2, 3], None)
    assert timed.score(STATE, POD, snapshot.at(3)) == (3, None)
    assert timed.normalize_score(STATE, POD, nodes, scores) is None
    assert scores.tolist() == [0, 2, 4, 6]
    assert metrics.plugins == [("Odd", "Score", Code.SUCCESS)] * 2


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


@pytest.mark.parametrize("record", [True, False])
def test_the_per_shape_cache_times_plugins_too(record: bool) -> None:
    snapshot = Snapshot()
    for i in range(20):
        snapshot.set_node(make_node(f"n{i}"))
    metrics = Recorded()
    fw = next(
        iter(
            build_frameworks(
                default_config(),
                in_tree_registry(),
                snapshot,
                rng=random.Random(1),
                metrics=metrics,
            ).values()
        )
    )
    timed: list[list[tuple[str, str]]] = []
    for i in range(4):
        pod = make_pod(f"p{i}", cpu="100m")
        state = CycleState()
        state.record_plugin_metrics = record
        metrics.plugins.clear()
        r = fw.schedule_pod(state, pod)
        snapshot.add_pod(PodInfo.of(pod), r.suggested_host)
        timed.append([(p, point) for p, point, _ in metrics.plugins])
        assert np.all(r.totals >= 0)
    if not record:
        assert timed == [[], [], [], []]
        return
    # The first two pods of the shape: every plugin over every node (the second into the cache);
    # then the plugins that read pods, about the node the last pod went to.
    for first in timed[:2]:
        assert ("NodeResourcesFit", "Filter") in first
        assert ("TaintToleration", "Score") in first
    for later in timed[2:]:
        assert ("NodeResourcesFit", "Filter") in later
        assert ("NodeResourcesFit", "Score") in later
        assert ("TaintToleration", "Filter") not in later
        assert ("TaintToleration", "Score") not in later
