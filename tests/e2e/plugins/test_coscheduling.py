"""Coscheduling end to end: scheduler-plugins' PodGroup CRD (the manifest kubesched ships under
deploy/crds) installed into the session's kube-apiserver, ``kubesched run``'s service
(in-process) with Coscheduling as upstream configures it, a training job's PodGroup and its
eight workers placed all together or not at all, two competing groups, and bad input."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import pytest
import yaml

from builders import make_node, make_pod
from kubesched.cluster import ClusterInfo
from kubesched.config import load_config_from_dict
from kubesched.framework import plugin_args_types
from kubesched.kube import APIClient
from kubesched.plugins import default_registry
from kubesched.plugins.coscheduling import POD_GROUP_LABEL
from kubesched.scheduler import SchedulerService

if TYPE_CHECKING:
    from conftest import AdminClient

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

OWNER = "e2e.kubesched.io/coscheduling"
TIMEOUT = 3
NAMESPACE_PREFIX = "cosched"
CRD = Path(__file__).parents[3] / "deploy" / "crds" / "scheduling.x-k8s.io_podgroups.yaml"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1"


@pytest.fixture(scope="module")
def pod_group_crd(admin_client: AdminClient) -> None:
    """The shipped CRD, applied and served."""
    [crd] = [d for d in yaml.safe_load_all(CRD.read_text()) if d]
    name = crd["metadata"]["name"]
    admin_client.request(
        "PATCH",
        f"{CRDS}/{name}",
        crd,
        content_type="application/apply-patch+yaml",
        params={"fieldManager": "kubesched-e2e", "force": "true"},
    ).expect(200, 201)
    deadline = time.monotonic() + 60
    while admin_client.get(f"{PODGROUPS}/podgroups", limit="1").status != 200:
        assert time.monotonic() < deadline, "the PodGroup CRD is not served after 60s"
        time.sleep(0.2)


@pytest.fixture
def add_nodes(admin_client: AdminClient, run_id: str) -> Iterator[Callable[[int], list[str]]]:
    made: list[str] = []

    def add(count: int) -> list[str]:
        out = []
        for _ in range(count):
            name = f"cosched-{run_id}-{len(made)}"
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
async def scheduler(
    control_plane: ClusterInfo, run_id: str, pod_group_crd: None
) -> AsyncIterator[str]:
    """kube-scheduler's default plugins plus Coscheduling, configured as scheduler-plugins'
    manifests/coscheduling do; yields the profile's schedulerName."""
    profile = f"cosched-{run_id}"
    registry = default_registry()
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [
                {
                    "schedulerName": profile,
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "*"}],
                        },
                    },
                    "pluginConfig": [
                        {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": TIMEOUT}}
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


def create_pod_group(
    admin: AdminClient, namespace: str, name: str, min_member: int, **spec: Any
) -> Any:
    return admin.post(
        f"{PODGROUPS}/namespaces/{namespace}/podgroups",
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": min_member, **spec},
        },
    )


async def create_workers(
    admin: AdminClient,
    namespace: str,
    scheduler: str,
    run_id: str,
    group: str,
    count: int,
    start: int = 0,
) -> None:
    for i in range(start, start + count):
        pod = make_pod(
            f"{group}-worker-{i}",
            cpu="1",
            labels={POD_GROUP_LABEL: group},
            spec={"schedulerName": scheduler, "nodeSelector": {OWNER: run_id}},
        )
        manifest: dict[str, Any] = msgspec.to_builtins(pod)
        del manifest["metadata"]["uid"]
        del manifest["metadata"]["namespace"]
        await asyncio.to_thread(
            lambda m=manifest: admin.post(f"/api/v1/namespaces/{namespace}/pods", m).expect(201)
        )


async def pods(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    r = await asyncio.to_thread(lambda: admin.get(f"/api/v1/namespaces/{namespace}/pods"))
    items: list[dict[str, Any]] = r.expect(200).json()["items"]
    return items


async def pod_group_status(admin: AdminClient, namespace: str, name: str) -> dict[str, Any]:
    r = await asyncio.to_thread(
        lambda: admin.get(f"{PODGROUPS}/namespaces/{namespace}/podgroups/{name}")
    )
    status: dict[str, Any] = r.expect(200).json().get("status", {})
    return status


async def failure_notes(admin: AdminClient, namespace: str) -> list[str]:
    r = await asyncio.to_thread(
        lambda: admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    )
    return [e["note"] for e in r.expect(200).json()["items"] if e["reason"] == "FailedScheduling"]


def bound(items: list[dict[str, Any]], group: str | None = None) -> list[str]:
    return sorted(
        p["spec"]["nodeName"]
        for p in items
        if p["spec"].get("nodeName")
        and (group is None or p["metadata"]["labels"].get(POD_GROUP_LABEL) == group)
    )


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


async def never(probe: Callable[[], Any], bad: Callable[[Any], bool], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = await probe()
        assert not bad(value), value
        await asyncio.sleep(0.5)


async def test_eight_workers_bind_together_and_the_status_follows(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    nodes = add_nodes(8)
    create_pod_group(admin_client, namespace, "trainer", 8).expect(201)
    await create_workers(admin_client, namespace, scheduler, run_id, "trainer", 8)
    items = await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == 8,
        "the eight workers bound",
    )
    assert bound(items) == sorted(nodes)
    status = await wait_for(
        lambda: pod_group_status(admin_client, namespace, "trainer"),
        lambda s: s.get("phase") == "Scheduling",
        "the PodGroup in phase Scheduling",
        seconds=20,
    )
    assert status["scheduleStartTime"]
    # No kubelet here: the pods are reported running by hand, as a kubelet would.
    for p in items:
        name = p["metadata"]["name"]
        await asyncio.to_thread(
            lambda n=name: admin_client.request(
                "PATCH",
                f"/api/v1/namespaces/{namespace}/pods/{n}/status",
                {"status": {"phase": "Running"}},
                content_type="application/merge-patch+json",
            ).expect(200)
        )
    status = await wait_for(
        lambda: pod_group_status(admin_client, namespace, "trainer"),
        lambda s: s.get("phase") == "Running",
        "the PodGroup in phase Running",
        seconds=20,
    )
    assert (status["running"], status.get("succeeded", 0), status.get("failed", 0)) == (8, 0, 0)


async def test_eight_workers_on_seven_nodes_none_binds_until_an_eighth_comes(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    add_nodes(7)
    create_pod_group(admin_client, namespace, "trainer", 8).expect(201)
    await create_workers(admin_client, namespace, scheduler, run_id, "trainer", 8)
    await wait_for(
        lambda: failure_notes(admin_client, namespace),
        lambda ns: any("PodGroup " in n and "gets rejected" in n for n in ns),
        "the group rejected",
        seconds=30,
    )
    await never(lambda: pods(admin_client, namespace), lambda ps: bound(ps) != [], TIMEOUT * 2)
    add_nodes(1)
    items = await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == 8,
        "the whole group bound",
        seconds=90,
    )
    assert len(set(bound(items))) == 8


async def test_two_competing_groups_never_deadlock(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    """Room for one group of four at a time: one group binds whole, the other waits whole;
    when the first finishes, the second binds."""
    add_nodes(6)
    create_pod_group(admin_client, namespace, "a", 4).expect(201)
    create_pod_group(admin_client, namespace, "b", 4).expect(201)
    # Interleaved creation, the worst case for a scheduler taking pods one by one.
    for i in range(4):
        await create_workers(admin_client, namespace, scheduler, run_id, "a", 1, start=i)
        await create_workers(admin_client, namespace, scheduler, run_id, "b", 1, start=i)
    items = await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: sorted((len(bound(ps, "a")), len(bound(ps, "b")))) == [0, 4],
        "one whole group bound",
        seconds=60,
    )
    winner = "a" if len(bound(items, "a")) == 4 else "b"
    loser = "b" if winner == "a" else "a"
    await never(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps, loser)) > 0 or len(bound(ps, winner)) != 4,
        TIMEOUT * 2,
    )
    # The winner's job ends: its pods go, and the other group takes the room whole.
    for p in items:
        if p["metadata"]["labels"][POD_GROUP_LABEL] == winner:
            await asyncio.to_thread(
                lambda n=p["metadata"]["name"]: admin_client.request(
                    "DELETE",
                    f"/api/v1/namespaces/{namespace}/pods/{n}",
                    params={"gracePeriodSeconds": "0"},
                ).expect(200)
            )
    await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps, loser)) == 4,
        "the other group bound",
        seconds=90,
    )


async def test_bad_input_says_why_and_recovers(
    admin_client: AdminClient,
    namespace: str,
    add_nodes: Callable[[int], list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    add_nodes(3)
    # A negative minMember never gets in: the CRD's schema turns it away, naming the field.
    bad = create_pod_group(admin_client, namespace, "negative", -1)
    assert bad.status == 422
    assert "spec.minMember" in bad.body.decode()
    # A pod naming a PodGroup that does not exist: told so, until it does.
    await create_workers(admin_client, namespace, scheduler, run_id, "late", 1)
    await wait_for(
        lambda: failure_notes(admin_client, namespace),
        lambda ns: any(f"PodGroup not found: {namespace}/late." in n for n in ns),
        "the missing PodGroup reported",
        seconds=30,
    )
    create_pod_group(admin_client, namespace, "late", 1).expect(201)
    await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps, "late")) == 1,
        "the pod bound once its PodGroup exists",
        seconds=60,
    )
    # A PodGroup asking for more members than exist: told how many there are, until there are.
    create_pod_group(admin_client, namespace, "short", 2).expect(201)
    await create_workers(admin_client, namespace, scheduler, run_id, "short", 1)
    await wait_for(
        lambda: failure_notes(admin_client, namespace),
        lambda ns: any(
            "cannot find enough sibling pods, current pods number: 1, minMember of group: 2" in n
            for n in ns
        ),
        "the missing member reported",
        seconds=30,
    )
    await create_workers(admin_client, namespace, scheduler, run_id, "short", 1, start=1)
    await wait_for(
        lambda: pods(admin_client, namespace),
        lambda ps: len(bound(ps, "short")) == 2,
        "the group bound once complete",
        seconds=60,
    )
