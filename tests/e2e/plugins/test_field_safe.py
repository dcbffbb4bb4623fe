"""SafeOverload and SafeBalance in ``kubesched run`` on a real apiserver.

First with statistics that a round of ``kubesched annotate-nodes`` wrote from a real
Prometheus (constant series, so the numbers are exact), then with hand-written statistics whose
Beta distributions have integer shapes, so every risk is a closed form. Pods land where the
documented formulas say, and a pod that fits nowhere is told why.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.annotator.field_e2e import (
    GROUP_LABEL,
    annotated_node,
    bound_node,
    namespace,
    new_group,
    nodes,
    profile_config,
    scheduler,
)
from e2e.annotator.prom_e2e import Monitoring, shared_prometheus
from e2e.scheduler.sched_e2e import (
    condition,
    create_pod,
    eventually,
    get_pod,
    pod_manifest,
)
from kubesched.annotator import Options, Round, annotate_once
from kubesched.cluster import ClusterInfo
from kubesched.kube import APIClient
from kubesched.plugins.network_traffic import PrometheusClient

if TYPE_CHECKING:
    from conftest import AdminClient

GI = 1 << 30
CPU_RISK = "node(s) were at risk of cpu overload"
MEMORY_RISK = "node(s) were at risk of memory overload"


@pytest.fixture(scope="session")
def monitoring() -> Iterator[Monitoring]:
    with shared_prometheus() as m:
        yield m


def safe_config(profile: str, balance: bool = True) -> dict[str, Any]:
    score = [("SafeOverload", 1)] + ([("SafeBalance", 1)] if balance else [])
    return profile_config(
        profile,
        filters=["SafeOverload"],
        score=score,
        args={"SafeOverload": {"utilization": 90, "percentile": 30}},
    )


def pod(
    client: AdminClient,
    ns: str,
    profile: str,
    name: str,
    *,
    group: str,
    only: list[str] | None = None,
    cpu: str | None = None,
    memory: str | None = None,
) -> str:
    spec: dict[str, Any] = {"nodeSelector": {GROUP_LABEL: group}}
    if only:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": only}
                            ]
                        }
                    ]
                }
            }
        }
    create_pod(client, pod_manifest(name, ns, profile, cpu=cpu, memory=memory, spec=spec))
    return name


def unschedulable_message(client: AdminClient, ns: str, name: str) -> str:
    got = eventually(
        lambda: get_pod(client, ns, name),
        lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable",
        timeout=30,
        what=f"pod {name} to be marked Unschedulable",
    )
    cond = condition(got, "PodScheduled")
    assert cond is not None
    return str(cond["message"])


def test_statistics_from_prometheus_decide_placement(
    monitoring: Monitoring, admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    # Nodes of 4 CPUs and 8Gi; a pod of 600m and 256Mi (0.25Gi). Free amounts measured:
    #   a: 3 CPUs, 6Gi   mu cpu (1000 + 600) / 4000 = 0.4, mem (2 + 0.25) / 8 = 0.28125
    #   b: 0.8 CPU, 6Gi  mu cpu (3200 + 600) / 4000 = 0.95 > 0.9: rejected
    #   c: 3 CPUs, 0.5Gi mu mem (7.5 + 0.25) / 8 = 0.96875 > 0.9: rejected
    #   d: 3.5 CPUs, 4Gi mu cpu (500 + 600) / 4000 = 0.275, mem (4 + 0.25) / 8 = 0.53125
    # Constant series: sigma 0, risk 0, SafeOverload 100 on a and d. SafeBalance,
    # int((1 - mu / 2) * 100 + 0.5), lower of cpu and memory:
    #   a: min(80, 86) = 80; d: min(86, 73) = 73. The pod goes to a (180 against 173).
    g = new_group()
    free = {"a": (3.0, 6.0), "b": (0.8, 6.0), "c": (3.0, 0.5), "d": (3.5, 4.0)}
    names = {k: f"sf-{g}-{k}" for k in free}
    for k, (cores, mem) in free.items():
        monitoring.exporter.node_idle_cpu(names[k], cores)
        monitoring.exporter.node_free_memory(names[k], mem * GI)
    profile = f"sf-{g}"
    with (
        nodes(admin_client, [annotated_node(n, g) for n in names.values()]),
        namespace(admin_client) as ns,
        scheduler(safe_config(profile), tmp_path, control_plane.kubeconfig) as proc,
    ):
        # a 2s window of 2s rates: 5 samples cover every point
        monitoring.prometheus.wait_for_samples(
            f'node_cpu_seconds_total{{kubernetes_node=~"sf-{g}-.*"}}', 6
        )
        result = annotate(monitoring, control_plane)
        assert set(names.values()) <= set(result.annotated)
        pod(admin_client, ns, profile, "fits", group=g, cpu="600m", memory="256Mi")
        assert bound_node(admin_client, ns, "fits", watch=proc) == names["a"]
        # 3.5 CPUs: no room left on a (NodeResourcesFit, which runs first); above 90% of
        # cpu on b, c and d, and of memory on c too
        pod(admin_client, ns, profile, "big", group=g, cpu="3500m", memory="256Mi")
        message = unschedulable_message(admin_client, ns, "big")
        assert "1 Insufficient cpu" in message
        assert f"3 {CPU_RISK}" in message
        assert f"1 {MEMORY_RISK}" in message
        # d goes idle: once a round of annotate-nodes has rewritten d's statistics (a node
        # annotation update, which SafeOverload registered), "big" is tried again and fits
        # there (cpu (0 + 3500) / 4000 = 0.875). Rounds repeat until the rate window holds
        # only the new samples.
        monitoring.exporter.node_idle_cpu(names["d"], 4.0)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not get_pod(admin_client, ns, "big")["spec"].get(
            "nodeName"
        ):
            annotate(monitoring, control_plane)
            time.sleep(1)
        assert bound_node(admin_client, ns, "big", watch=proc) == names["d"]


def annotate(monitoring: Monitoring, control_plane: ClusterInfo) -> Round:
    """One round of ``kubesched annotate-nodes`` (tests/e2e/annotator runs the command)."""
    options = Options(monitoring.prometheus.url, window=2.0, step=1.0, rate_window="2s")

    async def once() -> Round:
        api = APIClient.from_kubeconfig(control_plane.kubeconfig)
        try:
            return await annotate_once(api, PrometheusClient(options.prometheus), options)
        finally:
            await api.aclose()

    return asyncio.run(once())


def std_for(mu: float, alpha: float, beta: float, capacity: float) -> str:
    """The free-amount deviation making Beta(alpha, beta) the fit at mean ``mu``."""
    var = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    assert math.isclose(alpha / (alpha + beta), mu)
    return repr(math.sqrt(var) * capacity)


def test_beta_risks_by_hand(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    # cpu only, 4000m, pods requesting nothing; threshold 0.9, percentile 0.3:
    #   calm: free 2600 +- 0:               mu 0.35, risk 0, score 100
    #   b123: free 800 with Beta(12, 3):    mu 0.8, risk 1 - P(Bin(14, 0.9) >= 12) = 0.158,
    #                                       score int((1 - sqrt(0.158 / 0.3)) * 100) = 27
    #   b31:  free 1000 with Beta(3, 1):    mu 0.75, risk 1 - 0.9**3 = 0.271,
    #                                       score int((1 - sqrt(0.271 / 0.3)) * 100) = 4
    #   b41:  free 800 with Beta(4, 1):     mu 0.8, risk 1 - 0.9**4 = 0.344 > 0.3: rejected
    risk123 = 1 - sum(math.comb(14, j) * 0.9**j * 0.1 ** (14 - j) for j in (12, 13, 14))
    assert int((1 - math.sqrt(risk123 / 0.3)) * 100) == 27
    assert int((1 - math.sqrt((1 - 0.9**3) / 0.3)) * 100) == 4
    assert 1 - 0.9**4 > 0.3
    g = new_group()
    stats = {
        "calm": ("2600", "0"),
        "b123": ("800", std_for(0.8, 12, 3, 4000)),
        "b31": ("1000", std_for(0.75, 3, 1, 4000)),
        "b41": ("800", std_for(0.8, 4, 1, 4000)),
    }
    names = {k: f"sf-{g}-{k}" for k in stats}
    manifests = [
        annotated_node(names[k], g, annotations={"mean-free-cpu": m, "std-free-cpu": s})
        for k, (m, s) in stats.items()
    ]
    profile = f"sfb-{g}"
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(safe_config(profile, balance=False), tmp_path, control_plane.kubeconfig) as proc,
    ):
        pod(admin_client, ns, profile, "any", group=g)
        assert bound_node(admin_client, ns, "any", watch=proc) == names["calm"]
        risky = [names["b31"], names["b123"], names["b41"]]
        pod(admin_client, ns, profile, "risky", group=g, only=risky)
        assert bound_node(admin_client, ns, "risky", watch=proc) == names["b123"]
        pod(admin_client, ns, profile, "hopeless", group=g, only=[names["b41"]])
        assert f"1 {CPU_RISK}" in unschedulable_message(admin_client, ns, "hopeless")
