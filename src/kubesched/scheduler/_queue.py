"""The scheduling queue: kube-scheduler's ``PriorityQueue``, on one asyncio event loop.

Pods waiting to be scheduled live in exactly one of three places:

- **activeQ**, a heap ordered by the profiles' QueueSort ``less``: pods ready to be tried;
- **backoffQ**, two heaps ordered by backoff expiry: pods that failed and wait out a backoff
  (``initial * 2^(attempts-1)``, capped) before they go back to activeQ; pods that failed with
  an error (no rejecting plugin) have a heap of their own;
- **unschedulablePods**, a map: pods rejected by plugins, waiting for a cluster event one of those
  plugins registered (and whose queueing hint says ``Queue``). Pods a PreEnqueue plugin rejects
  (scheduling gates) wait here too, with ``gated_by`` set.

:meth:`SchedulingQueue.pop` hands the head of activeQ out and records the pod as *in flight*
until :meth:`SchedulingQueue.done`. Events that arrive while a pod is in flight are kept, so that
when the attempt fails :meth:`SchedulingQueue.add_unschedulable_if_not_present` can tell whether
one of them may already have made the pod schedulable (then it goes to backoffQ, not to
unschedulablePods where it could wait for an event that has already passed).

The behaviour is kube-scheduler v1.34's with its default feature gates: queueing hints on
(``SchedulerQueueingHints``) and pops from backoffQ when activeQ is empty
(``SchedulerPopFromBackoffQ``, which also orders backoffQ in one-second windows and runs PreEnqueue
when a pod enters backoffQ). ``pop_from_backoff=False`` gives the older behaviour.

Nothing here blocks or yields except :meth:`SchedulingQueue.pop` (waiting for a pod) and
:meth:`SchedulingQueue.run` (the periodic flushes), so every other method is atomic with respect
to the scheduling loop and informer callbacks on the same event loop.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import enum
import heapq
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
from kubesched.scheduler._events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_WILDCARD,
    NODE,
    UNSCHEDULABLE_POD,
    event_matches,
    is_wildcard,
    pod_scheduling_properties_change,
)

log = logging.getLogger(__name__)

#: kube-scheduler's defaults (``podInitialBackoffSeconds``, ``podMaxBackoffSeconds``, and the
#: hard-coded time after which a pod leaves unschedulablePods whatever happened).
DEFAULT_POD_INITIAL_BACKOFF = 1.0
DEFAULT_POD_MAX_BACKOFF = 10.0
DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION = 300.0
#: How often completed backoffs are flushed to activeQ, and the width of the backoffQ ordering
#: window (pods whose backoff ends in the same window are ordered by ``less``).
BACKOFF_FLUSH_INTERVAL = 1.0
#: How often unschedulablePods is checked for pods that waited too long.
UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

#: Sub-queue names, as the ``scheduler_pending_pods{queue}`` metric labels them.
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
#: The sub-queues other than activeQ, in the order :meth:`SchedulingQueue._report` keeps counts.
_NOT_ACTIVE = (BACKOFF, UNSCHEDULABLE, GATED)

_PRE_ENQUEUE = "PreEnqueue"
#: What a rejecting plugin that registered no events is taken to have registered.
_ALL_EVENTS: tuple[ClusterEventWithHint, ...] = (ClusterEventWithHint(EVENT_WILDCARD),)

#: ``(pod) -> Status | None``: the pod's profile's PreEnqueue plugins.
PreEnqueueFn = Callable[[Pod], Status | None]
#: ``(a, b) -> bool``: whether ``a`` is scheduled before ``b`` (QueueSort).
LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]
#: Receives the number of pending pods of the sub-queues whose number changed.
PendingPodsMetric = Callable[[dict[str, int]], None]


class _Strategy(enum.IntEnum):
    """Where a pod goes after an event (kube-scheduler's ``queueingStrategy``)."""

    SKIP = 0
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


# --- heap entries --------------------------------------------------------------------------


class _ActiveEntry:
    """An activeQ entry; removal marks it dead (the heap drops it when it surfaces).

    The heap holds tuples ending in the entry (:meth:`item`): the fields of the entry's QueueSort
    key before it when QueueSort has one, so that the heap compares keys without calling back into
    Python, or else the entry alone, which compares through ``less``. The key's fields are spread
    into the item rather than nested, which halves the cost of a pop (one QueueSort, so keys of one
    length). Equal keys fall through to the entries, whose ``less`` agrees with the key: neither
    sorts before the other.
    """

    __slots__ = ("alive", "key", "less", "qpi")

    def __init__(
        self, qpi: QueuedPodInfo, less: LessFn, key: tuple[int | float, ...] | None
    ) -> None:
        self.qpi = qpi
        self.less = less
        self.key = key
        self.alive = True

    def __lt__(self, other: _ActiveEntry) -> bool:
        return self.less(self.qpi, other.qpi)

    def item(self) -> _ActiveItem:
        return (self,) if self.key is None else (*self.key, self)


#: An activeQ heap item: ``(*key, entry)`` or ``(entry,)`` (see :class:`_ActiveEntry`).
_ActiveItem = tuple[Any, ...]


class _BackoffEntry:
    """A backoffQ heap entry: ordered by expiry, then by ``less`` (pods heap) or arrival."""

    __slots__ = ("alive", "error", "expiry", "less", "qpi", "seq")

    def __init__(
        self, qpi: QueuedPodInfo, expiry: float, seq: int, less: LessFn | None, error: bool
    ) -> None:
        self.qpi = qpi
        self.expiry = expiry
        self.seq = seq
        self.less = less
        self.error = error
        self.alive = True

    def __lt__(self, other: _BackoffEntry) -> bool:
        if self.expiry != other.expiry:
            return self.expiry < other.expiry
        if self.less is not None:
            return self.less(self.qpi, other.qpi)
        return self.seq < other.seq


@dataclass(slots=True)
class _InFlightEvent:
    seq: int
    event: ClusterEvent
    old: Any
    new: Any


# --- the queue -----------------------------------------------------------------------------


class SchedulingQueue:
    """kube-scheduler's ``PriorityQueue``: activeQ, backoffQ, unschedulablePods and the nominator.

    Pods are keyed by UID. A pod is in at most one sub-queue at a time, and every path either
    keeps it in one or hands it out through :meth:`pop`; only :meth:`delete` drops a pod.
    """

    def __init__(
        self,
        *,
        less: LessFn,
        sort_key: SortKeyFn | None = None,
        pre_enqueue: PreEnqueueFn | None = None,
        events_to_register: Mapping[str, Iterable[ClusterEventWithHint]] | None = None,
        pod_initial_backoff: float = DEFAULT_POD_INITIAL_BACKOFF,
        pod_max_backoff: float = DEFAULT_POD_MAX_BACKOFF,
        pod_max_in_unschedulable_pods_duration: float = (
            DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION
        ),
        clock: Callable[[], float] = time.monotonic,
        pending_pods_metric: PendingPodsMetric | None = None,
        pop_from_backoff: bool = True,
    ) -> None:
        """Build an empty queue.

        ``less`` is the QueueSort of the profiles (they all share one); ``sort_key``, if the
        QueueSort has one (``Framework.sort_key``), orders the activeQ without calling ``less``.
        ``pre_enqueue`` runs the PreEnqueue plugins of the pod's profile. ``events_to_register``
        maps a plugin name to the events that may make pods it rejected schedulable (the union
        over profiles); a plugin that rejects a pod but registered nothing is woken by every
        event, as in kube-scheduler.
        ``clock`` returns monotonic seconds.
        """
        self._less = less
        self._sort_key = sort_key
        self._pre_enqueue = pre_enqueue
        self._hints: dict[str, tuple[ClusterEventWithHint, ...]] = {
            plugin: _with_node_taint(tuple(events))
            for plugin, events in (events_to_register or {}).items()
        }
        self._registered = {e.event for events in self._hints.values() for e in events}
        self._interest: dict[ClusterEvent, bool] = {}
        self._initial_backoff = pod_initial_backoff
        self._max_backoff = pod_max_backoff
        self._max_in_unschedulable = pod_max_in_unschedulable_pods_duration
        self._clock = clock
        self._metric = pending_pods_metric
        self._pop_from_backoff = pop_from_backoff

        # activeQ
        self._active: dict[str, _ActiveEntry] = {}
        self._active_heap: list[_ActiveItem] = []
        # backoffQ: pods rejected by plugins (poppable when activeQ is empty), pods that erred
        self._backoff: dict[str, _BackoffEntry] = {}
        self._backoff_heap: list[_BackoffEntry] = []
        self._error_heap: list[_BackoffEntry] = []
        self._backoff_seq = 0
        self._dead = 0
        # unschedulablePods, with the gated subset and the pods any event may move (no rejecting
        # plugin, or one that registered no events)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: set[str] = set()
        self._catch_all: set[str] = set()
        # pods whose initial attempt timestamp is set when they first become active
        self._not_yet_active: set[str] = set()

        # in flight: pod UID -> sequence number at pop; events seen since, in sequence order
        self._seq = 0
        self._in_flight: dict[str, int] = {}
        self._in_flight_pods: dict[str, Pod] = {}
        self._in_flight_latest: dict[str, Pod] = {}
        self._in_flight_deleted: set[str] = set()
        self._events: list[_InFlightEvent] = []
        self._events_head = 0
        self._cycle = 0
        self._move_request_cycle = -1

        # nominator: node -> UIDs in nomination order; UID -> node; UID -> last known PodInfo
        self._nominated: dict[str, dict[str, None]] = {}
        self._nominated_node: dict[str, str] = {}
        self._nominated_info: dict[str, PodInfo] = {}

        self._closed = False
        self._closed_event = asyncio.Event()
        self._wakeup = asyncio.Event()
        # Nothing reported yet: every count differs from -1. activeQ's count apart from the
        # others': most reports (a pop, an add) change it alone.
        self._reported_active = -1
        self._reported_rest = (-1, -1, -1)

    # -- informer events for pending pods ------------------------------------------------------

    def add(self, pod: Pod) -> None:
        """A new pending pod: to activeQ, or unschedulablePods if a PreEnqueue plugin gates it.

        A pod the queue already knows (a re-list) is handled as an update.
        """
        uid = pod.metadata.uid
        known = self._known_pod(uid)
        if known is not None:
            self.update(known, pod)
            return
        qpi = self._new_queued_pod_info(pod)
        self._move_to_active(qpi, nominate=True)
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
        if uid in self._in_flight:
            self._in_flight_latest[uid] = new
            for event in events:
                self._record_event(event, old, new)
            self._update_nominated(old or new, PodInfo.of(new))
            return
        entry = self._active.get(uid)
        if entry is not None:
            entry.qpi.pod_info = PodInfo.of(new)
            self._active_add(entry.qpi)  # re-sorted: the priority may have changed
            self._update_nominated(old or new, entry.qpi.pod_info)
            return
        bentry = self._backoff.get(uid)
        if bentry is not None:
            bentry.qpi.pod_info = PodInfo.of(new)
            self._backoff_add(bentry.qpi)
            self._update_nominated(old or new, bentry.qpi.pod_info)
            return
        qpi = self._unschedulable.get(uid)
        if qpi is not None:
            qpi.pod_info = PodInfo.of(new)
            self._update_nominated(old or new, qpi.pod_info)
            for event in events:
                strategy = self._worth_requeuing(qpi, event, old, new)
                if strategy == _Strategy.SKIP:
                    continue
                where = self._requeue(qpi, strategy)
                if where == ACTIVE or (self._pop_from_backoff and where == BACKOFF):
                    break
            self._report()
            return
        qpi = self._new_queued_pod_info(new)
        self._move_to_active(qpi, nominate=True)
        self._report()

    def delete(self, pod: Pod) -> None:
        """The pod is gone (or bound): removed from every sub-queue and the nominator.

        If it is in flight, the attempt's outcome is dropped when it comes back.
        """
        uid = pod.metadata.uid
        self._nominator_delete(uid)
        # Mostly a pod just bound, in no sub-queue: then no count changes.
        if uid in self._active or uid in self._backoff or uid in self._unschedulable:
            self._active_remove(uid)
            self._backoff_remove(uid)
            self._unschedulable_remove(uid)
            self._report()
        self._not_yet_active.discard(uid)
        if uid in self._in_flight:
            self._in_flight_deleted.add(uid)

    def activate(self, pods: Iterable[Pod]) -> None:
        """``Activate``: move pods from unschedulablePods or backoffQ to activeQ now.

        A pod in flight gets a wildcard event recorded, so it is retried when it comes back.
        """
        for pod in pods:
            uid = pod.metadata.uid
            qpi = self._unschedulable.get(uid)
            from_backoff = False
            if qpi is None:
                entry = self._backoff.get(uid)
                if entry is not None:
                    qpi = entry.qpi
                    self._backoff_remove(uid)
                    from_backoff = True
            if qpi is not None:
                self._move_to_active(qpi, from_backoff=from_backoff)
                continue
            if uid in self._in_flight:
                self._record_event(EVENT_FORCE_ACTIVATE, None, pod)
                self._move_request_cycle = self._cycle
        self._report()

    # -- the scheduling loop ---------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule, waiting while there is none; ``None`` once closed.

        The pod's ``attempts`` is incremented, its rejecting plugins are reset for the new
        attempt, and it is in flight until :meth:`done`.
        """
        while True:
            qpi = self.try_pop()
            if qpi is not None or self._closed:
                return qpi
            self._wakeup.clear()
            await self._wakeup.wait()

    def try_pop(self) -> QueuedPodInfo | None:
        """Like :meth:`pop` without waiting: ``None`` if no pod is ready now."""
        while not self._closed:
            qpi = self._active_pop()
            if qpi is None and self._pop_from_backoff:
                qpi = self._backoff_pop()
            if qpi is None:
                return None
            uid = qpi.pod.metadata.uid
            if uid in self._in_flight:
                log.error("pod %s is tracked in the queue and in flight; discarded", qpi.pod.key)
                continue
            qpi.attempts += 1
            # Fresh sets, not cleared ones: the last attempt's may still be read elsewhere. An
            # empty one is kept (most pods were never rejected).
            if qpi.unschedulable_plugins:
                qpi.unschedulable_plugins = set()
            if qpi.pending_plugins:
                qpi.pending_plugins = set()
            self._seq += 1
            self._in_flight[uid] = self._seq
            self._in_flight_pods[uid] = qpi.pod
            self._cycle += 1
            self._report()
            return qpi
        return None

    def done(self, uid: str) -> None:
        """The attempt for the pod handed out by :meth:`pop` is over (bound or requeued)."""
        if self._in_flight.pop(uid, None) is None:
            return
        self._in_flight_pods.pop(uid, None)
        self._in_flight_latest.pop(uid, None)
        self._in_flight_deleted.discard(uid)
        if not self._in_flight:
            self._events.clear()
            self._events_head = 0
            return
        # Events older than the oldest pod still in flight are needed by nobody.
        oldest = next(iter(self._in_flight.values()))
        events, head = self._events, self._events_head
        while head < len(events) and events[head].seq < oldest:
            head += 1
        if head > 256 and head * 2 > len(events):
            del events[:head]
            head = 0
        self._events_head = head

    @property
    def scheduling_cycle(self) -> int:
        """How many pods have been popped; the cycle of the pod popped last."""
        return self._cycle

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
            if uid in self._in_flight_deleted:
                return
            latest = self._in_flight_latest.get(uid)
            if latest is not None and latest is not qpi.pod:
                qpi.pod_info = PodInfo.of(latest)
            if qpi.pod.spec.node_name:
                return
            where = self._where(uid)
            if where is not None:
                log.error("pod %s is already present in the %s queue", qpi.pod.key, where)
                return
            qpi.timestamp = self._clock()
            strategy = self._hint_for_in_flight_pod(qpi, scheduling_cycle)
            self._requeue(qpi, strategy)
        finally:
            self.done(uid)
            self._report()

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
        pods = self._candidates(event)
        if pre_check is not None:
            pods = [p for p in pods if pre_check(p.pod)]
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
        now = self._align(self._clock())
        done: list[QueuedPodInfo] = []
        for heap in (self._backoff_heap, self._error_heap):
            while heap:
                entry = heap[0]
                if not entry.alive:
                    heapq.heappop(heap)
                    self._dead -= 1
                    continue
                if entry.expiry >= now:
                    break
                heapq.heappop(heap)
                del self._backoff[entry.qpi.pod.metadata.uid]
                done.append(entry.qpi)
        for qpi in done:
            self._move_to_active(qpi, from_backoff=True)
        self._report()

    def flush_unschedulable_leftover(self) -> None:
        """Pods in unschedulablePods for longer than the maximum go to activeQ or backoffQ."""
        now = self._clock()
        stale = [
            q
            for q in self._unschedulable.values()
            if now - q.timestamp > self._max_in_unschedulable
        ]
        if stale:
            self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)
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
        while not self._closed:
            now = self._clock()
            delay = backoff_flush_interval - math.fmod(now, backoff_flush_interval)
            if delay <= 0 or delay > backoff_flush_interval:
                delay = backoff_flush_interval
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed_event.wait(), timeout=delay)
            if self._closed:
                return
            self.flush_backoff_completed()
            if self._clock() >= next_leftover:
                self.flush_unschedulable_leftover()
                next_leftover = self._clock() + unschedulable_flush_interval

    def close(self) -> None:
        """Stop: :meth:`pop` returns ``None`` from now on and :meth:`run` returns."""
        self._closed = True
        self._closed_event.set()
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- nominator -----------------------------------------------------------------------------

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None) -> None:
        """Record that ``pod_info``'s pod is nominated to run on ``node_name`` (preemption made
        room there). ``None`` takes the node from ``status.nominatedNodeName``; ``""`` clears the
        nomination. A bound or deleted pod is not nominated."""
        pod = pod_info.pod
        uid = pod.metadata.uid
        self._nominator_delete(uid)
        node = pod.status.nominated_node_name if node_name is None else node_name
        if not node or pod.spec.node_name or uid in self._in_flight_deleted:
            return
        self._nominated_node[uid] = node
        self._nominated_info[uid] = pod_info
        self._nominated.setdefault(node, {})[uid] = None

    def delete_nominated_pod_if_exists(self, pod: Pod) -> None:
        self._nominator_delete(pod.metadata.uid)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name``, in nomination order, in their latest version."""
        out: list[PodInfo] = []
        for uid in self._nominated.get(node_name, ()):
            qpi = self._get_queued(uid)
            out.append(qpi.pod_info if qpi is not None else self._nominated_info[uid])
        return out

    def nominated_node(self, uid: str) -> str | None:
        return self._nominated_node.get(uid)

    def nominated_nodes(self) -> list[str]:
        """The nodes with at least one nominated pod."""
        return list(self._nominated)

    # -- reading -------------------------------------------------------------------------------

    def pending_pods(self) -> list[Pod]:
        """Every pod in activeQ, backoffQ and unschedulablePods (gated included)."""
        return [
            *(e.qpi.pod for e in self._active.values()),
            *(e.qpi.pod for e in self._backoff.values()),
            *(q.pod for q in self._unschedulable.values()),
        ]

    def counts(self) -> dict[str, int]:
        """Pending pods per sub-queue, as ``scheduler_pending_pods`` labels them."""
        gated = len(self._gated)
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable) - gated,
            GATED: gated,
        }

    def pending_summary(self) -> str:
        """kube-scheduler's ``activeQ:1; backoffQ:0; unschedulablePods:2``."""
        return (
            f"activeQ:{len(self._active)}; backoffQ:{len(self._backoff)}; "
            f"unschedulablePods:{len(self._unschedulable)}"
        )

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._unschedulable)

    def in_flight_pods(self) -> list[Pod]:
        return list(self._in_flight_pods.values())

    def where(self, uid: str) -> str | None:
        """``"active"``, ``"backoff"``, ``"unschedulable"``, ``"gated"``, ``"in-flight"`` or
        ``None``."""
        w = self._where(uid)
        if w is None and uid in self._in_flight:
            return "in-flight"
        return w

    def get(self, uid: str) -> QueuedPodInfo | None:
        """The queued pod with this UID, if it is in a sub-queue."""
        return self._get_queued(uid)

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self._backoff_expiry(qpi) >= self._align(self._clock())

    def backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        """When the pod's backoff ends (clock seconds, aligned down to the ordering window)."""
        return self._backoff_expiry(qpi)

    # -- internals: placement ------------------------------------------------------------------

    def _new_queued_pod_info(self, pod: Pod) -> QueuedPodInfo:
        now = self._clock()
        self._not_yet_active.add(pod.metadata.uid)
        return QueuedPodInfo(pod_info=PodInfo.of(pod), initial_attempt_timestamp=now, timestamp=now)

    def _run_pre_enqueue(self, qpi: QueuedPodInfo) -> None:
        """Run PreEnqueue; a rejecting plugin gates the pod and counts as rejecting it."""
        if self._pre_enqueue is None:
            qpi.gated_by = ""
            return
        try:
            status = self._pre_enqueue(qpi.pod)
        except Exception as e:
            log.exception("PreEnqueue failed for pod %s", qpi.pod.key)
            status = Status.as_error(e)
        if status is None or status.code == Code.SUCCESS:
            qpi.gated_by = ""
            return
        plugin = status.plugin or _PRE_ENQUEUE
        qpi.unschedulable_plugins.add(plugin)
        qpi.gated_by = plugin

    def _move_to_active(
        self, qpi: QueuedPodInfo, *, from_backoff: bool = False, nominate: bool = False
    ) -> bool:
        """``moveToActiveQ``: to activeQ if PreEnqueue lets it, else to unschedulablePods.

        PreEnqueue already ran when a pod entered backoffQ, so it is not repeated for a pod coming
        from there (with pops from backoffQ on).
        """
        if not (self._pop_from_backoff and from_backoff):
            self._run_pre_enqueue(qpi)
        if qpi.gated_by:
            self._unschedulable_put(qpi)
            return False
        uid = qpi.pod.metadata.uid
        if uid in self._not_yet_active:
            self._not_yet_active.discard(uid)
            qpi.initial_attempt_timestamp = self._clock()
        self._active_add(qpi)
        if nominate:
            self.add_nominated_pod(qpi.pod_info, None)
        return True

    def _move_to_backoff(self, qpi: QueuedPodInfo) -> bool:
        """``moveToBackoffQ``; with pops from backoffQ, PreEnqueue runs here and may gate."""
        if self._pop_from_backoff:
            self._run_pre_enqueue(qpi)
            if qpi.gated_by:
                self._unschedulable_put(qpi)
                return False
        self._backoff_add(qpi)
        return True

    def _requeue(self, qpi: QueuedPodInfo, strategy: _Strategy) -> str:
        """``requeuePodWithQueueingStrategy``: the sub-queue the pod ends up in."""
        if strategy == _Strategy.SKIP:
            self._unschedulable_put(qpi)
            return UNSCHEDULABLE
        if strategy == _Strategy.AFTER_BACKOFF and self.is_backing_off(qpi):
            return BACKOFF if self._move_to_backoff(qpi) else UNSCHEDULABLE
        return ACTIVE if self._move_to_active(qpi) else UNSCHEDULABLE

    def _move_pods(
        self, pods: Iterable[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any
    ) -> None:
        """``movePodsToActiveOrBackoffQueue`` for pods currently in unschedulablePods."""
        for qpi in list(pods):
            if qpi.pod.metadata.uid not in self._unschedulable:
                continue
            if qpi.gated_by and not any(
                event_matches(e.event, event) for e in self._events_of(qpi.gated_by)
            ):
                # Only the gating plugin's events can lift its gate.
                continue
            strategy = self._worth_requeuing(qpi, event, old, new)
            if strategy == _Strategy.SKIP:
                continue
            self._unschedulable_remove(qpi.pod.metadata.uid)
            self._requeue(qpi, strategy)
        self._move_request_cycle = self._cycle
        self._record_event(event, old, new)

    def _candidates(self, event: ClusterEvent) -> list[QueuedPodInfo]:
        if self._of_interest(event):
            return list(self._unschedulable.values())
        # No registered event matches: only pods that any event moves.
        return [self._unschedulable[uid] for uid in self._catch_all]

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

    def _events_of(self, plugin: str) -> tuple[ClusterEventWithHint, ...]:
        return self._hints.get(plugin, _ALL_EVENTS)

    def _worth_requeuing(
        self, qpi: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any
    ) -> _Strategy:
        """``isPodWorthRequeuing``: what ``event`` means for a pod rejected by some plugins.

        A ``Queue`` hint from a Pending plugin requeues immediately (no backoff); from an
        Unschedulable plugin, after backoff. A hint that raises counts as ``Queue``.
        """
        pending = qpi.pending_plugins
        rejectors = qpi.unschedulable_plugins | pending
        if not rejectors:
            return _Strategy.AFTER_BACKOFF
        if is_wildcard(event):
            # A wildcard event carrying a pod is meant for that pod only (ForceActivate).
            if new is not None and (
                not isinstance(new, Pod) or new.metadata.uid != qpi.pod.metadata.uid
            ):
                return _Strategy.SKIP
            return _Strategy.AFTER_BACKOFF
        strategy = _Strategy.SKIP
        for plugin in rejectors:
            for registered in self._events_of(plugin):
                if not event_matches(registered.event, event):
                    continue
                if self._hint(plugin, registered, qpi.pod, old, new) == QueueingHint.SKIP:
                    continue
                if plugin in pending:
                    return _Strategy.IMMEDIATELY
                if not pending:
                    return _Strategy.AFTER_BACKOFF
                strategy = _Strategy.AFTER_BACKOFF
        return strategy

    @staticmethod
    def _hint(
        plugin: str, registered: ClusterEventWithHint, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        if registered.hint is None:
            return QueueingHint.QUEUE
        try:
            return registered.hint(pod, old, new)
        except Exception:
            log.exception("QueueingHintFn of %s failed for pod %s; requeueing", plugin, pod.key)
            return QueueingHint.QUEUE

    def _hint_for_in_flight_pod(self, qpi: QueuedPodInfo, scheduling_cycle: int) -> _Strategy:
        """``determineSchedulingHintForInFlightPod``: did an event while the pod was being
        scheduled possibly make it schedulable?"""
        if not qpi.unschedulable_plugins and not qpi.pending_plugins:
            # Failed with an error, not a rejection: retry after backoff.
            return _Strategy.AFTER_BACKOFF
        start = self._in_flight.get(qpi.pod.metadata.uid)
        if start is None:
            # Not popped from this queue: fall back to the scheduling cycle of the last move.
            log.warning("pod %s is not in flight", qpi.pod.key)
            if self._move_request_cycle >= scheduling_cycle:
                return _Strategy.AFTER_BACKOFF
            return _Strategy.SKIP
        events = self._events
        i = bisect.bisect_right(events, start, lo=self._events_head, key=lambda e: e.seq)
        strategy = _Strategy.SKIP
        for e in events[i:]:
            s = self._worth_requeuing(qpi, e.event, e.old, e.new)
            if s == _Strategy.IMMEDIATELY:
                return s
            if s == _Strategy.AFTER_BACKOFF:
                strategy = s
                if not qpi.pending_plugins:
                    return s
        return strategy

    def _record_event(self, event: ClusterEvent, old: Any, new: Any) -> None:
        """Keep ``event`` for the pods in flight (only while there are some)."""
        if self._in_flight:
            self._seq += 1
            self._events.append(_InFlightEvent(self._seq, event, old, new))

    # -- internals: backoff --------------------------------------------------------------------

    def _align(self, t: float) -> float:
        if not self._pop_from_backoff:
            return t
        return math.floor(t / BACKOFF_FLUSH_INTERVAL) * BACKOFF_FLUSH_INTERVAL

    def _backoff_duration(self, attempts: int) -> float:
        if attempts <= 0:
            return 0.0
        shift = attempts - 1
        if shift >= 63 or self._initial_backoff * (1 << shift) > self._max_backoff:
            return self._max_backoff
        return float(self._initial_backoff * (1 << shift))

    def _backoff_expiry(self, qpi: QueuedPodInfo) -> float:
        if qpi.attempts <= 0:
            # Never tried: no backoff penalty.
            return -math.inf
        return self._align(qpi.timestamp + self._backoff_duration(qpi.attempts))

    # -- internals: sub-queues -----------------------------------------------------------------

    def _where(self, uid: str) -> str | None:
        if uid in self._active:
            return ACTIVE
        if uid in self._backoff:
            return BACKOFF
        if uid in self._unschedulable:
            return GATED if uid in self._gated else UNSCHEDULABLE
        return None

    def _get_queued(self, uid: str) -> QueuedPodInfo | None:
        entry = self._active.get(uid)
        if entry is not None:
            return entry.qpi
        bentry = self._backoff.get(uid)
        if bentry is not None:
            return bentry.qpi
        return self._unschedulable.get(uid)

    def _known_pod(self, uid: str) -> Pod | None:
        qpi = self._get_queued(uid)
        if qpi is not None:
            return qpi.pod
        if uid in self._in_flight:
            return self._in_flight_latest.get(uid) or self._in_flight_pods[uid]
        return None

    def _active_add(self, qpi: QueuedPodInfo) -> None:
        uid = qpi.pod.metadata.uid
        self._backoff_remove(uid)
        self._unschedulable_remove(uid)
        self._active_remove(uid)
        key = self._sort_key
        entry = _ActiveEntry(qpi, self._less, None if key is None else key(qpi))
        self._active[uid] = entry
        heapq.heappush(self._active_heap, entry.item())
        self._wakeup.set()

    def _active_remove(self, uid: str) -> None:
        entry = self._active.pop(uid, None)
        if entry is not None:
            entry.alive = False
            self._dead += 1
            self._maybe_compact()

    def _active_pop(self) -> QueuedPodInfo | None:
        heap = self._active_heap
        while heap:
            entry: _ActiveEntry = heapq.heappop(heap)[-1]
            if entry.alive:
                del self._active[entry.qpi.pod.metadata.uid]
                return entry.qpi
            self._dead -= 1
        return None

    def _backoff_add(self, qpi: QueuedPodInfo) -> None:
        uid = qpi.pod.metadata.uid
        self._active_remove(uid)
        self._unschedulable_remove(uid)
        self._backoff_remove(uid)
        error = not qpi.unschedulable_plugins and not qpi.pending_plugins
        self._backoff_seq += 1
        entry = _BackoffEntry(
            qpi,
            self._backoff_expiry(qpi),
            self._backoff_seq,
            None if error or not self._pop_from_backoff else self._less,
            error,
        )
        self._backoff[uid] = entry
        heapq.heappush(self._error_heap if error else self._backoff_heap, entry)
        if not error and self._pop_from_backoff:
            self._wakeup.set()

    def _backoff_remove(self, uid: str) -> None:
        entry = self._backoff.pop(uid, None)
        if entry is not None:
            entry.alive = False
            self._dead += 1
            self._maybe_compact()

    def _backoff_pop(self) -> QueuedPodInfo | None:
        """The head of the backoffQ of rejected pods, backing off or not (activeQ is empty)."""
        heap = self._backoff_heap
        while heap:
            entry = heapq.heappop(heap)
            if entry.alive:
                del self._backoff[entry.qpi.pod.metadata.uid]
                return entry.qpi
            self._dead -= 1
        return None

    def _maybe_compact(self) -> None:
        live = len(self._active) + len(self._backoff)
        if self._dead <= 64 or self._dead <= live:
            return
        self._active_heap = [e.item() for e in self._active.values()]
        heapq.heapify(self._active_heap)
        self._backoff_heap = [e for e in self._backoff.values() if not e.error]
        heapq.heapify(self._backoff_heap)
        self._error_heap = [e for e in self._backoff.values() if e.error]
        heapq.heapify(self._error_heap)
        self._dead = 0

    def _unschedulable_put(self, qpi: QueuedPodInfo) -> None:
        uid = qpi.pod.metadata.uid
        self._active_remove(uid)
        self._backoff_remove(uid)
        self._unschedulable[uid] = qpi
        if qpi.gated_by:
            self._gated.add(uid)
        else:
            self._gated.discard(uid)
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors or any(p not in self._hints for p in rejectors):
            self._catch_all.add(uid)
        else:
            self._catch_all.discard(uid)

    def _unschedulable_remove(self, uid: str) -> None:
        if self._unschedulable.pop(uid, None) is not None:
            self._gated.discard(uid)
            self._catch_all.discard(uid)

    # -- internals: nominator ------------------------------------------------------------------

    def _nominator_delete(self, uid: str) -> None:
        node = self._nominated_node.pop(uid, None)
        if node is None:
            return
        # Recorded together with the node, in add_nominated_pod.
        del self._nominated_info[uid]
        uids = self._nominated.get(node)
        if uids is not None:
            uids.pop(uid, None)
            if not uids:
                del self._nominated[node]

    def _update_nominated(self, old: Pod, new: PodInfo) -> None:
        """``UpdateNominatedPod``: follow the pod's ``status.nominatedNodeName``, but keep a
        nomination made in memory when neither version carries one (the status update that
        records it may not have arrived yet)."""
        node: str | None = None
        if not old.status.nominated_node_name and not new.pod.status.nominated_node_name:
            node = self._nominated_node.get(old.metadata.uid)
        self._nominator_delete(old.metadata.uid)
        self.add_nominated_pod(new, node)

    # -- internals: metrics --------------------------------------------------------------------

    def _report(self) -> None:
        metric = self._metric
        if metric is None:
            return
        active = len(self._active)
        gated = len(self._gated)
        rest = (len(self._backoff), len(self._unschedulable) - gated, gated)
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
