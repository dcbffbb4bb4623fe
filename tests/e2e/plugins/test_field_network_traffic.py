"""NetworkTraffic against a real Prometheus scraping per-node receive counters the test controls:
the documented scores worked by hand, ``kubesched run`` placing pods on the quietest node, and
pods still scheduled while Prometheus is unreachable.

The counters start when the test registers them, so ``rate()`` over a one-minute window sees
only the few seconds scraped so far and reports every node's rate scaled by the same factor.
The scores, which only depend on the ratios to the busiest node, are the ones of the full rates:
with eth0 rates 1.01, 2.63 and 4.0 MB/s, ``100 - t * 100 // max`` gives
``100 - 25 = 75``, ``100 - 65 = 35`` and ``0``; a node Prometheus does not know scores 50.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from builders import make_node, make_pod
from e2e.annotator.field_e2e import (
    annotated_node,
    bound_node,
    namespace,
    new_group,
    nodes,
    pod_in_group,
    profile_config,
    scheduler,
    wait_for_log,
)
from e2e.annotator.prom_e2e import Monitoring, free_port, shared_prometheus
from kubesched.cluster import ClusterInfo
from kubesched.framework import CycleState, Nodes, Snapshot
from kubesched.plugins.network_traffic import NetworkTraffic

if TYPE_CHECKING:
    from conftest import AdminClient

RATES = {"a": 1.01e6, "b": 2.63e6, "c": 4.0e6}
EXPECTED = {"a": 75, "b": 35, "c": 0}


@pytest.fixture(scope="session")
def monitoring() -> Iterator[Monitoring]:
    with shared_prometheus() as m:
        yield m


def serve_traffic(m: Monitoring, group: str) -> dict[str, str]:
    """eth0 counters at RATES for nodes ``nt-<group>-a..c``, lo traffic far above them on a,
    a node the cluster does not have, and node_uname_info for the joins."""
    names = {k: f"nt-{group}-{k}" for k in RATES}
    for i, (k, rate) in enumerate(RATES.items()):
        instance = f"host-{group}-{i}:9100"  # unique in the shared exporter
        m.exporter.node_traffic(names[k], "eth0", rate, instance=instance)
        m.exporter.node_uname(instance, names[k])
    m.exporter.node_traffic(names["a"], "lo", 9e9, instance=f"host-{group}-0:9100")
    m.exporter.node_traffic(f"nt-{group}-elsewhere", "eth0", 1e3, instance=f"host-{group}-x:9100")
    m.prometheus.wait_for_samples(
        f'node_network_receive_bytes_total{{kubernetes_node=~"nt-{group}-.*"}}', 3
    )
    return names


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "e2e"


@pytest.mark.parametrize("uname", [False, True], ids=["node label", "node_uname_info join"])
def test_scores_from_prometheus_by_hand(monitoring: Monitoring, uname: bool) -> None:
    group = new_group()
    names = serve_traffic(monitoring, group)
    snap = Snapshot()
    for name in [*names.values(), f"nt-{group}-unknown"]:
        snap.set_node(make_node(name))
    args: dict[str, Any] = {
        "prometheusAddress": monitoring.prometheus.url,
        "networkInterface": "eth0",
        "timeRangeInMinutes": 1,
        "refreshInterval": "1h",
        "maxDataAge": "1h",
        "useNodeUnameInfo": uname,
    }
    plugin = NetworkTraffic(_Handle(snap), args)
    try:
        assert plugin.refresher.refresh_once(), plugin.refresher.last_error
        data = plugin.refresher.data
        assert data is not None
        known = {n: v for n, v in data.traffic.items() if n.startswith(f"nt-{group}-")}
        # eth0 only: lo's 9 GB/s on a is not counted
        assert known[names["a"]] < known[names["c"]]
        # the same scale for every node: the ratios of the set rates
        assert known[names["b"]] / known[names["c"]] == pytest.approx(2.63 / 4.0, rel=1e-3)
        nodes_ = Nodes(snap, snap.present_slots())
        state = CycleState()
        raw, _ = plugin.score_nodes(state, make_pod("p"), nodes_)
        plugin.normalize_score(state, make_pod("p"), nodes_, raw)
        assert raw.tolist() == [EXPECTED["a"], EXPECTED["b"], EXPECTED["c"], 50]
        assert np.array_equal(raw, np.array([75, 35, 0, 50]))
    finally:
        plugin.close()


def test_run_places_pods_on_the_quietest_node(
    monitoring: Monitoring,
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    tmp_path: Path,
) -> None:
    group = new_group()
    names = serve_traffic(monitoring, group)
    profile = f"nt-{group}"
    config = profile_config(
        profile,
        score=[("NetworkTraffic", 1)],
        args={
            "NetworkTraffic": {
                "prometheusAddress": monitoring.prometheus.url,
                "networkInterface": "eth0",
                "timeRangeInMinutes": 1,
                "refreshInterval": "1s",
            }
        },
    )
    manifests = [annotated_node(n, group) for n in names.values()]
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        # The first pod makes sure the background query has started; it may be scored before
        # the first answer (50 everywhere) or after it, as the two race.
        pod_in_group(admin_client, ns, profile, "warm-up", group)
        bound_node(admin_client, ns, "warm-up", watch=proc)
        wait_for_log(proc, "NetworkTraffic: traffic of")
        for i in range(3):
            pod_in_group(admin_client, ns, profile, f"p{i}", group, cpu="100m")
        placed = [bound_node(admin_client, ns, f"p{i}", watch=proc) for i in range(3)]
        # a: 75, b: 35, c: 0 (pods do not change the traffic)
        assert placed == [names["a"]] * 3


def test_pods_are_scheduled_while_prometheus_is_down(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    group = new_group()
    profile = f"nt-down-{group}"
    dead = f"http://127.0.0.1:{free_port()}"
    config = profile_config(
        profile,
        score=[("NetworkTraffic", 1)],
        args={
            "NetworkTraffic": {
                "prometheusAddress": dead,
                "refreshInterval": "1s",
                "maxDataAge": "1s",
                "requestTimeout": "1s",
            }
        },
    )
    manifests = [annotated_node(f"nt-down-{group}-{k}", group) for k in "ab"]
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        start = time.monotonic()
        for i in range(3):
            pod_in_group(admin_client, ns, profile, f"p{i}", group)
        placed = {bound_node(admin_client, ns, f"p{i}", watch=proc, timeout=15) for i in range(3)}
        assert placed <= {n["metadata"]["name"] for n in manifests}
        assert time.monotonic() - start < 15
        wait_for_log(proc, f"NetworkTraffic: query to {dead} failed")
        assert "every node scores 50" in proc.log()
