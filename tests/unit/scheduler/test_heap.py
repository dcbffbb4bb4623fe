"""The heap of activeQ and backoffQ (kube-scheduler's heap_test.go scenarios)."""

from __future__ import annotations

import msgspec
import pytest

from builders import make_pod
from kubesched.framework import PodInfo, QueuedPodInfo, SortKeyFn
from kubesched.scheduler._heap import Heap


def qinfo(name: str, priority: int = 0, at: float = 0.0) -> QueuedPodInfo:
    pod = make_pod(name, priority=priority)
    return QueuedPodInfo(PodInfo.of(pod), initial_attempt_timestamp=at, timestamp=at)


def uid(qpi: QueuedPodInfo) -> str:
    return qpi.pod.metadata.uid


def reprioritized(qpi: QueuedPodInfo, priority: int) -> QueuedPodInfo:
    """The same pod (same UID), updated to another priority."""
    spec = msgspec.structs.replace(qpi.pod.spec, priority=priority)
    pod = msgspec.structs.replace(qpi.pod, spec=spec)
    return QueuedPodInfo(PodInfo.of(pod), qpi.initial_attempt_timestamp, qpi.timestamp)


def priority_first(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.pod.spec.priority or 0, b.pod.spec.priority or 0
    return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def priority_key(qpi: QueuedPodInfo) -> tuple[int | float, ...]:
    return (-(qpi.pod.spec.priority or 0), qpi.timestamp)


def by_timestamp(qpi: QueuedPodInfo) -> tuple[int | float, ...]:
    return (qpi.timestamp,)


def drain(heap: Heap) -> list[str]:
    out: list[str] = []
    while (qpi := heap.pop()) is not None:
        out.append(qpi.pod.metadata.name)
    return out


KEYS = pytest.mark.parametrize("key", [None, priority_key], ids=["less", "sort_key"])


@KEYS
def test_pops_in_order(key: SortKeyFn | None) -> None:
    heap = Heap(priority_first, key)
    for x in (qinfo("low", 0, 1), qinfo("high", 9, 3), qinfo("mid-early", 5, 0)):
        heap.add(x)
    heap.add(qinfo("mid-late", 5, 2))
    assert drain(heap) == ["high", "mid-early", "mid-late", "low"]
    assert heap.pop() is None


def test_less_orders_pods_of_equal_keys() -> None:
    heap = Heap(priority_first, by_timestamp)
    for x in (qinfo("late", 9, 2), qinfo("low", 1, 1), qinfo("high", 9, 1)):
        heap.add(x)
    assert drain(heap) == ["high", "low", "late"]


@KEYS
def test_adding_a_pod_again_sorts_it_again(key: SortKeyFn | None) -> None:
    heap = Heap(priority_first, key)
    a, b, c = qinfo("a", 1, 0), qinfo("b", 2, 1), qinfo("c", 3, 2)
    for x in (a, b, c):
        heap.add(x)
    a = reprioritized(a, 9)
    heap.add(a)
    assert heap.size() == 3
    assert heap.get(uid(a)) is a
    assert heap.pop() is a
    heap.add(reprioritized(a, 0))
    assert drain(heap) == ["c", "b", "a"]


@KEYS
def test_delete_then_add_again(key: SortKeyFn | None) -> None:
    heap = Heap(priority_first, key)
    a, b = qinfo("a", 5), qinfo("b", 1)
    heap.add(a)
    heap.add(b)
    assert heap.delete(uid(a))
    assert not heap.delete(uid(a))
    assert (heap.size(), heap.has(uid(a)), heap.get(uid(a))) == (1, False, None)
    heap.add(a)
    assert (heap.size(), heap.has(uid(a)), heap.get(uid(a))) == (2, True, a)
    assert drain(heap) == ["a", "b"]


@KEYS
def test_compaction_keeps_the_order(key: SortKeyFn | None) -> None:
    heap = Heap(priority_first, key)
    pods = [qinfo(f"p{i}", i % 7, at=i) for i in range(300)]
    for p in pods:
        heap.add(p)
    # Deleting most pods rebuilds the heap from the live ones, more than once.
    for i, p in enumerate(pods):
        if i % 5:
            assert heap.delete(uid(p))
    kept = pods[::5]
    assert heap.size() == len(kept)
    assert [q.pod.metadata.name for q in heap.pod_infos()] == [p.pod.metadata.name for p in kept]
    kept.sort(key=priority_key)
    assert drain(heap) == [p.pod.metadata.name for p in kept]
    assert heap.size() == 0


def test_pop_below_takes_the_pods_keyed_below_the_bound_in_order() -> None:
    heap = Heap(priority_first, by_timestamp)
    assert heap.pop_below((9.0,)) == []
    pods = {n: qinfo(n, 0, at) for n, at in (("c", 3.0), ("a", 1.0), ("gone", 1.5), ("b", 2.0))}
    for p in pods.values():
        heap.add(p)
    heap.delete(uid(pods["gone"]))
    assert heap.pop_below((1.0,)) == []
    assert heap.pop_below((2.0,)) == [pods["a"]]
    assert heap.pop_below((3.5,)) == [pods["b"], pods["c"]]
    assert (heap.size(), heap.pop()) == (0, None)


def test_pop_below_leaves_keys_that_start_with_the_bound() -> None:
    heap = Heap(priority_first, lambda q: (q.timestamp, q.pod.spec.priority or 0))
    at_two, at_one = qinfo("at-two", 5, 2.0), qinfo("at-one", 5, 1.0)
    heap.add(at_two)
    heap.add(at_one)
    assert heap.pop_below((2.0,)) == [at_one]
    assert heap.has(uid(at_two))


def test_a_removed_pod_changed_afterwards_leaves_the_others_in_order() -> None:
    """A removed entry stays in the heap until it surfaces and still takes part in its
    comparisons: what becomes of the pod's QueuedPodInfo once it left (requeued elsewhere,
    made more or less important) must not change how that entry compares."""
    heap = Heap(priority_first, None)
    priorities = [13, 9, 11, 9, 5, 17, 8]
    pods = [qinfo(f"p{i}", priority=p, at=i) for i, p in enumerate(priorities)]
    for x in pods:
        heap.add(x)
    gone = pods[0]
    heap.delete(uid(gone))
    gone.pod_info = reprioritized(gone, -5).pod_info
    assert drain(heap) == ["p5", "p2", "p1", "p3", "p6", "p4"]
