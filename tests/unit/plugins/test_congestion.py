"""Congestion: ``round(100 * (1 - min(cf, max) / max))`` worked by hand, the original's parsing
of the annotation (integers only, missing = 0), the environment default and invalid values."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from builders import NodeWrapper, make_pod
from kubesched.config import ConfigError
from kubesched.framework import CycleState, Nodes, Snapshot
from kubesched.plugins.congestion import (
    Congestion,
    CongestionArgs,
    congestion_score,
    parse_factor,
)

ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "test"


def scores(factors: list[str | None], args: Mapping[str, int] | None = None) -> list[int]:
    snap = Snapshot()
    for i, f in enumerate(factors):
        factor = {} if f is None else {"congestion-factor": f}
        snap.set_node(NodeWrapper(f"n{i}").annotations(factor).allocatable(ALLOCATABLE).obj())
    plugin = Congestion(_Handle(snap), args)
    nodes = Nodes(snap, snap.present_slots())
    vec, status = plugin.score_nodes(CycleState(), make_pod("p"), nodes)
    assert status is None
    one = [plugin.score(CycleState(), make_pod("p"), info)[0] for info in nodes.infos()]
    assert vec.tolist() == one
    return one


def test_scores_by_hand() -> None:
    # max 100: 100 * (1 - cf / 100), rounded half up
    assert scores([None, "0", "25", "33", "100", "250", "-5", "+40"]) == [
        100,  # missing: no congestion
        100,
        75,
        67,
        0,
        0,  # above max: clamped to max
        100,  # <= 0 counts as 0
        60,
    ]


def test_rounding_half_up_with_another_max() -> None:
    # max 8: cf 1 -> 87.5 -> 88; cf 3 -> 62.5 -> 63; cf 5 -> 37.5 -> 38
    assert scores(["1", "3", "5"], {"congestionFactorMax": 8}) == [88, 63, 38]
    assert congestion_score(1, 8) == 88


def test_invalid_factors_count_as_zero_and_are_reported() -> None:
    snap = Snapshot()
    for i, f in enumerate(["12.5", "high", " 7", "50"]):
        snap.set_node(
            NodeWrapper(f"n{i}")
            .annotations({"congestion-factor": f})
            .allocatable(ALLOCATABLE)
            .obj()
        )
    plugin = Congestion(_Handle(snap))
    vec, _ = plugin.score_nodes(CycleState(), make_pod("p"), Nodes(snap, snap.present_slots()))
    assert vec.tolist() == [100, 100, 100, 50]
    assert plugin.invalid == 3


def test_parse_factor_is_atoi() -> None:
    assert parse_factor(None) == 0
    assert parse_factor("") == 0
    assert parse_factor("-3") == -3
    assert parse_factor("007") == 7
    assert parse_factor("1e3") is None
    assert parse_factor("3 ") is None


def test_max_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONGESTION_FACTOR_MAX", "50")
    assert CongestionArgs().congestion_factor_max == 50
    assert scores(["25"]) == [50]
    monkeypatch.setenv("CONGESTION_FACTOR_MAX", "0")  # not > 0: ignored, as the original
    assert CongestionArgs().congestion_factor_max == 100
    monkeypatch.delenv("CONGESTION_FACTOR_MAX")
    assert CongestionArgs().congestion_factor_max == 100


def test_args_validation() -> None:
    with pytest.raises(ConfigError) as err:
        Congestion(_Handle(Snapshot()), {"congestionFactorMax": 0})
    assert "args.congestionFactorMax: Invalid value: 0: must be greater than 0" in str(err.value)


def test_a_changed_annotation_is_read_again() -> None:
    snap = Snapshot()
    snap.set_node(
        NodeWrapper("a").annotations({"congestion-factor": "90"}).allocatable(ALLOCATABLE).obj()
    )
    plugin = Congestion(_Handle(snap))
    nodes = Nodes(snap, snap.present_slots())
    assert plugin.score_nodes(CycleState(), make_pod("p"), nodes)[0].tolist() == [10]
    snap.set_node(
        NodeWrapper("a").annotations({"congestion-factor": "10"}).allocatable(ALLOCATABLE).obj()
    )
    assert plugin.score_nodes(CycleState(), make_pod("p"), nodes)[0].tolist() == [90]
