"""kube-apiserver goes away mid-run and comes back: no pod is lost.

This test has a cluster of its own, since it stops that cluster's kube-apiserver.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from sched_e2e import (
    RestartableAPIServer,
    Runner,
    apiserver_restarter,
    bound,
    client_for,
    create_all,
    create_node,
    create_pod,
    eventually,
    list_pods,
    node_manifest,
    parse_cpu,
    pod_manifest,
    requests_of,
    scheduler_config,
)

from kubesched import cluster
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from sched_e2e import Client

BEFORE = 150
AFTER = 50


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[tuple[ClusterInfo, RestartableAPIServer]]:
    """A cluster for this module alone, and a handle to restart its kube-apiserver."""
    name = f"e2e-restart-{os.getpid()}"
    info = cluster.up(name)
    try:
        with apiserver_restarter(info) as apiserver:
            yield info, apiserver
    finally:
        cluster.down(name)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["crash", "restart"])
def test_apiserver_restart_mid_run_loses_no_pod(
    own_cluster: tuple[ClusterInfo, RestartableAPIServer],
    admin_client: Client,
    tmp_path: Path,
    signum: int,
) -> None:
    info, apiserver = own_cluster
    client = client_for(info, admin_client)
    namespace = f"restart-{signum}"
    profile = f"restart-{signum}"
    client.post("/api/v1/namespaces", {"metadata": {"name": namespace}}).expect(201)
    nodes = [node_manifest(f"r{signum}-{i}", cpu="16", memory="32Gi") for i in range(20)]
    create_all(client, create_node, nodes)
    runner = Runner(tmp_path, info.kubeconfig)
    try:
        # Pods first, then the scheduler, at the default rate limit (50 requests/s for
        # bindings and events together): the apiserver goes away with most pods still to bind.
        create_all(
            client,
            create_pod,
            [pod_manifest(f"a-{i:03d}", namespace, profile, cpu="100m") for i in range(BEFORE)],
        )
        sched = runner(scheduler_config(profile, qps=50, burst=50))
        # Down while pods are still being bound.
        eventually(
            lambda: len(bound(list_pods(client, namespace))),
            lambda n: n >= 20,
            timeout=60,
            interval=0.05,
            what="the first bindings",
            watch=sched,
        )
        before_stop = len(bound(list_pods(client, namespace)))
        apiserver.stop(signum)
        down_at = time.monotonic()
        time.sleep(2.0)
        assert sched.alive(), "the scheduler must ride out an apiserver restart"
        apiserver.start()
        print(
            f"kube-apiserver away for {time.monotonic() - down_at:.1f}s, "
            f"{before_stop}/{BEFORE} pods bound before"
        )

        # New pods after the restart arrive through re-established watches.
        create_all(
            client,
            create_pod,
            [pod_manifest(f"b-{i:03d}", namespace, profile, cpu="100m") for i in range(AFTER)],
        )
        final = eventually(
            lambda: list_pods(client, namespace),
            lambda ps: len(bound(ps)) == BEFORE + AFTER,
            timeout=120,
            interval=0.5,
            what="every pod bound after the restart",
            watch=sched,
        )
    finally:
        runner.close()
        for node in nodes:
            client.delete(f"/api/v1/nodes/{node['metadata']['name']}")

    per_node: dict[str, int] = {}
    for pod in final:
        node = pod["spec"]["nodeName"]
        per_node[node] = per_node.get(node, 0) + requests_of(pod)["cpu"]
    capacity = {n["metadata"]["name"]: parse_cpu(n["status"]["allocatable"]["cpu"]) for n in nodes}
    assert set(per_node) <= set(capacity)
    assert all(per_node[n] <= capacity[n] for n in per_node)
    assert before_stop < BEFORE, "the apiserver must go away while pods are being bound"
    assert sched.popen.returncode == 0, "stopped cleanly, not crashed"
    assert "Traceback" not in sched.log()
