"""The binder `bench e2e` measures as the API server's ceiling (hack/binder, on client-go),
against a real kube-apiserver: each pending pod bound to the next node in turn (a pod pinned to
a node by name, as a DaemonSet's, to that node) with kube-scheduler's ``Scheduled`` event, gated
pods and other schedulers' pods left alone, a pod of higher priority preempting as
kube-scheduler writes it, and a clean exit on SIGTERM."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from builders import NodeWrapper, PodWrapper
from kubesched import cluster
from kubesched.api import ObjectList, Pod
from kubesched.cluster import BINDER, ClusterInfo
from kubesched.kube import APIClient, api_path

NAMESPACE = "binder"
NODES = ("node-a", "node-b", "node-c")

T = TypeVar("T")


async def _until(probe: Callable[[], Awaitable[T | None]], what: str, within: float = 30.0) -> T:
    deadline = time.monotonic() + within
    while (found := await probe()) is None:
        assert time.monotonic() < deadline, f"waited {within:.0f} s for {what}"
        await asyncio.sleep(0.2)
    return found


def _pinned_to(node: str) -> dict[str, Any]:
    """Required node affinity on ``metadata.name``, as the DaemonSet controller pins its pods."""
    by_name = {"key": "metadata.name", "operator": "In", "values": [node]}
    required = {"nodeSelectorTerms": [{"matchFields": [by_name]}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}


async def _exercise(info: ClusterInfo, binder: Path) -> None:
    async with APIClient.from_kubeconfig(str(info.kubeconfig)) as client:
        await client.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for node in NODES:
            manifest = NodeWrapper(node).capacity({"cpu": "4", "pods": "110"}).ready().manifest()
            await client.post("/api/v1/nodes", manifest)
        pods_path = api_path("pods", namespace=NAMESPACE)

        async def create(name: str, requests: dict[str, str] | None = None, **spec: Any) -> None:
            pod = PodWrapper(name).namespace(NAMESPACE).pause(requests=requests).spec(spec)
            await client.post(pods_path, pod.manifest())

        # Six pods wait before it starts (its list), three come after (its watch).
        for i in range(6):
            await create(f"p{i}")
        # Pinned as the DaemonSet controller pins: not counted in the turns.
        await create("pinned", affinity=_pinned_to("node-b"))
        await create("gated", schedulingGates=[{"name": "example.com/hold"}])
        await create("other", schedulerName="other-scheduler")
        kubeconfig = info.client_kubeconfig("system:kube-scheduler")
        process = await asyncio.create_subprocess_exec(
            str(binder),
            f"--kubeconfig={kubeconfig}",
            "--in-flight=4",
            stdin=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            for i in range(6, 9):
                await create(f"p{i}")
            turns = [f"p{i}" for i in range(9)]
            names = [*turns, "pinned"]

            async def placed() -> dict[str, str] | None:
                pods = await client.list(pods_path, type=ObjectList[Pod])
                nodes = {p.metadata.name: p.spec.node_name for p in pods.items}
                return nodes if all(nodes[n] for n in names) else None

            async def scheduled_events() -> list[dict[str, Any]] | None:
                path = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"
                body = json.loads(await client.get(path))
                found = [e for e in body["items"] if e["reason"] == "Scheduled"]
                return found if len(found) >= len(names) else None

            nodes = await _until(placed, "the ten pods to be bound")
            events = await _until(scheduled_events, "ten Scheduled events")
            # In turn over the three nodes: three pods each, whatever order they went in.
            assert collections.Counter(nodes[n] for n in turns) == dict.fromkeys(NODES, 3)
            assert nodes["pinned"] == "node-b"
            assert sorted(e["regarding"]["name"] for e in events) == names
            for event in events:
                pod = event["regarding"]["name"]
                assert event["type"] == "Normal"
                assert event["action"] == "Binding"
                assert event["reportingController"] == "default-scheduler"
                assert event["note"] == f"Successfully assigned {NAMESPACE}/{pod} to {nodes[pod]}"
            # The binder listed them before any of the others; they stay pending.
            assert nodes["gated"] == nodes["other"] == ""
            await _preemption(client, create, pods_path)
            process.send_signal(signal.SIGTERM)
            _, errors = await asyncio.wait_for(process.communicate(), timeout=10)
            assert process.returncode == 0, errors.decode()[-2000:]
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()


async def _preemption(
    client: APIClient, create: Callable[..., Awaitable[None]], pods_path: str
) -> None:
    """Four pods of 1 CPU fill node-c (4 CPUs); one of priority 1000 asking for 2 CPUs, pinned
    there, evicts two of them with kube-scheduler's writes, then is bound there."""
    priority_classes = "/apis/scheduling.k8s.io/v1/priorityclasses"
    await client.post(priority_classes, {"metadata": {"name": "high"}, "value": 1000})
    pin = _pinned_to("node-c")

    for i in range(4):
        await create(f"low{i}", {"cpu": "1"}, affinity=pin, terminationGracePeriodSeconds=0)

    async def low_bound() -> int | None:
        pods = await client.list(pods_path, type=ObjectList[Pod])
        on_c = [p for p in pods.items if p.metadata.name.startswith("low") and p.spec.node_name]
        return len(on_c) if len(on_c) == 4 else None

    await _until(low_bound, "the four pods of 1 CPU to be bound")
    await create("high", {"cpu": "2"}, affinity=pin, priorityClassName="high")

    async def high_bound() -> Pod | None:
        pods = await client.list(pods_path, type=ObjectList[Pod])
        high = next(p for p in pods.items if p.metadata.name == "high")
        return high if high.spec.node_name else None

    high = await _until(high_bound, "the pod of priority 1000 to be bound")
    assert high.spec.node_name == "node-c"
    assert high.status.nominated_node_name == "node-c"
    pods = await client.list(pods_path, type=ObjectList[Pod])
    left = sorted(p.metadata.name for p in pods.items if p.metadata.name.startswith("low"))
    assert len(left) == 2, left

    async def preemption_events() -> list[dict[str, Any]] | None:
        path = f"/apis/events.k8s.io/v1/namespaces/{NAMESPACE}/events"
        body = json.loads(await client.get(path))
        found = [e for e in body["items"] if e["reason"] in ("Preempted", "FailedScheduling")]
        return found if len(found) >= 3 else None

    events = await _until(preemption_events, "two Preempted events and a FailedScheduling")
    preempted = sorted(e["regarding"]["name"] for e in events if e["reason"] == "Preempted")
    assert sorted(set(preempted) | set(left)) == [f"low{i}" for i in range(4)]
    assert len(preempted) == 2
    for event in events:
        if event["reason"] == "Preempted":
            assert event["note"] == f"Preempted by pod {high.metadata.uid} on node node-c"
            assert event["related"]["name"] == "high"
        else:
            assert event["regarding"]["name"] == "high"


def test_binds_in_turn_with_kube_schedulers_event() -> None:
    binder = cluster.ensure_tool(BINDER)
    name = f"binder-{os.getpid()}"
    info = cluster.up(name)
    try:
        asyncio.run(_exercise(info, binder))
    finally:
        cluster.down(name)
