"""backoffQ: pods that failed, waiting out their backoff (kube-scheduler's ``backoffQueue``)."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable

from kubesched.api import Pod
from kubesched.framework import QueuedPodInfo
from kubesched.scheduler._active_queue import LessFn

#: The sub-queue's name in metrics and logs.
BACKOFF = "backoff"

#: ``backoffQOrderingWindowDuration``: with pops from backoffQ, backoffs end on whole windows,
#: and pods whose backoff ends in the same window are ordered by QueueSort.
ORDERING_WINDOW = 1.0

#: Dead heap entries tolerated before the heaps are rebuilt (and never more than live ones).
_COMPACT_AFTER = 64


class _Entry:
    """A heap entry: ordered by backoff expiry, then by ``less`` (pods heap) or arrival."""

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

    def __lt__(self, other: _Entry) -> bool:
        if self.expiry != other.expiry:
            return self.expiry < other.expiry
        if self.less is not None:
            return self.less(self.qpi, other.qpi)
        return self.seq < other.seq


class BackoffQueue:
    """Two heaps by backoff expiry: pods rejected by plugins (``podBackoffQ``, which a pop takes
    from when activeQ is empty) and pods that failed with an error (``podErrorBackoffQ``).

    The backoff is ``initial * 2^(attempts-1)``, capped at ``max``, from the pod's timestamp.
    """

    name = BACKOFF

    def __init__(
        self,
        less: LessFn,
        incoming: dict[str, int],
        *,
        initial: float,
        maximum: float,
        clock: Callable[[], float],
        pop_from_backoff: bool,
    ) -> None:
        """``incoming`` counts the pods entering backoffQ by event; ``pop_from_backoff`` is
        ``SchedulerPopFromBackoffQ`` (ordering windows, QueueSort order within one)."""
        self._less = less if pop_from_backoff else None
        self._incoming = incoming
        self._initial = initial
        self._max = maximum
        self._clock = clock
        self._windowed = pop_from_backoff
        self._entries: dict[str, _Entry] = {}
        #: How many pods are queued (the dict's own ``__len__``, cheap on the hot path).
        self.size: Callable[[], int] = self._entries.__len__
        self._heap: list[_Entry] = []
        self._error_heap: list[_Entry] = []
        self._seq = 0
        self._dead = 0

    # -- backoff -------------------------------------------------------------------------------

    def backoff_time(self, qpi: QueuedPodInfo) -> float:
        """``getBackoffTime``: when the pod's backoff ends (clock seconds, aligned down to the
        ordering window); ``-inf`` for a pod never tried."""
        if qpi.attempts <= 0:
            return -math.inf
        return self.align(qpi.timestamp + self._duration(qpi.attempts))

    def is_backing_off(self, qpi: QueuedPodInfo) -> bool:
        return self.backoff_time(qpi) >= self.align(self._clock())

    def align(self, t: float) -> float:
        if not self._windowed:
            return t
        return math.floor(t / ORDERING_WINDOW) * ORDERING_WINDOW

    def _duration(self, attempts: int) -> float:
        shift = attempts - 1
        if shift >= 63 or self._initial * (1 << shift) > self._max:
            return self._max
        return float(self._initial * (1 << shift))

    # -- the queue -----------------------------------------------------------------------------

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """Queue the pod; ``event`` is what moved it here (``scheduler_queue_incoming_pods``)."""
        self._push(qpi)
        counts = self._incoming
        counts[event] = counts.get(event, 0) + 1

    def update(self, qpi: QueuedPodInfo) -> None:
        """Sort a queued pod again, after an update."""
        self._push(qpi)

    def delete(self, uid: str) -> bool:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return False
        entry.alive = False
        self._dead += 1
        if self._dead > _COMPACT_AFTER and self._dead > len(self._entries):
            self._heap = [e for e in self._entries.values() if not e.error]
            heapq.heapify(self._heap)
            self._error_heap = [e for e in self._entries.values() if e.error]
            heapq.heapify(self._error_heap)
            self._dead = 0
        return True

    def get(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.get(uid)
        return None if entry is None else entry.qpi

    def pods(self) -> Iterable[Pod]:
        return (e.qpi.pod for e in self._entries.values())

    def pop_backoff(self) -> QueuedPodInfo | None:
        """The head of the rejected pods' heap, backing off or not (activeQ is empty)."""
        heap = self._heap
        while heap:
            entry = heapq.heappop(heap)
            if entry.alive:
                del self._entries[entry.qpi.pod.metadata.uid]
                return entry.qpi
            self._dead -= 1
        return None

    def pop_all_backoff_completed(self) -> list[QueuedPodInfo]:
        """Every pod whose backoff is over, out of the queue."""
        now = self.align(self._clock())
        done: list[QueuedPodInfo] = []
        for heap in (self._heap, self._error_heap):
            while heap:
                entry = heap[0]
                if not entry.alive:
                    heapq.heappop(heap)
                    self._dead -= 1
                    continue
                if entry.expiry >= now:
                    break
                heapq.heappop(heap)
                del self._entries[entry.qpi.pod.metadata.uid]
                done.append(entry.qpi)
        return done

    def _push(self, qpi: QueuedPodInfo) -> None:
        uid = qpi.pod.metadata.uid
        if uid in self._entries:
            self.delete(uid)
        error = not qpi.unschedulable_plugins and not qpi.pending_plugins
        self._seq += 1
        entry = _Entry(qpi, self.backoff_time(qpi), self._seq, None if error else self._less, error)
        self._entries[uid] = entry
        heapq.heappush(self._error_heap if error else self._heap, entry)
