"""The Score loop: scores normalized, checked, weighted and summed; errors name the plugin."""

from __future__ import annotations

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    Code,
    CycleState,
    NodeInfo,
    Nodes,
    ScoreError,
    ScorePlugin,
    Snapshot,
    Status,
)
from kubesched.framework._scoring import Fresh, ScorePlan, check_range, score_in_order
from kubesched.framework._table import IntArray


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


class Reversed(ScorePlugin):
    """Per-node form: the node's slot times ten; NormalizeScore turns it round (100 - it)."""

    name = "Reversed"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return node.slot * 10, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        np.subtract(100, scores, out=scores)
        return None


class Slots(ScorePlugin):
    """Vectorized form: five times the node's slot."""

    name = "Slots"

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        return nodes.slots * 5, None


class Fails(ScorePlugin):
    """Errs at the point named by the pod's ``fails`` annotation."""

    name = "Fails"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        if pod.metadata.annotations.get("fails") == "score":
            return 0, Status(Code.ERROR, "no score")
        return 101 if pod.metadata.annotations.get("fails") == "range" else 0, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        if pod.metadata.annotations.get("fails") == "normalize":
            return Status(Code.ERROR, "no normalizing")
        return None


def setup(*plugins: type[ScorePlugin], weights: list[int]) -> tuple[ScorePlan, Nodes]:
    s = Snapshot()
    for i in range(4):
        s.set_node(make_node(f"n{i}"))
    handle = _Handle(s)
    plan = ScorePlan([p(handle) for p in plugins], weights, None)
    return plan, Nodes(s, s.present_slots())


def test_scores_are_normalized_weighted_and_summed() -> None:
    plan, nodes = setup(Reversed, Slots, weights=[2, 3])
    form = Fresh(plan, nodes)
    state = CycleState()
    score_in_order(state, make_pod("p"), plan.calls(state), form)
    assert form.per_plugin["Reversed"].tolist() == [200, 180, 160, 140]
    assert form.per_plugin["Slots"].tolist() == [0, 15, 30, 45]
    assert form.total.tolist() == [200, 195, 190, 185]


def test_no_plugins_sum_to_zero() -> None:
    plan, nodes = setup(weights=[])
    form = Fresh(plan, nodes)
    score_in_order(CycleState(), make_pod("p"), [], form)
    assert form.per_plugin == {}
    assert form.total.tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize(
    ("fails", "message"),
    [
        ("score", 'running Score plugins: plugin "Fails" failed with: no score'),
        (
            "normalize",
            'running Normalize on Score plugins: plugin "Fails" failed with: no normalizing',
        ),
        (
            "range",
            'applying score defaultWeights on Score plugins: plugin "Fails" returns an invalid '
            "score 101, it should in the range of [0, 100] after normalizing",
        ),
    ],
)
def test_an_error_at_any_step_names_the_plugin(fails: str, message: str) -> None:
    plan, nodes = setup(Slots, Fails, weights=[1, 1])
    state = CycleState()
    with pytest.raises(ScoreError) as e:
        score_in_order(
            state,
            make_pod("p", annotations={"fails": fails}),
            plan.calls(state),
            Fresh(plan, nodes),
        )
    assert e.value.plugin == "Fails"
    assert str(e.value) == message


@pytest.mark.parametrize(("scores", "bad"), [([0, 100, 7], None), ([3, -1], -1), ([101, 0], 101)])
def test_the_range_is_zero_to_one_hundred(scores: list[int], bad: int | None) -> None:
    array = np.array(scores, dtype=np.int64)
    if bad is None:
        check_range("P", array)
        return
    with pytest.raises(ScoreError, match=f"invalid score {bad}"):
        check_range("P", array)
