"""PodTopologySpread and InterPodAffinity end to end: the scheduler ``kubesched run`` runs
(:class:`SchedulerService`, in-process) against the session's kube-apiserver.

Six fake nodes in three zones. A deployment-like set of six pods with a zone spread constraint
(maxSkew 1, DoNotSchedule) lands two per zone; seven replicas with required anti-affinity on the
hostname take one node each, and the seventh stays Pending with kube-scheduler's message.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncIterator, Callable, Iterator
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

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
GROUP = "e2e.kubesched.io/spread-and-affinity"
ZONES = ("zone-a", "zone-b", "zone-c")
NAMESPACE_PREFIX = "spread"


@pytest.fixture
def nodes(admin_client: AdminClient, run_id: str) -> Iterator[dict[str, str]]:
    """Node name -> zone: two nodes per zone, labelled with this run's group. zone-a's nodes are
    much larger, so resource scoring alone would put every pod there."""
    made: dict[str, str] = {}
    try:
        for zone in ZONES:
            for i in range(2):
                name = f"spread-{run_id}-{zone}-{i}"
                cpu = "64" if zone == "zone-a" else "4"
                node = make_node(name, cpu=cpu, labels={ZONE: zone, HOST: name, GROUP: run_id})
                admin_client.post("/api/v1/nodes", msgspec.to_builtins(node)).expect(201)
                made[name] = zone
        yield made
    finally:
        for name in made:
            admin_client.delete(f"/api/v1/nodes/{name}")


@pytest.fixture
async def scheduler(control_plane: ClusterInfo, run_id: str) -> AsyncIterator[str]:
    """``kubesched run``'s service with one profile of this test's own (kube-scheduler's default
    plugins but DefaultPreemption); yields its schedulerName."""
    profile = f"spread-{run_id}"
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
            # Without preemption the message ends after the filter verdicts (no pod here
            # could be preempted anyway: they all have priority 0).
            "profiles": [
                {
                    "schedulerName": profile,
                    "plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}},
                }
            ],
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
    name: str, namespace: str, profile: str, run_id: str, labels: dict[str, str], spec: Any
) -> dict[str, Any]:
    pod = make_pod(
        name,
        namespace=namespace,
        cpu="500m",
        labels=labels,
        spec={"schedulerName": profile, "nodeSelector": {GROUP: run_id}, **spec},
    )
    manifest: dict[str, Any] = msgspec.to_builtins(pod)
    del manifest["metadata"]["uid"]
    return manifest


async def create_pods(admin: AdminClient, namespace: str, manifests: list[dict[str, Any]]) -> None:
    for m in manifests:
        await asyncio.to_thread(
            lambda m=m: admin.post(f"/api/v1/namespaces/{namespace}/pods", m).expect(201)
        )


async def pods_of(admin: AdminClient, namespace: str, app: str) -> list[dict[str, Any]]:
    response = await asyncio.to_thread(
        lambda: admin.get(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"app={app}")
    )
    items: list[dict[str, Any]] = response.expect(200).json()["items"]
    return items


async def eventually(
    probe: Callable[[], Any], done: Callable[[Any], bool], what: str, seconds: float = 60.0
) -> Any:
    deadline = time.monotonic() + seconds
    value = await probe()
    while not done(value):
        if time.monotonic() > deadline:
            summary = [
                (p["metadata"]["name"], p["spec"].get("nodeName"), condition(p)) for p in value
            ]
            pytest.fail(f"timed out waiting for {what}; last seen: {summary!r}")
        await asyncio.sleep(0.3)
        value = await probe()
    return value


def condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    for c in pod.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled":
            found: dict[str, Any] = c
            return found
    return None


async def test_zone_spread_with_do_not_schedule(
    admin_client: AdminClient,
    namespace: str,
    nodes: dict[str, str],
    scheduler: str,
    run_id: str,
) -> None:
    app = f"web-{run_id}"
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    }
    manifests = [
        pod_manifest(f"web-{i}", namespace, scheduler, run_id, {"app": app}, spread)
        for i in range(6)
    ]
    await create_pods(admin_client, namespace, manifests)
    pods = await eventually(
        lambda: pods_of(admin_client, namespace, app),
        lambda ps: len(ps) == 6 and all(p["spec"].get("nodeName") for p in ps),
        "six spread pods bound",
    )
    per_zone = collections.Counter(nodes[p["spec"]["nodeName"]] for p in pods)
    assert per_zone == dict.fromkeys(ZONES, 2)


async def test_anti_affinity_keeps_replicas_apart(
    admin_client: AdminClient,
    namespace: str,
    nodes: dict[str, str],
    scheduler: str,
    run_id: str,
) -> None:
    app = f"db-{run_id}"
    anti = {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}
                ]
            }
        }
    }
    manifests = [
        pod_manifest(f"db-{i}", namespace, scheduler, run_id, {"app": app}, anti) for i in range(7)
    ]
    await create_pods(admin_client, namespace, manifests)

    def settled(ps: list[dict[str, Any]]) -> bool:
        bound = [p for p in ps if p["spec"].get("nodeName")]
        pending = [p for p in ps if (c := condition(p)) is not None and c["status"] == "False"]
        return len(bound) == 6 and len(pending) == 1

    pods = await eventually(
        lambda: pods_of(admin_client, namespace, app), settled, "6 bound, 1 pending"
    )
    bound = sorted(p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName"))
    assert bound == sorted(nodes)  # one replica per node
    (pending,) = [p for p in pods if not p["spec"].get("nodeName")]
    cond = condition(pending)
    assert cond is not None
    assert cond["reason"] == "Unschedulable"
    # Every other node in the cluster fails the pods' nodeSelector first.
    all_nodes = (await asyncio.to_thread(lambda: admin_client.get("/api/v1/nodes"))).json()["items"]
    others = len(all_nodes) - len(nodes)
    reasons = ["6 node(s) didn't match pod anti-affinity rules"]
    if others:
        reasons.append(f"{others} node(s) didn't match Pod's node affinity/selector")
    # DefaultPreemption is off here; DynamicResources' PostFilter part ends the message.
    want = (
        f"0/{len(all_nodes)} nodes are available: {', '.join(sorted(reasons))}. "
        "no new claims to deallocate"
    )
    assert cond["message"] == want
    # The FailedScheduling event says the same.
    events = await asyncio.to_thread(
        lambda: admin_client.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    )
    notes = {
        e.get("note")
        for e in events.json()["items"]
        if e.get("reason") == "FailedScheduling"
        and e.get("regarding", {}).get("name") == pending["metadata"]["name"]
    }
    assert want in notes
