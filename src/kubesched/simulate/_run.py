"""The simulation: ``kubesched run``'s scheduler, fed from memory and binding into memory.

Nothing here re-implements a scheduling cycle: the scheduler ``kubesched run`` builds runs with
the informers replaced by calls to its own event handlers and an in-memory API client whose
``bind`` reports the bound pod back as the pod informer would (PV and PVC writes go to the
snapshot's object store, :mod:`kubesched.simulate._storage`). Pods are tried one at a time, once
each, except after a preemption or a background fetch. The model: docs/simulate.md, "How pods
are scheduled".
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from kubesched.api import (
    NAMESPACE_NAME_LABEL,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    ResourceClaim,
)
from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import (
    CycleState,
    FitError,
    Framework,
    Registry,
    ScheduleResult,
    Snapshot,
    Status,
    build_frameworks,
)
from kubesched.scheduler import Scheduler, new_scheduler
from kubesched.simulate._input import Inputs, Issue
from kubesched.simulate._storage import MemoryStorage, feed

#: What is kept of each attempt: nothing more than the outcome, the feasible nodes too, or the
#: full per-node explanation.
Detail = Literal["outcome", "feasible", "explain"]

REASON_SCHEDULED = "Scheduled"
REASON_GATED = "SchedulingGated"
REASON_NOT_HANDLED = "NotHandled"
#: The key of a node that a PreFilter plugin's node list left out (the plugins are named in the
#: reason).
PRE_FILTER_RESULT = "PreFilterResult"
FILTER_OK = "ok"

#: Called after each attempt with (pods attempted, pods to attempt, seconds since the start).
Progress = Callable[[int, int, float], None]


@dataclass
class NodeExplanation:
    """Why one node was or was not chosen for one pod."""

    #: Filter plugins run on the node, in order: ``"ok"`` each, until the first rejecting one,
    #: which carries its reasons. Empty if the pod was rejected before Filter.
    filter: dict[str, str] = field(default_factory=dict)
    #: PreFilter plugin (or :data:`PRE_FILTER_RESULT`) -> reason, when the node was ruled out
    #: before Filter.
    pre_filter: dict[str, str] = field(default_factory=dict)
    #: Score plugin -> normalized score times its weight (feasible nodes, when scoring ran).
    scores: dict[str, int] = field(default_factory=dict)
    total: int | None = None

    @property
    def feasible(self) -> bool:
        return not self.pre_filter and all(v == FILTER_OK for v in self.filter.values())


@dataclass
class PodResult:
    """What became of one pod."""

    namespace: str
    name: str
    uid: str
    #: The node, or ``None``.
    node: str | None
    #: ``Scheduled``, ``Unschedulable``, ``SchedulerError``, ``SchedulingGated``, ``NotHandled``
    #: or ``Skipped``.
    reason: str
    #: The ``Scheduled`` event's note, the ``FailedScheduling`` message, or why the pod was not
    #: tried.
    message: str
    #: The schedulerName the pod asked for.
    scheduler_name: str
    #: 1-based position among the attempts, ``None`` if the pod was not tried.
    attempt: int | None = None
    #: Feasible nodes, in node order (with detail ``feasible`` or ``explain``).
    feasible_nodes: list[str] | None = None
    #: Whether Score ran: kube-scheduler skips it when exactly one node is feasible.
    scored: bool | None = None
    #: Per node, with detail ``explain``; nodes the cycle did not evaluate are absent.
    nodes: dict[str, NodeExplanation] | None = None
    #: The node preemption nominated after the pod's first attempt (then retried once).
    nominated_node: str | None = None
    #: The pods (``namespace/name``) evicted to make room for this one.
    victims: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class SimulationResult:
    pods: list[PodResult]
    num_nodes: int
    #: Pods already running (``spec.nodeName`` set in the input).
    num_running: int
    seconds: float
    issues: list[Issue] = field(default_factory=list)
    #: The ResourceClaims as the simulation left them (DynamicResources' allocations).
    resource_claims: list[ResourceClaim] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Pods per reason."""
        out: dict[str, int] = {}
        for p in self.pods:
            out[p.reason] = out.get(p.reason, 0) + 1
        return out


class _MemoryClient:
    """The frameworks' API client: a bind is recorded and the bound pod reported to the
    scheduler right away, as the pod informer would report the API server's update."""

    def __init__(self, storage: MemoryStorage) -> None:
        self.scheduler: Scheduler | None = None
        self.pods: dict[str, Pod] = {}
        self.bound: dict[str, str] = {}
        self.storage = storage

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pod = self.pods.get(uid)
        if pod is None:
            raise LookupError(f'pods "{name}" not found')
        if pod.spec.node_name:
            raise RuntimeError(f"pod {namespace}/{name} is already assigned to node {node!r}")
        bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
        self.pods[uid] = bound
        self.bound[uid] = node
        assert self.scheduler is not None
        self.scheduler.on_pod_update(pod, bound)

    async def patch_persistent_volume(
        self, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolume:
        return await self.storage.patch_persistent_volume(name, patch, status=status)

    async def patch_persistent_volume_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolumeClaim:
        return await self.storage.patch_persistent_volume_claim(
            namespace, name, patch, status=status
        )

    async def patch_resource_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> ResourceClaim:
        return await self.storage.patch_resource_claim(namespace, name, patch, status=status)

    async def get_resource_claim(self, namespace: str, name: str) -> ResourceClaim:
        return await self.storage.get_resource_claim(namespace, name)

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> ResourceClaim:
        return await self.storage.unreserve_resource_claim(namespace, name, claim_uid, pod_uid)

    def is_conflict(self, error: BaseException) -> bool:
        return self.storage.is_conflict(error)


@dataclass
class _Record:
    reason: str
    node: str | None
    message: str
    nominated_node: str | None = None


class _Recorder:
    """The scheduler's writer (the last event of each pod, in memory) and the frameworks'
    evictor (a victim is deleted from the simulated cluster at once)."""

    def __init__(self) -> None:
        self.records: dict[str, _Record] = {}
        self.scheduler: Scheduler | None = None
        #: Preemptor UID -> its victims (``namespace/name``).
        self.victims: dict[str, list[str]] = {}

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        assert self.scheduler is not None
        self.victims.setdefault(preemptor.metadata.uid, []).append(victim.key)
        self.scheduler.on_pod_delete(victim)
        return True

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        """Nothing to record beyond :meth:`evict`'s bookkeeping."""

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        """Nominations live in the queue only; there is no pod status to clear."""

    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        note = f"Successfully assigned {pod.metadata.namespace}/{pod.metadata.name} to {node}"
        self.records[pod.metadata.uid] = _Record(REASON_SCHEDULED, node, note)

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.records[pod.metadata.uid] = _Record(reason, None, message, nominated_node)


@runtime_checkable
class _EvictingPlugin(Protocol):
    """A PostFilter plugin that evicts in the background (DefaultPreemption)."""

    async def wait_for_evictions(self) -> None: ...


async def _evictions_done(frameworks: Mapping[str, Framework]) -> None:
    for fwk in frameworks.values():
        for plugin in fwk.post_filter_plugins:
            if isinstance(plugin, _EvictingPlugin):
                await plugin.wait_for_evictions()


@runtime_checkable
class _FetchingPlugin(Protocol):
    """A plugin that fetches what it needs in the background and activates the pods that wait
    for it (ImageCompatibility's registry lookups)."""

    async def settle(self) -> None: ...


async def _fetches_done(frameworks: Mapping[str, Framework]) -> bool:
    """Wait for the plugins' background fetches; whether any plugin fetches at all."""
    found = False
    for fwk in frameworks.values():
        for plugin in fwk.plugins():
            if isinstance(plugin, _FetchingPlugin):
                found = True
                await plugin.settle()
    return found


@dataclass
class _Evidence:
    feasible: list[str] | None = None
    scored: bool | None = None
    nodes: dict[str, NodeExplanation] | None = None


class _Observer:
    """Keeps, per attempt, what the framework computed (the scheduler's attempt observer)."""

    def __init__(self, detail: Detail) -> None:
        self.detail = detail
        self.evidence: dict[str, _Evidence] = {}

    def __call__(
        self, fwk: Framework, pod: Pod, state: CycleState, outcome: ScheduleResult | FitError
    ) -> None:
        if self.detail == "outcome":
            return
        names = fwk.snapshot.table.names
        ev = _Evidence()
        if isinstance(outcome, ScheduleResult):
            slots = outcome.feasible_slots.tolist()
            ev.feasible = [names[s] for s in slots]
            ev.scored = len(slots) > 1
        else:
            ev.feasible = []
        if self.detail == "explain":
            ev.nodes = explain_nodes(fwk, state, outcome)
        self.evidence[pod.metadata.uid] = ev


def explain_nodes(
    fwk: Framework, state: CycleState, outcome: ScheduleResult | FitError
) -> dict[str, NodeExplanation]:
    names = fwk.snapshot.table.names
    filters = [p.name for p in fwk.filter_plugins if p.name not in state.skip_filter_plugins]
    nodes: dict[str, NodeExplanation] = {}
    if isinstance(outcome, ScheduleResult):
        diagnosis = outcome.diagnosis
        scored = len(outcome.feasible_slots) > 1
        for i, slot in enumerate(outcome.feasible_slots.tolist()):
            scores = {p: int(a[i]) for p, a in outcome.plugin_scores.items()} if scored else {}
            nodes[names[slot]] = NodeExplanation(
                filter=dict.fromkeys(filters, FILTER_OK),
                scores=scores,
                total=int(outcome.totals[i]) if scored else None,
            )
    else:
        diagnosis = outcome.diagnosis
    for group in diagnosis.groups:
        status = group.status
        explanation = _rejected(status, filters, before_filter=bool(diagnosis.pre_filter_msg))
        for slot in group.slots.tolist():
            nodes[names[slot]] = explanation
    return dict(sorted(nodes.items()))


def _rejected(status: Status, filters: list[str], *, before_filter: bool) -> NodeExplanation:
    if before_filter or not status.plugin:
        return NodeExplanation(pre_filter={status.plugin or PRE_FILTER_RESULT: status.message})
    run = filters[: filters.index(status.plugin)] if status.plugin in filters else filters
    return NodeExplanation(filter={**dict.fromkeys(run, FILTER_OK), status.plugin: status.message})


class _OneAtATime(Scheduler):
    """The simulation's scheduler: it waits for each pod's binding right after its scheduling
    cycle, so a binding that need not wait at Permit runs then, in the simulation's own
    coroutine, instead of as a task (a turn of the event loop per pod, 4% of a run)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._next: list[Coroutine[Any, Any, None]] = []

    def _start_binding(
        self, uid: str, cycle: Coroutine[Any, Any, None], waiting_on_permit: bool
    ) -> None:
        if waiting_on_permit:
            super()._start_binding(uid, cycle, waiting_on_permit)
        else:
            self._next.append(cycle)

    async def drain(self) -> None:
        while self._next:
            await self._next.pop(0)
        await super().drain()


class Simulation:
    """``kubesched run``'s scheduler over ``inputs``: nodes and running pods added, pending pods
    queued. :meth:`run` gives each pending pod its attempt; before that, :attr:`frameworks` can be
    asked about a pod (``kubesched why`` does) on the cluster as it is, changing nothing."""

    def __init__(
        self,
        inputs: Inputs,
        config: KubeSchedulerConfiguration,
        registry: Registry,
        *,
        seed: int | None = None,
        detail: Detail = "outcome",
    ) -> None:
        self.start = time.perf_counter()
        self.inputs = inputs
        self.snapshot = snapshot = Snapshot()
        self.client = client = _MemoryClient(MemoryStorage(snapshot))
        self.frameworks = frameworks = build_frameworks(
            config, registry, snapshot, client=client, rng=random.Random(seed)
        )
        self.recorder = recorder = _Recorder()
        for fwk in frameworks.values():
            fwk.set_evictor(recorder)
        # A clock that ticks once per reading: pods queued in input order get increasing
        # timestamps, so PrioritySort's tiebreak is the input order, whatever the real clock does.
        ticks = itertools.count()
        self.observer = observer = _Observer(detail)
        self.scheduler = scheduler = new_scheduler(
            config,
            frameworks,
            snapshot,
            recorder,
            observer=observer,
            clock=lambda: float(next(ticks)),
            scheduler_type=_OneAtATime,
        )
        self.queue = scheduler.queue
        client.scheduler = recorder.scheduler = scheduler

        # Namespace labels for namespaceSelector; a namespace the input only implies still
        # carries the name label the API server puts on every Namespace.
        for pod in inputs.pods:
            ns = pod.metadata.namespace
            snapshot.set_namespace(ns, {NAMESPACE_NAME_LABEL: ns})
        for name, namespace in inputs.objects.namespaces.items():
            snapshot.set_namespace(name, {NAMESPACE_NAME_LABEL: name, **namespace.metadata.labels})
        feed(snapshot, inputs.objects)
        for node in inputs.nodes:
            scheduler.on_node_add(node)
        self.running = inputs.running
        for pod in self.running:
            scheduler.on_pod_add(pod)
        self.pending = inputs.pending
        for pod in self.pending:
            client.pods[pod.metadata.uid] = pod
            scheduler.on_pod_add(pod)

    def pre_enqueue(self, pod: Pod, gating: str = "") -> Status | None:
        fwk = self.frameworks.get(pod.spec.scheduler_name)
        return None if fwk is None else fwk.run_pre_enqueue(pod, gating)

    async def run(self, progress: Progress | None = None) -> SimulationResult:
        """One attempt per pending pod; see the module doc."""
        frameworks, queue, scheduler = self.frameworks, self.queue, self.scheduler
        client, recorder, observer = self.client, self.recorder, self.observer
        start, pending = self.start, self.pending
        to_attempt = sum(1 for p in pending if p.spec.scheduler_name in frameworks)
        # Pod UID -> its position among first attempts (dicts keep insertion order).
        attempts: dict[str, int] = {}
        nominated: dict[str, str] = {}
        skipped: dict[str, str] = {}
        fetched: set[str] = set()
        while (qpi := queue.try_pop()) is not None:
            uid = qpi.pod.metadata.uid
            outcome = scheduler.schedule_one(qpi)
            await scheduler.drain()
            attempts.setdefault(uid, len(attempts) + 1)
            record = recorder.records.get(uid)
            if uid in client.bound:
                pass
            elif record is not None and record.nominated_node and uid not in nominated:
                nominated[uid] = record.nominated_node
                await _evictions_done(frameworks)
                queue.activate([qpi.pod])
            elif (
                uid not in fetched
                and await _fetches_done(frameworks)
                and queue.where(uid) == "active"
            ):
                fetched.add(uid)  # what a plugin fetched for the pod is there now: once more
            else:
                queue.delete(qpi.pod)  # one attempt: no retry on later events
                if record is None:
                    skipped[uid] = outcome.message
            if progress is not None:
                progress(len(attempts), to_attempt, time.perf_counter() - start)
        for fwk in frameworks.values():
            await fwk.aclose()

        by_uid = {p.metadata.uid: p for p in pending}
        results: list[PodResult] = []
        for uid, n in attempts.items():
            pod = by_uid[uid]
            record = recorder.records.get(uid)
            if record is None:
                record = _Record("Skipped", None, skipped.get(uid, ""))
            ev = observer.evidence.get(uid, _Evidence())
            results.append(
                PodResult(
                    namespace=pod.metadata.namespace,
                    name=pod.metadata.name,
                    uid=uid,
                    node=record.node,
                    reason=record.reason,
                    message=record.message,
                    scheduler_name=pod.spec.scheduler_name,
                    attempt=n,
                    feasible_nodes=ev.feasible,
                    scored=ev.scored,
                    nodes=ev.nodes,
                    nominated_node=nominated.get(uid),
                    victims=recorder.victims.get(uid, []),
                )
            )
        attempted = set(attempts)
        for pod in pending:
            uid = pod.metadata.uid
            if uid in attempted:
                continue
            if pod.spec.scheduler_name not in frameworks:
                reason = REASON_NOT_HANDLED
                message = (
                    f"no profile has schedulerName {pod.spec.scheduler_name!r}: "
                    "the pod is left to another scheduler"
                )
            else:
                reason = REASON_GATED
                qpi = queue.get(uid)
                gate = self.pre_enqueue(pod, "" if qpi is None else qpi.gated_by)
                message = gate.message if gate is not None else "not attempted"
                if qpi is None or not qpi.gated_by:
                    reason = "Skipped"
            results.append(
                PodResult(
                    namespace=pod.metadata.namespace,
                    name=pod.metadata.name,
                    uid=uid,
                    node=None,
                    reason=reason,
                    message=message,
                    scheduler_name=pod.spec.scheduler_name,
                )
            )
        return SimulationResult(
            pods=results,
            num_nodes=len(self.inputs.nodes),
            num_running=len(self.running),
            seconds=time.perf_counter() - start,
            issues=list(self.inputs.issues),
            resource_claims=list(self.snapshot.objects.list(ResourceClaim)),
        )


async def simulate(
    inputs: Inputs,
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    seed: int | None = None,
    detail: Detail = "outcome",
    progress: Progress | None = None,
) -> SimulationResult:
    """Schedule ``inputs``' pending pods on its nodes, one attempt each; see the module doc."""
    return await Simulation(inputs, config, registry, seed=seed, detail=detail).run(progress)
