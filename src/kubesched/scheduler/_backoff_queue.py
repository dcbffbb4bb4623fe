"""backoffQ: pods that failed, waiting out their backoff (kube-scheduler's ``backoffQueue``)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable

from kubesched.api import Pod
from kubesched.framework import QueuedPodInfo
from kubesched.scheduler._heap import Heap, LessFn

#: The sub-queue's name in metrics and logs.
BACKOFF = "backoff"

#: ``backoffQOrderingWindowDuration``: with pops from backoffQ, backoffs end on whole windows,
#: and pods whose backoff ends in the same window are ordered by QueueSort.
ORDERING_WINDOW = 1.0


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
        self._initial = initial
        self._max = maximum
        self._clock = clock
        self._windowed = pop_from_backoff
        # With ordering windows QueueSort orders the rejected pods of a window; elsewhere equal
        # expiries go by arrival (numbers no two pods share, so ``less`` is never reached).
        self._arrivals = itertools.count()
        self._incoming = incoming
        self._pods = Heap(less, self._expiry if pop_from_backoff else self._expiry_then_arrival)
        self._errors = Heap(less, self._expiry_then_arrival)

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

    def size(self) -> int:
        """How many pods are queued."""
        return self._pods.size() + self._errors.size()

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """Queue the pod; ``event`` is what moved it here (``scheduler_queue_incoming_pods``)."""
        self._heap_for(qpi).add(qpi)
        counts = self._incoming
        counts[event] = counts.get(event, 0) + 1

    def update(self, qpi: QueuedPodInfo) -> None:
        """Sort a queued pod again, after an update."""
        self._heap_for(qpi).add(qpi)

    def delete(self, uid: str) -> bool:
        return self._pods.delete(uid) or self._errors.delete(uid)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid) or self._errors.get(uid)

    def pods(self) -> Iterable[Pod]:
        return (q.pod for h in (self._pods, self._errors) for q in h.pod_infos())

    def pop_backoff(self) -> QueuedPodInfo | None:
        """The head of the rejected pods' heap, backing off or not (activeQ is empty)."""
        return self._pods.pop()

    def pop_all_backoff_completed(self) -> list[QueuedPodInfo]:
        """Every pod whose backoff is over, out of the queue."""
        # Every key starts with the pod's expiry.
        now = (self.align(self._clock()),)
        return self._pods.pop_below(now) + self._errors.pop_below(now)

    def _heap_for(self, qpi: QueuedPodInfo) -> Heap:
        """The heap the pod goes in (the error one if no plugin rejected it), the pod taken out of
        the other one if it is there."""
        if qpi.unschedulable_plugins or qpi.pending_plugins:
            heap, other = self._pods, self._errors
        else:
            heap, other = self._errors, self._pods
        uid = qpi.pod_info.pod.metadata.uid  # as Heap.add reads it, a call less than qpi.pod
        if other.has(uid):
            other.delete(uid)
        return heap

    def _expiry(self, qpi: QueuedPodInfo) -> tuple[float]:
        return (self.backoff_time(qpi),)

    def _expiry_then_arrival(self, qpi: QueuedPodInfo) -> tuple[float, int]:
        return self.backoff_time(qpi), next(self._arrivals)
