"""The scheduling queue: kube-scheduler's PriorityQueue scenarios, on a clock moved by hand."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Container, Mapping
from typing import Any

import msgspec
import pytest

from builders import make_pod
from kubesched.api import Pod, Toleration
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Status,
)
from kubesched.scheduler._events import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_WILDCARD,
    event_matches,
    pod_scheduling_properties_change,
)
from kubesched.scheduler._scheduling_queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    UNSCHEDULABLE,
    SchedulingQueue,
)

NODE_ADD = ClusterEvent("Node", ActionType.ADD)
NODE_LABEL = ClusterEvent("Node", ActionType.UPDATE_NODE_LABEL)
NODE_TAINT = ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT)
NODE_ANNOTATION = ClusterEvent("Node", ActionType.UPDATE_NODE_ANNOTATION)
GATE_PLUGIN = "SchedulingGates"


class FakeClock:
    """Monotonic seconds that only move when the test says so."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def priority_sort(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort: higher priority first, then earlier first attempt."""
    pa, pb = a.pod.spec.priority or 0, b.pod.spec.priority or 0
    if pa != pb:
        return pa > pb
    return a.initial_attempt_timestamp < b.initial_attempt_timestamp


def scheduling_gates(pod: Pod, gating: str = "") -> Status | None:
    if pod.spec.scheduling_gates:
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates", plugin=GATE_PLUGIN
        )
    return None


DEFAULT_EVENTS: dict[str, list[ClusterEventWithHint]] = {
    "Fit": [
        ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL))
    ],
    "Taints": [ClusterEventWithHint(ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT))],
    GATE_PLUGIN: [
        ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED))
    ],
}


def make_queue(
    clock: FakeClock,
    events: Mapping[str, list[ClusterEventWithHint]] | None = None,
    **kwargs: Any,
) -> SchedulingQueue:
    kwargs.setdefault("pre_enqueue", scheduling_gates)
    return SchedulingQueue(
        less=priority_sort,
        events_to_register=DEFAULT_EVENTS if events is None else events,
        clock=clock,
        **kwargs,
    )


def pop(q: SchedulingQueue) -> QueuedPodInfo:
    qpi = q.try_pop()
    assert qpi is not None
    return qpi


def fail(
    q: SchedulingQueue, qpi: QueuedPodInfo, *plugins: str, pending: tuple[str, ...] = ()
) -> None:
    """End an attempt the way the scheduling loop does after a rejection (or an error)."""
    qpi.unschedulable_plugins = set(plugins)
    qpi.pending_plugins = set(pending)
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)


def relabel(pod: Pod, **labels: str) -> Pod:
    meta = msgspec.structs.replace(pod.metadata, labels={**pod.metadata.labels, **labels})
    return msgspec.structs.replace(pod, metadata=meta)


def with_spec(pod: Pod, **changes: Any) -> Pod:
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, **changes))


def uid(pod: Pod) -> str:
    return pod.metadata.uid


# --- ordering and popping -----------------------------------------------------------------


def test_pop_follows_priority_then_arrival() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    low = make_pod("low", priority=1)
    high = make_pod("high", priority=100)
    mid_first = make_pod("mid-first", priority=10)
    q.add(low)
    clock.step(1)
    q.add(mid_first)
    clock.step(1)
    q.add(high)
    clock.step(1)
    q.add(make_pod("mid-second", priority=10))
    names = [pop(q).pod.metadata.name for _ in range(4)]
    assert names == ["high", "mid-first", "mid-second", "low"]
    assert q.try_pop() is None


def test_a_sort_key_orders_the_active_queue_as_less_does() -> None:
    clock = FakeClock()
    q = make_queue(
        clock,
        sort_key=lambda qpi: (-(qpi.pod.spec.priority or 0), qpi.initial_attempt_timestamp),
    )
    pods = [make_pod(f"p{i}", priority=p) for i, p in enumerate((1, 10, 100, 10, 1, 100))]
    for pod in pods:
        q.add(pod)
        clock.step(1)
    # An update re-sorts the pod by its new key.
    q.update(pods[0], with_spec(pods[0], priority=50))
    names = [pop(q).pod.metadata.name for _ in pods]
    assert names == ["p2", "p5", "p0", "p1", "p3", "p4"]


def test_pods_whose_sort_keys_tie_are_ordered_by_less() -> None:
    clock = FakeClock()
    # A key that ties for every pod (by priority only); less also orders by first attempt.
    q = make_queue(clock, sort_key=lambda qpi: (-(qpi.pod.spec.priority or 0), 0))
    for i in (3, 1, 4, 0, 2):
        clock.now = 1000.0 + i
        q.add(make_pod(f"p{i}", priority=5 if i == 4 else 1))
    assert [pop(q).pod.metadata.name for _ in range(5)] == ["p4", "p0", "p1", "p2", "p3"]


def test_pop_counts_attempts_resets_plugins_and_tracks_in_flight() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    assert qpi.attempts == 1
    assert q.scheduling_cycle == 1
    assert q.where(uid(pod)) == "in-flight"
    assert q.in_flight_pods() == [pod]
    fail(q, qpi, "Fit")
    assert q.where(uid(pod)) == UNSCHEDULABLE
    assert q.in_flight_pods() == []
    clock.step(20)
    q.move_all_to_active_or_backoff(NODE_ADD)
    again = pop(q)
    assert again is qpi
    assert again.attempts == 2
    assert again.unschedulable_plugins == set()
    q.done(uid(pod))
    assert q.where(uid(pod)) is None


async def test_pop_waits_for_a_pod() -> None:
    q = make_queue(FakeClock())
    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    pod = make_pod("late")
    q.add(pod)
    qpi = await asyncio.wait_for(waiter, 1)
    assert qpi is not None
    assert qpi.pod is pod


async def test_close_releases_a_waiting_pop_and_later_pops() -> None:
    q = make_queue(FakeClock())
    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0.01)
    q.close()
    assert await asyncio.wait_for(waiter, 1) is None
    q.add(make_pod("after-close"))
    assert await q.pop() is None


# --- backoff ------------------------------------------------------------------------------


def test_backoff_doubles_from_initial_up_to_max() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False, pod_initial_backoff=1, pod_max_backoff=10)
    qpi = QueuedPodInfo(PodInfo.of(make_pod("p")), clock(), clock())
    durations = []
    for attempts in range(1, 8):
        qpi.attempts = attempts
        durations.append(q.backoff_expiry(qpi) - qpi.timestamp)
    assert durations == [1, 2, 4, 8, 10, 10, 10]
    qpi.attempts = 0
    assert not q.is_backing_off(qpi)


def test_errored_pod_waits_out_its_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    qpi = pop_fail_error(q, qpi)
    assert q.where(uid(pod)) == BACKOFF
    assert q.try_pop() is None  # activeQ empty, backoff not over
    clock.step(0.5)
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == BACKOFF
    clock.step(0.6)
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == ACTIVE
    # Second failure: two seconds.
    qpi = pop(q)
    pop_fail_error(q, qpi)
    clock.step(1.5)
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == BACKOFF
    clock.step(0.6)
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == ACTIVE


def pop_fail_error(q: SchedulingQueue, qpi: QueuedPodInfo) -> QueuedPodInfo:
    fail(q, qpi)
    return qpi


def test_backoff_is_aligned_to_whole_seconds_when_popping_from_backoff() -> None:
    clock = FakeClock(10.3)
    q = make_queue(clock)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    fail(q, qpi)  # error: backoff 1 s from 10.3, aligned down to 11.0
    assert q.backoff_expiry(qpi) == 11.0
    clock.now = 11.5  # in the window of the expiry: still backing off
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == BACKOFF
    clock.now = 12.0
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == ACTIVE


def test_pops_from_backoff_when_active_is_empty_but_not_errored_pods() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    rejected, errored = make_pod("rejected"), make_pod("errored")
    q.add(rejected)
    clock.step(0.001)
    q.add(errored)
    a, b = pop(q), pop(q)
    q.move_all_to_active_or_backoff(NODE_ADD)  # in flight: makes "Fit" rejections retry
    fail(q, a, "Fit")
    fail(q, b)
    assert q.where(uid(rejected)) == BACKOFF
    assert q.where(uid(errored)) == BACKOFF
    assert pop(q).pod is rejected  # still backing off, but nothing else to do
    assert q.try_pop() is None  # errored pods wait out their backoff


def test_backoff_pops_in_expiry_order_then_priority() -> None:
    clock = FakeClock(100.0)
    q = make_queue(clock)
    pods = [make_pod("low", priority=1), make_pod("high", priority=9), make_pod("later")]
    for p in pods:
        q.add(p)
    popped = {qpi.pod.metadata.name: qpi for qpi in (pop(q), pop(q), pop(q))}
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, popped["low"], "Fit")
    fail(q, popped["high"], "Fit")
    clock.step(1.0)
    fail(q, popped["later"], "Fit")
    order = [pop(q).pod.metadata.name for _ in range(3)]
    assert order == ["high", "low", "later"]


# --- unschedulable pods and events --------------------------------------------------------


def test_rejected_pod_waits_for_an_event_its_plugin_registered() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Taints")
    assert q.where(uid(pod)) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_ADD)  # only "Fit" registered it
    assert q.where(uid(pod)) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_TAINT)
    assert q.where(uid(pod)) == BACKOFF  # still within its 1 s backoff
    clock.step(2)
    q.flush_backoff_completed()
    assert q.where(uid(pod)) == ACTIVE


def test_event_after_backoff_goes_straight_to_active() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    clock.step(5)
    q.move_all_to_active_or_backoff(NODE_LABEL)
    assert q.where(uid(pod)) == ACTIVE


def test_broader_incoming_action_does_not_match_a_narrow_registration() -> None:
    narrow = ClusterEvent("Node", ActionType.UPDATE_NODE_LABEL)
    assert event_matches(narrow, ClusterEvent("Node", ActionType.UPDATE_NODE_LABEL))
    assert not event_matches(narrow, ClusterEvent("Node", ActionType.UPDATE))
    assert event_matches(ClusterEvent("Node", ActionType.UPDATE), narrow)
    assert not event_matches(narrow, ClusterEvent("Pod", ActionType.UPDATE_NODE_LABEL))
    pod_add = ClusterEvent("Pod", ActionType.ADD)
    assert event_matches(pod_add, ClusterEvent("AssignedPod", ActionType.ADD))
    assert event_matches(pod_add, ClusterEvent("UnschedulablePod", ActionType.ADD))
    assert not event_matches(ClusterEvent("AssignedPod", ActionType.ADD), pod_add)
    assert event_matches(ClusterEvent("*", ActionType.ADD), NODE_ADD)
    assert event_matches(EVENT_WILDCARD, NODE_TAINT)
    assert not event_matches(NODE_ADD, EVENT_WILDCARD)


def test_queueing_hint_decides_per_event() -> None:
    seen: list[Any] = []

    def only_gpu_nodes(pod: Pod, old: Any, new: Any) -> QueueingHint:
        seen.append(new)
        if new is not None and new.get("gpu"):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    events = {"Fit": [ClusterEventWithHint(NODE_ADD, only_gpu_nodes)]}
    clock = FakeClock()
    q = make_queue(clock, events, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    clock.step(5)
    q.move_all_to_active_or_backoff(NODE_ADD, None, {"gpu": False})
    assert q.where(uid(pod)) == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(NODE_ADD, None, {"gpu": True})
    assert q.where(uid(pod)) == ACTIVE
    assert seen == [{"gpu": False}, {"gpu": True}]


def test_a_failing_hint_counts_as_queue() -> None:
    def broken(pod: Pod, old: Any, new: Any) -> QueueingHint:
        raise RuntimeError("bug")

    clock = FakeClock()
    q = make_queue(clock, {"Fit": [ClusterEventWithHint(NODE_ADD, broken)]})
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    clock.step(5)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where(uid(pod)) == ACTIVE


def test_pending_plugin_queue_hint_skips_backoff() -> None:
    clock = FakeClock()
    events = {"Volumes": [ClusterEventWithHint(ClusterEvent("PersistentVolume", ActionType.ADD))]}
    q = make_queue(clock, events, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    fail(q, qpi, pending=("Volumes",))
    assert q.where(uid(pod)) == UNSCHEDULABLE
    assert q.is_backing_off(qpi)
    q.move_all_to_active_or_backoff(ClusterEvent("PersistentVolume", ActionType.ADD))
    assert q.where(uid(pod)) == ACTIVE


def test_plugin_without_registered_events_is_woken_by_any_event() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "OutOfTree")
    clock.step(5)
    q.move_all_to_active_or_backoff(ClusterEvent("StorageClass", ActionType.ADD))
    assert q.where(uid(pod)) == ACTIVE


def test_errored_pod_left_in_unschedulable_moves_on_any_event() -> None:
    """A pod with no rejecting plugin in unschedulablePods (gate lifted but a plugin gated it
    again without naming itself) is moved by events nobody registered."""
    clock = FakeClock()
    q = make_queue(clock, {})
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    fail(q, qpi, "X")  # X registered nothing: wildcard
    assert q.where(uid(pod)) == UNSCHEDULABLE
    clock.step(5)
    q.move_all_to_active_or_backoff(ClusterEvent("Anything", ActionType.DELETE))
    assert q.where(uid(pod)) == ACTIVE


def test_pre_check_filters_pods() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    a, b = make_pod("a"), make_pod("b")
    q.add(a)
    clock.step(1)
    q.add(b)
    fail(q, pop(q), "Fit")
    fail(q, pop(q), "Fit")
    clock.step(5)
    q.move_all_to_active_or_backoff(NODE_ADD, pre_check=lambda p: p.metadata.name == "b")
    assert q.where(uid(a)) == UNSCHEDULABLE
    assert q.where(uid(b)) == ACTIVE


# --- events while in flight ----------------------------------------------------------------


def test_event_while_in_flight_sends_the_pod_to_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    q.move_all_to_active_or_backoff(NODE_ADD)  # a node appears mid-attempt
    fail(q, qpi, "Fit")
    assert q.where(uid(pod)) == BACKOFF


def test_unrelated_event_while_in_flight_keeps_the_pod_unschedulable() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    q.move_all_to_active_or_backoff(NODE_ANNOTATION)  # "Fit" did not register it
    fail(q, qpi, "Fit")
    assert q.where(uid(pod)) == UNSCHEDULABLE


def test_event_before_the_attempt_started_does_not_count() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    first, second = make_pod("first", priority=10), make_pod("second")
    q.add(first)
    q.add(second)
    a = pop(q)
    q.move_all_to_active_or_backoff(NODE_ADD)  # while only "first" is in flight
    b = pop(q)
    fail(q, b, "Fit")
    assert q.where(uid(second)) == UNSCHEDULABLE
    fail(q, a, "Fit")
    assert q.where(uid(first)) == BACKOFF


def test_in_flight_events_are_pruned_when_attempts_end() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    early, late = make_pod("early", priority=1), make_pod("late")
    q.add(early)
    q.add(late)
    a = pop(q)
    for _ in range(300):
        q.move_all_to_active_or_backoff(NODE_ADD)
    b = pop(q)
    active_q = q._active_q
    assert len(active_q._events) == 300
    q.done(uid(a.pod))
    # Every event predates the only attempt left: none is kept, and none counts for it.
    assert active_q._events[active_q._events_head :] == []
    fail(q, b, "Fit")
    assert q.where(uid(late)) == UNSCHEDULABLE
    assert active_q._events == []


def test_update_while_in_flight_is_kept_and_returns_the_latest_pod() -> None:
    events = {"Affinity": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE_POD_LABEL))]}
    clock = FakeClock()
    q = make_queue(clock, events, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    newer = relabel(pod, tier="web")
    q.update(pod, newer)
    assert q.where(uid(pod)) == "in-flight"
    fail(q, qpi, "Affinity")
    assert q.where(uid(pod)) == BACKOFF
    queued = q.get(uid(pod))
    assert queued is not None
    assert queued.pod is newer


def test_pod_deleted_while_in_flight_is_not_requeued() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    q.delete(pod)
    fail(q, qpi, "Fit")
    assert q.where(uid(pod)) is None
    assert q.pending_pods() == []


def test_activate_moves_pods_now_and_marks_in_flight_ones() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    parked, flying, bystander = make_pod("parked"), make_pod("flying"), make_pod("bystander")
    for p in (parked, flying, bystander):
        q.add(p)
        clock.step(1)
    fail(q, pop(q), "Taints")
    f, b = pop(q), pop(q)
    assert (f.pod, b.pod) == (flying, bystander)
    q.activate([parked, flying])
    assert q.where(uid(parked)) == ACTIVE
    fail(q, f, "Taints")
    assert q.where(uid(flying)) == BACKOFF
    # The activation was for "flying" only.
    fail(q, b, "Taints")
    assert q.where(uid(bystander)) == UNSCHEDULABLE


# --- the five-minute flush ----------------------------------------------------------------


def test_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    old, young = make_pod("old"), make_pod("young")
    q.add(old)
    fail(q, pop(q), "Taints")
    clock.step(200)
    q.add(young)
    fail(q, pop(q), "Taints")
    clock.step(100.5)  # "old" has waited 300.5 s, "young" 100.5 s
    q.flush_unschedulable_leftover()
    assert q.where(uid(old)) == ACTIVE
    assert q.where(uid(young)) == UNSCHEDULABLE


async def test_run_flushes_backoff_and_leftovers() -> None:
    clock = FakeClock(50.0)
    q = make_queue(clock, pop_from_backoff=False, pod_max_in_unschedulable_pods_duration=10)
    backing, parked = make_pod("backing"), make_pod("parked")
    q.add(backing)
    clock.step(0.001)
    q.add(parked)
    fail(q, pop(q))  # error: backoff
    fail(q, pop(q), "Taints")
    task = asyncio.ensure_future(
        q.run(backoff_flush_interval=0.01, unschedulable_flush_interval=0.02)
    )
    await asyncio.sleep(0.05)
    assert q.where(uid(backing)) == BACKOFF
    assert q.where(uid(parked)) == UNSCHEDULABLE
    clock.step(11)
    await asyncio.sleep(0.1)
    assert q.where(uid(backing)) == ACTIVE
    assert q.where(uid(parked)) == ACTIVE
    q.close()
    await asyncio.wait_for(task, 1)


# --- gated pods ------------------------------------------------------------------------------


def test_gated_pod_waits_until_its_gates_are_removed() -> None:
    checked: list[str] = []

    def counting_gates(pod: Pod, gating: str) -> Status | None:
        checked.append(pod.metadata.name)
        return scheduling_gates(pod, gating)

    clock = FakeClock()
    q = make_queue(clock, pre_enqueue=counting_gates)
    pod = make_pod("gated", spec={"schedulingGates": [{"name": "example.com/wait"}]})
    q.add(pod)
    assert q.where(uid(pod)) == GATED
    assert q.counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}
    assert q.try_pop() is None
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert len(checked) == 1  # the gates are not checked again for events the gate ignores
    clock.step(400)
    q.flush_unschedulable_leftover()  # the flush asks again: the gates are still there
    assert q.where(uid(pod)) == GATED
    assert len(checked) == 2
    clock.step(30)
    q.flush_unschedulable_leftover()  # not at every flush: a whole period later
    assert len(checked) == 2
    clock.step(300)
    q.flush_unschedulable_leftover()
    assert len(checked) == 3
    assert q.where(uid(pod)) == GATED
    q.update(pod, relabel(pod, x="y"))  # an update that keeps the gate
    assert q.where(uid(pod)) == GATED
    ungated = with_spec(pod, scheduling_gates=[])
    q.update(pod, ungated)
    assert q.where(uid(pod)) == ACTIVE
    qpi = pop(q)
    assert qpi.pod is ungated
    assert qpi.attempts == 1
    # The first attempt is timed from when the gate lifted, not from creation.
    assert qpi.initial_attempt_timestamp == clock()


def test_a_gate_lifted_with_no_event_lets_its_pod_go_at_the_flush() -> None:
    """A PreEnqueue plugin whose gate lifts with no event it registered (a bug of its hints, a
    race of its own) would hold the pod for good: the five-minute flush asks it again
    (kubernetes#139162)."""
    holding = {"stuck"}

    def gate(pod: Pod, gating: str) -> Status | None:
        if pod.metadata.name in holding:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held", plugin="Gate")
        return None

    clock = FakeClock()
    q = make_queue(clock, {"Gate": [ClusterEventWithHint(NODE_ADD)]}, pre_enqueue=gate)
    pod = make_pod("stuck")
    q.add(pod)
    assert q.where(uid(pod)) == GATED
    holding.clear()  # lifted silently
    q.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE)  # not the gate's event
    assert q.where(uid(pod)) == GATED
    clock.step(299)
    q.flush_unschedulable_leftover()
    assert q.where(uid(pod)) == GATED
    clock.step(2)
    q.flush_unschedulable_leftover()
    assert q.where(uid(pod)) in (ACTIVE, BACKOFF)


def test_pre_enqueue_that_raises_gates_until_any_event() -> None:
    calls = 0

    def flaky(pod: Pod, gating: str) -> Status | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("plugin bug")
        return None

    clock = FakeClock()
    q = SchedulingQueue(less=priority_sort, pre_enqueue=flaky, clock=clock)
    pod = make_pod("p")
    q.add(pod)
    assert q.where(uid(pod)) == GATED
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where(uid(pod)) == ACTIVE


@pytest.mark.parametrize("told", [False, True], ids=["asked", "held"])
@pytest.mark.parametrize(("waited", "released_to"), [(0.0, BACKOFF), (10.0, ACTIVE)])
def test_a_pod_gated_again_by_each_event_stays_gated_and_counts_as_arriving(
    waited: float, released_to: str, told: bool
) -> None:
    """A preemptor held by PreEnqueue while its victims go sees each victim's deletion: the
    plugin that rejected it says Queue, PreEnqueue runs once and holds it again, so it stays
    gated (counted as arriving, as a move out and back is); once PreEnqueue lets it through
    it goes where its backoff says. A pod its gate names among those it holds (``told``) is
    counted the same without PreEnqueue being asked."""
    holding = False
    asked = 0
    held: set[str] = set()

    def preempting(pod: Pod, gating: str) -> Status | None:
        nonlocal asked
        asked += 1
        if holding:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "preempting", plugin="Preempting")
        return None

    events = {
        "Fit": [ClusterEventWithHint(NODE_ADD)],
        "Preempting": [ClusterEventWithHint(NODE_ADD, lambda *_: QueueingHint.SKIP)],
    }
    clock = FakeClock()
    incoming: dict[str, dict[str, int]] = {}
    q = make_queue(
        clock,
        events,
        pre_enqueue=preempting,
        held_pods=lambda gate: held if gate == "Preempting" else None,
        incoming_pods_metric=incoming,
    )
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    holding = True
    q.move_all_to_active_or_backoff(NODE_ADD)  # Fit's Queue, PreEnqueue gates it
    assert q.where(uid(pod)) == GATED
    asked = 0
    if told:
        held.add(uid(pod))
    for _ in range(3):
        q.move_all_to_active_or_backoff(NODE_ADD)
        assert q.where(uid(pod)) == GATED
    assert asked == (0 if told else 3)
    assert incoming[UNSCHEDULABLE] == {"ScheduleAttemptFailure": 1, "NodeAdd": 4}
    clock.step(waited)
    holding = False
    held.clear()
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.where(uid(pod)) == released_to
    assert asked == (1 if told else 4)


def test_a_pod_gated_again_by_another_plugin_waits_for_that_ones_events() -> None:
    """Held again, but by another PreEnqueue plugin than before: the pod is kept under that
    one, so only that plugin's events reach it from then on."""
    gate = ""

    def holding(pod: Pod, gating: str) -> Status | None:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held", plugin=gate) if gate else None

    events = {
        "Fit": [ClusterEventWithHint(NODE_ADD)],
        "Preempting": [ClusterEventWithHint(NODE_ADD, lambda *_: QueueingHint.SKIP)],
        "Other": [ClusterEventWithHint(EVENT_ASSIGNED_POD_DELETE)],
    }
    incoming: dict[str, dict[str, int]] = {}
    q = make_queue(FakeClock(), events, pre_enqueue=holding, incoming_pods_metric=incoming)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    gate = "Preempting"
    q.move_all_to_active_or_backoff(NODE_ADD)  # Fit's Queue, Preempting gates it
    qpi = q.get(uid(pod))
    assert qpi is not None
    assert qpi.gated_by == "Preempting"
    gate = "Other"
    q.move_all_to_active_or_backoff(NODE_ADD)  # Preempting's gate: its event reaches the pod
    assert q.where(uid(pod)) == GATED
    assert qpi.gated_by == "Other"
    assert incoming[UNSCHEDULABLE] == {"ScheduleAttemptFailure": 1, "NodeAdd": 2}
    gate = "Preempting"
    q.move_all_to_active_or_backoff(NODE_ADD)  # not Other's event: PreEnqueue is not asked
    assert qpi.gated_by == "Other"
    q.assigned_pod_deleted(make_pod("victim", node_name="n1"))
    assert qpi.gated_by == "Preempting"
    assert incoming[UNSCHEDULABLE] == {
        "ScheduleAttemptFailure": 1,
        "NodeAdd": 2,
        "AssignedPodDelete": 1,
    }


@pytest.mark.parametrize("seed", range(4))
def test_held_pods_move_the_pods_a_queue_asking_each_moves(seed: int) -> None:
    """Random pods held by one of two gates, released, held again, failing, events: a queue
    told which pods each gate holds (``held_pods``) moves each pod as one that asks
    PreEnqueue does, and counts the same arrivals; a gate's container that raises is asked
    past."""
    rng = random.Random(seed)
    holds: dict[str, set[str]] = {"Preempting": set(), "Other": set()}

    def pre_enqueue(pod: Pod, gating: str) -> Status | None:
        for plugin in ([gating] if gating else []) + ["Preempting", "Other"]:
            if uid(pod) in holds[plugin]:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held", plugin=plugin)
        return None

    class Broken:
        def __contains__(self, uid: object) -> bool:
            raise RuntimeError("plugin bug")

    def held_pods(gate: str) -> Container[str] | None:
        return Broken() if gate == "Other" and seed == 0 else holds.get(gate)

    # Each gate lifted by events of its own: a pod kept under the wrong one shows.
    events = {
        "Fit": [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_LABEL)],
        "Preempting": [ClusterEventWithHint(NODE_ADD, lambda *_: QueueingHint.SKIP)],
        "Other": [ClusterEventWithHint(NODE_LABEL, lambda *_: QueueingHint.SKIP)],
    }
    clocks = (FakeClock(), FakeClock())
    incoming: tuple[dict[str, dict[str, int]], ...] = ({}, {})
    queues = [
        make_queue(
            clocks[i],
            events,
            pre_enqueue=pre_enqueue,
            incoming_pods_metric=incoming[i],
            **({"held_pods": held_pods} if i == 0 else {}),
        )
        for i in range(2)
    ]
    pods: list[Pod] = []
    for step in range(1200):
        op = rng.randrange(6)
        if op == 0 or not pods:
            pod = make_pod(f"p{step}")
            pods.append(pod)
            for q in queues:
                q.add(pod)
        elif op == 1:
            popped = [q.try_pop() for q in queues]
            assert [None if p is None else uid(p.pod) for p in popped] == [
                None if popped[0] is None else uid(popped[0].pod)
            ] * 2
            for q, qpi in zip(queues, popped, strict=True):
                if qpi is not None:
                    fail(q, qpi, "Fit")
        elif op == 2:
            gate = rng.choice(["Preempting", "Other"])
            for pod in rng.sample(pods, min(len(pods), 3)):
                holds[gate].symmetric_difference_update({uid(pod)})
        elif op <= 4:
            event = rng.choice([NODE_ADD, NODE_LABEL])
            for q in queues:
                q.move_all_to_active_or_backoff(event)
        else:
            seconds = rng.choice([0.5, 2.0, 11.0])
            for clock, q in zip(clocks, queues, strict=True):
                clock.step(seconds)
                q.flush_backoff_completed()
        assert [queues[0].where(uid(p)) for p in pods] == [queues[1].where(uid(p)) for p in pods]
    assert incoming[0] == incoming[1]
    assert incoming[0][UNSCHEDULABLE].get("NodeAdd", 0) > 0
    assert incoming[0][UNSCHEDULABLE].get("NodeUpdateNodeLabel", 0) > 0


# --- delete and update ------------------------------------------------------------------------


@pytest.mark.parametrize("place", [ACTIVE, BACKOFF, UNSCHEDULABLE, GATED])
def test_delete_removes_the_pod_from_each_sub_queue(place: str) -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    spec = {"schedulingGates": [{"name": "g"}]} if place == GATED else None
    pod = make_pod("p", spec=spec)
    q.add(pod)
    if place == BACKOFF:
        fail(q, pop(q))
    elif place == UNSCHEDULABLE:
        fail(q, pop(q), "Fit")
    assert q.where(uid(pod)) == place
    q.delete(pod)
    assert q.where(uid(pod)) is None
    assert q.pending_pods() == []
    assert sum(q.counts().values()) == 0
    clock.step(1000)
    q.flush_backoff_completed()
    q.flush_unschedulable_leftover()
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.try_pop() is None


def test_update_in_active_reorders() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    a, b = make_pod("a", priority=5), make_pod("b", priority=1)
    q.add(a)
    q.add(b)
    b2 = with_spec(b, priority=10)
    q.update(b, b2)
    first = pop(q)
    assert first.pod is b2
    assert pop(q).pod is a


def test_update_in_backoff_stays_in_backoff() -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q))
    newer = relabel(pod, a="b")
    q.update(pod, newer)
    assert q.where(uid(pod)) == BACKOFF
    queued = q.get(uid(pod))
    assert queued is not None
    assert queued.pod is newer


def test_update_of_unschedulable_pod_moves_it_only_on_a_registered_change() -> None:
    events = {"Affinity": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE_POD_LABEL))]}
    clock = FakeClock()
    q = make_queue(clock, events)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Affinity")
    clock.step(5)
    annotated = msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, annotations={"note": "x"})
    )
    q.update(pod, annotated)  # UPDATE_OTHER: not registered
    assert q.where(uid(pod)) == UNSCHEDULABLE
    queued = q.get(uid(pod))
    assert queued is not None
    assert queued.pod is annotated
    q.update(annotated, relabel(annotated, app="x"))
    assert q.where(uid(pod)) == ACTIVE


def test_update_stops_at_the_first_event_that_activates_the_pod() -> None:
    events = {
        "Claims": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE_POD_LABEL))],
        "Taints": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE_POD_TOLERATIONS))],
    }
    clock = FakeClock()
    q = make_queue(clock, events, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    fail(q, qpi, "Taints", pending=("Claims",))
    assert q.is_backing_off(qpi)
    # Labels (Pending plugin: now) and tolerations (after backoff) change together.
    newer = with_spec(relabel(pod, a="b"), tolerations=[Toleration(operator="Exists")])
    q.update(pod, newer)
    assert q.where(uid(pod)) == ACTIVE


def test_update_of_unknown_pod_adds_it() -> None:
    q = make_queue(FakeClock())
    pod = make_pod("p")
    q.update(None, pod)
    assert q.where(uid(pod)) == ACTIVE
    q.add(relabel(pod, again="yes"))  # re-listed: an update, not a second copy
    assert len(q) == 1


def test_pod_scheduling_properties_change() -> None:
    pod = make_pod("p", cpu="2", spec={"schedulingGates": [{"name": "g"}]})
    same = pod_scheduling_properties_change(pod, pod)
    assert same == [ClusterEvent("UnschedulablePod", ActionType.UPDATE_OTHER)]
    smaller = make_pod("p", cpu="1")
    smaller = with_spec(relabel(smaller, a="b"), tolerations=[{"operator": "Exists"}])
    smaller = msgspec.convert(msgspec.to_builtins(smaller), Pod)
    actions = {e.action for e in pod_scheduling_properties_change(smaller, pod)}
    assert actions == {
        ActionType.UPDATE_POD_LABEL,
        ActionType.UPDATE_POD_SCALE_DOWN,
        ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
        ActionType.UPDATE_POD_TOLERATIONS,
    }
    bound = with_spec(pod, node_name="n1")
    assert {e.resource for e in pod_scheduling_properties_change(bound, pod)} == {"AssignedPod"}


# --- assigned pod events ------------------------------------------------------------------


def _affinity_selects(pod: Pod, _old: Any, new: Any) -> QueueingHint:
    """A stand-in for InterPodAffinity's hint: the added pod has the label the pod wants."""
    terms = pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
    wanted = terms[0].label_selector.match_labels
    ok = all(new.metadata.labels.get(k) == v for k, v in wanted.items())
    return QueueingHint.QUEUE if ok else QueueingHint.SKIP


def _same_namespace(pod: Pod, _old: Any, new: Any) -> QueueingHint:
    """A stand-in for PodTopologySpread's hint: the added pod is in the pod's namespace."""
    same = new.metadata.namespace == pod.metadata.namespace
    return QueueingHint.QUEUE if same else QueueingHint.SKIP


def test_assigned_pod_added_moves_only_pods_it_may_help() -> None:
    events = {
        "InterPodAffinity": [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD), _affinity_selects)
        ],
        "PodTopologySpread": [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD), _same_namespace)
        ],
    }
    clock = FakeClock()
    q = make_queue(clock, events)
    wants_db = make_pod(
        "wants-db",
        spec={
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}}
                    ]
                }
            }
        },
    )
    wants_cache = make_pod(
        "wants-cache",
        spec={
            "affinity": {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "cache"}}}
                    ]
                }
            }
        },
    )
    spread = make_pod("spread")
    other_ns_spread = make_pod("spread-elsewhere", namespace="other")
    for p in (wants_db, wants_cache, spread, other_ns_spread):
        q.add(p)
        clock.step(1)
    for _ in range(2):
        fail(q, pop(q), "InterPodAffinity")
    for _ in range(2):
        fail(q, pop(q), "PodTopologySpread")
    clock.step(5)
    q.assigned_pod_added(make_pod("db-0", labels={"app": "db"}, node_name="n1"))
    assert q.where(uid(wants_db)) == ACTIVE
    assert q.where(uid(wants_cache)) == UNSCHEDULABLE
    assert q.where(uid(spread)) == ACTIVE
    assert q.where(uid(other_ns_spread)) == UNSCHEDULABLE
    assert EVENT_ASSIGNED_POD_ADD.resource == "AssignedPod"


def test_a_bound_pod_added_while_no_pod_is_unschedulable_is_kept_for_pods_in_flight() -> None:
    events = {"InterPodAffinity": [ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD))]}
    clock = FakeClock()
    q = make_queue(clock, events)
    pod = make_pod("wants-db")
    q.add(pod)
    qpi = pop(q)
    q.assigned_pod_added(make_pod("db-0", labels={"app": "db"}, node_name="n1"))
    fail(q, qpi, "InterPodAffinity")
    # The event came while the pod was in flight: it may fit now, so it backs off rather than
    # waiting in unschedulablePods for an event that has passed.
    assert q.where(uid(pod)) == BACKOFF


def test_assigned_pod_scaled_down_moves_resource_rejections() -> None:
    events = {
        "NodeResourcesFit": [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN)
            )
        ]
    }
    clock = FakeClock()
    q = make_queue(clock, events)
    pending = make_pod("pending")
    q.add(pending)
    fail(q, pop(q), "NodeResourcesFit")
    clock.step(5)
    running = make_pod("running", cpu="2", node_name="n1")
    relabelled = relabel(running, v="2")
    q.assigned_pod_updated(running, relabelled)
    assert q.where(uid(pending)) == UNSCHEDULABLE
    q.assigned_pod_updated(relabelled, make_pod_like(relabelled, cpu="1"))
    assert q.where(uid(pending)) == ACTIVE


def make_pod_like(pod: Pod, cpu: str) -> Pod:
    raw = msgspec.to_builtins(pod)
    raw["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return msgspec.convert(raw, Pod)


# --- nominator --------------------------------------------------------------------------------


def test_nominated_pods_follow_add_update_and_delete() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    pod = make_pod("preemptor", priority=100)
    q.add(pod)
    qpi = pop(q)
    fail(q, qpi, "Fit")
    q.add_nominated_pod(qpi.pod_info, "n1")
    assert [p.pod for p in q.nominated_pods_for_node("n1")] == [pod]
    assert q.nominated_node(uid(pod)) == "n1"
    # An update that does not carry the nomination keeps the one made in memory.
    newer = relabel(pod, seen="yes")
    q.update(pod, newer)
    assert [p.pod for p in q.nominated_pods_for_node("n1")] == [newer]
    # Moving the nomination.
    q.add_nominated_pod(PodInfo.of(newer), "n2")
    assert q.nominated_pods_for_node("n1") == []
    assert [p.pod for p in q.nominated_pods_for_node("n2")] == [newer]
    q.delete(newer)
    assert q.nominated_pods_for_node("n2") == []
    assert q.nominated_node(uid(pod)) is None


def test_pod_arriving_with_a_nominated_node_is_nominated() -> None:
    q = make_queue(FakeClock())
    raw = msgspec.to_builtins(make_pod("p"))
    raw["status"] = {"nominatedNodeName": "n3"}
    pod = msgspec.convert(raw, Pod)
    q.add(pod)
    assert [p.pod for p in q.nominated_pods_for_node("n3")] == [pod]
    q.add_nominated_pod(PodInfo.of(pod), "")
    assert q.nominated_pods_for_node("n3") == []
    q.add_nominated_pod(PodInfo.of(with_spec(pod, node_name="n3")), "n3")
    assert q.nominated_pods_for_node("n3") == []  # already bound: not nominated


# --- metrics and invariants -------------------------------------------------------------------


def test_pending_pods_metric_reports_changes() -> None:
    reports: list[dict[str, int]] = []
    clock = FakeClock()
    q = make_queue(clock, pending_pods_metric=reports.append, pop_from_backoff=False)
    q.add(make_pod("a"))
    q.add(make_pod("g", spec={"schedulingGates": [{"name": "g"}]}))
    fail(q, pop(q), "Fit")
    assert reports[0] == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
    # Afterwards only the sub-queues whose count changed are reported.
    assert reports[1:] == [{GATED: 1}, {ACTIVE: 0}, {UNSCHEDULABLE: 1}]
    latest: dict[str, int] = {}
    for report in reports:
        latest.update(report)
    assert latest == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 1, GATED: 1}
    assert q.pending_summary() == "activeQ:0; backoffQ:0; unschedulablePods:2"
    n = len(reports)
    q.move_all_to_active_or_backoff(NODE_ANNOTATION)  # moves nothing: nothing reported
    assert len(reports) == n


@pytest.mark.parametrize("pop_from_backoff", [True, False])
def test_no_pod_is_ever_lost_or_duplicated(pop_from_backoff: bool) -> None:
    """Random informer events, attempts and failures: every live pod is in exactly one place."""
    rng = random.Random(7)
    clock = FakeClock()
    events = {
        **DEFAULT_EVENTS,
        "Affinity": [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.ADD | ActionType.UPDATE_POD_LABEL),
                lambda pod, old, new: rng.choice([QueueingHint.QUEUE, QueueingHint.SKIP]),
            )
        ],
    }
    # The pending-pods metric gets only what changed: applied in turn, the reports are the counts.
    reported: dict[str, int] = {}
    q = make_queue(
        clock, events, pop_from_backoff=pop_from_backoff, pending_pods_metric=reported.update
    )
    live: dict[str, Pod] = {}
    flying: dict[str, QueuedPodInfo] = {}
    for step in range(3000):
        op = rng.randrange(10)
        if op == 0 or not live:
            gates = [{"name": "g"}] if rng.random() < 0.2 else []
            pod = make_pod(f"p{step}", priority=rng.randrange(3), spec={"schedulingGates": gates})
            live[uid(pod)] = pod
            q.add(pod)
        elif op == 1:
            pod = live[rng.choice(list(live))]
            new = relabel(pod, step=str(step))
            if rng.random() < 0.5:
                new = with_spec(new, scheduling_gates=[])
            live[uid(pod)] = new
            q.update(pod, new)
        elif op == 2 and rng.random() < 0.3:
            pod = live.pop(rng.choice(list(live)))
            q.delete(pod)
        elif op in (3, 4):
            qpi = q.try_pop()
            if qpi is not None:
                flying[uid(qpi.pod)] = qpi
        elif op == 5 and flying:
            qpi = flying.pop(rng.choice(list(flying)))
            if rng.random() < 0.2 and uid(qpi.pod) in live:
                live.pop(uid(qpi.pod))  # bound
                q.done(uid(qpi.pod))
                q.delete(qpi.pod)
            else:
                plugins = rng.choice([(), ("Fit",), ("Taints",), ("Affinity",), ("Fit", "Taints")])
                fail(q, qpi, *plugins)
        elif op == 6:
            q.move_all_to_active_or_backoff(rng.choice([NODE_ADD, NODE_LABEL, NODE_TAINT]))
        elif op == 7:
            q.assigned_pod_added(make_pod("bound", node_name="n"))
        elif op == 8:
            clock.step(rng.random() * 3)
            q.flush_backoff_completed()
        else:
            clock.step(rng.random() * 60)
            q.flush_unschedulable_leftover()
        # Invariant: live pods are each in one sub-queue or in flight; nothing else is queued.
        queued = [uid(p) for p in q.pending_pods()]
        assert len(queued) == len(set(queued))
        in_flight = {uid(p) for p in q.in_flight_pods()}
        assert set(queued) | (in_flight & live.keys()) == live.keys()
        assert not set(queued) & in_flight
        assert set(flying) == in_flight
        if reported or len(q):
            assert reported == q.counts()
    # Drain: lift every gate and every rejection; all live pods come out.
    for qpi in list(flying.values()):
        q.done(uid(qpi.pod))
        if uid(qpi.pod) in live:
            fail(q, qpi)
    for pod in list(live.values()):
        if pod.spec.scheduling_gates:
            new = with_spec(pod, scheduling_gates=[])
            q.update(pod, new)
            live[uid(pod)] = new
    clock.step(1000)
    q.flush_unschedulable_leftover()
    clock.step(100)
    q.flush_backoff_completed()
    out = set()
    while (qpi := q.try_pop()) is not None:
        out.add(uid(qpi.pod))
    assert out == live.keys()


# --- observability: scheduler_queue_incoming_pods_total and the move log --------------------


def test_incoming_pods_are_counted_per_queue_and_event() -> None:
    clock = FakeClock()
    incoming: dict[str, dict[str, int]] = {}
    q = make_queue(clock, pop_from_backoff=False, incoming_pods_metric=incoming)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    q.move_all_to_active_or_backoff(NODE_ADD)  # still backing off
    clock.step(5)
    q.flush_backoff_completed()
    fail(q, pop(q), "Fit")
    clock.step(400)
    q.flush_unschedulable_leftover()
    fail(q, pop(q), "Taints")
    q.activate([pod])
    gated = make_pod("gated", spec={"schedulingGates": [{"name": "g"}]})
    q.add(gated)
    q.update(None, make_pod("unknown"))
    assert incoming == {
        ACTIVE: {
            "UnschedulablePodAdd": 1,
            "BackoffComplete": 1,
            "UnschedulableTimeout": 1,
            "ForceActivate": 1,
            "UnschedulablePodUpdate": 1,
        },
        BACKOFF: {"NodeAdd": 1},
        UNSCHEDULABLE: {"ScheduleAttemptFailure": 3, "UnschedulablePodAdd": 1},
    }


def test_pops_from_backoffq_are_counted() -> None:
    incoming: dict[str, dict[str, int]] = {}
    q = make_queue(FakeClock(), incoming_pods_metric=incoming)
    q.add(make_pod("p"))
    qpi = pop(q)
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, qpi, "Fit")  # NodeAdd arrived in flight: to backoffQ
    assert q.where(uid(qpi.pod)) == BACKOFF
    pop(q)
    assert incoming == {
        ACTIVE: {"UnschedulablePodAdd": 1, "PopFromBackoffQ": 1},
        BACKOFF: {"ScheduleAttemptFailure": 1},
        UNSCHEDULABLE: {},
    }


def test_an_update_that_moves_nothing_counts_nothing() -> None:
    incoming: dict[str, dict[str, int]] = {}
    q = make_queue(FakeClock(), incoming_pods_metric=incoming)
    pod = make_pod("p")
    q.add(pod)
    fail(q, pop(q), "Fit")
    before = {queue: dict(counts) for queue, counts in incoming.items()}
    q.update(pod, relabel(pod, tier="web"))  # "Fit" registered no pod event
    assert q.where(uid(pod)) == UNSCHEDULABLE
    assert incoming == before


def test_each_move_is_logged_with_its_event_and_the_plugin_whose_hint_queued_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    q = make_queue(clock, pop_from_backoff=False)
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    caplog.set_level("DEBUG", logger="kubesched.scheduler._scheduling_queue")
    fail(q, qpi, "Fit", "Taints")
    clock.step(60)
    q.move_all_to_active_or_backoff(NODE_LABEL)  # registered by "Fit" alone
    moves = [r.getMessage() for r in caplog.records if "internal scheduling queue" in r.message]
    assert moves == [
        "Pod moved to an internal scheduling queue pod=default/p event=ScheduleAttemptFailure "
        "queue=unschedulable plugin=-",
        "Pod moved to an internal scheduling queue pod=default/p event=NodeUpdateNodeLabel "
        "queue=active plugin=Fit",
    ]


def test_a_pod_in_flight_enters_no_sub_queue(caplog: pytest.LogCaptureFixture) -> None:
    q = make_queue(FakeClock())
    pod = make_pod("p")
    q.add(pod)
    qpi = pop(q)
    q._enter(qpi, q._active_q, "Test", "")
    assert q.where(uid(pod)) == "in-flight"
    assert q.try_pop() is None
    assert "pod default/p is in flight; not queued in active" in caplog.text


def test_a_pod_updated_in_the_heap_leaves_the_others_in_order() -> None:
    """A removed entry stays in the heap until it surfaces and still takes part in its
    comparisons: the update of a pod must not change what its old entry compares by (pods a,
    b, c of priority 1, 2, 3; a raised to 9 comes out first, then c, then b)."""
    clock = FakeClock()
    q = make_queue(clock)
    pods = {
        name: make_pod(name, spec={"priority": p}) for name, p in (("a", 1), ("b", 2), ("c", 3))
    }
    for p in pods.values():
        q.add(p)
        clock.step(1)
    q.update(pods["a"], with_spec(pods["a"], priority=9))
    assert [pop(q).pod.metadata.name for _ in range(3)] == ["a", "c", "b"]


# --- gate keys: events reach the gated pods waiting for what they are about ------------------

CLAIM_ADD = ClusterEvent("ResourceClaim", ActionType.ADD)
EVERYTHING = "*"


def waits_for(pod: Pod) -> str:
    return pod.metadata.annotations.get("waits", "")


def claims_gate(present: set[str]) -> Any:
    """A PreEnqueue gate holding pods until the object their ``waits`` annotation names exists
    (one named ``?...`` is not known yet: as a claim from a template before the pod's status
    names it)."""

    def pre_enqueue(pod: Pod, gating: str) -> Status | None:
        key = waits_for(pod)
        if key and (key.startswith("?") or key not in present):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting", plugin="Claims")
        return None

    return pre_enqueue


def claim_events(asked: list[str]) -> dict[str, list[ClusterEventWithHint]]:
    """The gate's registration: its hint queues a pod for the object it waits for (or for any
    pod, on the object ``*``), and says which object an event is about."""

    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        asked.append(pod.metadata.name)
        known = not waits_for(pod).startswith("?")
        return (
            QueueingHint.QUEUE
            if new == EVERYTHING or (known and new == waits_for(pod))
            else QueueingHint.SKIP
        )

    def object_keys(old: Any, new: Any) -> set[str] | None:
        return None if new == EVERYTHING else {new}

    return {
        **DEFAULT_EVENTS,
        "Claims": [ClusterEventWithHint(CLAIM_ADD, hint, object_keys)],
    }


def claims_gate_keys(pod: Pod, gating: str) -> frozenset[str] | None:
    if gating != "Claims":
        return None
    return frozenset() if waits_for(pod).startswith("?") else frozenset([waits_for(pod)])


def waiting(name: str, key: str) -> Pod:
    return make_pod(name, annotations={"waits": key})


def test_a_keyed_gate_holding_a_pod_again_keys_it_again() -> None:
    """Held again by a gate that keeps pods by keys, a pod is kept by the keys the gate gives
    now (they may depend on more than the pod), even when the gate names it as held."""
    asked: list[str] = []
    waits = {"p": "a"}

    def gate(pod: Pod, gating: str) -> Status | None:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting", plugin="Claims")

    def keys(pod: Pod, gating: str) -> frozenset[str]:
        return frozenset([waits[pod.metadata.name]])

    def hint(pod: Pod, old: Any, new: Any) -> QueueingHint:
        asked.append(new)
        return QueueingHint.QUEUE

    pod = make_pod("p")
    events = {"Claims": [ClusterEventWithHint(CLAIM_ADD, hint, lambda old, new: {new})]}
    q = make_queue(
        FakeClock(), events, pre_enqueue=gate, gate_keys=keys, held_pods=lambda _: {uid(pod)}
    )
    q.add(pod)
    waits["p"] = "b"
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "a")
    assert asked == ["a"]
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "a")
    assert asked == ["a"]
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "b")
    assert asked == ["a", "b"]
    assert q.where(uid(pod)) == GATED


def test_an_event_about_an_object_asks_only_the_pods_waiting_for_it() -> None:
    present: set[str] = set()
    asked: list[str] = []
    q = make_queue(
        FakeClock(),
        claim_events(asked),
        pre_enqueue=claims_gate(present),
        gate_keys=claims_gate_keys,
    )
    pods = {key: waiting(f"waits-{key}", key) for key in "abc"}
    for pod in pods.values():
        q.add(pod)
    # Rejected by Fit too after an attempt: kept by no key, asked about every object.
    # Rejected by Fit, then gated when Fit's event moves it: kept by no key, asked about every
    # object.
    also_fit = waiting("also-fit", "z")
    present.add("z")
    q.add(also_fit)
    fail(q, pop(q), "Fit")
    present.remove("z")
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert [q.where(uid(p)) for p in (*pods.values(), also_fit)] == [GATED] * 4
    present.add("b")
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "b")
    assert asked == ["waits-b", "also-fit"]
    assert [q.where(uid(p)) for p in pods.values()] == [GATED, ACTIVE, GATED]
    # An update that changes what the pod waits for: found by its new key.
    old = pods["c"]
    meta = msgspec.structs.replace(old.metadata, annotations={"waits": "d"})
    new = msgspec.structs.replace(old, metadata=meta)
    q.update(old, new)
    asked.clear()
    present.add("d")
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "d")
    assert asked == ["waits-c", "also-fit"]
    assert q.where(uid(new)) == ACTIVE
    # An event that may be about anything asks every pod its gate holds.
    asked.clear()
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, EVERYTHING)
    assert sorted(asked) == ["also-fit", "waits-a"]


@pytest.mark.parametrize(("seed", "objects"), [(0, 40), (1, 40), (2, 4), (3, 4)])
def test_gate_keys_move_the_pods_a_queue_without_them_moves(seed: int, objects: int) -> None:
    """Random pods waiting for objects, objects appearing, pods changing what they wait for,
    attempts failing: a queue that keeps gated pods by their gate keys moves each pod as one
    that asks every gated pod does, and counts the same arrivals."""
    rng = random.Random(seed)
    present: set[str] = set()
    clocks = (FakeClock(), FakeClock())
    incoming: tuple[dict[str, dict[str, int]], ...] = ({}, {})
    # Fit's events include the objects': a gated pod it rejected too is kept by no key and
    # moved by each of them.
    events = claim_events([])
    events["Fit"] = [*events["Fit"], ClusterEventWithHint(CLAIM_ADD)]
    queues = [
        make_queue(
            clocks[i],
            events,
            pre_enqueue=claims_gate(present),
            incoming_pods_metric=incoming[i],
            **({"gate_keys": claims_gate_keys} if i == 0 else {}),
        )
        for i in range(2)
    ]
    live: dict[str, Pod] = {}
    seen: set[str] = set()
    for step in range(1500):
        op = rng.randrange(8)
        if op <= 1 or not live:
            pod = waiting(f"p{step}", rng.choice(["?", "o"]) + str(rng.randrange(objects)))
            live[uid(pod)] = pod
            for q in queues:
                q.add(pod)
        elif op == 2:
            pod = live[rng.choice(list(live))]
            key = rng.choice(["?", "o", "o"]) + str(rng.randrange(objects))
            meta = msgspec.structs.replace(pod.metadata, annotations={"waits": key})
            new = msgspec.structs.replace(pod, metadata=meta)
            live[uid(pod)] = new
            for q in queues:
                q.update(pod, new)
        elif op == 3:
            key = rng.choice([f"o{rng.randrange(objects)}", EVERYTHING])
            if key != EVERYTHING and rng.random() < 0.5:
                present.add(key)
            for q in queues:
                q.move_all_to_active_or_backoff(CLAIM_ADD, None, key)
        elif op == 4:
            popped = [q.try_pop() for q in queues]
            assert [None if p is None else uid(p.pod) for p in popped] == [
                None if popped[0] is None else uid(popped[0].pod)
            ] * 2
            if popped[0] is not None:
                plugins = rng.choice([("Fit",), ("Claims",), ("Fit", "Claims")])
                for q, qpi in zip(queues, popped, strict=True):
                    assert qpi is not None
                    fail(q, qpi, *plugins)
        elif op == 5:
            for q in queues:
                q.move_all_to_active_or_backoff(NODE_ADD)
        else:
            seconds = rng.random() * 5
            for clock in clocks:
                clock.step(seconds)
            for q in queues:
                q.flush_backoff_completed()
        places = [{u: q.where(u) for u in live} for q in queues]
        assert places[0] == places[1], (step, {u for u in live if places[0][u] != places[1][u]})
        seen.update(places[0].values())
    assert incoming[0] == incoming[1]
    assert {GATED, ACTIVE, BACKOFF, UNSCHEDULABLE} <= seen


def test_a_pod_gated_before_what_it_waits_for_is_named_is_found_once_named() -> None:
    """As a pod whose claim comes from a template: gated while its status names no claim (no
    key), the last pod kept by a key gone meanwhile, then named by an update."""
    present: set[str] = set()
    q = make_queue(
        FakeClock(), claim_events([]), pre_enqueue=claims_gate(present), gate_keys=claims_gate_keys
    )
    unnamed, named = waiting("unnamed", "?1"), waiting("named", "o1")
    q.add(unnamed)
    q.add(named)
    present.add("o1")
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "o1")
    assert (q.where(uid(unnamed)), q.where(uid(named))) == (GATED, ACTIVE)
    meta = msgspec.structs.replace(unnamed.metadata, annotations={"waits": "o2"})
    now_named = msgspec.structs.replace(unnamed, metadata=meta)
    q.update(unnamed, now_named)
    assert q.where(uid(now_named)) == GATED
    present.add("o2")
    q.move_all_to_active_or_backoff(CLAIM_ADD, None, "o2")
    assert q.where(uid(now_named)) == ACTIVE
