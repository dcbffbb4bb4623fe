"""The Filter loop: plugins in order, the first to reject a node decides, in either form."""

from __future__ import annotations

import random
from typing import Any

import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    BindPlugin,
    Code,
    CycleState,
    FilterError,
    FilterPlugin,
    Framework,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PodInfo,
    QueuedPodInfo,
    QueueSortPlugin,
    Registry,
    Snapshot,
    Status,
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


class Sort(QueueSortPlugin):
    name = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Binder(BindPlugin):
    name = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


class CpuFit(FilterPlugin):
    """Per-node form only: rejects nodes with less than 1 free CPU."""

    name = "CpuFit"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        ASKED.append((self.name, [node.slot]))
        if node.allocatable.get("cpu", 0) - node.requested.get("cpu", 0) < 1000:
            return Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return None


class NoGpu(FilterPlugin):
    """Vectorized form only: rejects nodes labelled gpu=true."""

    name = "NoGpu"

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        ASKED.append((self.name, nodes.slots.tolist()))
        gpu = nodes.table.label_predicate("gpu", lambda v: v == "true")[nodes.slots]
        return NodeStatuses.from_mask(
            gpu, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had a gpu")
        )


class Says(FilterPlugin):
    """Answers with the code in the pod's ``says`` annotation on node n3."""

    name = "Says"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.name != "n3":
            return None
        return Status(Code[pod.metadata.annotations["says"]], "said so")


REGISTRY = Registry({p.name: p for p in (Sort, Binder, CpuFit, NoGpu, Says)})


def cluster() -> Snapshot:
    s = Snapshot()
    s.set_node(make_node("n1", cpu="1"))
    s.set_node(make_node("n2", cpu="4", labels={"gpu": "true"}))
    s.set_node(make_node("n3", cpu="4"))
    s.set_node(make_node("n4", cpu="500m", labels={"gpu": "true"}))
    s.set_node(make_node("n5", cpu="4"))
    s.add_pod(PodInfo.of(make_pod("busy", cpu="500m")), "n1")
    return s


def filters(snapshot: Snapshot, *names: str) -> list[FilterPlugin]:
    fw = Framework(
        profile_name="t",
        registry=REGISTRY,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "filter": [(n, 1) for n in names],
        },
        snapshot=snapshot,
        rng=random.Random(1),
    )
    return fw.filter_plugins


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
    rejected = filter_in_order(CycleState(), make_pod("p"), filters(s, "CpuFit", "NoGpu"), form)
    got = verdicts(s, rejected)
    assert {n: (st.plugin, st.reasons) for n, st in got.items()} == {
        "n1": ("CpuFit", ("Insufficient cpu",)),
        "n4": ("CpuFit", ("Insufficient cpu",)),
        "n2": ("NoGpu", ("node(s) had a gpu",)),
    }
    assert got["n2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert len(form.remaining) == 2


@pytest.mark.parametrize("kind", ["vectorized", "per-node"])
def test_a_plugin_is_asked_only_about_the_nodes_left(kind: str) -> None:
    s = cluster()
    ASKED.clear()
    filter_in_order(
        CycleState(), make_pod("p"), filters(s, "CpuFit", "NoGpu"), form_of(kind, s, [0, 1, 3])
    )
    asked = {name: sorted(s for n, slots in ASKED if n == name for s in slots) for name, _ in ASKED}
    # n1 and n4 failed CpuFit: only n2 is left for NoGpu, in either form.
    assert asked == {"CpuFit": [0, 1, 3], "NoGpu": [1]}


def test_once_no_node_is_left_no_plugin_is_asked() -> None:
    s = cluster()
    ASKED.clear()
    rejected = filter_in_order(
        CycleState(), make_pod("p"), filters(s, "CpuFit", "NoGpu"), PerNode(s, [0])
    )
    assert [name for name, _ in ASKED] == ["CpuFit"]
    assert len(rejected) == 1


@pytest.mark.parametrize("kind", ["vectorized", "per-node"])
@pytest.mark.parametrize("code", ["ERROR", "WAIT", "SKIP"])
def test_a_status_that_is_no_rejection_raises(kind: str, code: str) -> None:
    s = cluster()
    pod = make_pod("p", annotations={"says": code})
    with pytest.raises(FilterError) as e:
        filter_in_order(CycleState(), pod, filters(s, "Says"), form_of(kind, s, [0, 1, 2]))
    assert e.value.plugin == "Says"
    assert e.value.status.code == Code[code]
    assert e.value.status.plugin == "Says"


@pytest.mark.parametrize("code", ["UNSCHEDULABLE", "UNSCHEDULABLE_AND_UNRESOLVABLE", "PENDING"])
def test_rejections_of_every_kind_are_kept(code: str) -> None:
    s = cluster()
    pod = make_pod("p", annotations={"says": code})
    rejected = filter_in_order(CycleState(), pod, filters(s, "Says"), PerNode(s, [0, 2]))
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
    plugins = filters(s, "CpuFit", "NoGpu")
    state = CycleState()
    assert FilterPlan(plugins, None).calls(state) == plugins
    plan = FilterPlan(plugins, Recorded())
    timed = plan.calls(state)
    assert all(isinstance(p, InstrumentedFilter) for p in timed)
    assert [p.name for p in timed] == ["CpuFit", "NoGpu"]
    assert plan.calls(state) is timed
    assert [p.name for p in plan.calls(state, pods_only=True)] == ["CpuFit", "NoGpu"]
    state.record_plugin_metrics = False
    assert plan.calls(state) == plugins
