"""PodGroup end to end: ``kubesched run``'s service (in-process) with the gang plugin enabled,
against the session's kube-apiserver. Three pods labelled as one group with a quorum of three:
with room for two, none binds and the waiting ones time out; once there is room, all bind."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.cluster import ClusterInfo
from kubesched.config import load_config_from_dict
from kubesched.framework import plugin_args_types
from kubesched.kube import APIClient
from kubesched.plugins import default_registry
from kubesched.plugins.gang import GROUP_LABEL, MIN_AVAILABLE_LABEL
from kubesched.scheduler import SchedulerService

if TYPE_CHECKING:
    from conftest import AdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

OWNER = "e2e.kubesched.io/gang"
TIMEOUT = 3
NAMESPACE_PREFIX = "gang"


@pytest.fixture
def add_nodes(admin_client: AdminClient, run_id: str) -> Iterator[Callable[[int], list[str]]]:
    made: list[str] = []

    def add(count: int) -> list[str]:
        out = []
        for _ in range(count):
            name = f"gang-{run_id}-{len(made)}"
            node = make_node(name, cpu="1", labels={OWNER: run_id})
            admin_client.post("/api/v1/nodes", msgspec.to_builtins(node)).expect(201)
            made.append(name)
            out.append(name)
        return out

    try:
        yield add
    finally:
        for name in made:
            admin_client.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
async def scheduler(control_plane: ClusterInfo, run_id: str) -> AsyncIterator[str]:
    """A profile of kube-scheduler's default plugins plus PodGroup, waiting at most
    ``TIMEOUT`` seconds for a group; yields its schedulerName."""
    profile = f"gang-{run_id}"
    registry = default_registry()
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [
                {
                    "schedulerName": profile,
                    "plugins": {"multiPoint": {"enabled": [{"name": "PodGroup"}]}},
                    "pluginConfig": [
                        {"name": "PodGroup", "args": {"permitWaitingTimeSeconds": TIMEOUT}}
                    ],
                }
            ],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    async with APIClient.from_kubeconfig(str(control_plane.kubeconfig)) as client:
        service = SchedulerService(config, client, registry, health_port=0)
        task = asyncio.create_task(service.run())
        try:
            yield profile
        finally:
            service.stop()
            await asyncio.wait_for(task, 30)


async def create_group(
    admin: AdminClient, namespace: str, scheduler: str, run_id: str, size: int = 3
) -> None:
    for i in range(size):
        await create_member(admin, namespace, scheduler, run_id, i, size)


async def create_member(
    admin: AdminClient, namespace: str, scheduler: str, run_id: str, i: int, size: int
) -> None:
    """Group member ``worker-<i>`` of a group of ``size``."""
    pod = make_pod(
        f"worker-{i}",
        cpu="1",
        labels={GROUP_LABEL: "trainer", MIN_AVAILABLE_LABEL: str(size)},
        spec={"schedulerName": scheduler, "nodeSelector": {OWNER: run_id}},
    )
    manifest: dict[str, Any] = msgspec.to_builtins(pod)
    del manifest["metadata"]["uid"]
    del manifest["metadata"]["namespace"]
    await asyncio.to_thread(
        lambda: admin.post(f"/api/v1/namespaces/{namespace}/pods", manifest).expect(201)
    )


async def pods(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    r = await asyncio.to_thread(lambda: admin.get(f"/api/v1/namespaces/{namespace}/pods"))
    items: list[dict[str, Any]] = r.expect(200).json()["items"]
    return items


async def failure_notes(admin: AdminClient, namespace: str) -> list[str]:
    r = await asyncio.to_thread(
        lambda: admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    )
    return [e["note"] for e in r.expect(200).json()["items"] if e["reason"] == "FailedScheduling"]


def bound(items: list[dict[str, Any]]) -> list[str]:
    return sorted(p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName"))


async def wait_for(
    probe: Callable[[], Any], done: Callable[[Any], bool], what: str, seconds: float = 60.0
) -> Any:
    deadline = time.monotonic() + seconds
    value = await probe()
    while not done(value):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds}s waiting for {what}; last seen: {value!r}")
        await asyncio.sleep(0.3)
        value = await probe()
    return value


async def test_with_room_for_two_of_three_nothing_binds_until_there_is_room(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kubesched.scheduler")
    caplog.set_level(logging.DEBUG, logger="kubesched.plugins.gang")
    add_nodes(2)
    # The first member waits at Permit a second before the second does: its wait ends first,
    # and its Unreserve rejects the second, still waiting. (Two waits ending in one turn of the
    # event loop would both end by their timeouts.)
    await create_member(admin_client, namespace, scheduler, run_id, 0, 3)
    await wait_for(
        lambda: asyncio.sleep(0, caplog.messages),
        lambda messages: any(f"{namespace}/worker-0 waits for its group" in m for m in messages),
        "the first member waiting at Permit",
        seconds=30,
    )
    await asyncio.sleep(1.0)
    for i in (1, 2):
        await create_member(admin_client, namespace, scheduler, run_id, i, 3)
    # Two members wait at Permit, holding the two nodes; after TIMEOUT seconds they give up.
    timeout_note = (
        f"0/1 nodes are available: 1 rejected due to timeout after waiting {TIMEOUT}s at plugin "
        "PodGroup."
    )
    notes = await wait_for(
        lambda: failure_notes(admin_client, namespace),
        lambda ns: timeout_note in ns,
        "a member timing out at Permit",
        seconds=30,
    )
    # Meanwhile and for a while after, not one member was bound.
    for _ in range(int(TIMEOUT * 2 / 0.5)):
        assert bound(await pods(admin_client, namespace)) == []
        await asyncio.sleep(0.5)
    notes = await failure_notes(admin_client, namespace)
    # The sibling rejected with the one that timed out: as client-go does, a pod's later
    # FailedScheduling events only count in the series of its first, so which notes show
    # depends on the order the members failed in; the scheduler's report of each failure does
    # not.
    assert any(
        "Unable to schedule pod" in r.getMessage()
        and "0/1 nodes are available: 1 pod group trainer rejected: " in r.getMessage()
        for r in caplog.records
    )
    assert any("Insufficient cpu" in n for n in notes)

    # With a third node the group is tried again, and all of it binds.
    add_nodes(1)
    items = await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == 3,
        "the whole group bound",
        seconds=60,
    )
    assert len(set(bound(items))) == 3


async def test_with_room_for_three_the_group_binds_at_once(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    nodes = add_nodes(3)
    start = time.monotonic()
    await create_group(admin_client, namespace, scheduler, run_id)
    items = await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == 3,
        "the whole group bound",
        seconds=30,
    )
    assert bound(items) == sorted(nodes)
    # Released by the quorum, not by a timeout.
    assert time.monotonic() - start < TIMEOUT
    assert not any("rejected" in n for n in await failure_notes(admin_client, namespace))
