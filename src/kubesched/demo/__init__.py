"""``kubesched demo``: the scheduler on a real local control plane, end to end.

Brings up (or reuses) the local control plane, creates a small fake cluster and pending pods,
runs the very scheduler ``kubesched run`` runs until every pod is placed or reported
unschedulable, and prints where each pod went and why the others could not go.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

import msgspec
import yaml

from kubesched.api import Pod
from kubesched.cluster import ClusterInfo, up
from kubesched.config import load_config_from_dict
from kubesched.kube import AlreadyExists, APIClient, NotFound
from kubesched.plugins import default_registry
from kubesched.scheduler import SchedulerService

NAMESPACE = "kubesched-demo"
SCHEDULER_NAME = "kubesched"
CLUSTER_NAME = "kubesched"

#: The demo's KubeSchedulerConfiguration: one profile, kube-scheduler's default plugins.
CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "leaderElection": {"leaderElect": False},
    "profiles": [{"schedulerName": SCHEDULER_NAME}],
}

Progress = Callable[[str], None]


def _manifests(name: str) -> list[dict[str, Any]]:
    text = resources.files(__name__).joinpath(name).read_text()
    return [d for d in yaml.safe_load_all(text) if d]


async def _ensure_objects(client: APIClient, progress: Progress) -> list[str]:
    """Create the nodes (kept if present) and fresh demo pods; returns the pod names in order."""
    with contextlib.suppress(AlreadyExists):
        await client.post("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    for node in _manifests("cluster.yaml"):
        try:
            await client.post("/api/v1/nodes", node)
        except AlreadyExists:
            await client.put(
                f"/api/v1/nodes/{node['metadata']['name']}/status", await _merged(client, node)
            )
    names = []
    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    await client.delete(pods_path, params={"gracePeriodSeconds": 0})
    for pod in _manifests("workload.yaml"):
        name = pod["metadata"]["name"]
        while True:  # a pod from an earlier run may still be terminating
            try:
                await client.post(pods_path, pod)
                break
            except AlreadyExists:
                await asyncio.sleep(0.2)
        names.append(name)
    progress(f"created {len(_manifests('cluster.yaml'))} nodes and {len(names)} pending pods")
    return names


async def _merged(client: APIClient, node: dict[str, Any]) -> dict[str, Any]:
    """The stored node with the demo's status, so a re-run restores it."""
    current: dict[str, Any] = msgspec.json.decode(
        await client.get(f"/api/v1/nodes/{node['metadata']['name']}")
    )
    current["status"] = node["status"]
    return current


async def _outcomes(client: APIClient, names: list[str]) -> dict[str, tuple[str, str]]:
    """Pod -> (node or "", why): the binding, or the latest FailedScheduling message."""
    out: dict[str, tuple[str, str]] = {}
    for name in names:
        try:
            pod = msgspec.json.decode(
                await client.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"), type=Pod
            )
        except NotFound:
            continue
        if pod.spec.node_name:
            out[name] = (pod.spec.node_name, "")
            continue
        cond = next((c for c in pod.status.conditions if c.type == "PodScheduled"), None)
        if cond is not None and cond.status == "False":
            out[name] = ("", cond.message)
    return out


async def _run(info: ClusterInfo, progress: Progress, wait: float) -> dict[str, tuple[str, str]]:
    config = load_config_from_dict(CONFIG)
    async with APIClient.from_kubeconfig(str(info.kubeconfig)) as client:
        names = await _ensure_objects(client, progress)
        service = SchedulerService(config, client, default_registry(), health_port=0)
        task = asyncio.create_task(service.run())
        deadline = time.monotonic() + wait
        outcomes: dict[str, tuple[str, str]] = {}
        while time.monotonic() < deadline and len(outcomes) < len(names):
            await asyncio.sleep(0.5)
            outcomes = await _outcomes(client, names)
        service.stop()
        await task
        return {n: outcomes.get(n, ("", "no decision before the timeout")) for n in names}


def run_demo(
    progress: Progress, *, timeout: float = 60.0
) -> tuple[ClusterInfo, dict[str, tuple[str, str]]]:
    """Run the demo; returns the cluster and, per pod, its node or why it has none."""
    info = up(CLUSTER_NAME, progress=progress)
    return info, asyncio.run(_run(info, progress, timeout))
