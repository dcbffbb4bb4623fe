"""PodGroup: labels and args, PreFilter validation, Permit holding members until the quorum is
placed, the whole group rejected when one member gives up, and the scheduling loop with it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.config import ConfigError, load_config_from_dict
from kubesched.framework import (
    Code,
    CycleState,
    Framework,
    PodInfo,
    QueueingHint,
    Registry,
    Snapshot,
    Status,
    build_frameworks,
    plugin_args_types,
)
from kubesched.plugins import default_registry, in_tree_registry
from kubesched.plugins.gang import (
    GROUP_LABEL,
    MIN_AVAILABLE_LABEL,
    NAME,
    PodGroup,
    group_of,
    min_available,
)
from kubesched.scheduler import Cache, Scheduler, SchedulingQueue


def member(
    name: str,
    group: str | None = "g",
    quorum: str | None = "3",
    *,
    namespace: str = "default",
    cpu: str = "1",
    node_name: str = "",
) -> Pod:
    labels = {}
    if group is not None:
        labels[GROUP_LABEL] = group
    if quorum is not None:
        labels[MIN_AVAILABLE_LABEL] = quorum
    p = make_pod(name, namespace=namespace, cpu=cpu, labels=labels, node_name=node_name)
    return msgspec.structs.replace(
        p, metadata=msgspec.structs.replace(p.metadata, uid=f"{namespace}/{name}")
    )


#: The plugins of these tests' profile: enough to schedule, and the gang.
PLUGINS = {
    "queueSort": [("PrioritySort", 1)],
    "preFilter": [("NodeResourcesFit", 1), (NAME, 1)],
    "filter": [("NodeResourcesFit", 1)],
    "reserve": [(NAME, 1)],
    "permit": [(NAME, 1)],
    "bind": [("DefaultBinder", 1)],
}


def framework(
    snapshot: Snapshot, args: Mapping[str, Any] | None = None, client: Any = None
) -> tuple[Framework, PodGroup]:
    fw = Framework(
        profile_name="default-scheduler",
        registry=Registry({**in_tree_registry(), NAME: PodGroup}),
        plugins=PLUGINS,
        plugin_args={NAME: dict(args)} if args is not None else None,
        snapshot=snapshot,
        client=client,
        rng=random.Random(1),
    )
    plugin = fw.plugin(NAME)
    assert isinstance(plugin, PodGroup)
    return fw, plugin


def cluster(*nodes: str, cpu: str = "4") -> Snapshot:
    s = Snapshot()
    for n in nodes:
        s.set_node(make_node(n, cpu=cpu))
    return s


# --- labels and args ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "group", "quorum"),
    [
        ({}, None, None),
        ({GROUP_LABEL: "g"}, "g", None),
        ({GROUP_LABEL: "g", MIN_AVAILABLE_LABEL: "3"}, "g", 3),
        ({GROUP_LABEL: "g", MIN_AVAILABLE_LABEL: "0"}, "g", None),
        ({GROUP_LABEL: "g", MIN_AVAILABLE_LABEL: "-1"}, "g", None),
        ({GROUP_LABEL: "g", MIN_AVAILABLE_LABEL: "three"}, "g", None),
        ({GROUP_LABEL: "", MIN_AVAILABLE_LABEL: "2"}, None, 2),
    ],
)
def test_labels(labels: dict[str, str], group: str | None, quorum: int | None) -> None:
    pod = make_pod("p", labels=labels)
    assert (group_of(pod), min_available(pod)) == (group, quorum)


def test_args() -> None:
    _, plugin = framework(cluster("n"))
    assert plugin.timeout == 60.0
    _, plugin = framework(cluster("n"), {"permitWaitingTimeSeconds": 5})
    assert plugin.timeout == 5.0
    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds"):
        framework(cluster("n"), {"permitWaitingTimeSeconds": 0})
    with pytest.raises(ConfigError, match="timeout"):
        framework(cluster("n"), {"timeout": 5})


# --- PreFilter ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "status"),
    [
        (member("lonely", group=None, quorum=None), Status(Code.SKIP)),
        (member("ok"), None),
        (
            member("missing", quorum=None),
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f"pod group label {MIN_AVAILABLE_LABEL} is missing",
            ),
        ),
        (
            member("bad", quorum="x"),
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                f'pod group label {MIN_AVAILABLE_LABEL} must be a positive integer, not "x"',
            ),
        ),
    ],
)
def test_pre_filter(pod: Pod, status: Status | None) -> None:
    fw, plugin = framework(cluster("n"))
    assert plugin.pre_filter(CycleState(), pod, fw.all_nodes()) == (None, status)


# --- Permit ------------------------------------------------------------------------------------


def place(fw: Framework, pod: Pod, node: str) -> Status | None:
    """What the scheduling cycle does once a node is chosen: assume, Reserve, Permit."""
    fw.snapshot.add_pod(PodInfo.of(pod), node)
    assert fw.run_reserve(CycleState(), pod, node) is None
    return fw.run_permit(CycleState(), pod, node)


WAIT = Status(Code.WAIT, "one or more plugins asked to wait")


async def test_members_wait_until_the_quorum_is_placed_then_all_go() -> None:
    fw, _ = framework(cluster("n1", "n2"))
    m1, m2, m3 = (member(f"m{i}") for i in (1, 2, 3))
    assert place(fw, m1, "n1") == WAIT
    assert place(fw, m2, "n2") == WAIT
    first = asyncio.ensure_future(fw.wait_on_permit(m1))
    second = asyncio.ensure_future(fw.wait_on_permit(m2))
    await asyncio.sleep(0)
    assert not first.done()
    # The third completes the group: allowed at once, and the others released.
    assert place(fw, m3, "n1") is None
    assert await first is None
    assert await second is None
    assert list(fw.waiting_pods()) == []


async def test_bound_members_count_and_other_groups_do_not() -> None:
    fw, _ = framework(cluster("n1"))
    fw.snapshot.add_pod(PodInfo.of(member("running", node_name="n1")), "n1")
    fw.snapshot.add_pod(PodInfo.of(member("other-ns", namespace="ns2", node_name="n1")), "n1")
    fw.snapshot.add_pod(PodInfo.of(member("other-group", group="h", node_name="n1")), "n1")
    deleting = member("leaving", node_name="n1")
    deleting = msgspec.structs.replace(
        deleting,
        metadata=msgspec.structs.replace(
            deleting.metadata, deletion_timestamp="2024-01-01T00:00:00Z"
        ),
    )
    fw.snapshot.add_pod(PodInfo.of(deleting), "n1")
    assert place(fw, member("m1"), "n1") == WAIT  # running + m1: 2 of 3
    assert place(fw, member("m2"), "n1") is None  # 3 of 3


async def test_a_timeout_rejects_the_whole_group() -> None:
    fw, plugin = framework(cluster("n1"))
    plugin.timeout = 0.05
    m1, m2 = member("m1"), member("m2")
    assert place(fw, m1, "n1") == WAIT
    # The others wait long enough that only m1's timeout can end a wait, however slow the
    # machine is.
    plugin.timeout = 60.0
    assert place(fw, m2, "n1") == WAIT
    other = member("x1", group="h", quorum="2")
    assert place(fw, other, "n1") == WAIT
    second = asyncio.ensure_future(fw.wait_on_permit(m2))
    other_waits = asyncio.ensure_future(fw.wait_on_permit(other))

    status = await fw.wait_on_permit(m1)
    assert status == Status(
        Code.UNSCHEDULABLE,
        "rejected due to timeout after waiting 50ms at plugin PodGroup",
        plugin=NAME,
    )
    # The binding cycle undoes m1's reservation: its group goes with it, before m2's own timeout.
    fw.run_unreserve(CycleState(), m1, "n1")
    assert await second == Status(
        Code.UNSCHEDULABLE, "pod group g rejected: m1 was not scheduled", plugin=NAME
    )
    # Another group is none of its business.
    assert not other_waits.done()
    fw.reject_waiting_pod(other.metadata.uid, "cleanup")
    await other_waits


def test_pods_outside_groups_pass() -> None:
    fw, _ = framework(cluster("n1"))
    assert place(fw, member("solo", group=None, quorum=None), "n1") is None
    fw.run_unreserve(CycleState(), member("solo", group=None, quorum=None), "n1")


def test_requeue_hints() -> None:
    _, plugin = framework(cluster("n1"))
    events = {(e.event.resource, e.event.action): e.hint for e in plugin.events_to_register()}
    assert set(events) >= {("AssignedPod", 2)}
    pod_hint = next(e.hint for e in plugin.events_to_register() if e.event.resource == "Pod")
    assert pod_hint is not None
    pod = member("m1")
    assert pod_hint(pod, None, member("m2")) == QueueingHint.QUEUE
    assert pod_hint(pod, None, member("m2", namespace="ns2")) == QueueingHint.SKIP
    assert pod_hint(pod, None, member("h1", group="h")) == QueueingHint.SKIP
    assert pod_hint(pod, None, member("loner", group=None)) == QueueingHint.SKIP
    assert pod_hint(pod, pod, member("m1", quorum="2")) == QueueingHint.QUEUE
    assert pod_hint(pod, None, "not a pod") == QueueingHint.QUEUE


# --- through the scheduling loop ------------------------------------------------------------


class Cluster:
    """Binds in memory and reports the bound pod to the scheduler, as the informer would."""

    def __init__(self) -> None:
        self.scheduler: Scheduler | None = None
        self.pods: dict[str, Pod] = {}
        self.failures: dict[str, str] = {}

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        assert self.scheduler is not None
        pod = self.pods[uid]
        bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
        self.pods[uid] = bound
        self.scheduler.on_pod_update(pod, bound)

    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.failures[pod.metadata.name] = message


async def run_gang(room: int) -> tuple[Cluster, Scheduler, SchedulingQueue]:
    """Three members (quorum 3, 1 CPU each) on nodes with ``room`` CPUs in all; each member
    gets one attempt, then the binding cycles finish."""
    snapshot = Snapshot()
    cluster = Cluster()
    fw, plugin = framework(snapshot, client=cluster)
    frameworks = {"default-scheduler": fw}
    plugin.timeout = 0.2
    queue = SchedulingQueue(
        less=fw.less, pre_enqueue=fw.run_pre_enqueue, events_to_register=fw.events_to_register()
    )
    scheduler = Scheduler(profiles=frameworks, cache=Cache(snapshot), queue=queue, writer=cluster)
    cluster.scheduler = scheduler
    for i in range(room):
        scheduler.on_node_add(make_node(f"n{i}", cpu="1"))
    for i in range(3):
        pod = member(f"m{i}")
        cluster.pods[pod.metadata.uid] = pod
        scheduler.on_pod_add(pod)
    for _ in range(3):
        qpi = queue.try_pop()
        assert qpi is not None
        scheduler.schedule_one(qpi)
        await asyncio.sleep(0.05)  # members arrive one after the other: m0 times out first
    await scheduler.drain()
    return cluster, scheduler, queue


async def test_with_room_for_all_the_group_binds() -> None:
    cluster, _, _ = await run_gang(room=3)
    nodes = sorted(p.spec.node_name for p in cluster.pods.values())
    assert nodes == ["n0", "n1", "n2"]
    assert cluster.failures == {}


async def test_with_room_for_two_nothing_binds_and_every_reservation_is_undone() -> None:
    cluster, scheduler, queue = await run_gang(room=2)
    assert [p.spec.node_name for p in cluster.pods.values()] == ["", "", ""]
    # Nothing is held on the nodes any more, and every member is back in the queue.
    assert scheduler.cache.assumed_count == 0
    assert all(not info.pods for info in scheduler.cache.snapshot.node_infos())
    assert sorted(p.metadata.name for p in queue.pending_pods()) == ["m0", "m1", "m2"]
    assert cluster.failures == {
        "m0": "0/1 nodes are available: 1 rejected due to timeout after waiting 200ms at plugin "
        "PodGroup.",
        "m1": "0/1 nodes are available: 1 pod group g rejected: m0 was not scheduled.",
        "m2": "0/2 nodes are available: 2 Insufficient cpu.",
    }


def test_registered_by_entry_point_and_enabled_by_configuration() -> None:
    """Installed, the plugin is in the default registry and a profile can enable it."""
    registry = default_registry()
    assert registry.get(NAME) is PodGroup
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "gang",
                    "plugins": {"multiPoint": {"enabled": [{"name": NAME}]}},
                    "pluginConfig": [{"name": NAME, "args": {"permitWaitingTimeSeconds": 7}}],
                }
            ],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    fw = build_frameworks(config, registry, Snapshot())["gang"]
    points = fw.plugins_by_point()
    for point in ("preFilter", "reserve", "permit"):
        assert NAME in [name for name, _ in points[point]]
    plugin = fw.plugin(NAME)
    assert isinstance(plugin, PodGroup)
    assert plugin.timeout == 7.0
