"""The runtime's support for preemption: node trials, nominated pods in Filter, the nominated
node first, PreFilterExtensions, and victims evicted through the front end."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Hashable, Iterable
from typing import Any, ClassVar

import msgspec
import numpy as np
import pytest
from test_node_info import readded_at_generation

from builders import make_node, make_pod
from kubesched.api import ObjectMeta, Pod, PodDisruptionBudget
from kubesched.framework import (
    BindPlugin,
    Code,
    CycleState,
    FilterPlugin,
    FitError,
    Framework,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PermitPlugin,
    PodInfo,
    PostFilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    Registry,
    Snapshot,
    Status,
)


class Sort(QueueSortPlugin):
    name = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Binder(BindPlugin):
    name = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


class CpuFit(FilterPlugin):
    """Per-node form: the pod's CPU request must fit in what the node has left."""

    name = "CpuFit"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        want = PodInfo.of(pod).requests.get("cpu", 0)
        if node.allocatable.get("cpu", 0) - node.requested.get("cpu", 0) < want:
            return Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return None


class CountOnNode(PreFilterPlugin, FilterPlugin):
    """Counts pods added and removed through PreFilterExtensions in its cycle state, and
    rejects nodes labelled ``error=true`` in AddPod/RemovePod."""

    name = "CountOnNode"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write("count", _Counter())
        return None, None

    def add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._bump(state, node, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._bump(state, node, -1)

    def _bump(self, state: CycleState, node: NodeInfo, delta: int) -> Status | None:
        assert node.node is not None
        if node.node.metadata.labels.get("error") == "true":
            return Status(Code.ERROR, "failed to update")
        state.read("count", _Counter).n += delta
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        limit = pod.metadata.annotations.get("max-added")
        if limit is not None and state.read("count", _Counter).n > int(limit):
            return Status(Code.UNSCHEDULABLE, "too many added")
        return None


class _Counter:
    def __init__(self) -> None:
        self.n = 0

    def clone(self) -> _Counter:
        c = _Counter()
        c.n = self.n
        return c


class Hold(PermitPlugin):
    name = "Hold"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), 30.0


class Answer(PostFilterPlugin):
    """Answers what the pod's ``<name>`` annotation says: ``code:node:reason``."""

    name = "Answer"

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        code, node, reason = pod.metadata.annotations[self.name].split(":")
        status = None if code == "ok" else Status(Code[code], *([reason] if reason else []))
        return (None if node == "-" else node), status


class Again(Answer):
    name = "Again"


class BothForms(FilterPlugin):
    """Says which form ran: the per-node one or the vectorized one."""

    name = "BothForms"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return Status(Code.UNSCHEDULABLE, "per-node form")

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        return NodeStatuses.from_mask(
            np.ones(len(nodes), dtype=np.bool_), Status(Code.UNSCHEDULABLE, "vectorized form")
        )


class VectorizedOnly(FilterPlugin):
    name = "VectorizedOnly"

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        return NodeStatuses.from_mask(
            np.ones(len(nodes), dtype=np.bool_), Status(Code.UNSCHEDULABLE, "vectorized only")
        )


REGISTRY = Registry(
    {
        p.name: p
        for p in (Sort, Binder, CpuFit, CountOnNode, Hold, Answer, Again, BothForms, VectorizedOnly)
    }
)


def framework(snapshot: Snapshot) -> Framework:
    return Framework(
        profile_name="test",
        registry=REGISTRY,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "preFilter": [("CountOnNode", 1)],
            "filter": [("CpuFit", 1), ("CountOnNode", 1)],
            "permit": [("Hold", 1)],
        },
        snapshot=snapshot,
        rng=random.Random(1),
    )


class Nominator:
    def __init__(self) -> None:
        self.pods: dict[str, list[PodInfo]] = {}

    def nominate(self, pod: Pod, node: str) -> None:
        self.pods.setdefault(node, []).append(PodInfo.of(pod))

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.pods.get(node_name, []))

    def nominated_nodes(self) -> Iterable[str]:
        return [n for n, pods in self.pods.items() if pods]

    def nominations_stamp(self, node_name: str) -> Hashable:
        return tuple(id(pi) for pi in self.pods.get(node_name, []))


def cluster() -> Snapshot:
    s = Snapshot()
    s.set_node(make_node("n1", cpu="2"))
    s.set_node(make_node("n2", cpu="2"))
    s.set_node(make_node("n3", cpu="2", labels={"error": "true"}))
    return s


def with_status(pod: Pod, nominated: str) -> Pod:
    return msgspec.structs.replace(
        pod, status=msgspec.structs.replace(pod.status, nominated_node_name=nominated)
    )


# --- trials ------------------------------------------------------------------------------------


def test_a_trial_changes_one_node_and_is_undone_exactly() -> None:
    s = cluster()
    a, b, c = (PodInfo.of(make_pod(n, cpu="500m", labels={"app": n})) for n in "abc")
    for p in (a, b, c):
        s.add_pod(p, "n1")
    slot = s.slot_of("n1")
    assert slot is not None
    cpu = s.table.resource_index["cpu"]
    rows = s.pods.slots[: s.pods.size].copy()
    groups = s.pods.group_ids[: s.pods.size].copy()
    extra = PodInfo.of(make_pod("extra", cpu="250m"))

    with s.trial("n1") as trial:
        trial.remove_pod(a)
        trial.remove_pod(c)
        trial.add_pod(extra)
        assert list(trial.node.pods) == [b.uid, extra.uid]
        assert s.table.requested[slot, cpu] == 750
        # Only the node's NodeInfo and row change, as only kube-scheduler's copy of it does:
        # which node counts each pod, and the pods index, stay as the cluster has them.
        assert s.node_of_pod(a.uid) == "n1"
        assert s.node_of_pod(extra.uid) is None
        np.testing.assert_array_equal(s.pods.slots[: s.pods.size], rows)
        with pytest.raises(ValueError, match="already counted"):
            trial.add_pod(b)

    info = s.get("n1")
    assert info is not None
    assert list(info.pods) == [a.uid, b.uid, c.uid]
    assert s.table.requested[slot, cpu] == 1500
    assert s.node_of_pod(extra.uid) is None
    np.testing.assert_array_equal(s.pods.slots[: s.pods.size], rows)
    np.testing.assert_array_equal(s.pods.group_ids[: s.pods.size], groups)


def test_a_trial_is_undone_when_the_block_raises() -> None:
    s = cluster()
    a = PodInfo.of(make_pod("a", cpu="1"))
    s.add_pod(a, "n1")

    def fail_midway() -> None:
        with s.trial("n1") as trial:
            trial.remove_pod(a)
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fail_midway()
    assert s.node_of_pod(a.uid) == "n1"
    with s.trial("n2") as trial, pytest.raises(ValueError, match="not counted on node n2"):
        trial.remove_pod(a)


# --- nominated pods in Filter ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("nominated_priority", "pod_priority", "fits_n1"),
    [
        (100, 10, False),  # a higher-priority pod holds the room
        (10, 10, False),  # so does one of equal priority
        (5, 10, True),  # a lower-priority one does not
    ],
)
def test_nominated_pods_of_equal_or_higher_priority_count_in_filter(
    nominated_priority: int, pod_priority: int, fits_n1: bool
) -> None:
    s = cluster()
    s.add_pod(PodInfo.of(make_pod("busy2", cpu="2")), "n2")
    s.add_pod(PodInfo.of(make_pod("busy3", cpu="2")), "n3")
    fw = framework(s)
    nominator = Nominator()
    fw.set_pod_nominator(nominator)
    nominator.nominate(make_pod("preemptor", cpu="1500m", priority=nominated_priority), "n1")
    pod = make_pod("p", cpu="1", priority=pod_priority)

    state = CycleState()
    if fits_n1:
        assert fw.schedule_pod(state, pod).suggested_host == "n1"
    else:
        with pytest.raises(FitError) as e:
            fw.schedule_pod(state, pod)
        assert str(e.value) == "0/3 nodes are available: 3 Insufficient cpu."
    # The trial left nothing behind.
    info = s.get("n1")
    assert info is not None
    assert not info.pods
    assert s.table.requested[info.slot, s.table.resource_index["cpu"]] == 0


def test_the_pod_itself_is_not_counted_as_nominated() -> None:
    s = cluster()
    fw = framework(s)
    nominator = Nominator()
    fw.set_pod_nominator(nominator)
    pod = make_pod("p", cpu="2", priority=10)
    nominator.nominate(pod, "n1")
    state = CycleState()
    fw.run_pre_filter(state, pod, fw.all_nodes())
    n1 = s.get("n1")
    assert n1 is not None
    assert fw.run_filter_plugins_with_nominated_pods(state, pod, n1) is None


def test_nominated_pods_pass_through_prefilter_extensions_on_a_cloned_state() -> None:
    s = cluster()
    fw = framework(s)
    nominator = Nominator()
    fw.set_pod_nominator(nominator)
    for i in range(2):
        nominator.nominate(make_pod(f"nom{i}", priority=100), "n1")
    pod = make_pod("p", priority=1, annotations={"max-added": "1"})
    state = CycleState()
    fw.run_pre_filter(state, pod, fw.all_nodes())
    n1, n2 = s.get("n1"), s.get("n2")
    assert n1 is not None
    assert n2 is not None

    status = fw.run_filter_plugins_with_nominated_pods(state, pod, n1)
    assert status == Status(Code.UNSCHEDULABLE, "too many added", plugin="CountOnNode")
    # The pass with the nominated pods worked on a copy of the state.
    assert state.read("count", _Counter).n == 0
    assert fw.run_filter_plugins_with_nominated_pods(state, pod, n2) is None


def test_prefilter_extension_errors_name_the_plugin() -> None:
    s = cluster()
    fw = framework(s)
    pod = make_pod("p")
    state = CycleState()
    fw.run_pre_filter(state, pod, fw.all_nodes())
    n3 = s.get("n3")
    assert n3 is not None
    other = PodInfo.of(make_pod("other"))
    add = fw.run_pre_filter_extension_add_pod(state, pod, other, n3)
    remove = fw.run_pre_filter_extension_remove_pod(state, pod, other, n3)
    assert add is not None
    assert remove is not None
    assert add.code == remove.code == Code.ERROR
    assert add.message == 'running AddPod on PreFilter plugin "CountOnNode": failed to update'
    assert remove.message == (
        'running RemovePod on PreFilter plugin "CountOnNode": failed to update'
    )
    # A plugin whose PreFilter said Skip is left out.
    state.skip_filter_plugins.add("CountOnNode")
    assert fw.run_pre_filter_extension_add_pod(state, pod, other, n3) is None


def test_the_nominated_node_is_tried_first_and_alone() -> None:
    s = cluster()
    fw = framework(s)
    pod = with_status(make_pod("p", cpu="1"), "n2")
    result = fw.schedule_pod(CycleState(), pod)
    assert (result.suggested_host, result.feasible_nodes, result.evaluated_nodes) == ("n2", 1, 1)
    # A nominated node that no longer fits: every node is evaluated.
    s.add_pod(PodInfo.of(make_pod("busy", cpu="2")), "n2")
    result = fw.schedule_pod(CycleState(), pod)
    assert result.feasible_nodes == 2
    assert result.suggested_host in {"n1", "n3"}


# --- evicting victims -------------------------------------------------------------------------


class Evictor:
    def __init__(self, gone: frozenset[str] = frozenset()) -> None:
        self.calls: list[tuple[Any, ...]] = []
        #: Victims already deleted when evicted.
        self.gone = gone

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        self.calls.append(("evict", victim.metadata.name, preemptor.metadata.name))
        return victim.metadata.name not in self.gone

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        self.calls.append(("event", victim.metadata.name, node, profile))

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        self.calls.append(("clear", pod.metadata.name))


async def test_victims_are_evicted_or_rejected_at_permit() -> None:
    s = cluster()
    fw = framework(s)
    preemptor, victim, waiting = make_pod("pre"), make_pod("victim"), make_pod("waiting")
    # Without an evictor nothing happens.
    await fw.preempt_pod(preemptor, victim, "n1", "DefaultPreemption")
    evictor = Evictor()
    fw.set_evictor(evictor)
    assert fw.run_permit(CycleState(), waiting, "n1") == Status(
        Code.WAIT, "one or more plugins asked to wait"
    )
    outcome = asyncio.ensure_future(fw.wait_on_permit(waiting))
    await fw.preempt_pod(preemptor, victim, "n1", "DefaultPreemption")
    await fw.preempt_pod(preemptor, waiting, "n1", "DefaultPreemption")
    await fw.clear_nominated_node_name(victim)
    assert await outcome == Status(Code.UNSCHEDULABLE, "preempted", plugin="DefaultPreemption")
    assert evictor.calls == [
        ("evict", "victim", "pre"),
        ("event", "victim", "n1", "test"),
        ("event", "waiting", "n1", "test"),
        ("clear", "victim"),
    ]


async def test_a_victim_already_gone_gets_no_preempted_event() -> None:
    """``PreemptPod`` returns before recording the event when the deletion finds no pod."""
    fw = framework(cluster())
    evictor = Evictor(gone=frozenset({"gone"}))
    fw.set_evictor(evictor)
    preemptor = make_pod("pre")
    await fw.preempt_pod(preemptor, make_pod("gone"), "n1", "DefaultPreemption")
    await fw.preempt_pod(preemptor, make_pod("there"), "n1", "DefaultPreemption")
    assert evictor.calls == [
        ("evict", "gone", "pre"),
        ("evict", "there", "pre"),
        ("event", "there", "n1", "test"),
    ]


def test_list_objects_serves_registered_listers_else_the_object_store() -> None:
    snapshot = cluster()
    fw = framework(snapshot)
    assert fw.list_objects(PodDisruptionBudget) == []
    stored = PodDisruptionBudget(metadata=ObjectMeta(name="stored", namespace="ns"))
    snapshot.objects.set(stored)
    assert fw.list_objects(PodDisruptionBudget) == [stored]
    watched = PodDisruptionBudget(metadata=ObjectMeta(name="watched", namespace="ns"))
    fw.register_lister(PodDisruptionBudget, lambda: [watched])
    assert fw.list_objects(PodDisruptionBudget) == [watched]


@pytest.mark.parametrize(
    ("first", "second", "nominated", "status"),
    [
        # Unschedulable answers merge: reasons, the first rejector, the last real nomination.
        (
            "UNSCHEDULABLE::a",
            "UNSCHEDULABLE:-:b",
            "",
            Status(Code.UNSCHEDULABLE, "a", "b", plugin="Answer"),
        ),
        (
            "UNSCHEDULABLE:-:a",
            "UNSCHEDULABLE:-:",
            None,
            Status(Code.UNSCHEDULABLE, "a", plugin="Answer"),
        ),
        # A success ends the run with its nomination.
        ("UNSCHEDULABLE::a", "ok:n2:", "n2", None),
        # So do UnschedulableAndUnresolvable and Error (which loses the nomination).
        (
            "UNSCHEDULABLE_AND_UNRESOLVABLE:n1:x",
            "ok:n2:",
            "n1",
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "x", plugin="Answer"),
        ),
        ("ERROR:n1:boom", "ok:n2:", None, Status(Code.ERROR, "boom", plugin="Answer")),
    ],
)
def test_post_filter_plugins_run_until_one_decides(
    first: str, second: str, nominated: str | None, status: Status | None
) -> None:
    fw = Framework(
        profile_name="test",
        registry=REGISTRY,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "postFilter": [("Answer", 1), ("Again", 1)],
        },
        snapshot=cluster(),
    )
    pod = make_pod("p", annotations={"Answer": first, "Again": second})
    assert fw.run_post_filter(CycleState(), pod, {}) == (nominated, status)


@pytest.mark.parametrize(
    ("plugin", "reason"), [("BothForms", "per-node form"), ("VectorizedOnly", "vectorized only")]
)
def test_one_node_is_filtered_with_the_per_node_form_when_there_is_one(
    plugin: str, reason: str
) -> None:
    snapshot = cluster()
    fw = Framework(
        profile_name="test",
        registry=REGISTRY,
        plugins={"queueSort": [("Sort", 1)], "bind": [("Binder", 1)], "filter": [(plugin, 1)]},
        snapshot=snapshot,
    )
    n1 = snapshot.get("n1")
    assert n1 is not None
    assert fw.run_filter_plugins(CycleState(), make_pod("p"), n1) == Status(
        Code.UNSCHEDULABLE, reason, plugin=plugin
    )


def test_a_trial_without_rows_changes_the_node_info_only() -> None:
    s = cluster()
    a = PodInfo.of(make_pod("a", cpu="500m"))
    s.add_pod(a, "n1")
    slot = s.slot_of("n1")
    assert slot is not None
    cpu = s.table.resource_index["cpu"]
    version = s.table.version
    with s.trial("n1", rows=False) as trial:
        trial.remove_pod(a)
        assert trial.node.requested["cpu"] == 0
        # The row, and so whatever was derived from it, is untouched.
        assert s.table.requested[slot, cpu] == 500
    assert s.table.version == version
    info = s.get("n1")
    assert info is not None
    assert info.requested["cpu"] == 500


def test_trials_change_several_nodes_rows_included_and_undo_them_all() -> None:
    s = cluster()
    a, b = (PodInfo.of(make_pod(n, cpu="500m")) for n in "ab")
    s.add_pod(a, "n1")
    cpu = s.table.resource_index["cpu"]
    n1, n2 = s.get("n1"), s.get("n2")
    assert n1 is not None
    assert n2 is not None
    extra = PodInfo.of(make_pod("extra", cpu="250m"))
    with s.trials([n1, n2]) as (t1, t2):
        t1.remove_pod(a)
        t1.add_pod(b)
        t2.add_pod(extra)
        assert s.table.requested[n1.slot, cpu] == 500
        assert s.table.requested[n2.slot, cpu] == 250
        assert list(n1.pods) == [b.uid]
    assert list(n1.pods) == [a.uid]
    assert not n2.pods
    assert s.table.requested[n1.slot, cpu] == 500
    assert s.table.requested[n2.slot, cpu] == 0


class LocalCpuFit(CpuFit):
    """CpuFit, declared to judge each node by that node alone."""

    name = "LocalCpuFit"
    node_local = True


class LocalMemoryRow(FilterPlugin):
    """Vectorized only, from the table: the pod's memory request must fit in the row."""

    name = "LocalMemoryRow"
    node_local = True

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        t = self.handle.snapshot.table
        mem = t.resource_index["memory"]
        want = PodInfo.of(pod).requests.get("memory", 0)
        left = t.allocatable[nodes.slots, mem] - t.requested[nodes.slots, mem]
        return NodeStatuses.from_mask(
            left < want, Status(Code.UNSCHEDULABLE, "Insufficient memory")
        )


class Counted(LocalMemoryRow):
    """LocalMemoryRow, counting the nodes it is asked about."""

    name = "Counted"
    asked: ClassVar[list[int]] = []

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        self.asked.append(len(nodes))
        return super().filter_nodes(state, pod, nodes)


def _two_forms(s: Snapshot, *, local: bool) -> Framework:
    registry = Registry(
        {p.name: p for p in (Sort, Binder, CpuFit, LocalCpuFit, LocalMemoryRow, Counted)}
    )
    first = "LocalCpuFit" if local else "CpuFit"
    return Framework(
        profile_name="test",
        registry=registry,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "filter": [(first, 1), ("LocalMemoryRow", 1)],
        },
        snapshot=s,
    )


def test_nominated_pods_on_many_nodes_are_judged_in_one_pass_as_one_by_one() -> None:
    """With node-local plugins only, the nodes with nominated pods are judged together (each
    with its own nominated pods counted, rows included): the same verdicts as node by node."""
    rng = random.Random(7)
    s = Snapshot()
    for i in range(40):
        s.set_node(make_node(f"n{i}", cpu="4", memory="4Gi"))
        for j in range(rng.randrange(3)):
            cpu, mem = rng.choice(["500m", "1", "2"]), rng.choice(["512Mi", "1Gi", "2Gi"])
            s.add_pod(PodInfo.of(make_pod(f"p{i}-{j}", cpu=cpu, memory=mem)), f"n{i}")
    nominator = Nominator()
    for i in rng.sample(range(40), 24):
        cpu, mem = rng.choice(["500m", "1", "2"]), rng.choice(["512Mi", "1Gi", "2Gi"])
        nom = make_pod(f"nom{i}", cpu=cpu, memory=mem, priority=rng.choice([5, 10, 20]))
        nominator.nominate(nom, f"n{i}")
    pods = [
        make_pod(
            f"q{k}",
            cpu=rng.choice(["500m", "1", "2"]),
            memory=rng.choice(["512Mi", "1Gi", "2Gi"]),
            priority=10,
        )
        for k in range(12)
    ]
    table = s.table.requested.copy()
    outcomes = []
    for local in (True, False):
        fw = _two_forms(s, local=local)
        fw.set_pod_nominator(nominator)
        got = []
        for p in pods:
            feasible, diagnosis = fw.find_nodes_that_fit(CycleState(), p)
            statuses = {
                n: (st.plugin.removeprefix("Local"), st.reasons)
                for n, st in diagnosis.node_statuses(s).items()
            }
            got.append((feasible.slots.tolist(), statuses))
        outcomes.append(got)
    assert outcomes[0] == outcomes[1]
    assert any(statuses for _, statuses in outcomes[0])
    np.testing.assert_array_equal(s.table.requested, table)


def counted_framework(nodes: int) -> tuple[Snapshot, Framework]:
    """``nodes`` nodes of 2 CPU and 2Gi, and a framework filtering with ``Counted`` alone."""
    s = Snapshot()
    for i in range(nodes):
        s.set_node(make_node(f"n{i}", cpu="2", memory="2Gi"))
    fw = Framework(
        profile_name="test",
        registry=Registry({p.name: p for p in (Sort, Binder, Counted)}),
        plugins={"queueSort": [("Sort", 1)], "bind": [("Binder", 1)], "filter": [("Counted", 1)]},
        snapshot=s,
    )
    return s, fw


def test_a_kept_verdict_with_nominated_pods_stands_until_the_node_or_its_nominations_change() -> (
    None
):
    s, fw = counted_framework(12)
    nominator = Nominator()
    fw.set_pod_nominator(nominator)
    for i in range(10):
        nominator.nominate(make_pod(f"nom{i}", memory="1536Mi", priority=10), f"n{i}")
    old = PodInfo.of(make_pod("old", memory="512Mi"))
    s.add_pod(old, "n5")
    every = {f"n{i}" for i in range(12)}

    def fit() -> set[str]:
        Counted.asked.clear()
        p = make_pod("p", memory="512Mi", priority=10)
        feasible, _ = fw.find_nodes_that_fit(CycleState(), p)
        return {s.table.names[slot] for slot in feasible.slots.tolist()}

    assert fit() == every - {"n5"}
    assert Counted.asked == [10, 11]  # the ten with nominated pods together, then the rest
    # The pod's shape seen twice: the pass without nominated pods comes from the per-shape
    # cache (built now, over every node); the ten verdicts with them are kept.
    assert fit() == every - {"n5"}
    assert Counted.asked == [12]
    assert fit() == every - {"n5"}
    assert Counted.asked == []
    # One node's pods change, another's nominations, a third's pods without nominations: the
    # cache asks again about the two whose pods changed, then the first two are judged again
    # with their nominated pods, one by one (they are few).
    s.remove_pod(old.uid)
    nominator.pods["n4"] = [PodInfo.of(make_pod("big", memory="2Gi", priority=10))]
    s.add_pod(PodInfo.of(make_pod("busy", memory="2Gi")), "n10")
    assert fit() == every - {"n4", "n10"}
    assert Counted.asked == [1, 1, 1, 1]
    # Verdicts judged one by one are kept as well (the cache asks once more about the two
    # rows their judging wrote and put back).
    assert fit() == every - {"n4", "n10"}
    assert Counted.asked == [1, 1]
    assert fit() == every - {"n4", "n10"}
    assert Counted.asked == []


def test_kept_verdicts_with_nominated_pods_counted_first_are_the_ordinary_paths() -> None:
    """The per-shape cache's verdicts (the pass without nominated pods) under the first pass
    on the nominated nodes: the feasible nodes and every node's status as the ordinary path
    gives them, a node failing both passes with the first's status."""
    s = Snapshot()
    for i in range(7):
        s.set_node(make_node(f"n{i}", cpu="2", memory="2Gi"))
    fw = Framework(
        profile_name="test",
        registry=Registry({p.name: p for p in (Sort, Binder, LocalCpuFit, Counted)}),
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "filter": [("LocalCpuFit", 1), ("Counted", 1)],
        },
        snapshot=s,
    )
    nominator = Nominator()
    fw.set_pod_nominator(nominator)

    def pod(name: str, cpu: str, memory: str, priority: int = 10) -> Pod:
        return make_pod(name, cpu=cpu, memory=memory, priority=priority)

    # n0 fails only with its nominated pod (cpu); n1 fails both, on cpu first and on memory
    # without it; n2 both on memory; n3 nothing; n4 a nominated pod of lower priority (not
    # counted); n5 fails without nominations; n6 passes with its nominated pod.
    nominator.nominate(pod("nom0", "1500m", "100Mi"), "n0")
    nominator.nominate(pod("nom1", "1500m", "100Mi"), "n1")
    s.add_pod(PodInfo.of(pod("on1", "100m", "1800Mi", 0)), "n1")
    nominator.nominate(pod("nom2", "100m", "100Mi"), "n2")
    s.add_pod(PodInfo.of(pod("on2", "100m", "1800Mi", 0)), "n2")
    nominator.nominate(pod("nom4", "1500m", "1500Mi", 5), "n4")
    s.add_pod(PodInfo.of(pod("on5", "1500m", "100Mi", 0)), "n5")
    nominator.nominate(pod("nom6", "100m", "100Mi"), "n6")

    def fit() -> tuple[set[str], dict[str, str]]:
        Counted.asked.clear()
        feasible, diagnosis = fw.find_nodes_that_fit(CycleState(), pod("p", "1", "512Mi"))
        names = {s.table.names[slot] for slot in feasible.slots.tolist()}
        statuses = {n: st.message for n, st in diagnosis.node_statuses(s).items()}
        return names, statuses

    ordinary = fit()
    assert ordinary == (
        {"n3", "n4", "n6"},
        {
            "n0": "Insufficient cpu",
            "n1": "Insufficient cpu",
            "n2": "Insufficient memory",
            "n5": "Insufficient cpu",
        },
    )
    assert fit() == ordinary
    assert fit() == ordinary
    assert Counted.asked == []  # every verdict kept: the ordinary path asks about every node


class Looked(Nominator):
    """Counts the lookups of a node's nominated pods."""

    def __init__(self) -> None:
        super().__init__()
        self.looked: list[str] = []

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        self.looked.append(node_name)
        return super().nominated_pods_for_node(node_name)


def test_a_kept_verdict_needs_no_lookup_of_the_nominated_pods_while_they_are_the_same() -> None:
    s, fw = counted_framework(3)
    nominator = Looked()
    fw.set_pod_nominator(nominator)
    big = make_pod("big", memory="1536Mi", priority=10)
    nominator.nominate(big, "n0")

    def fit(p: Pod) -> set[str]:
        nominator.looked.clear()
        feasible, _ = fw.find_nodes_that_fit(CycleState(), p)
        return {s.table.names[slot] for slot in feasible.slots.tolist()}

    def pod(name: str, priority: int) -> Pod:
        return make_pod(name, memory="1Gi", priority=priority)

    assert fit(pod("a", 10)) == {"n1", "n2"}
    assert nominator.looked == ["n0"]
    assert fit(pod("b", 10)) == {"n1", "n2"}  # the same shape and priority: kept
    assert nominator.looked == []
    # Another priority is judged again: a lower one counts the nominated pod, a higher one not.
    assert fit(pod("c", 5)) == {"n1", "n2"}
    assert nominator.looked == ["n0"]
    assert fit(pod("d", 20)) == {"n0", "n1", "n2"}
    assert nominator.looked == ["n0"]
    # The nominated pod judged itself: not counted against itself.
    assert fit(big) == {"n0", "n1", "n2"}
    assert nominator.looked == ["n0"]
    assert fit(pod("e", 10)) == {"n1", "n2"}
    assert nominator.looked == ["n0"]
    # Nominated elsewhere: n0 is free again, n1 judged with it.
    nominator.pods["n0"] = []
    nominator.nominate(big, "n1")
    assert fit(pod("f", 10)) == {"n0", "n2"}
    assert nominator.looked == ["n1"]
    # Counted on a node meanwhile (assumed): no longer nominated anywhere in effect.
    s.add_pod(PodInfo.of(big), "n2")
    assert fit(pod("g", 10)) == {"n0", "n1"}
    assert nominator.looked == ["n1"]


def test_a_kept_verdict_is_judged_again_on_a_node_deleted_and_added_anew() -> None:
    """A node deleted and added again has a new NodeInfo whose generation may equal the old
    one's: the verdict kept for the old one does not stand for it."""
    s, fw = counted_framework(3)
    nominator = Nominator()
    fw.set_pod_nominator(nominator)
    nominator.nominate(make_pod("nom", memory="1Gi", priority=10), "n0")
    p = make_pod("p", memory="512Mi", priority=10)

    def fit() -> set[str]:
        feasible, _ = fw.find_nodes_that_fit(CycleState(), p)
        return {s.table.names[slot] for slot in feasible.slots.tolist()}

    assert fit() == {"n0", "n1", "n2"}
    before = s.get("n0")
    assert before is not None
    after = readded_at_generation(s, make_node("n0", cpu="2", memory="1Gi"), before.generation)
    assert after is not before  # only the identity tells them apart
    assert fit() == {"n1", "n2"}
