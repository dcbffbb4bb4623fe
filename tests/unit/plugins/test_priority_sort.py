"""PrioritySort: kube-scheduler's priority_sort_test cases, plus the nil-priority rule."""

from __future__ import annotations

from typing import Any, cast

import pytest

from builders import make_pod
from kubesched.framework import Handle, PodInfo, QueuedPodInfo
from kubesched.plugins.priority_sort import PrioritySort, pod_priority


def queued(priority: int | None, timestamp: float, initial: float = 0.0) -> QueuedPodInfo:
    pod = make_pod(f"p{priority}-{timestamp}", priority=priority)
    return QueuedPodInfo(PodInfo.of(pod), initial_attempt_timestamp=initial, timestamp=timestamp)


PLUGIN = PrioritySort(cast(Handle, None))


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        pytest.param(queued(0, 1), queued(100, 1), False, id="p1 priority lower than p2"),
        pytest.param(queued(100, 1), queued(0, 1), True, id="p1 priority higher than p2"),
        pytest.param(queued(100, 1), queued(100, 2), True, id="equal priority, p1 queued earlier"),
        pytest.param(queued(100, 2), queued(100, 1), False, id="equal priority, p2 queued earlier"),
        pytest.param(queued(None, 1), queued(1, 1), False, id="unset priority counts as 0 (vs 1)"),
        pytest.param(queued(None, 1), queued(-1, 1), True, id="unset priority counts as 0 (vs -1)"),
        pytest.param(queued(None, 1), queued(0, 2), True, id="unset equals 0, then time decides"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, want: bool) -> None:
    assert PLUGIN.less(a, b) is want


def test_ties_use_the_queue_timestamp_not_the_first_attempt() -> None:
    # Upstream compares QueuedPodInfo.Timestamp; the initial attempt time must not decide.
    a = queued(5, timestamp=10, initial=1)
    b = queued(5, timestamp=5, initial=9)
    assert not PLUGIN.less(a, b)
    assert PLUGIN.less(b, a)


def test_pod_priority() -> None:
    assert pod_priority(make_pod("a")) == 0
    assert pod_priority(make_pod("b", priority=7)) == 7
    assert pod_priority(make_pod("c", priority=-3)) == -3


def test_sorting_a_queue() -> None:
    import functools

    items = [queued(0, 3), queued(10, 4), queued(None, 1), queued(10, 2), queued(-5, 0)]
    order = sorted(
        items,
        key=functools.cmp_to_key(
            lambda x, y: -1 if PLUGIN.less(x, y) else (1 if PLUGIN.less(y, x) else 0)
        ),
    )
    got: list[Any] = [(pod_priority(q.pod), q.timestamp) for q in order]
    assert got == [(10, 2), (10, 4), (0, 1), (0, 3), (-5, 0)]


def test_sort_key_orders_exactly_as_less() -> None:
    items = [
        queued(p, t, initial=i) for p in (None, -5, 0, 10) for t in (1.0, 2.5) for i in (0.0, 9.0)
    ]
    for a in items:
        for b in items:
            assert (PLUGIN.sort_key(a) < PLUGIN.sort_key(b)) is PLUGIN.less(a, b)
