"""activeQ and the pods in flight (kube-scheduler's ``activeQueue``).

activeQ holds the pods ready to be tried, in QueueSort order. A pod popped from it is *in
flight* until its attempt is over; the cluster events that arrive meanwhile are kept here, so
that a failed attempt can be checked against them (docs/queue.md).
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.api import Pod
from kubesched.framework import ClusterEvent, QueuedPodInfo, SortKeyFn
from kubesched.scheduler._events import POP_FROM_BACKOFF_Q
from kubesched.scheduler._heap import Heap, LessFn

#: The sub-queue's name in metrics and logs.
ACTIVE = "active"

#: Pruned in-flight events tolerated at the head of the list before it is cut.
_PRUNE_AFTER = 256


class BackoffQPopper(Protocol):
    """Where a pop goes when activeQ is empty (``SchedulerPopFromBackoffQ``)."""

    def pop_backoff(self) -> QueuedPodInfo | None: ...


@dataclass(slots=True)
class InFlightEvent:
    """A cluster event that arrived while pods were in flight (``clusterEvent``)."""

    seq: int
    event: ClusterEvent
    old: Any
    new: Any


class ActiveQueue:
    """activeQ, the pods in flight and the events seen while they are, and the scheduling cycle.

    Pods are keyed by UID. :meth:`pop` hands the head out (or, when activeQ is empty, the head of
    backoffQ) and records the pod as in flight until :meth:`done`.
    """

    name = ACTIVE

    def __init__(
        self,
        less: LessFn,
        sort_key: SortKeyFn | None,
        incoming: dict[str, int],
        backoff: BackoffQPopper | None = None,
    ) -> None:
        """``sort_key``, if QueueSort has one, orders the heap without calling ``less``;
        ``incoming`` counts the pods entering activeQ by event; ``backoff``, if given, is popped
        from when activeQ is empty."""
        self._incoming = incoming
        self._backoff = backoff
        self._heap = Heap(less, sort_key)
        #: How many pods are queued (reports read it on every pop).
        self.size: Callable[[], int] = self._heap.size
        #: The heap's own methods, without a call through this class's.
        self.delete: Callable[[str], bool] = self._heap.delete
        self.get: Callable[[str], QueuedPodInfo | None] = self._heap.get
        #: How many pods have been popped; the cycle of the pod popped last.
        self.scheduling_cycle = 0
        self._closed = False
        self._wakeup = asyncio.Event()

        # In flight: UID -> the sequence number of its pop, with the pod as popped, the version
        # an update brought meanwhile, and whether it was deleted meanwhile.
        self._seq = 0
        self._in_flight: dict[str, int] = {}
        #: Whether a pod is in flight (the dict's own ``__contains__``: asked on every move).
        self.in_flight: Callable[[object], bool] = self._in_flight.__contains__
        self._in_flight_pods: dict[str, Pod] = {}
        self._updated: dict[str, Pod] = {}
        self._deleted: set[str] = set()
        # Events since the oldest pod in flight was popped, in sequence order, from _events_head.
        self._events: list[InFlightEvent] = []
        self._events_head = 0

    # -- the queue -----------------------------------------------------------------------------

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """Queue the pod; ``event`` is what moved it here (``scheduler_queue_incoming_pods``)."""
        self._heap.add(qpi)
        counts = self._incoming
        counts[event] = counts.get(event, 0) + 1
        self._wakeup.set()

    def update(self, qpi: QueuedPodInfo) -> None:
        """Sort a queued pod again (an update may have changed its priority)."""
        self._heap.add(qpi)
        self._wakeup.set()

    def pods(self) -> Iterable[Pod]:
        return (qpi.pod for qpi in self._heap.pod_infos())

    def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ, else of backoffQ, now in flight; ``None`` if there is none.

        The pod's ``attempts`` is incremented and its rejecting plugins are reset for the new
        attempt.
        """
        if self._closed:
            return None
        qpi = self._heap.pop()
        if qpi is None:
            qpi = None if self._backoff is None else self._backoff.pop_backoff()
            if qpi is None:
                return None
            counts = self._incoming
            counts[POP_FROM_BACKOFF_Q] = counts.get(POP_FROM_BACKOFF_Q, 0) + 1
        pod = qpi.pod
        uid = pod.metadata.uid
        qpi.attempts += 1
        # Fresh sets, not cleared ones: the last attempt's may still be read elsewhere. An
        # empty one is kept (most pods were never rejected).
        if qpi.unschedulable_plugins:
            qpi.unschedulable_plugins = set()
        if qpi.pending_plugins:
            qpi.pending_plugins = set()
        self._seq += 1
        self._in_flight[uid] = self._seq
        self._in_flight_pods[uid] = pod
        self.scheduling_cycle += 1
        return qpi

    async def wait(self) -> None:
        """Until a pod may be ready (:meth:`broadcast`) or the queue is closed."""
        self._wakeup.clear()
        await self._wakeup.wait()

    def broadcast(self) -> None:
        """Wake a waiting :meth:`wait` (a pod was added to activeQ, or to backoffQ when pops
        from it are on)."""
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- in flight -----------------------------------------------------------------------------

    def in_flight_pod(self, uid: str) -> Pod | None:
        """The pod in flight in its latest known version."""
        return self._updated.get(uid) or self._in_flight_pods.get(uid)

    def in_flight_pods(self) -> list[Pod]:
        return list(self._in_flight_pods.values())

    def updated_in_flight(self, uid: str) -> Pod | None:
        """The version an update brought while the pod was in flight, if any."""
        return self._updated.get(uid)

    def delete_in_flight(self, uid: str) -> bool:
        """The pod in flight was deleted: its attempt's outcome is to be dropped."""
        if uid not in self._in_flight:
            return False
        self._deleted.add(uid)
        return True

    def deleted_in_flight(self, uid: str) -> bool:
        return uid in self._deleted

    def add_events_if_pod_in_flight(
        self, old: Pod | None, new: Pod, events: Iterable[ClusterEvent]
    ) -> bool:
        """Keep events about a pod in flight, for when its attempt ends."""
        if new.metadata.uid not in self._in_flight:
            return False
        for event in events:
            self._seq += 1
            self._events.append(InFlightEvent(self._seq, event, old, new))
        return True

    def update_in_flight(self, old: Pod | None, new: Pod, events: Iterable[ClusterEvent]) -> bool:
        """Keep an update of a pod in flight: its events, and the new version it comes back in."""
        if not self.add_events_if_pod_in_flight(old, new, events):
            return False
        self._updated[new.metadata.uid] = new
        return True

    def add_event_if_any_in_flight(self, event: ClusterEvent, old: Any, new: Any) -> bool:
        if not self._in_flight:
            return False
        self._seq += 1
        self._events.append(InFlightEvent(self._seq, event, old, new))
        return True

    def cluster_events_for_pod(self, uid: str) -> list[InFlightEvent] | None:
        """The events since the pod was popped; ``None`` if it is not in flight."""
        start = self._in_flight.get(uid)
        if start is None:
            return None
        events = self._events
        i = bisect.bisect_right(events, start, lo=self._events_head, key=lambda e: e.seq)
        return events[i:]

    def done(self, uid: str) -> None:
        """The attempt for the pod is over; events no pod in flight needs are dropped."""
        if self._in_flight.pop(uid, None) is None:
            return
        self._in_flight_pods.pop(uid, None)
        self._updated.pop(uid, None)
        self._deleted.discard(uid)
        if not self._in_flight:
            self._events.clear()
            self._events_head = 0
            return
        oldest = next(iter(self._in_flight.values()))
        events, head = self._events, self._events_head
        while head < len(events) and events[head].seq < oldest:
            head += 1
        if head > _PRUNE_AFTER and head * 2 > len(events):
            del events[:head]
            head = 0
        self._events_head = head
