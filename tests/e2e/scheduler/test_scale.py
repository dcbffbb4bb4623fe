"""1,000 pods on 100 nodes: every pod bound, no node over-committed, from the API's own view."""

from __future__ import annotations

import random
import time
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any

import pytest
from sched_e2e import (
    OWNER,
    OWNER_LABEL,
    bound,
    create_all,
    create_pod,
    eventually,
    list_nodes,
    list_pods,
    node_manifest,
    parse_cpu,
    parse_memory,
    pod_manifest,
    requests_of,
    scheduler_config,
)

if TYPE_CHECKING:
    from sched_e2e import Client, MakeNodes, StartScheduler

pytestmark = pytest.mark.usefixtures("only_our_nodes")

NODES = 100
PODS = 1000


def _nodes(rng: random.Random) -> list[dict[str, Any]]:
    """Mixed sizes; some nodes take few pods, so the pod count is a limit too."""
    nodes = []
    for i in range(NODES):
        cpu, memory = rng.choice([("2", "4Gi"), ("4", "8Gi"), ("8", "16Gi")])
        pods = "6" if i % 10 == 0 else "110"
        nodes.append(node_manifest(f"scale-{i:03d}", cpu=cpu, memory=memory, pods=pods))
    return nodes


def _pods(rng: random.Random, namespace: str, profile: str) -> list[dict[str, Any]]:
    pods = []
    for i in range(PODS):
        if i % 20 == 0:  # best effort: no requests at all
            cpu = memory = None
        else:
            cpu = f"{rng.choice([100, 200, 250, 300, 500])}m"
            memory = f"{rng.choice([128, 256, 512, 768])}Mi"
        pods.append(pod_manifest(f"p-{i:04d}", namespace, profile, cpu=cpu, memory=memory))
    return pods


def test_a_thousand_pods_on_a_hundred_nodes(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    rng = random.Random(20261122)
    nodes = _nodes(rng)
    pods = _pods(rng, namespace, profile)
    capacity = sum(parse_cpu(n["status"]["allocatable"]["cpu"]) for n in nodes)
    wanted = sum(requests_of(p)["cpu"] for p in pods)
    assert wanted < 0.8 * capacity, "the workload must fit with room to spare"
    make_nodes(nodes)
    sched = kubesched(scheduler_config(profile))

    started = time.monotonic()
    create_all(admin_client, create_pod, pods)
    final = eventually(
        lambda: list_pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == PODS,
        timeout=180,
        interval=1.0,
        what=f"all {PODS} pods bound",
        watch=sched,
    )
    print(f"{PODS} pods created and bound in {time.monotonic() - started:.1f}s")

    # Nothing over-committed, by the API's final state: requests and pod counts per node.
    allocatable = {
        n["metadata"]["name"]: n["status"]["allocatable"]
        for n in list_nodes(admin_client, labelSelector=f"{OWNER_LABEL}={OWNER}")
    }
    used: dict[str, Counter[str]] = defaultdict(Counter)
    for pod in final:
        node = pod["spec"]["nodeName"]
        assert node in allocatable, f"{pod['metadata']['name']} bound to unknown node {node}"
        used[node].update({**requests_of(pod), "pods": 1})
    over = {
        node: dict(u)
        for node, u in used.items()
        if u["cpu"] > parse_cpu(allocatable[node]["cpu"])
        or u["memory"] > parse_memory(allocatable[node]["memory"])
        or u["pods"] > int(allocatable[node]["pods"])
    }
    assert over == {}
    assert sum(u["pods"] for u in used.values()) == PODS
    # LeastAllocated and BalancedAllocation spread the load: no node is left empty.
    assert len(used) == NODES
    assert (
        eventually(
            lambda: sched.metric(
                "scheduler_schedule_attempts_total", result="scheduled", profile=profile
            ),
            lambda v: v is not None and v >= PODS,
            timeout=10,
            what="every binding counted",
        )
        == PODS
    )
    assert "Conflict" not in sched.log()
