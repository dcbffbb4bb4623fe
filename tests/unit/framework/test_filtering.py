"""The Filter loop: plugins in order, the first to reject a node decides, in either form."""

from __future__ import annotations

from typing import Any

import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    Code,
    CycleState,
    FilterError,
    FilterPlugin,
    NodeInfo,
    Nodes,
    NodeStatuses,
    Snapshot,
    Status,
    node_for,
)
from kubesched.framework._filtering import (
    FilterForm,
    FilterPlan,
    PerNode,
    Vectorized,
    filter_in_order,
)
from kubesched.framework._instrumented import InstrumentedFilter

#: Slots each plugin was asked about, in order.
ASKED: list[tuple[str, list[int]]] = []


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


class Cordoned(FilterPlugin):
    """Per-node form only: rejects nodes labelled ``cordoned``."""

    name = "Cordoned"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        ASKED.append((self.name, [node.slot]))
        if "cordoned" in node_for(node).metadata.labels:
            return Status(Code.UNSCHEDULABLE, "node(s) were cordoned")
        return None


class Zoned(FilterPlugin):
    """Vectorized form only: rejects nodes outside zone ``a``, unresolvably."""

    name = "Zoned"

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        ASKED.append((self.name, nodes.slots.tolist()))
        elsewhere = nodes.table.label_predicate("zone", lambda v: v != "a")[nodes.slots]
        return NodeStatuses.from_mask(
            elsewhere, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) in another zone")
        )


class Says(FilterPlugin):
    """Answers with the code in the pod's ``says`` annotation on node n3."""

    name = "Says"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.name != "n3":
            return None
        return Status(Code[pod.metadata.annotations["says"]], "said so")


def cluster() -> Snapshot:
    s = Snapshot()
    s.set_node(make_node("n1", labels={"zone": "a", "cordoned": ""}))
    s.set_node(make_node("n2", labels={"zone": "b"}))
    s.set_node(make_node("n3", labels={"zone": "a"}))
    s.set_node(make_node("n4", labels={"zone": "b", "cordoned": ""}))
    s.set_node(make_node("n5", labels={"zone": "a"}))
    return s


def filters(snapshot: Snapshot, *plugins: type[FilterPlugin]) -> list[FilterPlugin]:
    handle = _Handle(snapshot)
    return [p(handle) for p in plugins]


def form_of(kind: str, snapshot: Snapshot, slots: list[int]) -> FilterForm[Any]:
    if kind == "per-node":
        return PerNode(snapshot, slots)
    return Vectorized(snapshot, snapshot.table.present_slots()[slots])


def verdicts(snapshot: Snapshot, rejected: list[tuple[Any, Status]]) -> dict[str, Status]:
    names = snapshot.table.names
    out = {}
    for nodes, status in rejected:
        for slot in [nodes] if isinstance(nodes, int) else nodes.tolist():
            out[names[slot]] = status
    return out


@pytest.mark.parametrize("kind", ["vectorized", "per-node"])
def test_the_first_plugin_to_reject_a_node_decides(kind: str) -> None:
    s = cluster()
    form = form_of(kind, s, [0, 1, 2, 3, 4])
    rejected = filter_in_order(CycleState(), make_pod("p"), filters(s, Cordoned, Zoned), form)
    got = verdicts(s, rejected)
    assert {n: (st.plugin, st.reasons) for n, st in got.items()} == {
        "n1": ("Cordoned", ("node(s) were cordoned",)),
        "n4": ("Cordoned", ("node(s) were cordoned",)),
        "n2": ("Zoned", ("node(s) in another zone",)),
    }
    assert got["n2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert len(form.remaining) == 2


@pytest.mark.parametrize("kind", ["vectorized", "per-node"])
def test_a_plugin_is_asked_only_about_the_nodes_left(kind: str) -> None:
    s = cluster()
    ASKED.clear()
    filter_in_order(
        CycleState(), make_pod("p"), filters(s, Cordoned, Zoned), form_of(kind, s, [0, 1, 3])
    )
    asked = {name: sorted(s for n, slots in ASKED if n == name for s in slots) for name, _ in ASKED}
    # n1 and n4 failed Cordoned: only n2 is left for Zoned, in either form.
    assert asked == {"Cordoned": [0, 1, 3], "Zoned": [1]}


def test_once_no_node_is_left_no_plugin_is_asked() -> None:
    s = cluster()
    ASKED.clear()
    rejected = filter_in_order(
        CycleState(), make_pod("p"), filters(s, Cordoned, Zoned), PerNode(s, [0])
    )
    assert [name for name, _ in ASKED] == ["Cordoned"]
    assert len(rejected) == 1


@pytest.mark.parametrize("kind", ["vectorized", "per-node"])
@pytest.mark.parametrize("code", ["ERROR", "WAIT", "SKIP"])
def test_a_status_that_is_no_rejection_raises(kind: str, code: str) -> None:
    s = cluster()
    pod = make_pod("p", annotations={"says": code})
    with pytest.raises(FilterError) as e:
        filter_in_order(CycleState(), pod, filters(s, Says), form_of(kind, s, [0, 1, 2]))
    assert e.value.plugin == "Says"
    assert e.value.status.code == Code[code]
    assert e.value.status.plugin == "Says"


@pytest.mark.parametrize("code", ["UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE", "PENDING"])
def test_rejections_of_every_kind_are_kept(code: str) -> None:
    s = cluster()
    pod = make_pod("p", annotations={"says": code})
    rejected = filter_in_order(CycleState(), pod, filters(s, Says), PerNode(s, [0, 2]))
    assert [(slot, st.code) for slot, st in rejected] == [(2, Code[code])]


class Recorded:
    def __init__(self) -> None:
        self.plugins: list[tuple[str, str]] = []

    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None:
        pass

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        self.plugins.append((plugin, point))


def test_a_plan_hands_out_timed_plugins_only_in_cycles_that_record_them() -> None:
    s = cluster()
    plugins = filters(s, Cordoned, Zoned)
    state = CycleState()
    assert FilterPlan(plugins, None).calls(state) == plugins
    plan = FilterPlan(plugins, Recorded())
    timed = plan.calls(state)
    assert all(isinstance(p, InstrumentedFilter) for p in timed)
    assert [p.name for p in timed] == ["Cordoned", "Zoned"]
    assert plan.calls(state) is timed
    # Neither says it reads the Node alone.
    assert [p.name for p in plan.calls(state, pods_only=True)] == ["Cordoned", "Zoned"]
    state.record_plugin_metrics = False
    assert plan.calls(state) == plugins
