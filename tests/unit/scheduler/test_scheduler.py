"""The scheduling loop's binding cycles: each runs in its own task and is tracked until it ends."""

from __future__ import annotations

import asyncio
import random

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import Node, Pod
from kubesched.bench import MemoryCluster
from kubesched.config import KubeSchedulerConfiguration, default_config, load_config_from_dict
from kubesched.framework import (
    Code,
    CycleState,
    Plugin,
    PreBindPlugin,
    QueuedPodInfo,
    Registry,
    ReservePlugin,
    Snapshot,
    Status,
    build_frameworks,
)
from kubesched.plugins import default_registry
from kubesched.scheduler import Cache, Outcome, Scheduler, SchedulerMetrics, SchedulingQueue
from kubesched.scheduler import _scheduler as scheduler_module
from unit.kube.kube_fakes import eventually


class _Writer:
    def __init__(self) -> None:
        #: (reason, message) of each failure written, in order.
        self.failures: list[tuple[str, str]] = []
        #: The nominated node each failure wrote: ``""`` clears, ``None`` leaves it.
        self.nominations: list[str | None] = []

    def scheduled(self, pod: object, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: object, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.failures.append((reason, message))
        self.nominations.append(nominated_node)


def _scheduler(
    cluster: MemoryCluster,
    config: KubeSchedulerConfiguration | None = None,
    registry: Registry | None = None,
) -> Scheduler:
    snapshot = Snapshot()
    frameworks = build_frameworks(
        config or default_config(),
        registry or default_registry(),
        snapshot,
        client=cluster,
        rng=random.Random(0),
    )
    fwk = next(iter(frameworks.values()))
    queue = SchedulingQueue(less=fwk.less, events_to_register=fwk.events_to_register())
    scheduler = Scheduler(
        profiles=frameworks,
        cache=Cache(snapshot),
        queue=queue,
        writer=_Writer(),
        pod_lookup=cluster.lookup,
    )
    cluster.scheduler = scheduler
    scheduler.on_node_add(make_node("n1", cpu="4"))
    return scheduler


def _add_pod(cluster: MemoryCluster, scheduler: Scheduler, name: str) -> None:
    pod = make_pod(name, cpu="100m")
    cluster.add(pod)
    scheduler.on_pod_add(pod)


def test_a_binding_cycle_leaves_the_set_in_flight_when_it_ends() -> None:
    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        for i in range(3):
            _add_pod(cluster, scheduler, f"p{i}")
            qpi = scheduler.queue.try_pop()
            assert qpi is not None
            assert scheduler.schedule_one(qpi).node == "n1"
        tasks = list(scheduler._binding.values())
        assert len(tasks) == 3
        await asyncio.sleep(0)  # the turn in which the three binding cycles run
        assert all(t.done() for t in tasks)
        # Gone as soon as each ended, not on a later turn.
        assert not scheduler._binding
        assert cluster.bound == 3

    asyncio.run(main())


def _one_in_binding(cluster: MemoryCluster) -> tuple[Scheduler, QueuedPodInfo]:
    """A scheduler with pod ``p`` scheduled and its binding cycle started, not yet run."""
    scheduler = _scheduler(cluster)
    _add_pod(cluster, scheduler, "p")
    qpi = scheduler.queue.try_pop()
    assert qpi is not None
    scheduler.schedule_one(qpi)
    return scheduler, qpi


def test_drain_returns_though_a_binding_task_was_cancelled_before_it_ran() -> None:
    async def main() -> None:
        cluster = MemoryCluster()
        scheduler, _ = _one_in_binding(cluster)
        (task,) = scheduler._binding.values()
        task.cancel()
        await asyncio.wait_for(scheduler.drain(), timeout=5)
        assert not scheduler._binding
        assert cluster.bound == 0

    asyncio.run(main())


def test_a_failed_bind_forgets_the_assumed_pod() -> None:
    async def main() -> None:
        cluster = MemoryCluster()
        scheduler, qpi = _one_in_binding(cluster)
        assert scheduler.cache.is_assumed(qpi.pod.metadata.uid)
        del cluster.pods[qpi.pod.key]  # deleted before the binding: the API server refuses it
        await scheduler.drain()
        assert cluster.conflicts == 1
        assert scheduler.cache.pod_count == 0
        assert scheduler.queue.in_flight_pods() == []

    asyncio.run(main())


def test_a_failed_bind_says_which_plugin_failed() -> None:
    """The pod's condition and FailedScheduling event carry ``RunBindPlugins``' message."""

    class Refusing(MemoryCluster):
        async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
            raise RuntimeError(f'pods "{name}" is forbidden: binding refused')

    async def main() -> None:
        scheduler, _ = _one_in_binding(Refusing())
        await scheduler.drain()
        assert isinstance(scheduler.writer, _Writer)
        assert scheduler.writer.failures == [
            (
                "SchedulerError",
                'running Bind plugin "DefaultBinder": pods "p" is forbidden: binding refused',
            )
        ]

    asyncio.run(main())


def _attempt(cluster: MemoryCluster, scheduler: Scheduler, pod: Pod) -> Outcome:
    """A new pending pod and its first attempt (the queue holds nothing ahead of it)."""
    cluster.add(pod)
    scheduler.on_pod_add(pod)
    qpi = scheduler.queue.try_pop()
    assert qpi is not None
    assert qpi.pod is pod
    return scheduler.schedule_one(qpi)


def test_a_failed_binding_retries_the_pods_its_assumption_kept_out() -> None:
    """The event of a failed binding carries the pod on the node it was assumed to, as
    kube-scheduler's ``handleBindingCycleError`` does: NodeResourcesFit's hint skips a deleted
    pod that was on no node, and the pod kept out would wait for the five-minute flush."""

    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        queue = scheduler.queue
        first = make_pod("first", cpu="4")
        assert _attempt(cluster, scheduler, first).node == "n1"  # assumed; not bound yet
        second = make_pod("second", cpu="4")
        assert _attempt(cluster, scheduler, second).reason == "Unschedulable"
        assert queue.where(second.metadata.uid) == "unschedulable"
        del cluster.pods[first.key]  # deleted before its binding: the API server refuses it
        await scheduler.drain()
        assert scheduler.cache.pod_count == 0
        assert queue.where(second.metadata.uid) in ("active", "backoff")

    asyncio.run(main())


def test_without_post_filter_plugins_a_failure_leaves_the_nomination() -> None:
    """With no PostFilter plugin, kube-scheduler's failed cycle returns an empty ScheduleResult
    (its nominating mode Noop): the pod's nominated node stays, in its status and the
    nominator, where a PostFilter's own verdict or any other failure decides otherwise."""
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "multiPoint": {
                            "disabled": [
                                {"name": "DefaultPreemption"},
                                {"name": "DynamicResources"},
                            ]
                        }
                    },
                }
            ],
        },
        plugin_names=default_registry(),
    )

    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster, config)
        assert not next(iter(scheduler.profiles.values())).post_filter_plugins
        pod = make_pod("big", cpu="8")
        pod = msgspec.structs.replace(
            pod, status=msgspec.structs.replace(pod.status, nominated_node_name="n1")
        )
        assert _attempt(cluster, scheduler, pod).reason == "Unschedulable"
        assert isinstance(scheduler.writer, _Writer)
        assert scheduler.writer.nominations == [None]
        assert scheduler.queue.nominated_node(pod.metadata.uid) == "n1"

    asyncio.run(main())


def test_a_nominated_pod_bound_frees_its_room_for_lower_priority_pods() -> None:
    """A pending pod that gets bound leaves the queue as a deleted one (kube-scheduler's
    unscheduled-pod informer sees it go): the room its nomination held on a node is free, and
    the lower-priority pods it kept out are retried."""

    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        scheduler.on_node_add(make_node("n2", cpu="4"))
        queue = scheduler.queue
        high = make_pod("high", cpu="4", priority=100)
        high = msgspec.structs.replace(
            high, status=msgspec.structs.replace(high.status, nominated_node_name="n1")
        )
        cluster.add(high)
        scheduler.on_pod_add(high)
        scheduler.on_node_add(make_node("n3", cpu="1"))
        held = queue.try_pop()  # in flight, nominated to n1
        assert held is not None
        assert held.pod.metadata.name == "high"
        # n2 is taken by another scheduler's pod; n1 is held for the nominated pod.
        other = make_pod("other", cpu="4", node_name="n2")
        scheduler.on_pod_add(other)
        low = make_pod("low", cpu="4", priority=0)
        assert _attempt(cluster, scheduler, low).reason == "Unschedulable"
        assert queue.where(low.metadata.uid) == "unschedulable"
        # Bound to n3 by someone else: the room held on n1 is free now.
        queue.done(held.pod.metadata.uid)
        bound = msgspec.structs.replace(
            high, spec=msgspec.structs.replace(high.spec, node_name="n3")
        )
        scheduler.on_pod_update(high, bound)
        assert queue.nominated_node(high.metadata.uid) is None
        assert queue.where(low.metadata.uid) in ("active", "backoff")

    asyncio.run(main())


class _ReserveBug(ReservePlugin):
    name = "ReserveBug"

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if pod.metadata.name == "bad":
            raise RuntimeError("reserve bug")
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass


class _PreBindNo(PreBindPlugin):
    name = "PreBindNo"

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if pod.metadata.name == "bad":
            return Status(Code.UNSCHEDULABLE, "not now")
        return None


@pytest.mark.parametrize(
    ("plugin", "point"),
    [(_ReserveBug, "reserve"), (_PreBindNo, "preBind")],
    ids=["raises", "prebind"],
)
def test_a_pod_failed_by_a_plugin_backs_off_and_the_loop_goes_on(
    plugin: type[Plugin], point: str
) -> None:
    """A Reserve plugin's bug fails that pod's cycle (it used to end the loop, the pod left
    assumed), and a PreBind rejection comes after Permit: either way the pod is undone and
    retried after backoff, not left for an event, and the loop goes on with the next pods."""

    async def main() -> None:
        cluster = MemoryCluster()
        registry = default_registry()
        registry.register(plugin)
        config = load_config_from_dict(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "profiles": [
                    {
                        "schedulerName": "default-scheduler",
                        "plugins": {point: {"enabled": [{"name": plugin.name}]}},
                    }
                ],
            },
            plugin_names=registry,
        )
        scheduler = _scheduler(cluster, config, registry)
        queue = scheduler.queue
        bad, good = make_pod("bad", cpu="1"), make_pod("good", cpu="1")
        for pod in (bad, good):
            cluster.add(pod)
            scheduler.on_pod_add(pod)
        loop = asyncio.create_task(scheduler.run())
        await eventually(lambda: cluster.bound == 1 and queue.where(bad.metadata.uid) is not None)
        assert not loop.done()
        assert queue.where(bad.metadata.uid) == "backoff"
        assert not scheduler.cache.is_assumed(bad.metadata.uid)
        scheduler.stop()
        await loop

    asyncio.run(main())


def _bare_node(name: str) -> Node:
    """A node as a kubelet registers it, before its first status update."""
    return msgspec.convert({"metadata": {"name": name, "uid": f"node-{name}"}}, Node)


def test_a_node_whose_status_arrives_after_it_registered_gets_the_pod_retried() -> None:
    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        pod = make_pod("big", cpu="100")
        cluster.add(pod)
        scheduler.on_pod_add(pod)
        qpi = scheduler.queue.try_pop()
        assert qpi is not None
        assert scheduler.schedule_one(qpi).node is None
        uid = pod.metadata.uid
        assert scheduler.queue.where(uid) == "unschedulable"
        bare = _bare_node("huge")
        scheduler.on_node_add(bare)
        # Nothing on it yet: NodeResourcesFit's hint says the pod cannot fit there.
        assert scheduler.queue.where(uid) == "unschedulable"
        # The status update changes allocatable and conditions: two events, and the first
        # (allocatable) is one NodeResourcesFit registered.
        scheduler.on_node_update(bare, make_node("huge", cpu="128", memory="512Gi"))
        assert scheduler.queue.where(uid) in ("active", "backoff")

    asyncio.run(main())


def test_an_undecodable_object_retries_the_waiting_pods_and_is_counted() -> None:
    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        scheduler.metrics = SchedulerMetrics()
        pod = make_pod("big", cpu="100")
        cluster.add(pod)
        scheduler.on_pod_add(pod)
        qpi = scheduler.queue.try_pop()
        assert qpi is not None
        scheduler.schedule_one(qpi)
        assert scheduler.queue.where(pod.metadata.uid) == "unschedulable"
        scheduler.on_undecodable("Node", "n-odd")
        assert scheduler.queue.where(pod.metadata.uid) in ("active", "backoff")
        counted = scheduler.metrics.registry.get_sample_value(
            "kubesched_undecodable_objects_total", {"resource": "Node"}
        )
        assert counted == 1

    asyncio.run(main())


def test_the_loop_waits_while_the_binding_cycles_in_flight_are_at_their_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(scheduler_module, "MAX_BINDING_CYCLES", 2)

    async def main() -> None:
        cluster = MemoryCluster()
        scheduler = _scheduler(cluster)
        gate = asyncio.Event()
        bind = cluster.bind

        async def slow_bind(namespace: str, name: str, uid: str, node: str) -> None:
            await gate.wait()
            await bind(namespace, name, uid, node)

        monkeypatch.setattr(cluster, "bind", slow_bind)
        for i in range(5):
            _add_pod(cluster, scheduler, f"p{i}")
        loop = asyncio.create_task(scheduler.run())
        await asyncio.sleep(0.05)
        # Two bindings wait on the API; the other three pods wait in the queue, not assumed.
        assert len(scheduler._binding) == 2
        assert len(scheduler.queue) == 3
        gate.set()
        for _ in range(100):
            if cluster.bound == 5:
                break
            await asyncio.sleep(0.01)
        assert cluster.bound == 5
        scheduler.stop()
        await asyncio.wait_for(loop, timeout=5)

    asyncio.run(main())
