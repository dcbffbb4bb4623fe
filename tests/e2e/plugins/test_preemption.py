"""DefaultPreemption end to end: ``kubesched run``'s service (in-process) against the session's
kube-apiserver, with PriorityClasses, pods bound by hand as the lower-priority workload, and a
PodDisruptionBudget.

There is no kubelet: a victim deleted with a grace period stays ``Terminating`` until the test
finishes the deletion, as a kubelet would once the containers stopped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.cluster import ClusterInfo
from kubesched.config import load_config_from_dict
from kubesched.kube import APIClient
from kubesched.plugins import default_registry
from kubesched.scheduler import SchedulerService

if TYPE_CHECKING:
    from conftest import AdminClient

# The scheduler runs on the session loop (its fixture is async), so the tests must too.
pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

GROUP = "e2e.kubesched.io/preemption"
NAMESPACE_PREFIX = "preempt"


@pytest.fixture
def priority_classes(admin_client: AdminClient, run_id: str) -> Iterator[dict[str, str]]:
    """``low`` (0), ``mid`` (10) and ``high`` (1000) -> this run's PriorityClass names."""
    values = {"low": 0, "mid": 10, "high": 1000}
    names = {k: f"preempt-{run_id}-{k}" for k in values}
    try:
        for k, v in values.items():
            body = {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": names[k]},
                "value": v,
            }
            admin_client.post("/apis/scheduling.k8s.io/v1/priorityclasses", body).expect(201)
        yield names
    finally:
        for name in names.values():
            admin_client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


@pytest.fixture
def make_nodes(admin_client: AdminClient, run_id: str) -> Iterator[Callable[..., list[str]]]:
    made: list[str] = []

    def make(*names: str, cpu: str = "2") -> list[str]:
        out = []
        for short in names:
            name = f"preempt-{run_id}-{short}"
            node = make_node(name, cpu=cpu, labels={GROUP: run_id})
            admin_client.post("/api/v1/nodes", msgspec.to_builtins(node)).expect(201)
            made.append(name)
            out.append(name)
        return out

    try:
        yield make
    finally:
        for name in made:
            admin_client.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
async def scheduler(control_plane: ClusterInfo, run_id: str) -> AsyncIterator[str]:
    """``kubesched run``'s service with one default profile of this test's own; yields its
    schedulerName."""
    profile = f"preempt-{run_id}"
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            "profiles": [{"schedulerName": profile}],
        }
    )
    async with APIClient.from_kubeconfig(str(control_plane.kubeconfig)) as client:
        service = SchedulerService(config, client, default_registry(), health_port=0)
        task = asyncio.create_task(service.run())
        try:
            yield profile
        finally:
            service.stop()
            await asyncio.wait_for(task, 30)


def pod_manifest(
    name: str,
    run_id: str,
    priority_class: str,
    *,
    scheduler: str = "",
    node: str = "",
    cpu: str = "1",
    grace: int = 0,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": priority_class,
        "nodeSelector": {GROUP: run_id},
        "terminationGracePeriodSeconds": grace,
    }
    if scheduler:
        spec["schedulerName"] = scheduler
    pod = make_pod(name, cpu=cpu, node_name=node, labels=labels, spec=spec)
    manifest: dict[str, Any] = msgspec.to_builtins(pod)
    del manifest["metadata"]["uid"]
    del manifest["metadata"]["namespace"]
    return manifest


async def call(fn: Callable[[], Any]) -> Any:
    return await asyncio.to_thread(fn)


async def create_pod(admin: AdminClient, namespace: str, manifest: dict[str, Any]) -> None:
    await call(lambda: admin.post(f"/api/v1/namespaces/{namespace}/pods", manifest).expect(201))


async def get_pod(admin: AdminClient, namespace: str, name: str) -> dict[str, Any] | None:
    r = await call(lambda: admin.get(f"/api/v1/namespaces/{namespace}/pods/{name}"))
    if r.status == 404:
        return None
    pod: dict[str, Any] = r.expect(200).json()
    return pod


async def events(admin: AdminClient, namespace: str) -> list[dict[str, Any]]:
    r = await call(lambda: admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"))
    items: list[dict[str, Any]] = r.expect(200).json()["items"]
    return items


async def eventually(
    probe: Callable[[], Awaitable[Any]],
    done: Callable[[Any], bool],
    what: str,
    seconds: float = 60.0,
) -> Any:
    deadline = time.monotonic() + seconds
    value = await probe()
    while not done(value):
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds}s waiting for {what}; last seen: {value!r}")
        await asyncio.sleep(0.3)
        value = await probe()
    return value


def condition(pod: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in (pod or {}).get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            found: dict[str, Any] = c
            return found
    return None


async def test_a_high_priority_pod_preempts_the_cheapest_victims_once_they_are_gone(
    admin_client: AdminClient,
    namespace: str,
    priority_classes: dict[str, str],
    make_nodes: Callable[..., list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    node_a, node_b = make_nodes("a", "b")
    # node a: two low-priority pods, terminated by a kubelet in 30 s. node b: two of mid priority.
    for i in range(2):
        low = pod_manifest(f"low-{i}", run_id, priority_classes["low"], node=node_a, grace=30)
        await create_pod(admin_client, namespace, low)
        mid = pod_manifest(f"mid-{i}", run_id, priority_classes["mid"], node=node_b)
        await create_pod(admin_client, namespace, mid)
    preemptor = pod_manifest("high", run_id, priority_classes["high"], scheduler=scheduler, cpu="2")
    await create_pod(admin_client, namespace, preemptor)

    async def victims() -> list[dict[str, Any] | None]:
        return [await get_pod(admin_client, namespace, f"low-{i}") for i in range(2)]

    # Both victims of node a are marked and deleted gracefully; the preemptor is nominated there.
    marked = await eventually(
        victims,
        lambda vs: all(v is not None and v["metadata"].get("deletionTimestamp") for v in vs),
        "the low-priority pods being deleted",
    )
    for v in marked:
        target = condition(v, "DisruptionTarget")
        assert target is not None
        assert (target["status"], target["reason"], target["message"]) == (
            "True",
            "PreemptionByScheduler",
            f"{scheduler}: preempting to accommodate a higher priority pod",
        )
    high = await eventually(
        lambda: get_pod(admin_client, namespace, "high"),
        lambda p: p["status"].get("nominatedNodeName") == node_a,
        "the preemptor nominated to node a",
    )
    uid = high["metadata"]["uid"]
    cond = condition(high, "PodScheduled")
    assert cond is not None
    # Preemption found its node, so it adds nothing to the message.
    assert cond["message"].endswith("2 Insufficient cpu.")
    # The mid-priority pods are untouched, and the preemptor waits for its victims.
    for i in range(2):
        mid = await get_pod(admin_client, namespace, f"mid-{i}")
        assert mid is not None
        assert not mid["metadata"].get("deletionTimestamp")
    await asyncio.sleep(2)
    high = await get_pod(admin_client, namespace, "high")
    assert high is not None
    assert not high["spec"].get("nodeName")

    # The kubelet's part: the containers stopped, the victims go.
    for i in range(2):
        await call(
            lambda i=i: admin_client.request(
                "DELETE",
                f"/api/v1/namespaces/{namespace}/pods/low-{i}",
                params={"gracePeriodSeconds": "0"},
            ).expect(200)
        )
    bound = await eventually(
        lambda: get_pod(admin_client, namespace, "high"),
        lambda p: bool(p["spec"].get("nodeName")),
        "the preemptor bound",
    )
    assert bound["spec"]["nodeName"] == node_a
    preempted = sorted(
        (e["regarding"]["name"], e["note"], e["related"]["name"], e["reportingController"])
        for e in await events(admin_client, namespace)
        if e["reason"] == "Preempted"
    )
    note = f"Preempted by pod {uid} on node {node_a}"
    assert preempted == [(f"low-{i}", note, "high", scheduler) for i in range(2)]


async def test_a_pod_disruption_budget_steers_preemption_to_another_node(
    admin_client: AdminClient,
    namespace: str,
    priority_classes: dict[str, str],
    make_nodes: Callable[..., list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    node_a, node_b = make_nodes("a", "b", cpu="1")
    # Without the budget node a would be chosen: its victim has the lower priority.
    guarded = pod_manifest(
        "guarded", run_id, priority_classes["low"], node=node_a, labels={"app": "guarded"}
    )
    free = pod_manifest("free", run_id, priority_classes["mid"], node=node_b)
    await create_pod(admin_client, namespace, guarded)
    await create_pod(admin_client, namespace, free)
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }
    path = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    await call(lambda: admin_client.post(path, budget).expect(201))
    # No disruption controller runs here: the budget's status is written as it would be.
    status = {
        "status": {
            "disruptionsAllowed": 0,
            "currentHealthy": 1,
            "desiredHealthy": 1,
            "expectedPods": 1,
            "observedGeneration": 1,
        }
    }
    await call(lambda: admin_client.patch(f"{path}/guard/status", status).expect(200))
    await asyncio.sleep(1)  # the scheduler's PDB informer sees it

    await create_pod(
        admin_client,
        namespace,
        pod_manifest("high", run_id, priority_classes["high"], scheduler=scheduler),
    )
    bound = await eventually(
        lambda: get_pod(admin_client, namespace, "high"),
        lambda p: bool(p["spec"].get("nodeName")),
        "the preemptor bound",
    )
    assert bound["spec"]["nodeName"] == node_b
    assert await get_pod(admin_client, namespace, "free") is None
    still = await get_pod(admin_client, namespace, "guarded")
    assert still is not None
    assert not still["metadata"].get("deletionTimestamp")


async def test_equal_priority_preempts_nobody_and_says_why(
    admin_client: AdminClient,
    namespace: str,
    priority_classes: dict[str, str],
    make_nodes: Callable[..., list[str]],
    scheduler: str,
    run_id: str,
) -> None:
    (node_a,) = make_nodes("a", cpu="1")
    await create_pod(
        admin_client,
        namespace,
        pod_manifest("running", run_id, priority_classes["high"], node=node_a),
    )
    await create_pod(
        admin_client,
        namespace,
        pod_manifest("same", run_id, priority_classes["high"], scheduler=scheduler),
    )
    pod = await eventually(
        lambda: get_pod(admin_client, namespace, "same"),
        lambda p: condition(p, "PodScheduled") is not None,
        "the PodScheduled condition",
    )
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    # Other tests' nodes, if any, fail earlier filters for reasons of their own; for preemption
    # they are all beyond help (the pod's node selector rules them out).
    nodes = (await call(lambda: admin_client.get("/api/v1/nodes"))).json()["items"]
    others = len(nodes) - 1
    preemption = ["1 No preemption victims found for incoming pod"]
    if others:
        preemption.append(f"{others} Preemption is not helpful for scheduling")
    head, _, tail = cond["message"].partition(" no new claims to deallocate, preemption: ")
    assert head.startswith(f"0/{len(nodes)} nodes are available: ")
    assert "1 Insufficient cpu" in head
    assert tail == f"0/{len(nodes)} nodes are available: {', '.join(sorted(preemption))}."
    running = await get_pod(admin_client, namespace, "running")
    assert running is not None
    assert not running["metadata"].get("deletionTimestamp")
