"""NodeName: kube-scheduler's Filter cases; vectorized == per node."""

from __future__ import annotations

import random
from typing import cast

import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Nodes,
    PreFilterPlugin,
    Snapshot,
    Status,
)
from kubesched.plugins.node_name import NodeName

PLUGIN = NodeName(cast(Handle, None))
REJECTED = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match the requested node name"
)


@pytest.mark.parametrize(
    ("pod", "node", "want"),
    [
        pytest.param(make_pod("p"), "foo", None, id="no host specified"),
        pytest.param(make_pod("p", node_name="foo"), "foo", None, id="host matches"),
        pytest.param(make_pod("p", node_name="bar"), "foo", REJECTED, id="host doesn't match"),
    ],
)
def test_filter(pod: Pod, node: str, want: Status | None) -> None:
    s = Snapshot()
    info = s.set_node(make_node(node))
    assert PLUGIN.filter(CycleState(), pod, info) == want
    verdict = PLUGIN.filter_nodes(CycleState(), pod, Nodes(s, s.present_slots()))
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_vectorized_matches_per_node_on_random_clusters() -> None:
    rng = random.Random(3)
    for _ in range(30):
        s = Snapshot()
        n = rng.randint(1, 30)
        for i in range(n):
            s.set_node(make_node(f"n{i}"))
        for i in rng.sample(range(n), k=n // 3):
            s.remove_node(f"n{i}")
        want = rng.choice(["", f"n{rng.randrange(n + 3)}"])
        pod = make_pod("p", node_name=want)
        nodes = Nodes(s, s.present_slots())
        verdict = PLUGIN.filter_nodes(CycleState(), pod, nodes)
        per_node = [PLUGIN.filter(CycleState(), pod, info) for info in nodes.infos()]
        assert [verdict.statuses[int(k)] for k in verdict.ids] == per_node


def test_no_pre_filter_and_events() -> None:
    # kube-scheduler 1.34's NodeName is Filter only.
    assert not isinstance(PLUGIN, PreFilterPlugin)
    [registered] = PLUGIN.events_to_register()
    assert registered.event == ClusterEvent("Node", ActionType.ADD)
    assert registered.hint is None
