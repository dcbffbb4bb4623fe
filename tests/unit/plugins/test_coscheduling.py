"""Coscheduling: args, PreFilter's group checks (quorum, gates, minResources, backoff, bad
PodGroups), Permit and PostFilter over a group, QueueSort keeping groups together, the PodGroup
status, and the scheduling loop placing gangs all together or not at all."""

from __future__ import annotations

import asyncio
import functools
import random
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import ObjectMeta, Pod
from kubesched.config import ConfigError, load_config_from_dict
from kubesched.framework import (
    Code,
    CycleState,
    Framework,
    PodInfo,
    QueuedPodInfo,
    QueueingHint,
    Registry,
    Snapshot,
    Status,
    build_frameworks,
    plugin_args_types,
)
from kubesched.plugins import default_registry, in_tree_registry
from kubesched.plugins.coscheduling import (
    NAME,
    POD_GROUP_LABEL,
    Coscheduling,
    Member,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
    desired_status,
    resource_gap,
)
from kubesched.plugins.coscheduling._manager import parse_time
from kubesched.plugins.coscheduling._status import StatusWriter
from kubesched.scheduler import Cache, Scheduler, SchedulingQueue

PLUGINS = {
    "queueSort": [(NAME, 1)],
    "preFilter": [("NodeResourcesFit", 1), (NAME, 1)],
    "filter": [("NodeResourcesFit", 1)],
    "postFilter": [(NAME, 1)],
    "reserve": [(NAME, 1)],
    "permit": [(NAME, 1)],
    "bind": [("DefaultBinder", 1)],
}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def framework(
    snapshot: Snapshot,
    args: Mapping[str, Any] | None = None,
    client: Any = None,
    clock: Clock | None = None,
) -> tuple[Framework, Coscheduling]:
    registry = Registry({**in_tree_registry(), NAME: Coscheduling})
    fw = Framework(
        profile_name="default-scheduler",
        registry=registry,
        plugins=PLUGINS,
        plugin_args={NAME: dict(args)} if args is not None else None,
        snapshot=snapshot,
        client=client,
        rng=random.Random(1),
    )
    plugin = fw.plugin(NAME)
    assert isinstance(plugin, Coscheduling)
    if clock is not None:
        plugin.groups.clock = clock
        plugin.groups.permitted._clock = clock
        plugin.groups.backed_off._clock = clock
    return fw, plugin


def cluster(*nodes: str, cpu: str = "4") -> Snapshot:
    s = Snapshot()
    for n in nodes:
        s.set_node(make_node(n, cpu=cpu))
    return s


def pod_group(
    snapshot: Snapshot,
    name: str = "pg",
    min_member: int = 3,
    *,
    namespace: str = "default",
    min_resources: Mapping[str, str] | None = None,
    timeout: int | None = None,
    created: str = "2026-01-01T00:00:00Z",
) -> PodGroup:
    pg = PodGroup(
        metadata=ObjectMeta(name=name, namespace=namespace, creation_timestamp=created),
        spec=PodGroupSpec(
            min_member=min_member,
            min_resources=dict(min_resources or {}),
            schedule_timeout_seconds=timeout,
        ),
    )
    snapshot.objects.set(pg)
    return pg


def member(
    snapshot: Snapshot | None,
    name: str,
    group: str | None = "pg",
    *,
    namespace: str = "default",
    cpu: str = "1",
    node_name: str = "",
    spec: Mapping[str, Any] | None = None,
    phase: str = "",
) -> Pod:
    """A pod of ``group``; also fed to the store as its member informer would."""
    labels = {POD_GROUP_LABEL: group} if group is not None else {}
    p = make_pod(name, namespace=namespace, cpu=cpu, labels=labels, node_name=node_name, spec=spec)
    p = msgspec.structs.replace(
        p,
        metadata=msgspec.structs.replace(p.metadata, uid=f"{namespace}/{name}"),
        status=msgspec.structs.replace(p.status, phase=phase),
    )
    if snapshot is not None and group is not None:
        snapshot.objects.set(as_member(p))
    return p


def as_member(p: Pod) -> Member:
    return msgspec.convert(msgspec.to_builtins(p), Member)


def place(fw: Framework, pod: Pod, node: str) -> Status | None:
    fw.snapshot.add_pod(PodInfo.of(pod), node)
    assert fw.run_reserve(CycleState(), pod, node) is None
    return fw.run_permit(CycleState(), pod, node)


WAIT = Status(Code.WAIT, "one or more plugins asked to wait")


def unresolvable(message: str) -> tuple[None, Status]:
    return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


# --- args --------------------------------------------------------------------------------------


def test_args_defaults_and_validation() -> None:
    _, plugin = framework(cluster("n"))
    assert (plugin.schedule_timeout, plugin.backoff, plugin.reject_threshold) == (60.0, 0.0, 0.1)
    _, plugin = framework(cluster("n"), {"permitWaitingTimeSeconds": 0})
    assert plugin.schedule_timeout == 60.0
    with pytest.raises(ConfigError, match="podGroupRejectPercentage"):
        framework(cluster("n"), {"podGroupRejectPercentage": 101})
    with pytest.raises(ConfigError, match="podGroupBackoffSeconds"):
        framework(cluster("n"), {"podGroupBackoffSeconds": -1})
    with pytest.raises(ConfigError, match="permitWaitingTimeSeconds"):
        framework(cluster("n"), {"permitWaitingTimeSeconds": -1})


def test_registered_and_enabled_as_upstream_configures_it() -> None:
    registry = default_registry()
    assert registry.get(NAME) is Coscheduling
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "gangs",
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": NAME}]},
                        "queueSort": {"enabled": [{"name": NAME}], "disabled": [{"name": "*"}]},
                    },
                    "pluginConfig": [{"name": NAME, "args": {"permitWaitingTimeSeconds": 10}}],
                }
            ],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    fw = build_frameworks(config, registry, Snapshot())["gangs"]
    points = fw.plugins_by_point()
    for point in ("queueSort", "preFilter", "postFilter", "reserve", "permit"):
        assert NAME in [name for name, _ in points[point]]
    plugin = fw.plugin(NAME)
    assert isinstance(plugin, Coscheduling)
    assert plugin.schedule_timeout == 10.0


# --- PreFilter ---------------------------------------------------------------------------------


def test_pre_filter_pods_outside_groups_and_missing_groups_pass() -> None:
    s = cluster("n")
    fw, plugin = framework(s)
    assert plugin.pre_filter(CycleState(), member(s, "solo", group=None), fw.all_nodes()) == (
        None,
        None,
    )
    orphan = member(s, "orphan", group="nowhere")
    assert plugin.pre_filter(CycleState(), orphan, fw.all_nodes()) == (None, None)
    # ... and Permit turns it away, until its PodGroup exists.
    assert place(fw, orphan, "n") == Status(
        Code.UNSCHEDULABLE, "PodGroup not found: default/nowhere", plugin=NAME
    )


def test_pre_filter_needs_min_member_pods() -> None:
    s = cluster("n")
    pod_group(s, min_member=3)
    fw, plugin = framework(s)
    m0 = member(s, "m0")
    member(s, "m1")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == unresolvable(
        "pre-filter pod m0 cannot find enough sibling pods, current pods number: 2, "
        "minMember of group: 3"
    )
    # Finished pods do not count; a third live one does.
    member(s, "done", phase="Succeeded")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes())[1] is not None
    member(s, "m2")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == (None, None)


def test_pre_filter_gated_members() -> None:
    s = cluster("n")
    pod_group(s, min_member=2)
    fw, plugin = framework(s)
    m0 = member(s, "m0")
    member(s, "m1", spec={"schedulingGates": [{"name": "wait"}]})
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == unresolvable(
        "pre-filter pod m0 cannot proceed due to gated pods in the same PodGroup"
    )
    # One more pod than minMember: one gated pod is tolerated.
    member(s, "m2")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == (None, None)


def test_pre_filter_rejects_a_negative_min_member_naming_the_field() -> None:
    s = cluster("n")
    pod_group(s, min_member=-2)
    fw, plugin = framework(s)
    assert plugin.pre_filter(CycleState(), member(s, "m0"), fw.all_nodes()) == unresolvable(
        "PodGroup default/pg: spec.minMember must not be negative, got -2"
    )


def test_pre_filter_rejects_a_bad_quantity_naming_the_field() -> None:
    s = cluster("n")
    pod_group(s, min_member=1, min_resources={"cpu": "lots"})
    fw, plugin = framework(s)
    assert plugin.pre_filter(CycleState(), member(s, "m0"), fw.all_nodes()) == unresolvable(
        "PodGroup default/pg: spec.minResources.cpu: 'lots' is not a quantity"
    )


def test_pre_filter_min_resources_against_free_room() -> None:
    # Two nodes of 4 CPUs; 3 CPUs used on n1 by another pod: 5 free.
    s = cluster("n1", "n2")
    s.add_pod(PodInfo.of(member(None, "busy", group=None, cpu="3", node_name="n1")), "n1")
    pod_group(s, min_member=2, min_resources={"cpu": "6"})
    clock = Clock()
    fw, plugin = framework(s, {"permitWaitingTimeSeconds": 10}, clock=clock)
    m0 = member(s, "m0", cpu="3")
    member(s, "m1", cpu="3")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == unresolvable(
        "resource gap: cpu: 1000m"
    )
    # When that pod is a member of the group, the room it holds counts as the group's.
    s.remove_pod("default/busy")
    s.add_pod(PodInfo.of(member(s, "m2", cpu="3", node_name="n1")), "n1")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == (None, None)
    # Passed, the group is not checked again for permitWaitingTimeSeconds.
    s.add_pod(PodInfo.of(member(None, "busy2", group=None, cpu="3", node_name="n2")), "n2")
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == (None, None)
    clock.now += 11
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes())[1] is not None


def test_resource_gap_takes_nodes_in_turn() -> None:
    s = cluster("a", "b", "c", cpu="2")
    # Free cpu: a 2000m, b -1000m (overcommitted), c 2000m.
    s.add_pod(PodInfo.of(member(None, "x", group=None, cpu="3", node_name="b")), "b")
    assert resource_gap(s, {"cpu": 3000}, {}) == {}
    assert resource_gap(s, {"cpu": 3001}, {}) == {"cpu": 1}
    # Pods: 110 allowed per node, one used on b.
    assert resource_gap(s, {"pods": 329}, {}) == {}
    assert resource_gap(s, {"pods": 330}, {}) == {"pods": 1}
    assert resource_gap(s, {"nvidia.com/gpu": 1}, {}) == {"nvidia.com/gpu": 1}
    # The group's own pod on b is not counted as using b.
    slot = s.slot_of("b")
    assert slot is not None
    assert resource_gap(s, {"cpu": 6000}, {slot: {"cpu": 3000, "pods": 1}}) == {}
    assert resource_gap(s, {"cpu": 6001}, {slot: {"cpu": 3000}}) == {"cpu": 1}


def test_pre_filter_backoff_after_a_group_rejection() -> None:
    s = cluster("n")
    pod_group(s, min_member=2)
    clock = Clock()
    fw, plugin = framework(s, {"podGroupBackoffSeconds": 5}, clock=clock)
    m0, _ = member(s, "m0"), member(s, "m1")
    assert plugin.post_filter(CycleState(), m0, {})[1] == Status(
        Code.UNSCHEDULABLE,
        "PodGroup default/pg gets rejected due to Pod m0 is unschedulable even after PostFilter",
    )
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == unresolvable(
        "podGroup default/pg failed recently"
    )
    clock.now += 5
    assert plugin.pre_filter(CycleState(), m0, fw.all_nodes()) == (None, None)


# --- Permit, Unreserve, PostFilter -------------------------------------------------------------


async def test_members_wait_until_min_member_are_placed() -> None:
    s = cluster("n1", "n2")
    pod_group(s, min_member=3, timeout=30)
    fw, _ = framework(s)
    m0, m1, m2 = (member(s, f"m{i}") for i in range(3))
    assert place(fw, m0, "n1") == WAIT
    assert place(fw, m1, "n2") == WAIT
    first = asyncio.ensure_future(fw.wait_on_permit(m0))
    second = asyncio.ensure_future(fw.wait_on_permit(m1))
    await asyncio.sleep(0)
    assert not first.done()
    assert place(fw, m2, "n1") is None
    assert await first is None
    assert await second is None
    assert list(fw.waiting_pods()) == []


def test_wait_timeout_comes_from_the_pod_group_else_the_args() -> None:
    s = cluster("n1")
    pod_group(s, "a", min_member=2, timeout=7)
    pod_group(s, "b", min_member=2)
    _, plugin = framework(s, {"permitWaitingTimeSeconds": 12})
    assert plugin.permit(CycleState(), member(s, "a0", "a"), "n1") == (Status(Code.WAIT), 7.0)
    assert plugin.permit(CycleState(), member(s, "b0", "b"), "n1") == (Status(Code.WAIT), 12.0)


def test_bound_members_count_towards_min_member() -> None:
    s = cluster("n1")
    pod_group(s, min_member=2)
    fw, _ = framework(s)
    bound = member(s, "m0", node_name="n1", phase="Running")
    s.add_pod(PodInfo.of(bound), "n1")
    member(s, "done", node_name="n1", phase="Succeeded")
    assert place(fw, member(s, "m1"), "n1") is None


async def test_deleted_finished_and_recreated_members_no_longer_count() -> None:
    s = cluster("n1")
    pod_group(s, min_member=3)
    fw, plugin = framework(s)
    m0, m1 = member(s, "m0"), member(s, "m1")
    assert place(fw, m0, "n1") == WAIT
    assert place(fw, m1, "n1") == WAIT
    assert plugin.assigned_count("default/pg") == 2
    # m0 is deleted and created again by its controller, same name, new UID, not placed.
    s.objects.delete(Member, "m0", "default")
    again = msgspec.structs.replace(
        m0, metadata=msgspec.structs.replace(m0.metadata, uid="default/m0-again")
    )
    s.objects.set(as_member(again))
    assert plugin.assigned_count("default/pg") == 1
    # m1 finishes.
    s.objects.set(
        as_member(
            msgspec.structs.replace(
                m1, status=msgspec.structs.replace(m1.status, phase="Succeeded")
            )
        )
    )
    assert plugin.assigned_count("default/pg") == 0
    for p in (m0, m1):
        fw.reject_waiting_pod(p.metadata.uid, "cleanup")


async def test_unreserve_rejects_the_waiting_members() -> None:
    s = cluster("n1")
    pod_group(s, min_member=3)
    pod_group(s, "other", min_member=2)
    fw, plugin = framework(s)
    m0, m1 = member(s, "m0"), member(s, "m1")
    x0 = member(s, "x0", "other")
    assert place(fw, m0, "n1") == WAIT
    assert place(fw, m1, "n1") == WAIT
    assert place(fw, x0, "n1") == WAIT
    waits = asyncio.ensure_future(fw.wait_on_permit(m1))
    other = asyncio.ensure_future(fw.wait_on_permit(x0))
    fw.run_unreserve(CycleState(), m0, "n1")
    assert await waits == Status(Code.UNSCHEDULABLE, "rejection in Unreserve", plugin=NAME)
    assert not other.done()
    assert plugin.assigned_count("default/pg") == 1
    assert "default/pg" in plugin.groups.last_failed
    fw.reject_waiting_pod(x0.metadata.uid, "cleanup")
    await other


async def test_post_filter_rejects_the_group_unless_nearly_complete() -> None:
    s = cluster("n1")
    pod_group(s, min_member=10)
    fw, plugin = framework(s)
    pods = [member(s, f"m{i}") for i in range(10)]
    for p in pods[:9]:
        assert place(fw, p, "n1") == WAIT
    # 1 of 10 missing: 10% <= podGroupRejectPercentage, the others keep waiting.
    assert plugin.post_filter(CycleState(), pods[9], {}) == (None, Status(Code.UNSCHEDULABLE))
    assert len(list(fw.waiting_pods())) == 9
    waits = [asyncio.ensure_future(fw.wait_on_permit(p)) for p in pods[:9]]
    fw.run_unreserve(CycleState(), pods[8], "n1")
    s.remove_pod(pods[8].metadata.uid)
    assert all(
        r == Status(Code.UNSCHEDULABLE, "rejection in Unreserve", plugin=NAME)
        for r in await asyncio.gather(*waits)
    )


async def test_post_filter_rejects_waiting_members() -> None:
    s = cluster("n1")
    pod_group(s, min_member=3)
    fw, plugin = framework(s)
    m0, _m1, m2 = (member(s, f"m{i}") for i in range(3))
    assert place(fw, m0, "n1") == WAIT
    waits = asyncio.ensure_future(fw.wait_on_permit(m0))
    _, status = plugin.post_filter(CycleState(), m2, {})
    assert status is not None
    assert "gets rejected" in status.message
    assert await waits == Status(
        Code.UNSCHEDULABLE, "optimistic rejection in PostFilter", plugin=NAME
    )
    # Lone pods and pods of missing groups.
    assert plugin.post_filter(CycleState(), member(s, "solo", None), {}) == (
        None,
        Status(Code.UNSCHEDULABLE),
    )
    assert plugin.post_filter(CycleState(), member(s, "o", "nowhere"), {}) == (
        None,
        Status(Code.UNSCHEDULABLE, "can not find pod group"),
    )


def test_requeue_hints() -> None:
    s = cluster("n1")
    _, plugin = framework(s)
    hints = {e.event.resource: e.hint for e in plugin.events_to_register()}
    pod = member(s, "m0")
    member_hint = hints["pods.v1.scheduling.x-k8s.io-members"]
    group_hint = hints["podgroups.v1alpha1.scheduling.x-k8s.io"]
    assert member_hint is not None
    assert group_hint is not None
    assert member_hint(pod, None, as_member(member(None, "m1"))) == QueueingHint.QUEUE
    assert member_hint(pod, None, as_member(member(None, "x", "other"))) == QueueingHint.SKIP
    assert member_hint(pod, None, as_member(member(None, "m1", namespace="b"))) == (
        QueueingHint.SKIP
    )
    assert group_hint(pod, None, pod_group(Snapshot())) == QueueingHint.QUEUE
    assert group_hint(pod, None, pod_group(Snapshot(), "other")) == QueueingHint.SKIP


# --- QueueSort ---------------------------------------------------------------------------------


def test_queue_sort_keeps_groups_together() -> None:
    s = cluster("n1")
    pod_group(s, "late", created="2026-01-01T00:10:00Z")
    pod_group(s, "early", created="2026-01-01T00:00:00Z")
    _, plugin = framework(s)
    now = plugin._wall_offset  # monotonic 0 is this wall-clock time

    def qpi(p: Pod, t: float) -> QueuedPodInfo:
        return QueuedPodInfo(PodInfo.of(p), initial_attempt_timestamp=t, timestamp=t)

    early_wall = parse_time("2026-01-01T00:00:00Z")
    assert early_wall is not None
    infos = [
        qpi(member(s, "late-1", "late"), 0.0),
        qpi(member(s, "solo", None), early_wall - now + 60),
        qpi(member(s, "early-1", "early"), 5.0),
        qpi(member(s, "late-0", "late"), 9.0),
        qpi(member(s, "early-0", "early"), 1.0),
        qpi(make_pod("vip", priority=10), 100.0),
    ]
    ordered = sorted(
        infos,
        key=functools.cmp_to_key(
            lambda a, b: -1 if plugin.less(a, b) else (1 if plugin.less(b, a) else 0)
        ),
    )
    assert [i.pod.metadata.name for i in ordered] == [
        "vip",
        "early-0",
        "early-1",
        "solo",
        "late-0",
        "late-1",
    ]
    # A group that just failed goes behind the others.
    plugin.groups.mark_failure("default/early")
    plugin.groups.clock = lambda: 1e12
    ordered = sorted(
        infos,
        key=functools.cmp_to_key(
            lambda a, b: -1 if plugin.less(a, b) else (1 if plugin.less(b, a) else 0)
        ),
    )
    assert [i.pod.metadata.name for i in ordered][-2:] == ["early-0", "early-1"]


# --- status ------------------------------------------------------------------------------------


def _status_of(min_member: int, phases: list[str], status: PodGroupStatus | None = None) -> Any:
    pg = PodGroup(spec=PodGroupSpec(min_member=min_member), status=status or PodGroupStatus())
    members = [as_member(member(None, f"m{i}", phase=p)) for i, p in enumerate(phases)]
    return desired_status(pg, members, now=lambda: "2026-01-02T03:04:05Z")


def test_status_as_the_controller_settles_it() -> None:
    assert _status_of(3, ["Pending"] * 2) == PodGroupStatus(phase="Pending")
    scheduling = _status_of(3, ["Pending"] * 3)
    assert scheduling == PodGroupStatus(
        phase="Scheduling", schedule_start_time="2026-01-02T03:04:05Z"
    )
    running = _status_of(3, ["Running", "Running", "Succeeded"], scheduling)
    assert (running.phase, running.running, running.succeeded, running.failed) == (
        "Running",
        2,
        1,
        0,
    )
    assert running.schedule_start_time == "2026-01-02T03:04:05Z"
    assert _status_of(2, ["Running", "Failed"], running).phase == "Failed"
    finished = _status_of(2, ["Succeeded", "Succeeded"], running)
    assert finished.phase == "Finished"
    # Final phases stay.
    assert _status_of(2, [], finished) == finished
    # Members lost: Pending again.
    assert _status_of(3, ["Running"], running).phase == "Pending"


class StatusClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, Mapping[str, Any]]] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise AssertionError("not expected")

    async def patch_custom_object_status(
        self,
        group_version: str,
        plural: str,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str,
    ) -> bool:
        assert (group_version, plural) == ("scheduling.x-k8s.io/v1alpha1", "podgroups")
        self.patches.append((namespace, name, status))
        return True


async def test_status_writer_writes_changed_groups_only() -> None:
    s = cluster("n1")
    pod_group(s, min_member=2)
    pod_group(s, "quiet", min_member=1, namespace="other")
    client = StatusClient()
    _, plugin = framework(s, client=client)
    writer = plugin.status_writer
    assert isinstance(writer, StatusWriter)
    assert await writer.write_changed() == 2
    member(s, "m0", phase="Running")
    member(s, "m1", phase="Pending")
    client.patches.clear()
    assert await writer.write_changed() == 1
    namespace, name, status = client.patches[0]
    assert (namespace, name) == ("default", "pg")
    assert status["phase"] == "Scheduling"
    assert status["running"] == 1
    assert status["scheduleStartTime"] is not None
    assert await writer.write_changed() == 0
    await plugin.aclose()


def test_no_status_writer_when_turned_off_or_without_a_client() -> None:
    _, plugin = framework(cluster("n1"), {"updatePodGroupStatus": False}, client=StatusClient())
    assert plugin.status_writer is None
    _, plugin = framework(cluster("n1"))
    assert plugin.status_writer is None


# --- through the scheduling loop ------------------------------------------------------------


class Cluster:
    """Binds in memory and reports the bound pod to the scheduler, as the informers would."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.scheduler: Scheduler | None = None
        self.pods: dict[str, Pod] = {}
        self.failures: dict[str, str] = {}

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        assert self.scheduler is not None
        pod = self.pods[uid]
        bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
        self.pods[uid] = bound
        self.snapshot.objects.set(as_member(bound))
        self.scheduler.on_pod_update(pod, bound)

    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.failures[pod.metadata.name] = message


async def run_gangs(
    nodes: int, groups: Mapping[str, int], attempts: int, wait: float = 0.3
) -> tuple[Cluster, Scheduler]:
    """Groups of 1-CPU workers (minMember = size) on ``nodes`` 1-CPU nodes; ``attempts``
    scheduling attempts, then the binding cycles finish."""
    snapshot = Snapshot()
    c = Cluster(snapshot)
    fw, plugin = framework(snapshot, client=c)
    plugin.schedule_timeout = wait
    queue = SchedulingQueue(
        less=fw.less, pre_enqueue=fw.run_pre_enqueue, events_to_register=fw.events_to_register()
    )
    scheduler = Scheduler(
        profiles={"default-scheduler": fw}, cache=Cache(snapshot), queue=queue, writer=c
    )
    c.scheduler = scheduler
    for i in range(nodes):
        scheduler.on_node_add(make_node(f"n{i}", cpu="1"))
    for g, size in groups.items():
        pod_group(snapshot, g, min_member=size)
        for i in range(size):
            pod = member(snapshot, f"{g}-{i}", g)
            c.pods[pod.metadata.uid] = pod
            scheduler.on_pod_add(pod)
    for _ in range(attempts):
        qpi = queue.try_pop()
        if qpi is None:
            await asyncio.sleep(0.05)
            continue
        scheduler.schedule_one(qpi)
        await asyncio.sleep(0)
    await scheduler.drain()
    return c, scheduler


def bound_by_group(c: Cluster) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in c.pods.values():
        g = p.metadata.labels[POD_GROUP_LABEL]
        out[g] = out.get(g, 0) + (1 if p.spec.node_name else 0)
    return out


async def test_eight_workers_bind_together() -> None:
    c, _ = await run_gangs(nodes=8, groups={"trainer": 8}, attempts=8)
    assert bound_by_group(c) == {"trainer": 8}
    assert c.failures == {}


async def test_eight_workers_on_seven_nodes_none_binds() -> None:
    c, scheduler = await run_gangs(nodes=7, groups={"trainer": 8}, attempts=8)
    assert bound_by_group(c) == {"trainer": 0}
    assert scheduler.cache.assumed_count == 0
    assert all(not info.pods for info in scheduler.cache.snapshot.node_infos())
    assert c.failures["trainer-7"].startswith("0/7 nodes are available: 7 Insufficient cpu.")
    assert "PodGroup default/trainer gets rejected" in c.failures["trainer-7"]


async def test_two_competing_groups_one_completes() -> None:
    """Room for one group of four: the older group completes, the other places nothing (no
    deadlock with both half placed)."""
    c, _ = await run_gangs(nodes=4, groups={"a": 4, "b": 4}, attempts=8)
    assert sorted(bound_by_group(c).values()) == [0, 4]


async def test_a_group_that_cannot_fit_does_not_hold_back_a_later_one() -> None:
    """Head-of-line blocking: "big" sorts first and never fits; "small" still binds."""
    c, _ = await run_gangs(nodes=4, groups={"big": 5, "small": 2}, attempts=10)
    assert bound_by_group(c) == {"big": 0, "small": 2}
