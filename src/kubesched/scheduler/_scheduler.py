"""The scheduling loop: pop a pod, run its profile's scheduling cycle, bind asynchronously.

This is kube-scheduler's ``ScheduleOne`` with its failure handling. One asyncio loop runs
everything: informer events, the synchronous scheduling cycle (which never yields, so the cache
doubles as the cycle's snapshot), and many binding cycles in flight at once.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from kubesched.api import Node, Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    FitError,
    Framework,
    NodeGroup,
    NoNodesAvailableError,
    PluginError,
    PodInfo,
    QueuedPodInfo,
    ScheduleResult,
    Status,
)
from kubesched.scheduler._cache import Cache, CacheError
from kubesched.scheduler._events import (
    EVENT_NODE_ADD,
    EVENT_NODE_DELETE,
    WILDCARD,
    node_scheduling_properties_change,
)
from kubesched.scheduler._metrics import SchedulerMetrics
from kubesched.scheduler._scheduling_queue import SchedulingQueue

log = logging.getLogger(__name__)

#: ``v1.PodReasonUnschedulable`` and ``v1.PodReasonSchedulerError``.
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
#: The share of scheduling cycles, in percent, whose plugins are timed for
#: ``scheduler_plugin_execution_duration_seconds`` (kube-scheduler's
#: ``pluginMetricsSamplePercent``): timing every plugin of every cycle costs more than it tells.
PLUGIN_METRICS_SAMPLE_PERCENT = 10
#: How long the loop schedules pods back to back before it lets the event loop run the rest
#: (informer events, binding cycles, health checks). kube-scheduler's loop is a goroutine of
#: its own; here a turn of the event loop per pod would cost about a sixth of the loop, while a
#: millisecond delays an event or a binding's start by no more than that.
YIELD_EVERY_S = 0.001
#: Binding cycles past Permit at once; the scheduling loop waits for one to end beyond that.
#: kube-scheduler starts a goroutine per binding and bounds nothing, but each cycle holds its
#: pod, state and task until the API server has bound the pod and its event is queued: a
#: backlog decided far faster than it is bound (30,000 DaemonSet pods in seconds) held them
#: all, 1.3 GB. A thousand keep the client's connections busy many times over.
MAX_BINDING_CYCLES = 1000


class ClusterWriter(Protocol):
    """What the loop writes back to the cluster (the API server, or nothing in simulation)."""

    def scheduled(self, pod: Pod, node: str, profile: str) -> Awaitable[None] | None:
        """Record the ``Scheduled`` event; or, while events cannot be queued, return what the
        binding cycle awaits to record it (backpressure rather than a lost event)."""

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        """Record ``FailedScheduling`` and set ``PodScheduled=False`` with ``reason``."""


class AttemptObserver(Protocol):
    """Sees what the framework decided in each scheduling cycle (``simulate --explain``).

    Called with the cycle's state once ``schedule_pod`` has returned a result, or raised
    :class:`FitError` (after PostFilter ran, so the diagnosis is complete).
    """

    def __call__(
        self, fwk: Framework, pod: Pod, state: CycleState, outcome: ScheduleResult | FitError
    ) -> None: ...


@dataclass(slots=True)
class Outcome:
    """What became of one attempt (for logs, tests and ``simulate``)."""

    pod: str
    node: str | None
    reason: str
    message: str


class Scheduler:
    """Profiles over one cache and one queue, fed by informer callbacks."""

    def __init__(
        self,
        *,
        profiles: Mapping[str, Framework],
        cache: Cache,
        queue: SchedulingQueue,
        writer: ClusterWriter,
        metrics: SchedulerMetrics | None = None,
        pod_lookup: PodLookup | None = None,
        observer: AttemptObserver | None = None,
    ) -> None:
        self.profiles = dict(profiles)
        self.cache = cache
        self.queue = queue
        self.writer = writer
        self.metrics = metrics
        self._pod_lookup = pod_lookup
        self._observer = observer
        # Binding cycles in flight, by pod UID (a pod has one at a time: it is assumed until its
        # cycle ends, and an assumed pod is not scheduled again).
        self._binding: dict[str, asyncio.Task[None]] = {}
        # Of those, the ones past Permit (see MAX_BINDING_CYCLES); set while below the bound.
        self._binding_now = 0
        self._room = asyncio.Event()
        self._room.set()
        # Seeded: which cycles are timed does not change between runs.
        self._sample = random.Random(0)
        self._stopping = False
        for fwk in self.profiles.values():
            # Filter counts the pods preemption nominated; plugins may activate queued pods.
            fwk.set_pod_nominator(queue)
            fwk.set_pod_activator(queue)

    # -- informer callbacks (kube-scheduler's eventhandlers.go) ---------------------------------

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.profiles

    def on_node_add(self, node: Node) -> None:
        self.cache.add_node(node)
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)

    def on_node_update(self, old: Node, new: Node) -> None:
        self.cache.update_node(old, new)
        for event in node_scheduling_properties_change(new, old):
            self.queue.move_all_to_active_or_backoff(event, old, new)

    def on_node_delete(self, node: Node) -> None:
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_DELETE, node, None)
        self.cache.remove_node(node)

    def on_pod_add(self, pod: Pod) -> None:
        if pod.spec.node_name:
            self.cache.add_pod(pod)
            self.queue.assigned_pod_added(pod)
        elif self.responsible_for(pod):
            self.queue.add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if new.spec.node_name:
            if not old.spec.node_name:
                # Bound (by us, or by someone else): it leaves the queue, as a deletion of the
                # pending pod (the room a nomination held is free), and counts on its node.
                if self.responsible_for(old):
                    self._pending_pod_gone(old)
                self.cache.add_pod(new)
                self.queue.assigned_pod_added(new)
            else:
                self.cache.update_pod(old, new)
                self.queue.assigned_pod_updated(old, new)
            return
        if not self.responsible_for(new):
            return
        rv = new.metadata.resource_version
        if (rv and rv == old.metadata.resource_version) or self.cache.is_assumed(new.metadata.uid):
            # A re-list's copy, or our own pod between assume and bind: nothing changed for it.
            return
        self.queue.update(old, new)
        nominated = old.status.nominated_node_name
        if nominated and nominated != new.status.nominated_node_name:
            # The room held for it on that node is free for pods it could have preempted.
            self.queue.assigned_pod_deleted(old, _priority_at_most(old))

    def on_pod_delete(self, pod: Pod) -> None:
        if pod.spec.node_name:
            self.cache.remove_pod(pod)
            self.queue.assigned_pod_deleted(pod)
            return
        self._pending_pod_gone(pod)

    def _pending_pod_gone(self, pod: Pod) -> None:
        """``deletePodFromSchedulingQueue``: a pending pod was deleted or bound."""
        self.queue.delete(pod)
        fwk = self.profiles.get(pod.spec.scheduler_name)
        if fwk is None:
            return
        if fwk.reject_waiting_pod(pod.metadata.uid, "pod was deleted"):
            # It held resources on a node while waiting at Permit.
            self.queue.assigned_pod_deleted(pod)
        elif pod.status.nominated_node_name:
            self.queue.assigned_pod_deleted(pod, _priority_at_most(pod))

    def on_undecodable(self, resource: str, key: str) -> None:
        """An object of ``resource`` changed and could not be decoded: what changed is unknown,
        so every pod waiting for an event is tried again after its backoff (as kube-scheduler
        queues a pod when a hint function fails), rather than left waiting for nothing."""
        if self.metrics is not None:
            self.metrics.undecodable_objects.labels(resource).inc()
        log.warning("%s %s could not be decoded; retrying every unschedulable pod", resource, key)
        self.queue.move_all_to_active_or_backoff(
            ClusterEvent(WILDCARD, ActionType.ALL, f"{resource}Undecodable")
        )

    # -- the loop ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Schedule until :meth:`stop`; binding cycles left in flight are awaited."""
        queue = self.queue
        clock = time.perf_counter
        yield_at = clock() + YIELD_EVERY_S
        while not self._stopping:
            # Awaiting pop() only when no pod is ready spares a coroutine per pod.
            qpi = queue.try_pop()
            if qpi is None:
                qpi = await queue.pop()
                if qpi is None:
                    break
                yield_at = clock() + YIELD_EVERY_S
            self.schedule_one(qpi)
            while self._binding_now >= MAX_BINDING_CYCLES and not self._stopping:
                self._room.clear()
                await self._room.wait()
                yield_at = clock() + YIELD_EVERY_S
            if clock() >= yield_at:
                # Let informer events and binding cycles in.
                await asyncio.sleep(0)
                yield_at = clock() + YIELD_EVERY_S
        await self.drain()

    async def drain(self) -> None:
        """Wait for every binding cycle in flight."""
        while self._binding:
            tasks = dict(self._binding)
            await asyncio.gather(*tasks.values(), return_exceptions=True)
            # A task cancelled before it ever ran could not remove itself.
            for uid, task in tasks.items():
                if self._binding.get(uid) is task:
                    del self._binding[uid]

    def stop(self) -> None:
        self._stopping = True
        self.queue.close()
        self._room.set()

    def schedule_one(self, qpi: QueuedPodInfo) -> Outcome:
        """One scheduling cycle for ``qpi``; the binding cycle is started as a task."""
        pod = qpi.pod
        fwk = self.profiles.get(pod.spec.scheduler_name)
        if (
            fwk is None
            or pod.metadata.deletion_timestamp
            or self.cache.is_assumed(pod.metadata.uid)
        ):
            self.queue.done(pod.metadata.uid)
            return Outcome(pod.key, None, "Skipped", "not schedulable by this scheduler now")
        start = time.perf_counter()
        # The cycle this attempt belongs to: events after it may have made the pod schedulable.
        qpi.cycle = self.queue.scheduling_cycle
        state = CycleState()
        state.record_plugin_metrics = self._sample.random() < PLUGIN_METRICS_SAMPLE_PERCENT / 100
        # The queue derived the pod's requests and ports when it queued this very pod.
        state.pod_info = qpi.pod_info
        try:
            result = fwk.schedule_pod(state, pod, plugin_scores=self._observer is not None)
        except FitError as fit:
            # Left as the pod's status says without PostFilter plugins (upstream's empty
            # ScheduleResult: ModeNoop), or when PostFilter answers ``None``.
            nominated: str | None = None
            if fwk.post_filter_plugins:
                filtered = fit.diagnosis.node_statuses(fwk.snapshot)
                nominated, pf = fwk.run_post_filter(state, pod, filtered)
                if pf is not None and pf.message:
                    fit.diagnosis.post_filter_msg = pf.message
            if self._observer is not None:
                self._observer(fwk, pod, state, fit)
            qpi.unschedulable_plugins = set(fit.diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(fit.diagnosis.pending_plugins)
            return self._fail(fwk, qpi, REASON_UNSCHEDULABLE, str(fit), start, nominated)
        except NoNodesAvailableError as e:
            return self._fail(fwk, qpi, REASON_UNSCHEDULABLE, str(e), start)
        except PluginError as e:
            return self._fail(fwk, qpi, REASON_SCHEDULER_ERROR, str(e), start)
        except Exception as e:  # a plugin bug must not stop the loop or lose the pod
            log.exception("scheduling %s failed", pod.key)
            return self._fail(fwk, qpi, REASON_SCHEDULER_ERROR, Status.raised(e).message, start)

        if self._observer is not None:
            self._observer(fwk, pod, state, result)
        host = result.suggested_host
        self.cache.assume_pod(qpi.pod_info, host)
        # Counted on its node now: its nomination would count it twice.
        self.queue.delete_nominated_pod_if_exists(pod)
        status = fwk.run_reserve(state, pod, host)
        waiting = False
        if status is None:
            status = fwk.run_permit(state, pod, host)
            if status is not None and status.code == Code.WAIT:
                status = None
                waiting = True
        if status is not None:
            fwk.run_unreserve(state, pod, host)
            self.cache.forget_pod(pod.metadata.uid)
            if status.is_rejected():
                _set_rejector(qpi, status)
                message = _rejected_on_one_node(pod, status)
                return self._fail(fwk, qpi, REASON_UNSCHEDULABLE, message, start)
            return self._fail(fwk, qpi, REASON_SCHEDULER_ERROR, status.message, start)
        state.end_scheduling_cycle()
        # The task leaves ``_binding`` itself when it ends (a done callback would cost a turn of
        # the event loop per pod).
        if not waiting:
            self._binding_now += 1
        self._start_binding(
            pod.metadata.uid, self._binding_cycle(fwk, state, qpi, host, start, waiting), waiting
        )
        return Outcome(pod.key, host, "Assumed", "")

    def _start_binding(
        self, uid: str, cycle: Coroutine[Any, Any, None], waiting_on_permit: bool
    ) -> None:
        """Run a binding cycle as a task of its own, while the next pods are scheduled."""
        self._binding[uid] = asyncio.get_running_loop().create_task(cycle)

    async def _binding_cycle(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        host: str,
        start: float,
        waiting: bool,
    ) -> None:
        """``waiting``: a Permit plugin asked the pod to wait; it waits here to be allowed."""
        pod = qpi.pod
        metrics = self.metrics
        counted = not waiting
        at_permit = False
        try:
            try:
                status = await fwk.wait_on_permit(pod) if waiting else None
                at_permit = status is not None
                if waiting and status is None:
                    # Allowed: from here on it counts against the bound. Pods waiting at
                    # Permit do not, or a gang's members could never all be scheduled.
                    self._binding_now += 1
                    counted = True
                # Without PreBind plugins there is nothing to await before Bind.
                if status is None and fwk.pre_bind_plugins:
                    status = await fwk.run_pre_bind(state, pod, host)
                if status is None:
                    t0 = time.perf_counter()
                    status = await fwk.run_bind(state, pod, host)
                    if metrics is not None:
                        metrics.binding_duration.observe(time.perf_counter() - t0)
            except Exception as e:  # a bug beyond the plugins must not lose the pod
                log.exception("binding %s to %s failed", pod.key, host)
                status = Status.raised(e)
            if status is None:
                uid = pod.metadata.uid
                self.cache.finish_binding(uid)
                if metrics is not None:
                    metrics.attempt("scheduled", fwk.profile_name, time.perf_counter() - start)
                log.info("Successfully bound pod to node pod=%s node=%s", pod.key, host)
                later = self.writer.scheduled(pod, host, fwk.profile_name)
                if later is not None:
                    await later
                if fwk.post_bind_plugins:
                    fwk.run_post_bind(state, pod, host)
                self.queue.done(uid)
                return
            self._binding_failed(fwk, state, qpi, host, start, status, at_permit=at_permit)
        finally:
            # Its own task leaves the binding cycles in flight (see :meth:`drain`).
            self._binding.pop(pod.metadata.uid, None)
            if counted:
                self._binding_now -= 1
                self._room.set()

    def _binding_failed(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        host: str,
        start: float,
        status: Status,
        *,
        at_permit: bool,
    ) -> None:
        """Undo the assumption and Reserve, and put the pod back in the queue. Only a rejection
        at Permit makes the pod unschedulable by a plugin; after Permit, at PreBind or Bind, a
        failure of any kind sends it to backoffQ (``bindingCycle``)."""
        pod = qpi.pod
        # The events below carry the pod as it was counted, on its node (``assumedPod``): the
        # plugins' hints skip a deleted pod that was on no node.
        counted = self.cache.snapshot.pod_info(pod.metadata.uid)
        assumed = counted.pod if counted is not None else pod
        fwk.run_unreserve(state, pod, host)
        try:
            self.cache.forget_pod(pod.metadata.uid)
        except CacheError as e:
            # The binding went through after all (its answer was lost, as when kube-apiserver
            # restarts) and the informer confirmed the pod meanwhile: nothing to undo.
            log.error("scheduler cache ForgetPod failed: %s", e)
            freed = False
        else:
            freed = True
        rejected = status.is_rejected()
        if freed and not rejected:
            # The resources the pod held may let others fit.
            self.queue.assigned_pod_deleted(assumed)
        message = status.message
        if rejected and at_permit:
            _set_rejector(qpi, status)
            message = _rejected_on_one_node(pod, status)
        reason = REASON_UNSCHEDULABLE if rejected else REASON_SCHEDULER_ERROR
        self._fail(fwk, qpi, reason, message, start)
        if freed and rejected:
            # After the pod is back in the queue, and not for the pod itself: a rejection at
            # Permit must not be undone by the room the pod freed (``handleBindingCycleError``).
            uid = pod.metadata.uid
            self.queue.assigned_pod_deleted(assumed, lambda p: p.metadata.uid != uid)

    def _fail(
        self,
        fwk: Framework,
        qpi: QueuedPodInfo,
        reason: str,
        message: str,
        start: float,
        nominated: str | None = "",
    ) -> Outcome:
        """``handleSchedulingFailure``: tell the user, and put the pod back in the queue.

        ``nominated`` is the pod's nominated node from now on: ``""`` clears a nomination (every
        failure but a FitError, where PostFilter decides), ``None`` leaves it as the pod's
        status says.
        """
        pod = qpi.pod
        if self.metrics is not None:
            result = "unschedulable" if reason == REASON_UNSCHEDULABLE else "error"
            self.metrics.attempt(result, fwk.profile_name, time.perf_counter() - start)
        log.info("Unable to schedule pod pod=%s reason=%s: %s", pod.key, reason, message)
        current = self._current(pod)
        if current is None or current.spec.node_name:
            # Deleted or bound by someone else meanwhile: nothing to retry.
            self.queue.done(pod.metadata.uid)
            return Outcome(pod.key, None, reason, message)
        if reason == REASON_SCHEDULER_ERROR:
            qpi.unschedulable_plugins = set()
        qpi.pod_info = PodInfo.of(current)
        self.queue.add_unschedulable_if_not_present(qpi, qpi.cycle)
        self.queue.add_nominated_pod(qpi.pod_info, nominated)
        self.writer.failed(current, reason, message, fwk.profile_name, nominated)
        return Outcome(pod.key, None, reason, message)

    def _current(self, pod: Pod) -> Pod | None:
        if self._pod_lookup is None:
            return pod
        return self._pod_lookup(pod.metadata.namespace, pod.metadata.name)


def _rejected_on_one_node(pod: Pod, status: Status) -> str:
    """A rejection at Reserve or Permit, written as kube-scheduler writes it: a FitError about
    the one node the pod was meant for (``0/1 nodes are available: 1 <reason>.``)."""
    diagnosis = Diagnosis(num_all_nodes=1, groups=[NodeGroup(np.zeros(1, np.int64), status)])
    return str(FitError(pod, diagnosis))


class PodLookup(Protocol):
    """The informer's current view of a pod, or ``None`` if it is gone."""

    def __call__(self, namespace: str, name: str) -> Pod | None: ...


def _set_rejector(qpi: QueuedPodInfo, status: Status) -> None:
    """``Diagnosis.AddPluginStatus`` for a rejection at Reserve, Permit or later: the plugin is
    unschedulable, and pending too if it said ``Pending``."""
    qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
    qpi.pending_plugins = (
        {status.plugin} if status.plugin and status.code == Code.PENDING else set()
    )


def _priority_at_most(pod: Pod) -> Callable[[Pod], bool]:
    """``getLEPriorityPreCheck``: only pods of no higher priority than ``pod``."""
    priority = pod.spec.priority or 0
    return lambda p: (p.spec.priority or 0) <= priority
