"""backoffQ: backoff durations, the ordering window, the two heaps (kube-scheduler's
backoff_queue_test.go scenarios)."""

from __future__ import annotations

import math

import pytest

from builders import make_pod
from kubesched.framework import PodInfo, QueuedPodInfo
from kubesched.scheduler._backoff_queue import BackoffQueue


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def priority_first(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    return (a.pod.spec.priority or 0) > (b.pod.spec.priority or 0)


def qinfo(
    name: str, *, attempts: int, at: float, priority: int = 0, rejected: bool = True
) -> QueuedPodInfo:
    qpi = QueuedPodInfo(
        PodInfo.of(make_pod(name, priority=priority)),
        initial_attempt_timestamp=at,
        timestamp=at,
        attempts=attempts,
    )
    if rejected:
        qpi.unschedulable_plugins = {"Fit"}
    return qpi


def make(
    clock: Clock, *, windowed: bool = True, incoming: dict[str, int] | None = None
) -> BackoffQueue:
    return BackoffQueue(
        priority_first,
        {} if incoming is None else incoming,
        initial=1.0,
        maximum=10.0,
        clock=clock,
        pop_from_backoff=windowed,
    )


@pytest.mark.parametrize(
    ("attempts", "seconds"),
    [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (64, 10.0), (1000, 10.0)],
)
def test_backoff_doubles_from_initial_up_to_max(attempts: int, seconds: float) -> None:
    q = make(Clock(0.0), windowed=False)
    assert q.backoff_time(qinfo("p", attempts=attempts, at=100.0)) == 100.0 + seconds


def test_a_pod_never_tried_has_no_backoff() -> None:
    q = make(Clock(0.0))
    qpi = qinfo("p", attempts=0, at=100.0)
    assert q.backoff_time(qpi) == -math.inf
    assert not q.is_backing_off(qpi)


def test_backoff_ends_on_whole_windows_with_pops_from_backoffq() -> None:
    clock = Clock(101.2)
    qpi = qinfo("p", attempts=1, at=100.6)
    assert make(clock, windowed=True).backoff_time(qpi) == 101.0
    assert make(clock, windowed=True).is_backing_off(qpi)  # 101.0 >= align(101.2)
    assert make(clock, windowed=False).backoff_time(qpi) == pytest.approx(101.6)
    clock.now = 102.0
    assert not make(clock, windowed=True).is_backing_off(qpi)


def test_completed_backoffs_leave_both_heaps_in_expiry_order() -> None:
    clock = Clock(100.0)
    q = make(clock, windowed=False)
    late = qinfo("late", attempts=3, at=100.0)  # 104
    early = qinfo("early", attempts=1, at=100.0)  # 101
    erred = qinfo("erred", attempts=2, at=100.0, rejected=False)  # 102
    for x in (late, early, erred):
        q.add(x, "ScheduleAttemptFailure")
    assert q.pop_all_backoff_completed() == []
    clock.now = 102.5
    assert q.pop_all_backoff_completed() == [early, erred]
    assert q.size() == 1
    assert "late" in [p.metadata.name for p in q.pods()]
    clock.now = 200.0
    assert q.pop_all_backoff_completed() == [late]
    assert q.size() == 0


def test_pop_backoff_takes_rejected_pods_only_by_window_then_priority() -> None:
    q = make(Clock(100.0))
    low = qinfo("low", attempts=1, at=100.2, priority=1)
    high = qinfo("high", attempts=1, at=100.7, priority=9)  # same window as low
    later = qinfo("later", attempts=2, at=100.0, priority=99)
    erred = qinfo("erred", attempts=1, at=50.0, rejected=False)
    for x in (low, later, erred, high):
        q.add(x, "ScheduleAttemptFailure")
    assert [q.pop_backoff() for _ in range(4)] == [high, low, later, None]
    assert q.get(erred.pod.metadata.uid) is erred


def test_only_adds_count_as_incoming() -> None:
    incoming: dict[str, int] = {}
    q = make(Clock(100.0), incoming=incoming)
    qpi = qinfo("p", attempts=1, at=100.0)
    q.add(qpi, "ScheduleAttemptFailure")
    q.update(qpi)
    assert q.delete(qpi.pod.metadata.uid)
    assert not q.delete(qpi.pod.metadata.uid)
    q.add(qpi, "NodeAdd")
    assert incoming == {"ScheduleAttemptFailure": 1, "NodeAdd": 1}


def test_a_pod_moves_between_heaps_when_readded() -> None:
    clock = Clock(100.0)
    q = make(clock)
    qpi = qinfo("p", attempts=1, at=100.0, rejected=False)
    q.add(qpi, "ScheduleAttemptFailure")
    assert q.pop_backoff() is None  # an erring pod waits out its backoff
    qpi.unschedulable_plugins = {"Fit"}
    q.add(qpi, "ScheduleAttemptFailure")
    assert q.size() == 1
    assert q.pop_backoff() is qpi
    assert q.size() == 0


def test_many_deletes_keep_the_heaps_in_order() -> None:
    clock = Clock(0.0)
    q = make(clock, windowed=False)
    pods = [qinfo(f"p{i}", attempts=1, at=float(i), rejected=i % 3 != 0) for i in range(300)]
    for p in pods:
        q.add(p, "ScheduleAttemptFailure")
    for p in pods[::2]:
        q.delete(p.pod.metadata.uid)
    clock.now = 1000.0
    done = q.pop_all_backoff_completed()
    rejected = [p for p in pods[1::2] if p.unschedulable_plugins]
    erred = [p for p in pods[1::2] if not p.unschedulable_plugins]
    assert done == rejected + erred
