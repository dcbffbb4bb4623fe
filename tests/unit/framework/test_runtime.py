"""The framework runtime with small plugins: filter order, messages, scoring, selection, permit."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.config import default_config
from kubesched.framework import (
    BindPlugin,
    Code,
    CycleState,
    FilterPlugin,
    FitError,
    Framework,
    FrameworkError,
    Metrics,
    NodeInfo,
    Nodes,
    NodeStatuses,
    NoNodesAvailableError,
    PermitPlugin,
    PodInfo,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    Registry,
    ReservePlugin,
    ScoreError,
    ScorePlugin,
    Snapshot,
    Status,
    build_frameworks,
)
from kubesched.framework._table import IntArray
from kubesched.plugins import in_tree_registry


class Sort(QueueSortPlugin):
    name = "Sort"

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp < b.timestamp


class Binder(BindPlugin):
    name = "Binder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None


class CpuFit(FilterPlugin):
    """Per-node form: rejects nodes with less than 1 free CPU."""

    name = "CpuFit"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if node.allocatable.get("cpu", 0) - node.requested.get("cpu", 0) < 1000:
            return Status(Code.UNSCHEDULABLE, "Insufficient cpu")
        return None


class NoGpuLabel(FilterPlugin):
    """Vectorized form: rejects nodes labelled gpu=true."""

    name = "NoGpuLabel"

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        gpu = nodes.table.label_predicate("gpu", lambda v: v == "true")[nodes.slots]
        return NodeStatuses.from_mask(
            gpu, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had a gpu")
        )


class Broken(FilterPlugin):
    name = "Broken"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return Status(Code.ERROR, "boom")


class OnlyNamed(PreFilterPlugin):
    name = "OnlyNamed"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        want = pod.metadata.annotations.get("only")
        if want is None:
            return None, Status(Code.SKIP)
        return PreFilterResult(set(want.split(",")) if want else set()), None


class AlsoNamed(OnlyNamed):
    """:class:`OnlyNamed` under another name, reading the ``also`` annotation."""

    name = "AlsoNamed"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        return PreFilterResult(set(pod.metadata.annotations["also"].split(","))), None


class ByIndex(ScorePlugin):
    """Scores a node by the number in its name; normalizes to 0..100."""

    name = "ByIndex"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return int(node.name.removeprefix("n")), None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        top = int(scores.max()) or 1
        scores[:] = scores * 100 // top
        return None


class Flat(ScorePlugin):
    name = "Flat"

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        return np.full(len(nodes), 50, dtype=np.int64), None


class TooHigh(ScorePlugin):
    name = "TooHigh"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return 101, None


class Negative(ScorePlugin):
    name = "Negative"

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        return -1 if node.name == "n3" else 0, None


class Gang(PermitPlugin):
    name = "Gang"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), float(pod.metadata.annotations.get("wait", "5"))


class Raises(
    ReservePlugin, PermitPlugin, PostFilterPlugin, PreBindPlugin, BindPlugin, PostBindPlugin
):
    """A plugin whose every extension point has a bug."""

    name = "Raises"

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise RuntimeError("reserve bug")

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise RuntimeError("unreserve bug")

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        raise RuntimeError("permit bug")

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        raise RuntimeError("post filter bug")

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise RuntimeError("pre bind bug")

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise RuntimeError("bind bug")

    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise RuntimeError("post bind bug")


class Fails(ReservePlugin, PermitPlugin, PreBindPlugin, BindPlugin):
    """Returns, at every point of the binding, the status its pod's ``fails`` annotation names:
    an Error or a rejection."""

    name = "Fails"

    @staticmethod
    def _status(pod: Pod) -> Status:
        error = pod.metadata.annotations.get("fails") == "error"
        return Status(Code.ERROR if error else Code.UNSCHEDULABLE, "no room")

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return self._status(pod)

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return self._status(pod), 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return self._status(pod)

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return self._status(pod)


class Undo(ReservePlugin):
    name = "Undo"

    def __init__(self, handle: Any, args: Any = None) -> None:
        super().__init__(handle, args)
        self.undone: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.undone.append(pod.metadata.name)


REGISTRY = Registry(
    {
        p.name: p
        for p in (
            Raises,
            Undo,
            Sort,
            Binder,
            CpuFit,
            NoGpuLabel,
            Broken,
            OnlyNamed,
            AlsoNamed,
            ByIndex,
            Flat,
            TooHigh,
            Negative,
            Gang,
            Fails,
        )
    }
)


def framework(
    snapshot: Snapshot, metrics: Metrics | None = None, **points: list[tuple[str, int]]
) -> Framework:
    plugins: dict[str, Any] = {"queueSort": [("Sort", 1)], "bind": [("Binder", 1)], **points}
    return Framework(
        profile_name="test",
        registry=REGISTRY,
        plugins=plugins,
        snapshot=snapshot,
        rng=random.Random(1),
        metrics=metrics,
    )


def cluster() -> Snapshot:
    s = Snapshot()
    s.set_node(make_node("n1", cpu="1"))
    s.set_node(make_node("n2", cpu="4", labels={"gpu": "true"}))
    s.set_node(make_node("n3", cpu="4"))
    s.set_node(make_node("n4", cpu="4"))
    s.add_pod(PodInfo.of(make_pod("busy", cpu="500m")), "n1")
    return s


def test_first_failing_plugin_decides_and_message_matches_kube_scheduler() -> None:
    s = cluster()
    s.set_node(make_node("n5", cpu="500m", labels={"gpu": "true"}))
    fw = framework(s, filter=[("CpuFit", 1), ("NoGpuLabel", 1)])
    fw_pod = make_pod("p", cpu="1")
    s.remove_node("n3")
    s.remove_node("n4")
    with pytest.raises(FitError) as e:
        fw.schedule_pod(CycleState(), fw_pod)
    # n5 fails CpuFit first, so NoGpuLabel's reason is not counted for it.
    assert str(e.value) == ("0/3 nodes are available: 1 node(s) had a gpu, 2 Insufficient cpu.")
    statuses = e.value.diagnosis.node_statuses(s)
    assert statuses["n5"].plugin == "CpuFit"
    assert statuses["n2"].plugin == "NoGpuLabel"
    assert e.value.diagnosis.unschedulable_plugins == {"CpuFit", "NoGpuLabel"}


def test_scores_are_normalized_weighted_and_summed() -> None:
    s = cluster()
    fw = framework(s, filter=[("CpuFit", 1)], score=[("ByIndex", 2), ("Flat", 1)])
    r = fw.schedule_pod(CycleState(), make_pod("p"))
    assert r.suggested_host == "n4"
    names = [s.table.names[i] for i in r.feasible_slots.tolist()]
    assert names == ["n2", "n3", "n4"]
    assert r.plugin_scores["ByIndex"].tolist() == [100, 150, 200]
    assert r.plugin_scores["Flat"].tolist() == [50, 50, 50]
    assert r.totals.tolist() == [150, 200, 250]
    assert r.evaluated_nodes == 4


def test_single_feasible_node_skips_scoring() -> None:
    s = cluster()
    fw = framework(s, filter=[("CpuFit", 1), ("NoGpuLabel", 1)], score=[("TooHigh", 1)])
    s.remove_node("n4")
    r = fw.schedule_pod(CycleState(), make_pod("p"))
    assert r.suggested_host == "n3"
    assert r.plugin_scores == {}


def test_out_of_range_score_is_an_error() -> None:
    fw = framework(cluster(), score=[("TooHigh", 1)])
    with pytest.raises(ScoreError, match="invalid score 101"):
        fw.schedule_pod(CycleState(), make_pod("p"))


def test_negative_score_is_an_error() -> None:
    fw = framework(cluster(), score=[("Negative", 1)])
    with pytest.raises(ScoreError, match="invalid score -1"):
        fw.schedule_pod(CycleState(), make_pod("p"))


def test_ties_are_broken_at_random_but_reproducibly() -> None:
    def pick(seed: int) -> str:
        s = cluster()
        fw = Framework(
            profile_name="t",
            registry=REGISTRY,
            plugins={"queueSort": [("Sort", 1)], "bind": [("Binder", 1)], "score": [("Flat", 1)]},
            snapshot=s,
            rng=random.Random(seed),
        )
        return fw.schedule_pod(CycleState(), make_pod("p")).suggested_host

    picks = {pick(seed) for seed in range(30)}
    assert picks == {"n1", "n2", "n3", "n4"}
    assert pick(7) == pick(7)


def test_prefilter_result_narrows_and_skip_is_honoured() -> None:
    s = cluster()
    fw = framework(s, preFilter=[("OnlyNamed", 1)], score=[("ByIndex", 1)])
    pod = make_pod("p", annotations={"only": "n2"})
    assert fw.schedule_pod(CycleState(), pod).suggested_host == "n2"
    assert fw.schedule_pod(CycleState(), make_pod("q")).suggested_host == "n4"
    with pytest.raises(FitError) as e:
        fw.schedule_pod(CycleState(), make_pod("r", annotations={"only": "nope"}))
    # A named node that does not exist leaves nothing to filter: every node is "absent".
    assert str(e.value) == (
        "0/4 nodes are available: 4 node(s) didn't satisfy plugin(s) [OnlyNamed]."
    )
    with pytest.raises(FitError) as e:
        fw.schedule_pod(CycleState(), make_pod("r", annotations={"only": ""}))
    assert str(e.value) == "0/4 nodes are available: node(s) didn't satisfy plugin OnlyNamed."


def test_prefilter_results_that_leave_no_node_name_their_plugins_sorted() -> None:
    """``node(s) didn't satisfy plugin(s) [A B] simultaneously``: upstream lists the plugins as
    a sorted set, whatever their order in the profile."""
    fw = framework(cluster(), preFilter=[("OnlyNamed", 1), ("AlsoNamed", 1)])
    pod = make_pod("p", annotations={"only": "n1", "also": "n2"})
    _, status, _ = fw.run_pre_filter(CycleState(), pod, fw.all_nodes())
    assert status == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "node(s) didn't satisfy plugin(s) [AlsoNamed OnlyNamed] simultaneously",
    )


async def test_a_permit_wait_is_cut_to_fifteen_minutes() -> None:
    """``maxTimeout``: a Permit plugin asking for a longer wait gets 15 minutes."""
    fw = framework(cluster(), permit=[("Gang", 1)])
    pod = make_pod("p", annotations={"wait": "1800"})
    fw.run_permit(CycleState(), pod, "n3")
    waiting = fw.get_waiting_pod(pod.metadata.uid)
    assert waiting is not None
    (timer,) = waiting._timers
    assert timer.when() - asyncio.get_running_loop().time() == pytest.approx(900, abs=1)
    waiting.allow("Gang")


def test_prefilter_result_of_several_names_keeps_the_node_order() -> None:
    s = cluster()
    fw = framework(s, preFilter=[("OnlyNamed", 1)], score=[("ByIndex", 1)])
    result = fw.schedule_pod(CycleState(), make_pod("p", annotations={"only": "n3,ghost,n1"}))
    names = s.table.names
    # The named nodes that exist, in slot order; the others are ruled out as absent.
    assert [names[x] for x in result.feasible_slots.tolist()] == ["n1", "n3"]
    assert result.suggested_host == "n3"
    (absent,) = result.diagnosis.groups
    assert [names[x] for x in absent.slots.tolist()] == ["n2", "n4"]
    assert absent.status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert result.evaluated_nodes == 4


def test_filter_error_aborts() -> None:
    from kubesched.framework import FilterError

    fw = framework(cluster(), filter=[("Broken", 1)])
    with pytest.raises(FilterError, match="boom"):
        fw.schedule_pod(CycleState(), make_pod("p"))


def test_no_nodes() -> None:
    fw = framework(Snapshot())
    with pytest.raises(NoNodesAvailableError, match="no nodes available to schedule pods"):
        fw.schedule_pod(CycleState(), make_pod("p"))


def test_profile_errors_name_the_plugin() -> None:
    with pytest.raises(FrameworkError, match="plugin 'Nope' does not exist"):
        framework(Snapshot(), filter=[("Nope", 1)])
    with pytest.raises(FrameworkError, match="plugin 'Flat' does not extend filter plugin"):
        framework(Snapshot(), filter=[("Flat", 1)])
    with pytest.raises(FrameworkError, match="at least one bind plugin"):
        Framework(
            profile_name="t",
            registry=REGISTRY,
            plugins={"queueSort": [("Sort", 1)]},
            snapshot=Snapshot(),
        )


async def test_permit_wait_then_allow_or_timeout() -> None:
    s = cluster()
    fw = framework(s, permit=[("Gang", 1)])
    pod = make_pod("p", annotations={"wait": "5"})
    assert fw.run_permit(CycleState(), pod, "n3") == Status(
        Code.WAIT, "one or more plugins asked to wait"
    )
    waiting = fw.get_waiting_pod(pod.metadata.uid)
    assert waiting is not None
    asyncio.get_running_loop().call_soon(waiting.allow, "Gang")
    assert await fw.wait_on_permit(pod) is None

    late = make_pod("late", annotations={"wait": "0.05"})
    fw.run_permit(CycleState(), late, "n3")
    status = await fw.wait_on_permit(late)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE
    assert "rejected due to timeout after waiting 50ms at plugin Gang" in status.message


class Recorded:
    """Metrics that remember what was reported."""

    def __init__(self) -> None:
        self.points: list[str] = []
        self.plugins: list[tuple[str, str]] = []

    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None:
        self.points.append(point)

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        self.plugins.append((plugin, point))


@pytest.mark.parametrize("record", [True, False])
def test_plugins_are_timed_only_in_cycles_that_record_them(record: bool) -> None:
    metrics = Recorded()
    fw = framework(cluster(), metrics, filter=[("CpuFit", 1)], score=[("ByIndex", 1), ("Flat", 1)])
    state = CycleState()
    state.record_plugin_metrics = record
    fw.schedule_pod(state, make_pod("p"))
    assert {"Filter", "Score"} <= set(metrics.points)
    want = [("CpuFit", "Filter"), ("ByIndex", "Score"), ("Flat", "Score")] if record else []
    assert metrics.plugins == want


class _Closing(FilterPlugin):
    name = "Closing"
    closed: list[str]

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return None

    async def aclose(self) -> None:
        type(self).closed.append(self.name)


class _FailsToClose(_Closing):
    name = "FailsToClose"

    async def aclose(self) -> None:
        raise RuntimeError("cannot")


async def test_aclose_closes_every_plugin_even_after_one_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    _Closing.closed = []
    registry = Registry({**REGISTRY, "Closing": _Closing, "FailsToClose": _FailsToClose})
    fw = Framework(
        profile_name="test",
        registry=registry,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "filter": [("FailsToClose", 1), ("Closing", 1)],
        },
        snapshot=cluster(),
    )
    await fw.aclose()
    assert _Closing.closed == ["Closing"]
    assert "closing plugin FailsToClose failed" in caplog.text


def test_state_of_plugins_without_binding_points_ends_with_the_scheduling_cycle() -> None:
    snapshot = Snapshot()
    for i in range(3):
        snapshot.set_node(make_node(f"n{i}"))
    fw = next(
        iter(
            build_frameworks(
                default_config(), in_tree_registry(), snapshot, rng=random.Random(1)
            ).values()
        )
    )
    term = {
        "labelSelector": {"matchLabels": {"app": "web"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    pod = make_pod(
        "p",
        labels={"app": "web"},
        spec={
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        },
    )
    state = CycleState()
    fw.schedule_pod(state, pod)
    assert state.get("PreFilterInterPodAffinity") is not None
    assert state.get("PreFilterNodeResourcesFit") is not None
    state.end_scheduling_cycle()
    # InterPodAffinity and NodeResourcesFit have no Reserve, Permit or binding point: nothing
    # reads their state later. VolumeBinding's Reserve and PreBind do.
    assert state.get("PreFilterInterPodAffinity") is None
    assert state.get("PreFilterNodeResourcesFit") is None
    assert state.get("VolumeBinding") is not None


class _Gate(PreEnqueuePlugin):
    """Gates pods whose ``gate`` annotation names it."""

    name = "Gate"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if self.name in pod.metadata.annotations.get("gate", "").split(","):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"held by {self.name}")
        return None


class _OtherGate(_Gate):
    name = "OtherGate"


@pytest.mark.parametrize("fails", ["error", "reject"])
async def test_binding_points_wrap_an_error_and_pass_a_rejection(fails: str) -> None:
    """``RunReservePluginsReserve``, ``RunPermitPlugins``, ``RunPreBindPlugins`` and
    ``RunBindPlugins``: a plugin's Error comes back as ``running <point> plugin "<name>": ...``
    (the message the pod's condition and FailedScheduling event carry), a rejection as the
    plugin said it."""
    fw = framework(
        cluster(),
        reserve=[("Fails", 1)],
        permit=[("Fails", 1)],
        preBind=[("Fails", 1)],
        bind=[("Fails", 1)],
    )
    pod = make_pod("p", annotations={"fails": fails})
    state = CycleState()
    got = [
        fw.run_reserve(state, pod, "n3"),
        fw.run_permit(state, pod, "n3"),
        await fw.run_pre_bind(state, pod, "n3"),
        await fw.run_bind(state, pod, "n3"),
    ]
    if fails == "reject":
        assert got == [Status(Code.UNSCHEDULABLE, "no room", plugin="Fails")] * 4
        return
    assert [(s.code, s.plugin, s.message) for s in got if s is not None] == [
        (Code.ERROR, "Fails", f'running {point} plugin "Fails": no room')
        for point in ("Reserve", "Permit", "PreBind", "Bind")
    ]


def test_the_plugin_gating_a_pod_is_asked_first() -> None:
    """As ``runPreEnqueuePlugins``: the plugin that gated the pod last time is asked first, and
    while it still holds the pod, its status stands even if a plugin before it would hold the
    pod too; once it lets go, the others are asked in order."""
    registry = Registry({**REGISTRY, _Gate.name: _Gate, _OtherGate.name: _OtherGate})
    fw = Framework(
        profile_name="test",
        registry=registry,
        plugins={
            "queueSort": [("Sort", 1)],
            "bind": [("Binder", 1)],
            "preEnqueue": [("Gate", 1), ("OtherGate", 1)],
        },
        snapshot=Snapshot(),
    )
    both = make_pod("p", annotations={"gate": "Gate,OtherGate"})
    assert fw.run_pre_enqueue(both) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held by Gate", plugin="Gate"
    )
    assert fw.run_pre_enqueue(both, "OtherGate") == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held by OtherGate", plugin="OtherGate"
    )
    first_only = make_pod("p", annotations={"gate": "Gate"})
    assert fw.run_pre_enqueue(first_only, "OtherGate") == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held by Gate", plugin="Gate"
    )
    assert fw.run_pre_enqueue(make_pod("p"), "OtherGate") is None


async def test_a_plugin_that_raises_fails_the_pod_not_the_loop() -> None:
    """Reserve, Permit, PostFilter, PreBind and Bind answer an Error for a plugin that raised
    (the pod's cycle fails and it is requeued), worded as the framework words a plugin's
    error there; Unreserve and PostBind log it and go on with the others."""
    fw = framework(
        cluster(),
        reserve=[("Undo", 1), ("Raises", 1)],
        permit=[("Raises", 1)],
        postFilter=[("Raises", 1)],
        preBind=[("Raises", 1)],
        bind=[("Raises", 1)],
        postBind=[("Raises", 1)],
    )
    pod = make_pod("p", cpu="1")
    state = CycleState()
    for status, message in (
        (
            fw.run_reserve(state, pod, "n3"),
            'running Reserve plugin "Raises": RuntimeError: reserve bug',
        ),
        (
            fw.run_permit(state, pod, "n3"),
            'running Permit plugin "Raises": RuntimeError: permit bug',
        ),
        (fw.run_post_filter(state, pod, {})[1], "RuntimeError: post filter bug"),
        (
            await fw.run_pre_bind(state, pod, "n3"),
            'running PreBind plugin "Raises": RuntimeError: pre bind bug',
        ),
        (
            await fw.run_bind(state, pod, "n3"),
            'running Bind plugin "Raises": RuntimeError: bind bug',
        ),
    ):
        assert status is not None
        assert (status.code, status.plugin, status.message) == (Code.ERROR, "Raises", message)
    fw.run_unreserve(state, pod, "n3")
    undo = fw.plugin("Undo")
    assert isinstance(undo, Undo)
    assert undo.undone == ["p"]  # after Raises, in reverse order
    fw.run_post_bind(state, pod, "n3")
