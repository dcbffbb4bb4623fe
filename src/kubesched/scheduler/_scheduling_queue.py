"""The scheduling queue: kube-scheduler's ``PriorityQueue``, on one asyncio event loop.

It composes activeQ (with the pods in flight), backoffQ, unschedulablePods and the nominator,
and decides which cluster events move which pods between them (docs/queue.md). A pod is in at
most one sub-queue: :meth:`SchedulingQueue._enter` is the only way into one.

Nothing here blocks or yields except :meth:`SchedulingQueue.pop` (waiting for a pod) and
:meth:`SchedulingQueue.run` (the periodic flushes), so every other method is atomic with respect
to the scheduling loop and informer callbacks on the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import enum
import logging
import math
import time
from collections.abc import Callable, Collection, Container, Hashable, Iterable, Mapping
from typing import Any, Protocol

from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    SortKeyFn,
    Status,
)
from kubesched.scheduler._active_queue import ACTIVE, ActiveQueue
from kubesched.scheduler._backoff_queue import BACKOFF, ORDERING_WINDOW, BackoffQueue
from kubesched.scheduler._events import (
    BACKOFF_COMPLETE,
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_UPDATE,
    EVENT_WILDCARD,
    NODE,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_POD,
    event_label,
    event_matches,
    is_wildcard,
    pod_scheduling_properties_change,
)
from kubesched.scheduler._heap import LessFn
from kubesched.scheduler._metrics import IncomingPodsCounts
from kubesched.scheduler._nominator import Nominator
from kubesched.scheduler._unschedulable_pods import GATED, UNSCHEDULABLE, UnschedulablePods

log = logging.getLogger(__name__)

#: kube-scheduler's defaults (``podInitialBackoffSeconds``, ``podMaxBackoffSeconds``, and the
#: hard-coded time after which a pod leaves unschedulablePods whatever happened).
DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION = 300.0
#: How often completed backoffs are flushed to activeQ: once per backoffQ ordering window.
BACKOFF_FLUSH_INTERVAL = ORDERING_WINDOW
#: How often unschedulablePods is checked for pods that waited too long.
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

#: The sub-queues other than activeQ, in the order :meth:`SchedulingQueue._report` keeps counts.
_NOT_ACTIVE = (BACKOFF, UNSCHEDULABLE, GATED)

_PRE_ENQUEUE = "PreEnqueue"
#: What a rejecting plugin that registered no events is taken to have registered.
_ALL_EVENTS: tuple[ClusterEventWithHint, ...] = (ClusterEventWithHint(EVENT_WILDCARD),)
_SKIP = QueueingHint.SKIP


class _Matches(dict[str, tuple[ClusterEventWithHint, ...]]):
    """Of one incoming event: plugin -> its registrations the event matches, found when first
    asked."""

    def __init__(self, hints: Mapping[str, tuple[ClusterEventWithHint, ...]], event: ClusterEvent):
        super().__init__()
        self._hints = hints
        self.event = event
        self.wildcard = is_wildcard(event)

    def __missing__(self, plugin: str) -> tuple[ClusterEventWithHint, ...]:
        event = self.event
        registered = self._hints.get(plugin, _ALL_EVENTS)
        hit = self[plugin] = tuple(e for e in registered if event_matches(e.event, event))
        return hit


def _object_keys(matching: _Matches, gate: str, old: Any, new: Any) -> Collection[Hashable] | None:
    """What an event is about for the pods ``gate`` keeps out, by the ``object_keys`` of the
    gate's registrations it matches; ``None`` when one of them cannot tell."""
    if matching.wildcard:
        return None
    keys: set[Hashable] = set()
    for registered in matching[gate]:
        of = registered.object_keys
        if of is None:
            return None
        try:
            some = of(old, new)
            if some is None:
                return None
            keys.update(some)
        except Exception:
            log.exception("object keys of %s failed for %s", gate, matching.event)
            return None
    return keys


#: The moves' labels (``scheduler_queue_incoming_pods_total{event}``) that are no cluster event's.
_UNSCHEDULED_POD_ADD = event_label(EVENT_UNSCHEDULED_POD_ADD)
_UNSCHEDULED_POD_UPDATE = event_label(EVENT_UNSCHEDULED_POD_UPDATE)
_FORCE_ACTIVATE = event_label(EVENT_FORCE_ACTIVATE)
#: A pod entering activeQ for one of these is nominated as its status says (a new pod).
_NOMINATING = frozenset((_UNSCHEDULED_POD_ADD, _UNSCHEDULED_POD_UPDATE))

#: ``(pod, gating plugin or "") -> Status | None``: the pod's profile's PreEnqueue plugins, the
#: one gating it so far first.
PreEnqueueFn = Callable[[Pod, str], Status | None]
#: ``(pod, gating plugin) -> keys | None``: what the pod waits for (``Framework.gate_keys``).
GateKeysFn = Callable[[Pod, str], frozenset[Hashable] | None]
#: ``gating plugin -> UIDs | None``: the pods it holds now, looked up by UID
#: (``Framework.held_pods``).
HeldPodsFn = Callable[[str], Container[str] | None]
#: Receives the number of pending pods of the sub-queues whose number changed.
PendingPodsMetric = Callable[[dict[str, int]], None]


class _Strategy(enum.IntEnum):
    """Where a pod goes after an event (kube-scheduler's ``queueingStrategy``)."""

    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


# Upstream's names for them, read as globals: events reach thousands of waiting pods, and an
# Enum member read through its class costs ten times a global on Python 3.11.
_QUEUE_SKIP = _Strategy.SKIP
_QUEUE_AFTER_BACKOFF = _Strategy.AFTER_BACKOFF
_QUEUE_IMMEDIATELY = _Strategy.IMMEDIATELY


class _SubQueue(Protocol):
    """What :meth:`SchedulingQueue._enter` needs of activeQ, backoffQ and unschedulablePods."""

    #: The sub-queue's name in metrics and logs.
    name: str

    def add(self, qpi: QueuedPodInfo, event: str, /) -> None: ...

    def delete(self, uid: str, /) -> bool: ...

    def get(self, uid: str, /) -> QueuedPodInfo | None: ...


class SchedulingQueue:
    """kube-scheduler's ``PriorityQueue``: activeQ, backoffQ, unschedulablePods and the nominator.

    Pods are keyed by UID. Every path either keeps a pod in one sub-queue or hands it out
    through :meth:`pop`; only :meth:`delete` drops a pod.
    """

    def __init__(
        self,
        *,
        less: LessFn,
        sort_key: SortKeyFn | None = None,
        pre_enqueue: PreEnqueueFn | None = None,
        gate_keys: GateKeysFn | None = None,
        held_pods: HeldPodsFn | None = None,
        events_to_register: Mapping[str, Iterable[ClusterEventWithHint]] | None = None,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        pod_max_in_unschedulable_pods_duration: float = (
            DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION
        ),
        clock: Callable[[], float] = time.monotonic,
        pending_pods_metric: PendingPodsMetric | None = None,
        incoming_pods_metric: IncomingPodsCounts | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        """Build an empty queue.

        ``less`` is the QueueSort of the profiles (they all share one); ``sort_key``, if the
        QueueSort has one (``Framework.sort_key``), orders the activeQ without calling ``less``.
        ``pre_enqueue`` runs the PreEnqueue plugins of the pod's profile, ``gate_keys`` says what
        a gated pod waits for, ``held_pods`` which pods a gating plugin holds now (those are
        not asked again when an event reaches them). ``events_to_register``
        maps a plugin name to the events that may make pods it rejected schedulable (the union
        over profiles); a plugin that rejects a pod but registered nothing is woken by every
        event, as in kube-scheduler. ``clock`` returns monotonic seconds. The metrics receive the
        pending pods per sub-queue when they change, and count the pods entering each.
        ``pop_from_backoff`` is ``SchedulerPopFromBackoffQ`` (on by default, as in v1.34).
        """
        self._pre_enqueue = pre_enqueue
        self._gate_keys = gate_keys
        self._held_pods = held_pods
        self._hints: dict[str, tuple[ClusterEventWithHint, ...]] = {
            plugin: _with_node_taint(tuple(events))
            for plugin, events in (events_to_register or {}).items()
        }
        self._registered = {e.event for events in self._hints.values() for e in events}
        #: The gates some of whose events say what they are about: gate keys serve only them.
        self._keyed_gates = frozenset(
            plugin
            for plugin, events in self._hints.items()
            if any(e.object_keys is not None for e in events)
        )
        self._interest: dict[ClusterEvent, bool] = {}
        #: Incoming event -> each plugin's registrations matching it: events reach every
        #: waiting pod, and most reach thousands alike.
        self._matches: dict[ClusterEvent, _Matches] = {}
        self._max_in_unschedulable = pod_max_in_unschedulable_pods_duration
        self._clock = clock
        self._metric = pending_pods_metric
        self._pop_from_backoff = pop_from_backoff

        incoming = {} if incoming_pods_metric is None else incoming_pods_metric
        self._backoff_q = BackoffQueue(
            less,
            incoming.setdefault(BACKOFF, {}),
            initial=pod_initial_backoff,
            maximum=pod_max_backoff,
            clock=clock,
            pop_from_backoff=pop_from_backoff,
        )
        self._active_q = ActiveQueue(
            less,
            sort_key,
            incoming.setdefault(ACTIVE, {}),
            self._backoff_q if pop_from_backoff else None,
        )
        self._unschedulable_pods = UnschedulablePods(
            frozenset(self._hints), incoming.setdefault(UNSCHEDULABLE, {})
        )
        # The sub-queue each queued pod is in: written by _enter and _leave, and by try_pop for
        # the pod it hands out.
        self._location: dict[str, _SubQueue] = {}
        self._nominator = Nominator(self._active_q.deleted_in_flight)

        # Pods whose initial attempt timestamp is set when they first become active.
        self._not_yet_active: set[str] = set()
        # The scheduling cycle of the last move request (for pods not popped from this queue).
        self._move_request_cycle = -1
        self._closed_event = asyncio.Event()
        # Nothing reported yet: every count differs from -1. activeQ's count apart from the
        # others': most reports (a pop, an add) change it alone.
        self._reported_active = -1
        self._reported_rest = (-1, -1, -1)

    # -- informer events for pending pods ------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod: to activeQ, or unschedulablePods if a PreEnqueue plugin gates it.

        A pod the queue already knows (a re-list) is handled as an update.
        """
        known = self._known_pod(pod.metadata.uid)
        if known is not None:
            self.update(known, pod)
            return
        self._move_to_active(self._new_queued_pod_info(pod), _UNSCHEDULED_POD_ADD)
        self._report()

    def update(self, old: Pod | None, new: Pod) -> None:
        """A pending pod changed.

        In activeQ or backoffQ it is updated in place. In unschedulablePods, the update is turned
        into events (:func:`pod_scheduling_properties_change`) and the pod moves to activeQ or
        backoffQ if a plugin that rejected it registered one of them and its hint says ``Queue``
        (scheduling gates removed, labels or tolerations changed, requests scaled down ...). In
        flight, the events are kept for when the attempt ends. Unknown, it is added.
        """
        uid = new.metadata.uid
        events = (
            pod_scheduling_properties_change(new, old)
            if old is not None
            else [ClusterEvent(UNSCHEDULABLE_POD, ActionType.UPDATE_OTHER)]
        )
        if self._active_q.update_in_flight(old, new, events):
            self._nominator.update_nominated_pod(old or new, PodInfo.of(new))
            return
        part = self._location.get(uid)
        if part is None:
            self._move_to_active(self._new_queued_pod_info(new), _UNSCHEDULED_POD_UPDATE)
            self._report()
            return
        qpi = part.get(uid)
        assert qpi is not None  # the index and the sub-queue agree (_enter, _leave)
        if part is self._active_q or part is self._backoff_q:
            # A new QueuedPodInfo: the heap's old entry for the pod still compares through the
            # one it holds until it surfaces (an update in place broke the heap's order).
            qpi = copy.copy(qpi)
        qpi.pod_info = PodInfo.of(new)
        self._nominator.update_nominated_pod(old or new, qpi.pod_info)
        if part is self._active_q:
            self._active_q.update(qpi)  # re-sorted: the priority may have changed
            return
        if part is self._backoff_q:
            self._backoff_q.update(qpi)
            return
        if qpi.gated_by:
            # What the pod waits for may have changed with it (claims named in its status).
            self._find_gate_keys(qpi)
            self._unschedulable_pods.rekey(qpi)
        for event in events:
            strategy, plugin = self._worth_requeuing(qpi, event, old, new)
            if strategy is _QUEUE_SKIP:
                continue
            where = self._requeue(qpi, strategy, event_label(event), plugin)
            if where == ACTIVE or (self._pop_from_backoff and where == BACKOFF):
                break
        self._report()

    def delete(self, pod: Pod) -> None:
        """The pod is gone (or bound): removed from every sub-queue and the nominator.

        If it is in flight, the attempt's outcome is dropped when it comes back.
        """
        uid = pod.metadata.uid
        self._nominator.delete_nominated_pod_if_exists(uid)
        # Mostly a pod just bound, in no sub-queue: then no count changes.
        if self._leave(uid):
            self._report()
        self._not_yet_active.discard(uid)
        if self._active_q.in_flight(uid):
            self._active_q.delete_in_flight(uid)

    def activate(self, pods: Iterable[Pod]) -> None:
        """``Activate``: move pods from unschedulablePods or backoffQ to activeQ now.

        A pod in flight gets a ``ForceActivate`` event recorded, so it is retried when it comes
        back.
        """
        for pod in pods:
            uid = pod.metadata.uid
            qpi = self._unschedulable_pods.get(uid) or self._backoff_q.get(uid)
            if qpi is not None:
                self._move_to_active(qpi, _FORCE_ACTIVATE)
            elif self._active_q.add_events_if_pod_in_flight(None, pod, (EVENT_FORCE_ACTIVATE,)):
                self._move_request_cycle = self._active_q.scheduling_cycle
        self._report()

    # -- the scheduling loop ---------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, waiting while there is none; ``None`` once closed.

        The pod's ``attempts`` is incremented, its rejecting plugins are reset for the new
        attempt, and it is in flight until :meth:`done`.
        """
        while True:
            qpi = self.try_pop()
            if qpi is not None or self._active_q.closed:
                return qpi
            await self._active_q.wait()

    def try_pop(self) -> QueuedPodInfo | None:
        """Like :meth:`pop` without waiting: ``None`` if no pod is ready now."""
        qpi = self._active_q.pop()
        if qpi is not None:
            del self._location[qpi.pod.metadata.uid]
            self._report()
        return qpi

    def done(self, uid: str) -> None:
        """The attempt for the pod handed out by :meth:`pop` is over (bound or requeued)."""
        self._active_q.done(uid)

    @property
    def scheduling_cycle(self) -> int:
        """How many pods have been popped; the cycle of the pod popped last."""
        return self._active_q.scheduling_cycle

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, scheduling_cycle: int) -> None:
        """Put a pod whose attempt failed back, and end its attempt (:meth:`done`).

        Rejected by plugins (``qpi.unschedulable_plugins`` / ``pending_plugins``), it goes to
        unschedulablePods, unless an event one of them registered arrived while it was in flight
        and the plugin's hint says ``Queue``: then to backoffQ (to activeQ right away if the plugin
        was a Pending one). Failed with an error (no rejecting plugin), it goes to backoffQ. A pod
        deleted meanwhile is dropped; a pod updated meanwhile comes back in its latest version.
        """
        uid = qpi.pod.metadata.uid
        try:
            hint = self._failed_attempt_hint(qpi, scheduling_cycle)
        finally:
            # Before the pod is requeued: a pod in flight enters no sub-queue (_enter).
            self.done(uid)
        if hint is not None:
            self._requeue(qpi, hint[0], SCHEDULE_ATTEMPT_FAILURE, hint[1])
            self._report()

    def _failed_attempt_hint(
        self, qpi: QueuedPodInfo, scheduling_cycle: int
    ) -> tuple[_Strategy, str] | None:
        """Where a pod whose attempt failed goes, and by which plugin's hint; ``None`` if it
        is to be dropped (deleted or bound meanwhile) or is queued already."""
        uid = qpi.pod.metadata.uid
        if self._active_q.deleted_in_flight(uid):
            return None
        latest = self._active_q.updated_in_flight(uid)
        if latest is not None and latest is not qpi.pod:
            qpi.pod_info = PodInfo.of(latest)
        if qpi.pod.spec.node_name:
            return None
        where = self._where(uid)
        if where is not None:
            log.error("pod %s is already present in the %s queue", qpi.pod.key, where)
            return None
        qpi.timestamp = self._clock()
        return self._hint_for_in_flight_pod(qpi, scheduling_cycle)

    # -- cluster events --------------------------------------------------------------------

    def move_all_to_active_or_backoff(
        self,
        event: ClusterEvent,
        old: Any = None,
        new: Any = None,
        pre_check: Callable[[Pod], bool] | None = None,
    ) -> None:
        """``MoveAllToActiveOrBackoffQueue``: an event that may make unschedulable pods fit.

        Each pod in unschedulablePods whose rejecting plugins registered a matching event, and
        whose hint for it says ``Queue``, moves to backoffQ if it is still backing off, else to
        activeQ. Pods with no rejecting plugin move on any event. ``pre_check``, if given, must
        accept a pod for it to be considered at all.
        """
        if self._of_interest(event):
            matching = self._matching(event)
            pods = self._unschedulable_pods.reachable(
                lambda gate: bool(matching[gate]),
                lambda gate: _object_keys(matching, gate, old, new),
            )
        else:
            # No registered event matches: only pods that any event moves.
            pods = self._unschedulable_pods.catch_all()
        if pre_check is not None:
            pods = [p for p in pods if pre_check(p[1].pod)]
        self._move_pods(pods, event, old, new)
        self._report()

    def assigned_pod_added(self, pod: Pod) -> None:
        """A bound pod appeared: it may satisfy pending pods' pod affinity, spread or gangs."""
        self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)

    def assigned_pod_updated(self, old: Pod, new: Pod) -> None:
        """A bound pod changed: each property it changed is an event of its own (labels for
        affinity and spread, a request scaled down for resources)."""
        for event in pod_scheduling_properties_change(new, old):
            self.move_all_to_active_or_backoff(event, old, new)

    def assigned_pod_deleted(
        self, pod: Pod, pre_check: Callable[[Pod], bool] | None = None
    ) -> None:
        """A bound (or assumed) pod went away, freeing what it held."""
        self.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None, pre_check)

    # -- periodic work -----------------------------------------------------------------------

    def flush_backoff_completed(self) -> None:
        """Move every pod whose backoff is over from backoffQ to activeQ."""
        for qpi in self._backoff_q.pop_all_backoff_completed():
            self._move_to_active(qpi, BACKOFF_COMPLETE)
        self._report()

    def flush_unschedulable_leftover(self) -> None:
        """Pods in unschedulablePods for longer than the maximum go to activeQ or backoffQ.

        Gated pods too, if their PreEnqueue lets them now (kubernetes#139162): a gate lifted
        with no event of its plugin's would otherwise hold its pod for good."""
        now = self._clock()
        limit = self._max_in_unschedulable
        stale = [
            (q.pod.metadata.uid, q)
            for q in self._unschedulable_pods.pod_infos()
            if now - max(q.timestamp, q.flushed) > limit
        ]
        for _, q in stale:
            q.flushed = now
        if stale:
            self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None, flush=True)
        self._report()

    async def run(
        self,
        backoff_flush_interval: float = BACKOFF_FLUSH_INTERVAL,
        unschedulable_flush_interval: float = UNSCHEDULABLE_FLUSH_INTERVAL,
    ) -> None:
        """Flush completed backoffs every second, on whole seconds of the clock (so that whole
        ordering windows reach activeQ together), and leftover unschedulable pods every 30 s,
        until :meth:`close`."""
        next_leftover = self._clock() + unschedulable_flush_interval
        while not self.closed:
            now = self._clock()
            delay = backoff_flush_interval - math.fmod(now, backoff_flush_interval)
            if delay <= 0 or delay > backoff_flush_interval:
                delay = backoff_flush_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed_event.wait(), timeout=delay)
            if self.closed:
                return
            self.flush_backoff_completed()
            if self._clock() >= next_leftover:
                self.flush_unschedulable_leftover()
                next_leftover = self._clock() + unschedulable_flush_interval

    def close(self) -> None:
        """Stop: :meth:`pop` returns ``None`` from now on and :meth:`run` returns."""
        self._active_q.close()
        self._closed_event.set()

    @property
    def closed(self) -> bool:
        return self._active_q.closed

    # -- nominator -----------------------------------------------------------------------------

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None) -> None:
        """Record that ``pod_info``'s pod is nominated to run on ``node_name`` (preemption made
        room there). ``None`` takes the node from ``status.nominatedNodeName``; ``""`` clears the
        nomination. A bound or deleted pod is not nominated."""
        self._nominator.add_nominated_pod(pod_info, node_name)

    def delete_nominated_pod_if_exists(self, pod: Pod) -> None:
        self._nominator.delete_nominated_pod_if_exists(pod.metadata.uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name``, in nomination order, in their latest version."""
        out: list[PodInfo] = []
        for info in self._nominator.nominated_pods_for_node(node_name):
            qpi = self._get_queued(info.pod.metadata.uid)
            out.append(info if qpi is None else qpi.pod_info)
        return out

    def nominated_node(self, uid: str) -> str | None:
        return self._nominator.nominated_node(uid)

    def nominations_stamp(self, node_name: str) -> int:
        """The nominator's stamp of ``node_name``: every change of a queued pod's version goes
        through the nominator too (``update_nominated_pod``)."""
        return self._nominator.stamp(node_name)

    def nominated_nodes(self) -> list[str]:
        """The nodes with at least one nominated pod."""
        return self._nominator.nominated_nodes()

    # -- reading -------------------------------------------------------------------------------

    def pending_pods(self) -> list[Pod]:
        """Every pod in activeQ, backoffQ and unschedulablePods (gated included)."""
        return [
            *self._active_q.pods(),
            *self._backoff_q.pods(),
            *self._unschedulable_pods.pods(),
        ]

    def counts(self) -> dict[str, int]:
        """Pending pods per sub-queue, as ``scheduler_pending_pods`` labels them."""
        gated = self._unschedulable_pods.gated_size()
        return {
            ACTIVE: self._active_q.size(),
            BACKOFF: self._backoff_q.size(),
            UNSCHEDULABLE: self._unschedulable_pods.size() - gated,
            GATED: gated,
        }

    def pending_summary(self) -> str:
        """kube-scheduler's ``activeQ:1; backoffQ:0; unschedulablePods:2``."""
        return (
            f"activeQ:{self._active_q.size()}; backoffQ:{self._backoff_q.size()}; "
            f"unschedulablePods:{self._unschedulable_pods.size()}"
        )

    def __len__(self) -> int:
        return len(self._location)

    def in_flight_pods(self) -> list[Pod]:
        return self._active_q.in_flight_pods()

    def where(self, uid: str) -> str | None:
        """``"active"``, ``"backoff"``, ``"unschedulable"``, ``"gated"``, ``"in-flight"`` or
        ``None``."""
        w = self._where(uid)
        if w is None and self._active_q.in_flight(uid):
            return "in-flight"
        return w

    def get(self, uid: str) -> QueuedPodInfo | None:
        """The queued pod with this UID, if it is in a sub-queue."""
        return self._get_queued(uid)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self._backoff_q.is_backing_off(qpi)

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """When the pod's backoff ends (clock seconds, aligned down to the ordering window)."""
        return self._backoff_q.backoff_time(qpi)

    # -- internals: placement ------------------------------------------------------------------

    def _enter(self, qpi: QueuedPodInfo, part: _SubQueue, event: str, plugin: str) -> None:
        """Put the pod into ``part``: the one way into a sub-queue, so that a pod is in one at
        most, and in none while it is in flight.

        ``event`` moved it (counted by ``part``); ``plugin``'s queueing hint said so, if one did.
        """
        uid = qpi.pod.metadata.uid
        if self._active_q.in_flight(uid):
            log.error("pod %s is in flight; not queued in %s", qpi.pod.key, part.name)
            return
        location = self._location
        current = location.get(uid)
        if current is part and part is self._unschedulable_pods:
            part.add(qpi, event)  # still waiting: no move
            return
        if current is not None and current is not part:
            current.delete(uid)
        location[uid] = part
        part.add(qpi, event)
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "Pod moved to an internal scheduling queue pod=%s event=%s queue=%s plugin=%s",
                qpi.pod.key,
                event,
                part.name,
                plugin or "-",
            )

    def _leave(self, uid: str) -> bool:
        """Take the pod out of the sub-queue it is in, if any."""
        part = self._location.pop(uid, None)
        if part is None:
            return False
        part.delete(uid)
        return True

    def _where(self, uid: str) -> str | None:
        part = self._location.get(uid)
        if part is None:
            return None
        if part is self._unschedulable_pods and self._unschedulable_pods.gated(uid):
            return GATED
        return part.name

    def _get_queued(self, uid: str) -> QueuedPodInfo | None:
        part = self._location.get(uid)
        return None if part is None else part.get(uid)

    def _known_pod(self, uid: str) -> Pod | None:
        part = self._location.get(uid)
        if part is not None:
            qpi = part.get(uid)
            return None if qpi is None else qpi.pod
        return self._active_q.in_flight_pod(uid) if self._active_q.in_flight(uid) else None

    def _new_queued_pod_info(self, pod: Pod) -> QueuedPodInfo:
        now = self._clock()
        self._not_yet_active.add(pod.metadata.uid)
        return QueuedPodInfo(pod_info=PodInfo.of(pod), initial_attempt_timestamp=now, timestamp=now)

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        """Run PreEnqueue; a rejecting plugin gates the pod and counts as rejecting it."""
        self._apply_pre_enqueue(qpi, self._pre_enqueue_rejection(qpi))

    def _pre_enqueue_rejection(self, qpi: QueuedPodInfo) -> Status | None:
        """The PreEnqueue plugins' rejection of the pod (one that raises rejects), if any."""
        if self._pre_enqueue is None:
            return None
        try:
            status = self._pre_enqueue(qpi.pod, qpi.gated_by)
        except Exception as e:
            log.exception("PreEnqueue failed for pod %s", qpi.pod.key)
            return Status.as_error(e)
        if status is None or status.code == Code.SUCCESS:
            return None
        return status

    def _apply_pre_enqueue(self, qpi: QueuedPodInfo, rejection: Status | None) -> None:
        if rejection is None:
            qpi.gated_by = ""
            qpi.gate_keys = None
            return
        plugin = rejection.plugin or _PRE_ENQUEUE
        qpi.unschedulable_plugins.add(plugin)
        qpi.gated_by = plugin
        self._find_gate_keys(qpi)

    def _find_gate_keys(self, qpi: QueuedPodInfo) -> None:
        """What the gated pod waits for (``None``: not known, any event of its gate's)."""
        qpi.gate_keys = None
        if self._gate_keys is None or qpi.gated_by not in self._keyed_gates:
            return
        try:
            qpi.gate_keys = self._gate_keys(qpi.pod, qpi.gated_by)
        except Exception:
            log.exception("gate keys of %s failed for pod %s", qpi.gated_by, qpi.pod.key)

    def _move_to_active(
        self, qpi: QueuedPodInfo, event: str, plugin: str = "", *, pre_enqueued: bool = False
    ) -> bool:
        """``moveToActiveQ``: to activeQ if PreEnqueue lets it, else to unschedulablePods.

        With pops from backoffQ, PreEnqueue ran when the pod entered backoffQ, so it is not
        repeated when its backoff completes; nor when the caller ran it (``pre_enqueued``).
        """
        if not pre_enqueued and not (self._pop_from_backoff and event == BACKOFF_COMPLETE):
            self._run_pre_enqueue(qpi)
        if qpi.gated_by:
            self._enter(qpi, self._unschedulable_pods, event, plugin)
            return False
        uid = qpi.pod.metadata.uid
        if uid in self._not_yet_active:
            self._not_yet_active.discard(uid)
            qpi.initial_attempt_timestamp = self._clock()
        self._enter(qpi, self._active_q, event, plugin)
        if event in _NOMINATING:
            self._nominator.add_nominated_pod(qpi.pod_info, None)
        return True

    def _move_to_backoff(
        self, qpi: QueuedPodInfo, event: str, plugin: str, *, pre_enqueued: bool = False
    ) -> bool:
        """``moveToBackoffQ``; with pops from backoffQ, PreEnqueue runs here (unless the caller
        ran it: ``pre_enqueued``) and may gate."""
        if self._pop_from_backoff:
            if not pre_enqueued:
                self._run_pre_enqueue(qpi)
            if qpi.gated_by:
                self._enter(qpi, self._unschedulable_pods, event, plugin)
                return False
        self._enter(qpi, self._backoff_q, event, plugin)
        if self._pop_from_backoff:
            self._active_q.broadcast()
        return True

    def _requeue(
        self,
        qpi: QueuedPodInfo,
        strategy: _Strategy,
        event: str,
        plugin: str,
        *,
        pre_enqueued: bool = False,
    ) -> str:
        """``requeuePodWithQueueingStrategy``: the sub-queue the pod ends up in."""
        if strategy is _QUEUE_SKIP:
            self._enter(qpi, self._unschedulable_pods, event, plugin)
            return UNSCHEDULABLE
        if strategy is _QUEUE_AFTER_BACKOFF and self._backoff_q.is_backing_off(qpi):
            moved = self._move_to_backoff(qpi, event, plugin, pre_enqueued=pre_enqueued)
            return BACKOFF if moved else UNSCHEDULABLE
        moved = self._move_to_active(qpi, event, plugin, pre_enqueued=pre_enqueued)
        return ACTIVE if moved else UNSCHEDULABLE

    def _requeue_gated(
        self, qpi: QueuedPodInfo, strategy: _Strategy, event: str, plugin: str
    ) -> None:
        """:meth:`_requeue` for a gated pod still in unschedulablePods, when both activeQ and
        backoffQ run PreEnqueue on entry: PreEnqueue runs first, and a pod it gates again is put
        back at once (counted as arriving for ``event``, as a move would) instead of leaving and
        re-entering. Thousands of pods waiting for their preemptions see every victim's
        deletion, and nearly all of them are gated again by the same plugin: such a pod, unless
        its gate keeps pods by keys (which may have changed), is left as it is."""
        gated_by = qpi.gated_by
        rejection = self._pre_enqueue_rejection(qpi)
        if rejection is not None:
            if gated_by not in self._keyed_gates and (rejection.plugin or _PRE_ENQUEUE) == gated_by:
                self._unschedulable_pods.count_incoming(event)
                return
            self._apply_pre_enqueue(qpi, rejection)
            self._unschedulable_pods.add_again(qpi, event)
            return
        self._apply_pre_enqueue(qpi, None)
        self._leave(qpi.pod.metadata.uid)
        self._requeue(qpi, strategy, event, plugin, pre_enqueued=True)

    def _held_by(self, gate: str) -> Container[str]:
        """The pods ``gate`` holds now (none known: each pod is asked)."""
        if self._held_pods is None:
            return ()
        try:
            return self._held_pods(gate) or ()
        except Exception:
            log.exception("held pods of %s failed", gate)
            return ()

    def _move_pods(
        self,
        pods: list[tuple[str, QueuedPodInfo]],
        event: ClusterEvent,
        old: Any,
        new: Any,
        *,
        flush: bool = False,
    ) -> None:
        """``movePodsToActiveOrBackoffQueue`` for pods currently in unschedulablePods (a list
        of them by UID the caller built: moves change unschedulablePods). ``flush``: the
        UnschedulableTimeout flush, which reaches gated pods whatever their gate registered.

        A pod gated by a plugin without gate keys, which the plugin says it still holds
        (:meth:`_held_by`, asked once per gate), stays as it is without PreEnqueue being run:
        the hints only decide whether it counts as arriving for the event, as upstream's move
        and PreEnqueue's rejection would count it.
        """
        label = ""  # the event's label, once a pod moves (most events move none)
        waiting, location = self._unschedulable_pods, self._location
        matching = self._matching(event)
        # Bound once: every event reaches every pod waiting for it, thousands at times.
        worth = self._worth_requeuing
        # Gates whose held pods stay in place: with pops from backoffQ only (else PreEnqueue
        # runs on the way to activeQ alone), and only gates without keys (the pod's may change).
        in_place = self._pop_from_backoff
        keyed = self._keyed_gates
        held: dict[str, Container[str]] = {}
        counted = 0
        for uid, qpi in pods:
            if location.get(uid) is not waiting:
                continue
            gated_by = qpi.gated_by
            if gated_by:
                if not matching[gated_by] and not flush:
                    # Only the gating plugin's events can lift its gate (and the flush).
                    continue
                if in_place and gated_by not in keyed:
                    holding = held.get(gated_by)
                    if holding is None:
                        holding = held[gated_by] = self._held_by(gated_by)
                    try:
                        still = uid in holding
                    except Exception:
                        log.exception("held pods of %s failed", gated_by)
                        still = False  # PreEnqueue says
                    if still:
                        if worth(qpi, event, old, new, matching)[0] is not _QUEUE_SKIP:
                            counted += 1
                        continue
            strategy, plugin = worth(qpi, event, old, new, matching)
            if strategy is _QUEUE_SKIP:
                continue
            label = label or event_label(event)
            if gated_by and in_place:
                self._requeue_gated(qpi, strategy, label, plugin)
                continue
            self._leave(uid)
            self._requeue(qpi, strategy, label, plugin)
        if counted:
            waiting.count_incoming(label or event_label(event), counted)
        self._move_request_cycle = self._active_q.scheduling_cycle
        self._active_q.add_event_if_any_in_flight(event, old, new)

    def _of_interest(self, event: ClusterEvent) -> bool:
        """``isEventOfInterest``: whether any plugin registered an event matching ``event``."""
        if is_wildcard(event):
            return True
        hit = self._interest.get(event)
        if hit is None:
            hit = any(event_matches(r, event) for r in self._registered)
            self._interest[event] = hit
        return hit

    # -- internals: hints ----------------------------------------------------------------------

    def _matching(self, event: ClusterEvent) -> _Matches:
        """Each plugin's registered events that ``event`` matches (any event, for a plugin that
        registered none)."""
        hit = self._matches.get(event)
        if hit is None:
            hit = self._matches[event] = _Matches(self._hints, event)
        return hit

    def _worth_requeuing(
        self,
        qpi: QueuedPodInfo,
        event: ClusterEvent,
        old: Any,
        new: Any,
        matching: _Matches | None = None,
    ) -> tuple[_Strategy, str]:
        """``isPodWorthRequeuing``: what ``event`` means for a pod rejected by some plugins, and
        the plugin whose hint decided it (``""`` if none did).

        A ``Queue`` hint from a Pending plugin requeues immediately (no backoff); from an
        Unschedulable plugin, after backoff. A hint that raises counts as ``Queue``.
        """
        pending = qpi.pending_plugins
        # Most rejected pods have no Pending plugin: no union to build then (events reach
        # thousands of waiting pods).
        rejectors = qpi.unschedulable_plugins | pending if pending else qpi.unschedulable_plugins
        if not rejectors:
            return _QUEUE_AFTER_BACKOFF, ""
        pod = qpi.pod_info.pod
        if matching is None:
            matching = self._matching(event)
        if matching.wildcard:
            # A wildcard event carrying a pod is meant for that pod only (ForceActivate).
            if new is not None and (
                not isinstance(new, Pod) or new.metadata.uid != pod.metadata.uid
            ):
                return _QUEUE_SKIP, ""
            return _QUEUE_AFTER_BACKOFF, ""
        strategy, by = _QUEUE_SKIP, ""
        for plugin in rejectors:
            for registered in matching[plugin]:
                hint = registered.hint
                if hint is not None:
                    try:
                        skip = hint(pod, old, new) is _SKIP
                    except Exception:
                        log.exception(
                            "QueueingHintFn of %s failed for pod %s; requeueing", plugin, pod.key
                        )
                        skip = False
                    if skip:
                        continue
                if plugin in pending:
                    return _QUEUE_IMMEDIATELY, plugin
                if not pending:
                    return _QUEUE_AFTER_BACKOFF, plugin
                strategy, by = _QUEUE_AFTER_BACKOFF, plugin
        return strategy, by

    def _hint_for_in_flight_pod(
        self, qpi: QueuedPodInfo, scheduling_cycle: int
    ) -> tuple[_Strategy, str]:
        """``determineSchedulingHintForInFlightPod``: did an event while the pod was being
        scheduled possibly make it schedulable, and by which plugin's hint?"""
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            # Failed with an error, not a rejection: retry after backoff.
            return _QUEUE_AFTER_BACKOFF, ""
        events = self._active_q.cluster_events_for_pod(qpi.pod.metadata.uid)
        if events is None:
            # Not popped from this queue: fall back to the scheduling cycle of the last move.
            log.warning("pod %s is not in flight", qpi.pod.key)
            if self._move_request_cycle >= scheduling_cycle:
                return _QUEUE_AFTER_BACKOFF, ""
            return _QUEUE_SKIP, ""
        strategy, by = _QUEUE_SKIP, ""
        for e in events:
            s, plugin = self._worth_requeuing(qpi, e.event, e.old, e.new)
            if s is _QUEUE_IMMEDIATELY:
                return s, plugin
            if s is _QUEUE_AFTER_BACKOFF:
                strategy, by = s, plugin
                if not qpi.pending_plugins:
                    return s, plugin
        return strategy, by

    # -- internals: metrics --------------------------------------------------------------------

    def _report(self) -> None:
        metric = self._metric
        if metric is None:
            return
        active = self._active_q.size()
        waiting = self._unschedulable_pods
        gated = waiting.gated_size()
        rest = (self._backoff_q.size(), waiting.size() - gated, gated)
        reported = self._reported_rest
        if rest == reported:
            if active != self._reported_active:
                self._reported_active = active
                metric({ACTIVE: active})
            return
        changed = {
            q: n for q, n, before in zip(_NOT_ACTIVE, rest, reported, strict=True) if n != before
        }
        if active != self._reported_active:
            changed[ACTIVE] = active
        self._reported_active = active
        self._reported_rest = rest
        metric(changed)


def _with_node_taint(events: tuple[ClusterEventWithHint, ...]) -> tuple[ClusterEventWithHint, ...]:
    """A plugin that registered ``Node/Add`` but not ``Node/UpdateNodeTaint`` also hears taint
    updates, with no hint (``buildQueueingHintMap``'s mitigation of kubernetes#109437: a node
    added tainted and untainted later would otherwise never requeue that plugin's pods)."""
    nodes = [e.event.action for e in events if e.event.resource == NODE]
    if any(a & ActionType.ADD for a in nodes) and not any(
        a & ActionType.UPDATE_NODE_TAINT for a in nodes
    ):
        return (*events, ClusterEventWithHint(ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT)))
    return events
