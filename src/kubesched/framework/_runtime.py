"""The framework runtime: one profile's plugins, run at each extension point.

:class:`Framework` is kube-scheduler's ``frameworkImpl`` plus the scheduling algorithm
(``schedulePod``: filter, score, select a host). The scheduler loop, the extender and the simulator
all drive it the same way, so a decision explained by ``simulate`` is the decision ``run`` makes.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from kubesched.api import Pod
from kubesched.config import format_duration
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._diagnosis import Diagnosis, FitError, NodeGroup
from kubesched.framework._equivalence import EquivalenceCache, Filtered, shape_key
from kubesched.framework._errors import (
    FilterError,
    NoNodesAvailableError,
    ProfileError,
    ScoreError,
)
from kubesched.framework._filtering import (
    PER_NODE_AT_MOST,
    FilterPlan,
    PerNode,
    Vectorized,
    filter_in_order,
)
from kubesched.framework._instrumented import FilterCalls
from kubesched.framework._interface import (
    APIClient,
    BindPlugin,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventRecorder,
    FilterPlugin,
    Nodes,
    PermitPlugin,
    Plugin,
    PodActivator,
    PodEvictor,
    PodNominator,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SortKeyFn,
    WatchedKind,
    extension_points_of,
    has_per_node_filter,
    watched_kinds,
)
from kubesched.framework._metrics import Metrics
from kubesched.framework._node_info import NodeContent, NodeInfo, PodInfo
from kubesched.framework._registry import Registry
from kubesched.framework._scoring import Fresh, ScorePlan, score_in_order
from kubesched.framework._snapshot import NodeTrial, Snapshot
from kubesched.framework._status import Code, Status, go_quote
from kubesched.framework._table import IntArray

#: ``maxTimeout``: the longest a Permit plugin may hold a pod; a longer wait is cut to it.
MAX_PERMIT_WAIT = 15 * 60.0

P = TypeVar("P", bound=Plugin)
T = TypeVar("T")

log = logging.getLogger(__name__)


@dataclass(slots=True)
class ScheduleResult:
    """Where the pod goes, and the evidence (for ``simulate --explain``)."""

    suggested_host: str
    evaluated_nodes: int
    feasible_nodes: int
    #: Slots of the feasible nodes, aligned with the score arrays below.
    feasible_slots: IntArray
    #: Plugin name -> weighted, normalized scores; empty when one node was feasible (or when
    #: the caller did not ask for them and they came from the per-shape cache).
    plugin_scores: dict[str, IntArray]
    totals: IntArray
    diagnosis: Diagnosis


@dataclass(slots=True, frozen=True)
class _Verdict:
    """A node's Filter verdict with its nominated pods counted, and what it depended on: the
    node's Node object and pods, the verdict's key, the priority of the pod judged, and the
    nominator's stamp of the node with the UIDs of all the pods nominated there (none of them
    counted on a node, nor the pod judged). While those hold, it stands without the nominated
    pods being looked up again."""

    key: Hashable
    node: NodeContent
    priority: int
    stamp: Hashable
    uids: tuple[str, ...]
    status: Status | None


#: A node to judge with its nominated pods counted: the node, those pods, and the stamp and
#: UIDs its verdict is kept by (``None`` when it may not be kept: see ``_Verdict``).
_NominatedWork = tuple[NodeInfo, list[PodInfo], tuple[Hashable, tuple[str, ...]] | None]


@dataclass(slots=True)
class _Enabled:
    plugin: Plugin
    weight: int = 1


class _Plans(Generic[T]):
    """Per skip set (the plugins a cycle's PreFilters or PreScores skipped), the plan of the
    Filter or Score plugins left, made once: a profile sees few distinct skip sets."""

    def __init__(self, make: Callable[[frozenset[str]], T]) -> None:
        self._make = make
        self._plans: dict[frozenset[str], T] = {}

    def of(self, skip: set[str]) -> T:
        key = frozenset(skip)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._make(key)
        return plan


class _WaitingPod:
    """A pod held at Permit: one future resolved by allow-all, any reject, or the timeout."""

    def __init__(self, pod: Pod, pending: dict[str, float]) -> None:
        self._pod = pod
        self._pending = dict(pending)
        self._loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Status | None] = self._loop.create_future()
        self._timers = [
            self._loop.call_later(
                t,
                self.reject,
                name,
                f"rejected due to timeout after waiting {format_duration(t)} at plugin {name}",
            )
            for name, t in pending.items()
        ]

    @property
    def pod(self) -> Pod:
        return self._pod

    def allow(self, plugin: str) -> None:
        self._pending.pop(plugin, None)
        if not self._pending:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, message, plugin=plugin))

    def _finish(self, status: Status | None) -> None:
        for t in self._timers:
            t.cancel()
        if not self.future.done():
            self.future.set_result(status)


class Framework:
    """One profile: its plugins per extension point, and the scheduling algorithm over them."""

    def __init__(
        self,
        *,
        profile_name: str,
        registry: Registry,
        plugins: Mapping[str, Sequence[tuple[str, int]]],
        plugin_args: Mapping[str, Any] | None = None,
        snapshot: Snapshot,
        client: APIClient | None = None,
        percentage_of_nodes_to_score: int | None = None,
        rng: random.Random | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        """Build the profile.

        ``plugins`` maps an extension point (``"filter"``, ``"score"``, ...) to ``(name, weight)``
        in run order, multiPoint already expanded (see :func:`build_frameworks`).
        ``plugin_args`` maps a plugin name to its decoded args.
        """
        self.profile_name = profile_name
        self._snapshot = snapshot
        self._client = client
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self._rng = rng or random.Random()
        self._metrics = metrics
        self._next_start = 0
        self._waiting: dict[str, _WaitingPod] = {}
        self._nominator: PodNominator | None = None
        self._activator: PodActivator | None = None
        self._evictor: PodEvictor | None = None
        self._recorder: EventRecorder | None = None
        self._listers: dict[type[Any], Callable[[], Iterable[Any]]] = {}
        self._instances: dict[str, Plugin] = {}
        args = plugin_args or {}
        points: dict[str, list[_Enabled]] = {}
        for point, enabled in plugins.items():
            for name, weight in enabled:
                cls = registry.get(name)
                if cls is None:
                    raise ProfileError(f"{point}: plugin {name!r} does not exist")
                if point not in extension_points_of(cls):
                    raise ProfileError(f"plugin {name!r} does not extend {point} plugin")
                plugin = self._instances.get(name)
                if plugin is None:
                    plugin = self._instances[name] = cls(self, args.get(name))
                if any(e.plugin is plugin for e in points.get(point, [])):
                    raise ProfileError(f"plugin {name!r} already registered as {point!r}")
                points.setdefault(point, []).append(_Enabled(plugin, weight or 1))
        self._points = points
        if len(points.get("queueSort", [])) != 1:
            found = len(points.get("queueSort", []))
            raise ProfileError(f"only one queue sort plugin can be enabled, found {found}")
        if not points.get("bind"):
            raise ProfileError("at least one bind plugin is needed")
        self.pre_enqueue_plugins = self._of(PreEnqueuePlugin, "preEnqueue")
        self._pre_enqueue_by_name = {p.name: p for p in self.pre_enqueue_plugins}
        self.queue_sort = self._of(QueueSortPlugin, "queueSort")[0]
        self.pre_filter_plugins = self._of(PreFilterPlugin, "preFilter")
        self.filter_plugins = self._of(FilterPlugin, "filter")
        self.post_filter_plugins = self._of(PostFilterPlugin, "postFilter")
        self.pre_score_plugins = self._of(PreScorePlugin, "preScore")
        self.score_plugins = self._of(ScorePlugin, "score")
        self.score_weights = {e.plugin.name: e.weight for e in points.get("score", [])}
        self.reserve_plugins = self._of(ReservePlugin, "reserve")
        self.permit_plugins = self._of(PermitPlugin, "permit")
        self.pre_bind_plugins = self._of(PreBindPlugin, "preBind")
        self.bind_plugins = self._of(BindPlugin, "bind")
        self.post_bind_plugins = self._of(PostBindPlugin, "postBind")
        binding = {
            p.name
            for p in (
                *self.reserve_plugins,
                *self.permit_plugins,
                *self.pre_bind_plugins,
                *self.bind_plugins,
                *self.post_bind_plugins,
            )
        }
        #: Plugins whose PreFilter/PreScore state nothing reads after the scheduling cycle.
        self._cycle_only_plugins = frozenset(
            e.plugin.name for es in points.values() for e in es if e.plugin.name not in binding
        )
        # A dry run on one node asks each Filter plugin about that node alone: plugins with a
        # per-node form read its NodeInfo, the others (vectorized only) its table row.
        self._trials_need_rows = any(not has_per_node_filter(p) for p in self.filter_plugins)
        #: Node name -> its last verdict with its nominated pods counted.
        self._with_nominated: dict[str, _Verdict] = {}
        #: PreFilter plugins whose state follows pods added to or removed from a node.
        self._pre_filter_extended = [
            p.name
            for p in self.pre_filter_plugins
            if type(p).add_pod is not PreFilterPlugin.add_pod
            or type(p).remove_pod is not PreFilterPlugin.remove_pod
        ]
        self._equivalence = EquivalenceCache(snapshot)
        #: The first Filter plugins' verdicts, kept by what they read of the pod (FilterPlan's
        #: ``narrowed``), apart so that they do not push whole shapes out.
        self._narrowed = EquivalenceCache(snapshot)
        self._filter_plans = _Plans(self._make_filter_plan)
        self._score_plans = _Plans(self._make_score_plan)

    def _make_filter_plan(self, skip: frozenset[str]) -> FilterPlan:
        return FilterPlan([p for p in self.filter_plugins if p.name not in skip], self._metrics)

    def _make_score_plan(self, skip: frozenset[str]) -> ScorePlan:
        plugins = [p for p in self.score_plugins if p.name not in skip]
        weights = [self.score_weights[p.name] for p in plugins]
        return ScorePlan(plugins, weights, self._metrics)

    def _of(self, kind: type[P], point: str) -> list[P]:
        out = []
        for e in self._points.get(point, []):
            assert isinstance(e.plugin, kind)
            out.append(e.plugin)
        return out

    # -- Handle --------------------------------------------------------------------------------

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    @property
    def client(self) -> APIClient | None:
        return self._client

    @property
    def rng(self) -> random.Random:
        return self._rng

    @property
    def event_recorder(self) -> EventRecorder | None:
        return self._recorder

    def waiting_pods(self) -> Iterable[_WaitingPod]:
        return list(self._waiting.values())

    def get_waiting_pod(self, uid: str) -> _WaitingPod | None:
        return self._waiting.get(uid)

    def list_objects(self, kind: type[T]) -> list[T]:
        """From the lister registered for ``kind``, else from the snapshot's object store."""
        lister = self._listers.get(kind)
        if lister is None:
            return list(self._snapshot.objects.list(kind))
        return list(lister())

    def nominations_stamp(self, node_name: str) -> Hashable:
        return None if self._nominator is None else self._nominator.nominations_stamp(node_name)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        if self._nominator is None:
            return []
        return self._nominator.nominated_pods_for_node(node_name)

    def nominated_nodes(self) -> Iterable[str]:
        return () if self._nominator is None else self._nominator.nominated_nodes()

    def activate(self, pods: Iterable[Pod]) -> None:
        if self._activator is not None:
            self._activator.activate(pods)

    def trial(self, node_name: str) -> AbstractContextManager[NodeTrial]:
        return self._snapshot.trial(node_name, rows=self._trials_need_rows)

    def node_verdict_key(self, state: CycleState, pod: Pod) -> Hashable | None:
        if not self._nodes_judged_apart(state):
            return None
        return shape_key(state, pod, self._filter_plans.of(state.skip_filter_plugins))

    async def preempt_pod(self, preemptor: Pod, victim: Pod, node: str, plugin: str) -> None:
        """``PreemptPod``: a victim waiting at Permit is rejected; any other is evicted by the
        front end. Without an evictor (``simulate``) nothing is written."""
        waiting = self._waiting.get(victim.metadata.uid)
        if waiting is not None:
            waiting.reject(plugin, "preempted")
        elif self._evictor is not None:
            if not await self._evictor.evict(victim, preemptor):
                return
        else:
            log.debug("no evictor: victim %s of %s left in place", victim.key, preemptor.key)
            return
        if self._evictor is not None:
            self._evictor.preempted(victim, preemptor, node, self.profile_name)

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        if self._evictor is not None:
            await self._evictor.clear_nominated_node_name(pod)

    # -- what the front end plugs in -------------------------------------------------------------

    def set_pod_nominator(self, nominator: PodNominator | None) -> None:
        """Where nominated pods are kept (the scheduling queue): Filter then counts the ones of
        equal or higher priority on their node, as kube-scheduler does."""
        self._nominator = nominator

    def set_pod_activator(self, activator: PodActivator | None) -> None:
        self._activator = activator

    def set_evictor(self, evictor: PodEvictor | None) -> None:
        """How preemption victims are evicted and nominations cleared on the cluster."""
        self._evictor = evictor

    def set_event_recorder(self, recorder: EventRecorder | None) -> None:
        """Where plugins' events about pods go (:attr:`event_recorder`)."""
        self._recorder = recorder

    def watched_kinds(self) -> list[WatchedKind]:
        """The API kinds this profile's plugins read from the object store; the front end
        feeds them."""
        return watched_kinds(self._instances.values())

    def plugins(self) -> list[Plugin]:
        """Every plugin of the profile, once each."""
        return list(self._instances.values())

    def prepare(self) -> None:
        """:meth:`Plugin.prepare` on every plugin."""
        for plugin in self._instances.values():
            plugin.prepare()

    async def aclose(self) -> None:
        """:meth:`Plugin.aclose` on every plugin; one that fails is logged, the others still
        close."""
        for plugin in self._instances.values():
            try:
                await plugin.aclose()
            except Exception:
                log.exception("closing plugin %s failed", plugin.name)

    def register_lister(self, kind: type[T], lister: Callable[[], Iterable[T]]) -> None:
        """Serve :meth:`list_objects` for ``kind`` (an informer's store, a list in memory)."""
        self._listers[kind] = lister

    def plugin(self, name: str) -> Plugin | None:
        return self._instances.get(name)

    def plugins_by_point(self) -> dict[str, list[tuple[str, int]]]:
        """Extension point -> enabled ``(plugin, weight)``, for display."""
        return {p: [(e.plugin.name, e.weight) for e in es] for p, es in self._points.items()}

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Plugin name -> the cluster events that may make pods it rejected schedulable."""
        out = {}
        for name, plugin in self._instances.items():
            if isinstance(plugin, EnqueueExtensions):
                out[name] = plugin.events_to_register()
        return out

    def _observe(self, point: str, start: float, status: Status | None) -> None:
        if self._metrics is not None:
            code = Code.SUCCESS if status is None else status.code
            self._metrics.extension_point(
                point, code, self.profile_name, time.perf_counter() - start
            )

    # -- queueing ------------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: Pod, gating: str = "") -> Status | None:
        """PreEnqueue plugins in order, the one ``gating`` the pod so far first
        (``runPreEnqueuePlugins``): the first rejection."""
        first = self._pre_enqueue_by_name.get(gating) if gating else None
        if first is not None:
            s = first.pre_enqueue(pod)
            if s is not None and s.code != Code.SUCCESS:
                return s.with_plugin(first.name)
        for p in self.pre_enqueue_plugins:
            if p is first:
                continue
            s = p.pre_enqueue(pod)
            if s is not None and s.code != Code.SUCCESS:
                return s.with_plugin(p.name)
        return None

    def gate_keys(self, pod: Pod, plugin: str) -> frozenset[Hashable] | None:
        """``plugin``'s :meth:`PreEnqueuePlugin.gate_keys` for a pod it gates."""
        gating = self._pre_enqueue_by_name.get(plugin)
        keys = None if gating is None else gating.gate_keys(pod)
        return None if keys is None else frozenset(keys)

    def held_pods(self, plugin: str) -> Container[str] | None:
        """``plugin``'s :meth:`PreEnqueuePlugin.held_pods`."""
        gating = self._pre_enqueue_by_name.get(plugin)
        return None if gating is None else gating.held_pods()

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort.less(a, b)

    @property
    def sort_key(self) -> SortKeyFn | None:
        """The QueueSort plugin's order as a key, if it has one (``QueueSortPlugin.sort_key``)."""
        return self.queue_sort.sort_key

    # -- scheduling cycle ------------------------------------------------------------------------

    def all_nodes(self) -> Nodes:
        return Nodes(self._snapshot, self._snapshot.present_slots())

    def run_pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """PreFilter plugins in order (``RunPreFilterPlugins``).

        Returns the merged node narrowing, the status, and the plugins that narrowed. An
        UnschedulableAndUnresolvable rejection stops at once; an Unschedulable one lets the other
        PreFilters run, since preemption will need their state.
        """
        start = time.perf_counter()
        result: PreFilterResult | None = None
        narrowed_by: list[str] = []
        status: Status | None = None
        cycle_only = self._cycle_only_plugins
        for p in self.pre_filter_plugins:
            written = state.count()
            r, s = p.pre_filter(state, pod, nodes)
            if p.name in cycle_only:
                state.scheduling_cycle_only(state.keys_since(written))
            if s is not None and s.code == Code.SKIP:
                state.skip_filter_plugins.add(p.name)
                continue
            if s is not None and s.code != Code.SUCCESS:
                s = s.with_plugin(p.name)
                if s.code == Code.UNSCHEDULABLE:
                    status = s
                    continue
                if s.code != Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    s = s.wrapped(f"running PreFilter plugin {go_quote(p.name)}")
                self._observe("PreFilter", start, s)
                return None, s, []
            if r is not None and r.node_names is not None:
                narrowed_by.append(p.name)
                result = (result or PreFilterResult()).merge(r)
                if not result.node_names:
                    if len(narrowed_by) == 1:
                        msg = f"node(s) didn't satisfy plugin {narrowed_by[0]}"
                    else:
                        plugins = _go_list(sorted(narrowed_by))
                        msg = f"node(s) didn't satisfy plugin(s) {plugins} simultaneously"
                    status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
                    self._observe("PreFilter", start, status)
                    return result, status, narrowed_by
        self._observe("PreFilter", start, status)
        return result, status, narrowed_by

    def run_filter(self, state: CycleState, pod: Pod, nodes: Nodes, diagnosis: Diagnosis) -> Nodes:
        """Filter plugins over ``nodes``, vectorized (one node in the per-node forms); returns the
        feasible ones and fills ``diagnosis``.

        A node's status is that of the first plugin rejecting it, as kube-scheduler's per-node loop
        stops at the first failure. An Error status aborts the cycle (``FilterError``).
        """
        start = time.perf_counter()
        slots = nodes.slots
        if self._nominator is not None and len(slots):
            slots = self._filter_nodes_with_nominated_pods(state, pod, slots, diagnosis)
        calls = self._filter_plans.of(state.skip_filter_plugins).calls(state)
        try:
            if len(slots) == 1:
                # One node (a DaemonSet's pod names it; a nominated node): the per-node forms
                # cost less than numpy's calls, with the same verdicts (and a plugin without
                # one is asked once, as vectorized).
                per_node = PerNode(self._snapshot, slots.tolist())
                rejected_one = filter_in_order(state, pod, calls, per_node)
                rejected = [(np.array([r], dtype=np.int64), st) for r, st in rejected_one]
                remaining = np.array(per_node.remaining, dtype=np.int64)
            else:
                form = Vectorized(self._snapshot, slots)
                rejected = filter_in_order(state, pod, calls, form)
                remaining = form.remaining
        except FilterError as e:
            status = _filter_error(e)
            self._observe("Filter", start, status)
            raise FilterError(e.plugin, status) from e
        for failed, status in rejected:
            diagnosis.add(NodeGroup(failed, status))
        self._observe("Filter", start, None)
        return Nodes(self._snapshot, remaining)

    def _filter_nodes_with_nominated_pods(
        self, state: CycleState, pod: Pod, slots: IntArray, diagnosis: Diagnosis
    ) -> IntArray:
        """The first of kube-scheduler's two Filter passes, on the nodes where pods of equal or
        higher priority are nominated: with those pods counted. Nodes failing it get its status
        and leave ``slots``; the others go on to the ordinary pass (without them)."""
        assert self._nominator is not None
        names = self._nominator.nominated_nodes()
        if not names:
            return slots
        # A table of the candidate slots: cheaper than a set of them at thousands of nodes,
        # read through bytes (a numpy scalar read costs several times a bytes index).
        among = np.zeros(len(self._snapshot.table.present), dtype=bool)
        among[slots] = True
        candidate = among.tobytes()
        nominator = self._nominator
        key = self.node_verdict_key(state, pod)
        priority, uid = _priority(pod), pod.metadata.uid
        kept_verdicts = self._with_nominated
        counted = self._snapshot.node_of_pod

        def keepable(uids: tuple[str, ...]) -> bool:
            # A verdict stands by its nominated pods' UIDs only while none of them is the pod
            # judged or counted on a node (``_Verdict``).
            return uid not in uids and not any(map(counted, uids))

        verdicts: list[tuple[NodeInfo, Status | None]] = []
        work: list[_NominatedWork] = []
        node_info = self._snapshot.get
        for name in names:
            info = node_info(name)
            if info is None or not candidate[info.slot]:
                continue
            stamp = nominator.nominations_stamp(name)
            kept = kept_verdicts.get(name) if key is not None else None
            if (
                kept is not None
                and kept.key == key
                and kept.priority == priority
                and kept.stamp == stamp
                and keepable(kept.uids)
                and kept.node.holds(info)
            ):
                verdicts.append((info, kept.status))
                continue
            every = nominator.nominated_pods_for_node(name)
            nominated = self._ge_nominated(pod, every)
            if nominated:
                uids = tuple(pi.uid for pi in every)
                work.append((info, nominated, (stamp, uids) if keepable(uids) else None))
        if key is None:
            verdicts += [
                (info, self._run_filter_plugins_with(state, pod, info, nominated))
                for info, nominated, _ in work
            ]
        elif work:
            verdicts += self._with_nominated_verdicts(state, pod, key, work)
        # Grouped by object, then the objects by value: kept verdicts of nodes judged in
        # different passes are equal statuses in distinct objects, and one group per node would
        # cost each cycle (a Status hashes in Python, its id in C).
        by_object: dict[int, tuple[Status, list[int]]] = {}
        error = Code.ERROR  # read once: an Enum member through its class is slow on Python 3.11
        for info, status in verdicts:
            if status is None:
                continue
            group = by_object.get(id(status))
            if group is None:
                if status.code == error:
                    raise FilterError(status.plugin, status)
                group = by_object[id(status)] = (status, [])
            group[1].append(info.slot)
        if not by_object:
            return slots
        by_status: dict[Status, list[int]] = {}
        for status, failed in by_object.values():
            by_status.setdefault(status, []).extend(failed)
        for status, failed in by_status.items():
            diagnosis.add(NodeGroup(np.array(failed, dtype=np.int64), status))
            among[failed] = False
        return slots[among[slots]]

    def _nodes_judged_apart(self, state: CycleState) -> bool:
        """Whether what-if changes of several nodes can be judged in one pass: every active
        Filter plugin is node-local and no active PreFilter plugin follows added or removed
        pods in its state, so one node's change cannot reach another node's verdict."""
        if not self._filter_plans.of(state.skip_filter_plugins).local:
            return False
        skip = state.skip_filter_plugins
        return all(name in skip for name in self._pre_filter_extended)

    def _with_nominated_verdicts(
        self,
        state: CycleState,
        pod: Pod,
        key: Hashable,
        work: Sequence[_NominatedWork],
    ) -> list[tuple[NodeInfo, Status | None]]:
        """Each node's verdict with its nominated pods counted, given :meth:`node_verdict_key`,
        judged one by one when the nodes are few, else in one vectorized pass, and kept (see
        ``_Verdict``: nominated pods stay for many cycles while their victims go)."""
        kept_verdicts = self._with_nominated
        if len(kept_verdicts) > 2 * len(self._snapshot):
            kept_verdicts.clear()
        if len(work) <= PER_NODE_AT_MOST:
            verdicts = {
                info.slot: self._run_filter_plugins_with(state, pod, info, nominated)
                for info, nominated, _ in work
            }
        else:
            plugins = self._filter_plans.of(state.skip_filter_plugins).calls(state)
            try:
                verdicts = self._vectorized_verdicts(state, pod, plugins, [w[:2] for w in work])
            except FilterError as e:
                raise FilterError(e.plugin, _filter_error(e)) from e
        priority = _priority(pod)
        out: list[tuple[NodeInfo, Status | None]] = []
        error = Code.ERROR  # read once: an Enum member through its class is slow on Python 3.11
        for info, _, kept_by in work:
            status = verdicts.get(info.slot)
            if kept_by is not None and (status is None or status.code != error):
                stamp, uids = kept_by
                kept_verdicts[info.name] = _Verdict(
                    key, NodeContent.of(info), priority, stamp, uids, status
                )
            out.append((info, status))
        return out

    def _ge_nominated_pods(self, pod: Pod, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name`` with at least ``pod``'s priority, ``pod`` itself
        and pods already counted on some node (assumed or bound meanwhile) left out."""
        if self._nominator is None:
            return []
        return self._ge_nominated(pod, self._nominator.nominated_pods_for_node(node_name))

    def _ge_nominated(self, pod: Pod, nominated: Iterable[PodInfo]) -> list[PodInfo]:
        """Of ``nominated``, what :meth:`_ge_nominated_pods` counts."""
        priority = _priority(pod)
        uid = pod.metadata.uid
        return [
            pi
            for pi in nominated
            if pi.uid != uid
            and _priority(pi.pod) >= priority
            and self._snapshot.node_of_pod(pi.uid) is None
        ]

    def _run_filter_plugins_with(
        self, state: CycleState, pod: Pod, node: NodeInfo, nominated: Sequence[PodInfo]
    ) -> Status | None:
        """Filter on ``node`` with ``nominated`` counted there (``addGENominatedPods``)."""
        state_out = state.clone()
        with self.trial(node.name) as trial:
            for pi in nominated:
                trial.add_pod(pi)
                s = self.run_pre_filter_extension_add_pod(state_out, pod, pi, node)
                if s is not None:
                    return s
            return self.run_filter_plugins(state_out, pod, node)

    def run_filter_plugins(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """``RunFilterPlugins`` on one node as the snapshot holds it now: the first rejecting
        plugin's status, or an Error status."""
        plugins = self._filter_plans.of(state.skip_filter_plugins).calls(state)
        try:
            rejected = filter_in_order(state, pod, plugins, PerNode(self._snapshot, [node.slot]))
        except FilterError as e:
            return _filter_error(e)
        return rejected[0][1] if rejected else None

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, node: NodeInfo
    ) -> Status | None:
        """``RunFilterPluginsWithNominatedPods``: Filter on one node twice when pods of equal or
        higher priority are nominated there, with them counted and, if that passes, without
        (so that neither resources nor pod affinity are judged optimistically)."""
        nominated = self._ge_nominated_pods(pod, node.name)
        if nominated:
            status = self._run_filter_plugins_with(state, pod, node, nominated)
            if status is not None:
                return status
        return self.run_filter_plugins(state, pod, node)

    def run_filter_plugins_with_nominated_pods_together(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> list[Status | None]:
        if len(nodes) <= PER_NODE_AT_MOST or not self._nodes_judged_apart(state):
            return [self.run_filter_plugins_with_nominated_pods(state, pod, n) for n in nodes]
        # Both passes as run_filter_plugins_with_nominated_pods makes them, each over all the
        # nodes it concerns at once: the nodes cannot affect each other's verdicts.
        plugins = self._filter_plans.of(state.skip_filter_plugins).calls(state)
        work = [(n, ge) for n in nodes if (ge := self._ge_nominated_pods(pod, n.name))]
        try:
            verdicts = self._vectorized_verdicts(state, pod, plugins, work) if work else {}
            rest = [(n, ()) for n in nodes if n.slot not in verdicts]
            if rest:
                verdicts.update(self._vectorized_verdicts(state, pod, plugins, rest))
        except FilterError:
            # An Error is each node's own status: judged one by one, as without this pass.
            return [self.run_filter_plugins_with_nominated_pods(state, pod, n) for n in nodes]
        return [verdicts.get(n.slot) for n in nodes]

    def _vectorized_verdicts(
        self,
        state: CycleState,
        pod: Pod,
        plugins: Sequence[FilterCalls],
        work: Sequence[tuple[NodeInfo, Sequence[PodInfo]]],
    ) -> dict[int, Status | None]:
        """One vectorized Filter pass over the nodes of ``work``, each with its pods there
        counted too: the rejected nodes' statuses by slot."""
        adding = [(n, pods) for n, pods in work if pods]
        with self._snapshot.trials(n for n, _ in adding) as trials:
            for trial, (_, pods) in zip(trials, adding, strict=True):
                for pi in pods:
                    trial.add_pod(pi)
            slots = np.array(sorted(n.slot for n, _ in work), dtype=np.int64)
            rejected = filter_in_order(state, pod, plugins, Vectorized(self._snapshot, slots))
        return {slot: status for failed, status in rejected for slot in failed.tolist()}

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        """PreFilterExtensions ``AddPod`` of every PreFilter plugin not skipped."""
        return self._run_pre_filter_extension(
            state, "AddPod", lambda p: p.add_pod(state, pod, to_add, node)
        )

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        """PreFilterExtensions ``RemovePod`` of every PreFilter plugin not skipped."""
        return self._run_pre_filter_extension(
            state, "RemovePod", lambda p: p.remove_pod(state, pod, to_remove, node)
        )

    def _run_pre_filter_extension(
        self, state: CycleState, name: str, call: Callable[[PreFilterPlugin], Status | None]
    ) -> Status | None:
        for p in self.pre_filter_plugins:
            if p.name in state.skip_filter_plugins:
                continue
            s = call(p)
            if s is not None and s.code != Code.SUCCESS:
                return s.wrapped(f"running {name} on PreFilter plugin {go_quote(p.name)}", p.name)
        return None

    def run_post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        """PostFilter plugins until one succeeds (``RunPostFilterPlugins``).

        The nominated node is ``None`` to leave the pod's nomination as it is, ``""`` to clear
        it, or a node name. A success, an UnschedulableAndUnresolvable or an Error status ends the
        run; Unschedulable ones are merged (their reasons, the first plugin, the last nomination
        that was not ``None``).
        """
        start = time.perf_counter()
        nominated: str | None = None
        reasons: list[str] = []
        rejector = ""
        status: Status | None = None
        for p in self.post_filter_plugins:
            try:
                node, s = p.post_filter(state, pod, filtered)
            except Exception as e:
                node, s = None, _raised("PostFilter", p.name, pod, e)
            if s is None or s.code == Code.SUCCESS:
                self._observe("PostFilter", start, s)
                return node, s
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                self._observe("PostFilter", start, s)
                return node, s.with_plugin(p.name)
            if not s.is_rejected():
                status = Status(Code.ERROR, s.message, plugin=p.name, error=s.error)
                self._observe("PostFilter", start, status)
                return None, status
            if node is not None:
                nominated = node
            reasons.extend(s.reasons)
            rejector = rejector or p.name
        if rejector:
            status = Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)
        self._observe("PostFilter", start, status)
        return nominated, status

    def run_pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        start = time.perf_counter()
        status = None
        cycle_only = self._cycle_only_plugins
        for p in self.pre_score_plugins:
            written = state.count()
            s = p.pre_score(state, pod, nodes)
            if p.name in cycle_only:
                state.scheduling_cycle_only(state.keys_since(written))
            if s is not None and s.code == Code.SKIP:
                state.skip_score_plugins.add(p.name)
                continue
            if s is not None and s.code != Code.SUCCESS:
                status = s.wrapped(f"running PreScore plugin {go_quote(p.name)}", p.name)
                break
        self._observe("PreScore", start, status)
        return status

    def run_score(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[dict[str, IntArray], IntArray]:
        """Score, NormalizeScore and weight: per-plugin weighted scores and their sum."""
        start = time.perf_counter()
        plan = self._score_plans.of(state.skip_score_plugins)
        form = Fresh(plan, nodes)
        score_in_order(state, pod, plan.calls(state), form)
        self._observe("Score", start, None)
        return form.per_plugin, form.total

    def num_feasible_nodes_to_find(self, num_all_nodes: int) -> int:
        """``numFeasibleNodesToFind`` when percentageOfNodesToScore is set to 1..99; else all.

        kube-scheduler reads 0 (the default) as an adaptive share (50% minus 1% per 125 nodes, at
        least 5%, at least 100 nodes). kubesched reads it as every node instead: filtering and
        scoring all nodes is cheap here and places pods better. The two agree up to 100 nodes.
        """
        pct = self.percentage_of_nodes_to_score
        if pct is None or pct <= 0 or pct >= 100 or num_all_nodes < 100:
            return num_all_nodes
        return max(100, num_all_nodes * pct // 100)

    def find_nodes_that_fit(self, state: CycleState, pod: Pod) -> tuple[Nodes, Diagnosis]:
        """PreFilter, then Filter (``findNodesThatFitPod``): feasible nodes, why others fail."""
        feasible, diagnosis, _ = self._find_nodes_that_fit(state, pod)
        return feasible, diagnosis

    def _find_nodes_that_fit(
        self, state: CycleState, pod: Pod
    ) -> tuple[Nodes, Diagnosis, Filtered | None]:
        """:meth:`find_nodes_that_fit`, and the pod shape's cache entry when Filter came from
        there (Score may then too)."""
        all_nodes = self.all_nodes()
        diagnosis = Diagnosis(num_all_nodes=len(all_nodes))
        result, status, narrowed_by = self.run_pre_filter(state, pod, all_nodes)
        diagnosis.unschedulable_plugins.update(narrowed_by)
        if status is not None:
            if status.code == Code.ERROR:
                raise FilterError(status.plugin, status)
            diagnosis.pre_filter_msg = status.message
            diagnosis.add(NodeGroup(all_nodes.slots, status))
            return Nodes(self._snapshot, all_nodes.slots[:0]), diagnosis, None
        feasible = self._evaluate_nominated_node(state, pod, len(all_nodes))
        if feasible is not None:
            return feasible, diagnosis, None
        if (result is None or result.node_names is None) and self._may_use_cache(len(all_nodes)):
            cached = self._cached_filter(state, pod, diagnosis)
            if cached is not None:
                return cached[0], diagnosis, cached[1]
        candidates = all_nodes
        if result is not None and result.node_names is not None:
            # As kube-scheduler, look up the few names (a DaemonSet pod names one node) rather
            # than walk every node: names of no node are dropped.
            candidates = Nodes(self._snapshot, self._slots_named(result.node_names))
            if len(candidates) < len(all_nodes):
                absent = Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    f"node(s) didn't satisfy plugin(s) {_go_list(sorted(narrowed_by))}",
                )
                kept = np.searchsorted(all_nodes.slots, candidates.slots)
                diagnosis.add(NodeGroup(np.delete(all_nodes.slots, kept), absent))
        want = self.num_feasible_nodes_to_find(len(candidates))
        if want < len(candidates):
            candidates = self._sampled(state, pod, candidates, want, diagnosis)
            return candidates, diagnosis, None
        return self.run_filter(state, pod, candidates, diagnosis), diagnosis, None

    def _slots_named(self, names: Iterable[str]) -> IntArray:
        """The slots of the nodes (with a Node object) among ``names``, ascending as
        :meth:`all_nodes`."""
        slots = [s for s in map(self._snapshot.slot_of, names) if s is not None]
        return np.array(sorted(slots), dtype=np.int64)

    def _may_use_cache(self, num_nodes: int) -> bool:
        """Whether Filter may come from the per-shape cache: every node is a candidate (no
        sampling). Pods nominated to nodes are counted in by the first pass on those nodes
        alone (:meth:`_nominated_first`); the kept verdicts are the second pass's."""
        return self.num_feasible_nodes_to_find(num_nodes) >= num_nodes

    def _nominated_first(
        self, state: CycleState, pod: Pod, feasible: IntArray, groups: list[NodeGroup]
    ) -> tuple[IntArray, list[NodeGroup]]:
        """kube-scheduler's first Filter pass (nominated pods counted) on the nodes it applies
        to, over kept verdicts of the second (``feasible``, ``groups``): a node failing it
        gets its status instead and leaves the feasible nodes. ``feasible`` is returned as
        given when none of its nodes failed (Score may then come from the cache too)."""
        if self._nominator is None or not self._nominator.nominated_nodes():
            return feasible, groups
        first = Diagnosis()
        self._filter_nodes_with_nominated_pods(state, pod, self.all_nodes().slots, first)
        if not first.groups:
            return feasible, groups
        failed = np.zeros(len(self._snapshot.table.present), dtype=bool)
        for g in first.groups:
            failed[g.slots] = True
        second = [
            NodeGroup(rest, g.status) for g in groups if len(rest := g.slots[~failed[g.slots]])
        ]
        passed = ~failed[feasible]
        return (feasible if passed.all() else feasible[passed]), [*first.groups, *second]

    def _cached_filter(
        self, state: CycleState, pod: Pod, diagnosis: Diagnosis
    ) -> tuple[Nodes, Filtered | None] | None:
        """Filter from the per-shape cache, when the active Filter plugins are node-local, or
        the first of them are (the rest then run on the nodes those pass): the feasible nodes,
        and the cache entry when Score may come from there too (the entry's feasible nodes are
        the cycle's)."""
        start = time.perf_counter()
        plan = self._filter_plans.of(state.skip_filter_plugins)
        rest: list[FilterCalls] = []
        if not plan.local:
            if plan.split is None:
                return None
            plan, others = plan.split
            rest = list(others.calls(state))
        entry = self._equivalence.filter(state, pod, plan)
        scorable = True
        if entry is None and plan.narrowed is not None:
            # A shape not kept (yet): its first plugins' verdicts may be, by what they read.
            head, tail = plan.narrowed
            entry = self._narrowed.filter(state, pod, head)
            rest[:0] = tail.calls(state)
            scorable = False
        if entry is None:
            return None
        assert entry.feasible is not None
        feasible, groups = self._nominated_first(state, pod, entry.feasible, entry.groups)
        rejected: list[tuple[IntArray, Status]] = []
        if rest:
            form = Vectorized(self._snapshot, feasible)
            try:
                rejected = filter_in_order(state, pod, rest, form)
            except FilterError:
                # The ordinary path reports it, as it always does.
                return None
            feasible = form.remaining
        for g in groups:
            diagnosis.add(g)
        for failed, status in rejected:
            diagnosis.add(NodeGroup(failed, status))
        self._observe("Filter", start, None)
        # Score may come from the entry when it is kept by the pod's whole shape (an entry kept
        # by less of it holds scores of other pods) and its feasible nodes are the cycle's, or
        # some of them (the others failed with nominated pods counted).
        keep = scorable and not rest
        return Nodes(self._snapshot, feasible), entry if keep else None

    def _cached_score(
        self, state: CycleState, pod: Pod, entry: Filtered, feasible: IntArray, plugin_scores: bool
    ) -> tuple[dict[str, IntArray], IntArray, int] | None:
        """Score from the per-shape cache, when every active Score plugin is node-local, or
        some are (the others are then asked, and their scores added): the scores, their sums,
        and the slot of the node picked. ``feasible`` is the entry's feasible nodes or some of
        them (:meth:`_nominated_first`); on some, every plugin must be node-local."""
        start = time.perf_counter()
        plan = self._score_plans.of(state.skip_score_plugins)
        if feasible is not entry.feasible:
            some = self._equivalence.score(state, pod, entry, plan, self._rng, within=feasible)
            if some is None:
                return None
            self._observe("Score", start, None)
            return some[0], some[1], self._pick(feasible, some[1])
        if plan.local:
            out = self._equivalence.score(
                state, pod, entry, plan, self._rng, plugin_scores=plugin_scores
            )
            if out is not None:
                self._observe("Score", start, None)
            return out
        if plan.split is None:
            return None
        local, other = plan.split
        kept = self._equivalence.score(
            state, pod, entry, local, self._rng, plugin_scores=plugin_scores, pick=False
        )
        if kept is None:
            return None
        assert entry.feasible is not None
        feasible = entry.feasible
        fresh = Fresh(other, Nodes(self._snapshot, feasible))
        try:
            score_in_order(state, pod, other.calls(state), fresh)
        except ScoreError:
            # The ordinary path reports it, as it always does.
            return None
        per_local, local_totals, _ = kept
        totals: IntArray = local_totals + fresh.total
        per_plugin = (
            {
                p.name: per_local[p.name] if p.name in per_local else fresh.per_plugin[p.name]
                for p in plan.plugins
            }
            if plugin_scores
            else {}
        )
        self._observe("Score", start, None)
        return per_plugin, totals, self._pick(feasible, totals)

    def _pick(self, feasible: IntArray, totals: IntArray) -> int:
        """``selectHost``: the slot of a node with the top total, drawn among equals."""
        # argmax finds the top score in a fraction of max's time; the ties are all nodes with it.
        best = (totals == totals[totals.argmax()]).nonzero()[0]
        pick = int(best[self._rng.randrange(len(best))]) if len(best) > 1 else int(best[0])
        return int(feasible[pick])

    def _evaluate_nominated_node(self, state: CycleState, pod: Pod, num_all: int) -> Nodes | None:
        """``evaluateNominatedNode``: a pod that preemption nominated to a node tries that node
        first (it is likely the only one with room); the node, if it passes Filter."""
        name = pod.status.nominated_node_name
        info = self._snapshot.get(name) if name else None
        if info is None:
            return None
        one = Nodes(self._snapshot, np.array([info.slot], dtype=np.int64))
        try:
            feasible = self.run_filter(state, pod, one, Diagnosis(num_all_nodes=num_all))
        except FilterError as e:
            log.error("evaluation failed on nominated node %s for pod %s: %s", name, pod.key, e)
            return None
        return feasible if len(feasible) else None

    def _sampled(
        self, state: CycleState, pod: Pod, candidates: Nodes, want: int, diagnosis: Diagnosis
    ) -> Nodes:
        # kube-scheduler walks nodes from a rotating start index and stops once it has found
        # `want` feasible ones; the next pod starts where this one stopped.
        n = len(candidates)
        order = np.roll(candidates.slots, -(self._next_start % n))
        feasible = self.run_filter(state, pod, Nodes(self._snapshot, order), diagnosis)
        if len(feasible) > want:
            last = feasible.slots[want - 1]
            processed = int(np.flatnonzero(order == last)[0]) + 1
            diagnosis.groups = [
                NodeGroup(g.slots[np.isin(g.slots, order[:processed])], g.status)
                for g in diagnosis.groups
            ]
            diagnosis.groups = [g for g in diagnosis.groups if len(g.slots)]
            feasible = Nodes(self._snapshot, feasible.slots[:want])
            self._next_start = (self._next_start + processed) % n
        else:
            self._next_start = (self._next_start + n) % n
        return feasible

    def schedule_pod(
        self, state: CycleState, pod: Pod, *, plugin_scores: bool = True
    ) -> ScheduleResult:
        """kube-scheduler's ``schedulePod``: where ``pod`` should go.

        ``plugin_scores=False`` leaves out each plugin's scores where they would cost a copy
        (only their sum decides), and the result's ``totals`` are then valid until the next
        cycle only.

        Raises :class:`NoNodesAvailableError` when the cluster has no nodes, :class:`FitError`
        when no node fits, :class:`FilterError`/:class:`ScoreError` on a plugin error.
        """
        if len(self._snapshot) == 0:
            raise NoNodesAvailableError
        feasible, diagnosis, entry = self._find_nodes_that_fit(state, pod)
        if not len(feasible):
            raise FitError(pod, diagnosis)
        evaluated = len(feasible) + diagnosis.rejected_count()
        if len(feasible) == 1:
            return ScheduleResult(
                suggested_host=feasible.names()[0],
                evaluated_nodes=evaluated,
                feasible_nodes=1,
                feasible_slots=feasible.slots,
                plugin_scores={},
                totals=np.zeros(1, dtype=np.int64),
                diagnosis=diagnosis,
            )
        status = self.run_pre_score(state, pod, feasible)
        if status is not None:
            raise ScoreError(status.plugin, status)
        scored = (
            None
            if entry is None
            else self._cached_score(state, pod, entry, feasible.slots, plugin_scores)
        )
        if scored is not None:
            per_plugin, totals, slot = scored
        else:
            per_plugin, totals = self.run_score(state, pod, feasible)
            slot = self._pick(feasible.slots, totals)
        return ScheduleResult(
            suggested_host=self._snapshot.table.names[slot],
            evaluated_nodes=evaluated,
            feasible_nodes=len(feasible),
            feasible_slots=feasible.slots,
            plugin_scores=per_plugin,
            totals=totals,
            diagnosis=diagnosis,
        )

    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        start = time.perf_counter()
        status = None
        for p in self.reserve_plugins:
            try:
                s = p.reserve(state, pod, node_name)
            except Exception as e:
                s = _raised("Reserve", p.name, pod, e)
            if s is not None and s.code != Code.SUCCESS:
                status = _plugin_failure(s, "Reserve", p.name)
                break
        self._observe("Reserve", start, status)
        return status

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Unreserve in reverse order, as kube-scheduler does; one that raises is logged, the
        others still run (the pod must still be forgotten and requeued)."""
        for p in reversed(self.reserve_plugins):
            try:
                p.unreserve(state, pod, node_name)
            except Exception as e:
                _raised("Unreserve", p.name, pod, e)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Permit plugins; a Wait registers the pod as waiting and returns a Wait status."""
        start = time.perf_counter()
        waits: dict[str, float] = {}
        status: Status | None = None
        for p in self.permit_plugins:
            try:
                s, timeout = p.permit(state, pod, node_name)
            except Exception as e:
                s, timeout = _raised("Permit", p.name, pod, e), 0.0
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.code == Code.WAIT:
                waits[p.name] = min(timeout, MAX_PERMIT_WAIT)
                continue
            status = _plugin_failure(s, "Permit", p.name)
            break
        if status is None and waits:
            self._waiting[pod.metadata.uid] = _WaitingPod(pod, waits)
            status = Status(Code.WAIT, "one or more plugins asked to wait")
        self._observe("Permit", start, status)
        return status

    async def wait_on_permit(self, pod: Pod) -> Status | None:
        """Block the binding cycle until every waiting Permit plugin allows the pod."""
        waiting = self._waiting.get(pod.metadata.uid)
        if waiting is None:
            return None
        try:
            return await waiting.future
        finally:
            self._waiting.pop(pod.metadata.uid, None)

    def reject_waiting_pod(self, uid: str, message: str) -> bool:
        w = self._waiting.get(uid)
        if w is None:
            return False
        w.reject("", message)
        return True

    # -- binding cycle ---------------------------------------------------------------------------

    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.pre_bind_plugins:
            try:
                s = await p.pre_bind(state, pod, node_name)
            except Exception as e:
                s = _raised("PreBind", p.name, pod, e)
            if s is not None and s.code not in (Code.SUCCESS, Code.SKIP):
                return _plugin_failure(s, "PreBind", p.name)
        return None

    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.bind_plugins:
            try:
                s = await p.bind(state, pod, node_name)
            except Exception as e:
                s = _raised("Bind", p.name, pod, e)
            if s is not None and s.code == Code.SKIP:
                continue
            if s is None or s.code == Code.SUCCESS:
                return None
            return _plugin_failure(s, "Bind", p.name)
        return Status(Code.ERROR, "no bind plugin bound the pod")

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.post_bind_plugins:
            try:
                p.post_bind(state, pod, node_name)
            except Exception as e:
                _raised("PostBind", p.name, pod, e)


def _raised(point: str, plugin: str, pod: Pod, e: Exception) -> Status:
    """A plugin that raised at ``point``: logged, and an Error status for it. A plugin's bug
    fails this pod's cycle (the pod is requeued) and never the scheduling loop, which
    kube-scheduler's plugins, returning errors, cannot stop either."""
    log.error("%s plugin %s failed for pod %s", point, plugin, pod.key, exc_info=e)
    return Status.raised(e, plugin)


def _plugin_failure(s: Status, point: str, plugin: str) -> Status:
    """A Reserve, Permit, PreBind or Bind plugin's failure as the framework's ``Run...Plugins``
    return it: a rejection as it is, an error wrapped with the point and plugin."""
    s = s.with_plugin(plugin)
    return s if s.is_rejected() else s.wrapped(f"running {point} plugin {go_quote(plugin)}")


def _priority(pod: Pod) -> int:
    """``corev1helpers.PodPriority``: ``spec.priority``, 0 when unset."""
    return pod.spec.priority if pod.spec.priority is not None else 0


def _go_list(items: Sequence[str]) -> str:
    """A string slice as Go's ``%v`` prints it: ``[a b]``."""
    return "[" + " ".join(items) + "]"


def _filter_error(e: FilterError) -> Status:
    """A Filter plugin's Error as ``RunFilterPlugins`` reports it, on either form of the loop."""
    return e.status.wrapped(f"running {go_quote(e.plugin)} filter plugin", e.plugin)
