"""activeQ: QueueSort order, pops from backoffQ, the pods in flight and the events seen meanwhile
(kube-scheduler's active_queue_test.go scenarios)."""

from __future__ import annotations

import asyncio

import msgspec

from builders import make_pod
from kubesched.api import Pod
from kubesched.framework import ActionType, ClusterEvent, PodInfo, QueuedPodInfo
from kubesched.scheduler._active_queue import ActiveQueue
from kubesched.scheduler._events import POP_FROM_BACKOFF_Q

NODE_ADD = ClusterEvent("Node", ActionType.ADD)


def qinfo(name: str, priority: int = 0, at: float = 0.0) -> QueuedPodInfo:
    pod = make_pod(name, priority=priority)
    return QueuedPodInfo(PodInfo.of(pod), initial_attempt_timestamp=at, timestamp=at)


def uid(x: QueuedPodInfo | Pod) -> str:
    pod = x.pod if isinstance(x, QueuedPodInfo) else x
    return pod.metadata.uid


def with_priority(pod: Pod, priority: int) -> Pod:
    """The same pod (same UID), updated to another priority."""
    spec = msgspec.structs.replace(pod.spec, priority=priority)
    return msgspec.structs.replace(pod, spec=spec)


def priority_first(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.pod.spec.priority or 0, b.pod.spec.priority or 0
    if pa != pb:
        return pa > pb
    return a.initial_attempt_timestamp < b.initial_attempt_timestamp


def priority_key(qpi: QueuedPodInfo) -> tuple[int | float, ...]:
    return (-(qpi.pod.spec.priority or 0), qpi.initial_attempt_timestamp)


class Popper:
    """A backoffQ stand-in: hands out its pods in order."""

    def __init__(self, *pods: QueuedPodInfo) -> None:
        self.pods = list(pods)

    def pop_backoff(self) -> QueuedPodInfo | None:
        return self.pods.pop(0) if self.pods else None


def drain(q: ActiveQueue) -> list[str]:
    out: list[str] = []
    while (qpi := q.pop()) is not None:
        out.append(qpi.pod.metadata.name)
    return out


def test_pops_follow_less_and_the_sort_key_alike() -> None:
    for key in (None, priority_key):
        q = ActiveQueue(priority_first, key, {})
        q.add(qinfo("low", 0, at=1), "Add")
        q.add(qinfo("high", 10, at=3), "Add")
        q.add(qinfo("mid-early", 5, at=0), "Add")
        q.add(qinfo("mid-late", 5, at=2), "Add")
        assert drain(q) == ["high", "mid-early", "mid-late", "low"]


def test_update_resorts_and_delete_removes() -> None:
    q = ActiveQueue(priority_first, priority_key, {})
    a, b, c = qinfo("a", 1, at=0), qinfo("b", 2, at=1), qinfo("c", 3, at=2)
    for x in (a, b, c):
        q.add(x, "Add")
    a.pod_info = PodInfo.of(with_priority(a.pod, 9))
    q.update(a)
    assert q.delete(uid(c))
    assert not q.delete(uid(c))
    assert q.size() == 2
    assert q.get(uid(b)) is b
    assert q.get(uid(c)) is None
    assert q.get(uid(a)) is a
    assert drain(q) == ["a", "b"]


def test_many_deletes_keep_the_heap_in_order() -> None:
    q = ActiveQueue(priority_first, None, {})
    pods = [qinfo(f"p{i}", i % 7, at=i) for i in range(300)]
    for p in pods:
        q.add(p, "Add")
    for p in pods[::2]:
        q.delete(uid(p))
    kept = sorted(pods[1::2], key=priority_key)
    assert drain(q) == [p.pod.metadata.name for p in kept]


def test_pop_puts_the_pod_in_flight_and_resets_its_rejections() -> None:
    q = ActiveQueue(priority_first, None, {})
    qpi = qinfo("p")
    qpi.unschedulable_plugins = {"Fit"}
    qpi.pending_plugins = {"Gate"}
    q.add(qpi, "Add")
    popped = q.pop()
    assert popped is qpi
    assert (qpi.attempts, qpi.unschedulable_plugins, qpi.pending_plugins) == (1, set(), set())
    assert q.scheduling_cycle == 1
    assert q.in_flight(uid(qpi))
    assert q.in_flight_pods() == [qpi.pod]
    q.done(uid(qpi))
    assert not q.in_flight(uid(qpi))
    assert q.in_flight_pods() == []


def test_empty_activeq_pops_from_backoffq_and_counts_it() -> None:
    incoming: dict[str, int] = {}
    waiting = qinfo("waiting")
    q = ActiveQueue(priority_first, None, incoming, Popper(waiting))
    q.add(qinfo("ready"), "Add")
    assert drain(q) == ["ready", "waiting"]
    assert incoming == {"Add": 1, POP_FROM_BACKOFF_Q: 1}


def test_only_adds_count_as_incoming() -> None:
    incoming: dict[str, int] = {}
    q = ActiveQueue(priority_first, None, incoming)
    qpi = qinfo("p")
    q.add(qpi, "UnschedulablePodAdd")
    q.update(qpi)
    q.delete(uid(qpi))
    q.add(qpi, "UnschedulablePodAdd")
    assert incoming == {"UnschedulablePodAdd": 2}


def test_events_are_kept_only_while_pods_are_in_flight() -> None:
    q = ActiveQueue(priority_first, None, {})
    assert not q.add_event_if_any_in_flight(NODE_ADD, None, "n0")
    first, second = qinfo("first", 1), qinfo("second")
    q.add(first, "Add")
    q.add(second, "Add")
    q.pop()
    assert q.add_event_if_any_in_flight(NODE_ADD, None, "n1")
    q.pop()
    assert q.add_event_if_any_in_flight(NODE_ADD, None, "n2")
    seen = q.cluster_events_for_pod(uid(first))
    assert seen is not None
    assert [e.new for e in seen] == ["n1", "n2"]
    seen = q.cluster_events_for_pod(uid(second))
    assert seen is not None
    assert [e.new for e in seen] == ["n2"]
    assert q.cluster_events_for_pod("unknown") is None
    q.done(uid(first))
    # Only what the pod still in flight may need is kept.
    assert [e.new for e in q._events[q._events_head :]] == ["n2"]
    q.done(uid(second))
    assert q._events == []


def test_updates_and_deletes_of_a_pod_in_flight_are_kept_until_done() -> None:
    q = ActiveQueue(priority_first, None, {})
    qpi = qinfo("p")
    other = make_pod("other")
    q.add(qpi, "Add")
    q.pop()
    newer = with_priority(qpi.pod, 3)
    label = ClusterEvent("UnschedulablePod", ActionType.UPDATE_POD_LABEL)
    assert q.update_in_flight(qpi.pod, newer, [label])
    assert not q.update_in_flight(None, other, [label])
    assert q.updated_in_flight(uid(qpi)) is newer
    assert q.in_flight_pod(uid(qpi)) is newer
    seen = q.cluster_events_for_pod(uid(qpi))
    assert seen is not None
    assert [e.event for e in seen] == [label]
    # Events about a pod, without a new version of it (ForceActivate).
    assert q.add_events_if_pod_in_flight(None, newer, [NODE_ADD])
    assert q.updated_in_flight(uid(qpi)) is newer
    assert q.delete_in_flight(uid(qpi))
    assert not q.delete_in_flight(uid(other))
    assert q.deleted_in_flight(uid(qpi))
    q.done(uid(qpi))
    assert not q.deleted_in_flight(uid(qpi))
    assert q.updated_in_flight(uid(qpi)) is None


def test_wait_returns_on_broadcast_and_close() -> None:
    async def scenario() -> None:
        q = ActiveQueue(priority_first, None, {})
        waiter = asyncio.ensure_future(q.wait())
        await asyncio.sleep(0)
        assert not waiter.done()
        q.add(qinfo("p"), "Add")
        await asyncio.wait_for(waiter, 1)
        waiter = asyncio.ensure_future(q.wait())
        await asyncio.sleep(0)
        q.close()
        await asyncio.wait_for(waiter, 1)
        assert q.closed
        assert q.pop() is None  # closed: nothing is handed out any more

    asyncio.run(scenario())
