"""Preemption through the scheduling loop (queue, cache, Scheduler) with an in-memory cluster:
nomination, the preemptor held until its victims are gone, the room kept from lower-priority
pods, and the preemptor placed on its nominated node."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import msgspec

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.config import load_config_from_dict
from kubesched.framework import Snapshot, build_frameworks
from kubesched.kube import EventV1, NotFound
from kubesched.plugins import default_registry
from kubesched.plugins.default_preemption import DefaultPreemption
from kubesched.plugins.gang import GROUP_LABEL, MIN_AVAILABLE_LABEL
from kubesched.scheduler import Cache, Scheduler, SchedulingQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Cluster:
    """The API server's side: binds, deletes victims, writes the nominated node; every change
    reported to the scheduler as its informer would."""

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None
        self.pods: dict[str, Pod] = {}
        self.failures: dict[str, tuple[str, str | None]] = {}
        self.events: list[tuple[str, str]] = []

    @property
    def sched(self) -> Scheduler:
        assert self.scheduler is not None
        return self.scheduler

    def create(self, pod: Pod) -> None:
        self.pods[pod.metadata.uid] = pod
        self.sched.on_pod_add(pod)

    def _update(self, new: Pod) -> None:
        old = self.pods[new.metadata.uid]
        self.pods[new.metadata.uid] = new
        self.sched.on_pod_update(old, new)

    # APIClient
    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        pod = self.pods[uid]
        self._update(
            msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
        )

    # PodEvictor
    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        gone = self.pods.pop(victim.metadata.uid, None)
        if gone is not None:
            self.sched.on_pod_delete(gone)
        return gone is not None

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        self.events.append(
            (victim.metadata.name, f"Preempted by pod {preemptor.metadata.uid} on node {node}")
        )

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        self.set_nominated(pod.metadata.uid, "")

    # ClusterWriter
    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.failures[pod.metadata.name] = (message, nominated_node)

    def set_nominated(self, uid: str, node: str) -> None:
        pod = self.pods[uid]
        status = msgspec.structs.replace(pod.status, nominated_node_name=node)
        self._update(msgspec.structs.replace(pod, status=status))

    def node_of(self, name: str) -> str:
        return next(p.spec.node_name for p in self.pods.values() if p.metadata.name == name)


def setup(
    nodes: list[Any],
    pods: list[Pod],
    profile: Mapping[str, Any] | None = None,
    *,
    cluster: Cluster | None = None,
) -> tuple[Cluster, Scheduler, SchedulingQueue, Clock, DefaultPreemption | None]:
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", **(profile or {})}],
        }
    )
    cluster = cluster or Cluster()
    snapshot = Snapshot()
    frameworks = build_frameworks(
        config, default_registry(), snapshot, client=cluster, rng=random.Random(3)
    )
    fwk = frameworks["default-scheduler"]
    fwk.set_evictor(cluster)
    clock = Clock()
    queue = SchedulingQueue(
        less=fwk.less,
        pre_enqueue=fwk.run_pre_enqueue,
        events_to_register=fwk.events_to_register(),
        clock=clock,
    )
    scheduler = Scheduler(profiles=frameworks, cache=Cache(snapshot), queue=queue, writer=cluster)
    cluster.scheduler = scheduler
    for n in nodes:
        scheduler.on_node_add(n)
    for p in pods:
        cluster.create(p)
    plugin = fwk.plugin("DefaultPreemption")
    assert plugin is None or isinstance(plugin, DefaultPreemption)
    return cluster, scheduler, queue, clock, plugin


def pod(name: str, priority: int, node_name: str = "") -> Pod:
    return make_pod(name, cpu="1", priority=priority, node_name=node_name, uid=name)


async def test_a_preemptor_is_nominated_waits_for_its_victims_and_lands_on_its_node() -> None:
    cluster, scheduler, queue, clock, plugin = setup(
        [make_node("node1", cpu="1"), make_node("node2", cpu="1")],
        [pod("low1", 0, "node1"), pod("low2", 10, "node2")],
    )
    assert plugin is not None
    cluster.create(pod("p", 100))

    # The nested message ends the whole one: a single period, as kube-scheduler v1.34.4 writes.
    qpi = queue.try_pop()
    assert qpi is not None
    assert scheduler.schedule_one(qpi).reason == "Unschedulable"
    # The victim on node1 has the lowest priority: node1 is nominated, nothing preempted yet.
    assert cluster.failures["p"] == ("0/2 nodes are available: 2 Insufficient cpu.", "node1")
    assert queue.nominated_node("p") == "node1"
    assert queue.where("p") == "unschedulable"
    cluster.set_nominated("p", "node1")  # the status write, seen by the informer

    await plugin.wait_for_evictions()
    assert "low1" not in {p.metadata.name for p in cluster.pods.values()}
    assert cluster.events == [("low1", "Preempted by pod p on node node1")]

    # A lower-priority pod cannot take the room kept for the nominated preemptor.
    cluster.create(pod("q", 5))
    clock.now += 20
    queue.flush_backoff_completed()
    first = queue.try_pop()
    assert first is not None
    assert first.pod.metadata.name == "p"  # higher priority first
    second = queue.try_pop()
    assert second is not None
    assert scheduler.schedule_one(second).reason == "Unschedulable"
    assert cluster.failures["q"][0] == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod."
    )

    outcome = scheduler.schedule_one(first)
    assert (outcome.reason, outcome.node) == ("Assumed", "node1")
    # Counted on node1 as assumed now, so no longer as nominated there.
    assert queue.nominated_node("p") is None
    await scheduler.drain()
    assert cluster.node_of("p") == "node1"
    assert queue.nominated_node("p") is None


async def test_no_preemption_when_nothing_has_lower_priority() -> None:
    cluster, scheduler, queue, _clock, plugin = setup(
        [make_node("node1", cpu="1")], [pod("high", 100, "node1")]
    )
    assert plugin is not None
    cluster.create(pod("p", 100))
    qpi = queue.try_pop()
    assert qpi is not None
    scheduler.schedule_one(qpi)
    await plugin.wait_for_evictions()
    assert cluster.failures["p"] == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.",
        "",
    )
    assert cluster.events == []


async def test_disabling_the_plugin_turns_preemption_off() -> None:
    cluster, scheduler, queue, _clock, plugin = setup(
        [make_node("node1", cpu="1")],
        [pod("low", 0, "node1")],
        {"plugins": {"multiPoint": {"disabled": [{"name": "DefaultPreemption"}]}}},
    )
    assert plugin is None
    cluster.create(pod("p", 100))
    qpi = queue.try_pop()
    assert qpi is not None
    scheduler.schedule_one(qpi)
    # DynamicResources is the only PostFilter plugin left: its part ends the message, with no
    # period of its own as kube-scheduler writes it, and it leaves the nomination as it is
    # (None), as RunPostFilterPlugins does without a result.
    assert cluster.failures["p"] == (
        "0/1 nodes are available: 1 Insufficient cpu. no new claims to deallocate",
        None,
    )
    assert "low" in cluster.pods


def _preempt_for(cluster: Cluster, scheduler: Scheduler, queue: SchedulingQueue) -> None:
    """A preemptor ``p`` of 2 CPUs fails its first attempt and is nominated to node1."""
    cluster.create(make_pod("p", cpu="2", priority=100, uid="p"))
    qpi = queue.try_pop()
    assert qpi is not None
    assert scheduler.schedule_one(qpi).reason == "Unschedulable"
    assert cluster.failures["p"][1] == "node1"
    cluster.set_nominated("p", "node1")  # the status write, seen by the informer


def _placed_again(scheduler: Scheduler, queue: SchedulingQueue, clock: Clock) -> None:
    """Once backoff is over, ``p`` is popped (after the pods ahead of it) and lands on node1."""
    clock.now += 20
    queue.flush_backoff_completed()
    again = queue.try_pop()
    while again is not None and again.pod.metadata.name != "p":
        again = queue.try_pop()
    assert again is not None
    outcome = scheduler.schedule_one(again)
    assert (outcome.reason, outcome.node) == ("Assumed", "node1")


class _DeletedMeanwhile(Cluster):
    """The victims of the first eviction are all deleted at once, as if by someone else: the
    evictions after it find theirs gone (NotFound), with no deletion event of their own."""

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        node = victim.spec.node_name
        evicted = False
        for other in [p for p in self.pods.values() if p.spec.node_name == node]:
            if other.metadata.uid != preemptor.metadata.uid:
                evicted = await super().evict(other, preemptor) or evicted
        return evicted


async def test_a_preemptor_whose_victims_went_while_it_was_held_is_not_left_waiting() -> None:
    """Every victim's deletion reaches the queue while the preemptor is held at PreEnqueue, and
    the last eviction finds its victim gone: no event is left to requeue the preemptor, so the
    end of its preemption does (kubernetes#141694)."""
    cluster = _DeletedMeanwhile()
    nodes = [make_node("node1", cpu="2")]
    lows = [pod("low1", 10, "node1"), pod("low2", 0, "node1")]
    _, scheduler, queue, clock, plugin = setup(nodes, lows, cluster=cluster)
    assert plugin is not None
    _preempt_for(cluster, scheduler, queue)

    await plugin.wait_for_evictions()
    assert not cluster.pods.keys() & {"low1", "low2"}
    assert not plugin.is_pod_running_preemption("p")
    assert queue.where("p") in ("active", "backoff")
    _placed_again(scheduler, queue, clock)


async def test_a_preemptor_whose_last_victim_waited_at_permit_is_retried_once_it_is_gone() -> None:
    """The last victim is a gang member waiting at Permit: rejected in memory, it is still
    counted when the preemption ends, and leaves when its binding cycle fails. That event
    carries it on its node, so the preemptor is retried then."""
    cluster, scheduler, queue, clock, plugin = setup(
        [make_node("node1", cpu="2")],
        [pod("v1", 10, "node1")],
        {"plugins": {"multiPoint": {"enabled": [{"name": "PodGroup"}]}}},
    )
    assert plugin is not None
    gang = {GROUP_LABEL: "g", MIN_AVAILABLE_LABEL: "2"}
    cluster.create(make_pod("v2", cpu="1", priority=0, uid="v2", labels=gang))
    qpi = queue.try_pop()
    assert qpi is not None
    assert scheduler.schedule_one(qpi).reason == "Assumed"  # waits at Permit for its gang
    _preempt_for(cluster, scheduler, queue)

    await plugin.wait_for_evictions()
    await scheduler.drain()  # v2's binding cycle ends, rejected
    assert scheduler.cache.pod_count == 0
    assert queue.where("p") in ("active", "backoff")
    _placed_again(scheduler, queue, clock)


# --- what `kubesched run` sends to the API server -------------------------------------------


class RecordingClient:
    """Records the writes of the scheduler's writer; a pod named ``gone`` is already deleted."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def with_own_limiter(self) -> RecordingClient:
        return self

    async def patch(self, path: str, body: Any, **kwargs: Any) -> bytes:
        if "/gone/" in path:
            raise NotFound(404, "NotFound", 'pods "gone" not found')
        self.calls.append(("PATCH", path, body))
        return b"{}"

    async def delete(self, path: str, body: Any = None, **kwargs: Any) -> bytes:
        self.calls.append(("DELETE", path, body))
        return b"{}"


async def test_the_run_writer_marks_deletes_and_clears_as_kube_scheduler() -> None:
    from kubesched.scheduler._service import _Writer

    client = RecordingClient()
    writer = _Writer(client, {"prof": object()})  # type: ignore[arg-type, dict-item]
    preemptor = msgspec.structs.replace(
        pod("p", 100), spec=msgspec.structs.replace(pod("p", 100).spec, scheduler_name="prof")
    )
    victim = pod("v", 0, "node1")
    await writer.evict(victim, preemptor)
    await writer.evict(pod("gone", 0, "node1"), preemptor)  # already deleted: fine
    nominated = msgspec.structs.replace(
        pod("n", 0), status=msgspec.structs.replace(pod("n", 0).status, nominated_node_name="x")
    )
    await writer.clear_nominated_node_name(nominated)

    (mark, delete, clear) = client.calls
    assert mark[:2] == ("PATCH", "/api/v1/namespaces/default/pods/v/status")
    [condition] = mark[2]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "DisruptionTarget",
        "True",
        "PreemptionByScheduler",
        "prof: preempting to accommodate a higher priority pod",
    )
    assert delete == ("DELETE", "/api/v1/namespaces/default/pods/v", None)
    assert clear == (
        "PATCH",
        "/api/v1/namespaces/default/pods/n/status",
        {"status": {"nominatedNodeName": None}},
    )

    writer.preempted(victim, preemptor, "node1", "prof")
    kind, event = writer.recorders["prof"]._queue.get_nowait()
    assert kind == "create"
    assert isinstance(event, EventV1)
    assert (event.type, event.reason, event.action, event.note) == (
        "Normal",
        "Preempted",
        "Preempting",
        "Preempted by pod p on node node1",
    )
    assert event.regarding.name == "v"
    assert event.related is not None
    assert event.related.name == "p"
    assert event.reporting_controller == "prof"
