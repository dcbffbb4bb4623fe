"""Trimaran against a real Prometheus: node-exporter's CPU and memory series, turned into
utilisation ratios by kube-prometheus' recording rules, read with load-watcher's queries; the
scores of TargetLoadPacking and LoadVariationRiskBalancing worked by hand from upstream's
formulas, and ``kubesched run`` packing pods with TargetLoadPacking.

The rules are kube-prometheus' own but for the ``rate()`` window, 5 s instead of 5 m: a full
window from the first seconds on makes the rate of the test's steady counters exact (over a
longer, partly empty window Prometheus extrapolates). The plugins' window is 10 s, so the
averages only take rule results computed over full windows. The load is steady: averages are the
set utilisations and standard deviations are 0 (the unit tests cover deviations).

Nodes have 4 CPUs and 8 GiB. CPU utilisation: a 10 %, b 45 %, c 90 %; memory: a 25 %, b 50 %,
c 87.5 %. Node d is not in Prometheus.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from e2e.annotator.prom_e2e import Exporter, Monitoring, PrometheusServer
from kubesched.cluster import ClusterInfo
from kubesched.framework import CycleState, Snapshot
from kubesched.plugins.trimaran import LoadVariationRiskBalancing, TargetLoadPacking

if TYPE_CHECKING:
    from conftest import AdminClient

CPUS = 4
GIB = 1 << 30
CPU_UTIL = {"a": 0.10, "b": 0.45, "c": 0.90}
MEMORY_AVAILABLE = {"a": 6 * GIB, "b": 4 * GIB, "c": 1 * GIB}

#: kube-prometheus' node rules (instance:node_cpu:ratio) and node-mixin's memory one.
RULES = [
    {
        "name": "node.rules",
        "rules": [
            {
                "record": "instance:node_cpu:ratio",
                "expr": 'sum without(cpu, mode) (rate(node_cpu_seconds_total{mode!="idle",'
                'mode!="iowait",mode!="steal"}[5s])) / on(instance) group_left() '
                "count by(instance) (sum by(instance, cpu) (node_cpu_seconds_total))",
            },
            {
                "record": "instance:node_memory_utilisation:ratio",
                "expr": '1 - (node_memory_MemAvailable_bytes{job="node-exporter"} / '
                'node_memory_MemTotal_bytes{job="node-exporter"})',
            },
        ],
    }
]


@pytest.fixture(scope="module")
def monitoring() -> Iterator[Monitoring]:
    """An exporter and a Prometheus with the recording rules, for this module."""
    directory = Path(tempfile.mkdtemp(prefix="kubesched-trimaran-"))
    exporter = Exporter()
    try:
        server = PrometheusServer([exporter.target], directory, rules=RULES)
        try:
            yield Monitoring(exporter, server)
        finally:
            server.stop()
    finally:
        exporter.close()
        shutil.rmtree(directory, ignore_errors=True)


def serve_load(m: Monitoring, group: str) -> dict[str, str]:
    """node-exporter's series for nodes ``tl-<group>-a..c`` (``instance`` is the node name, as
    kube-prometheus relabels it); returns their names once the rules have enough results."""
    names = {k: f"tl-{group}-{k}" for k in CPU_UTIL}
    for k, name in names.items():
        base = {"instance": name, "job": "node-exporter"}
        for cpu in range(CPUS):
            labels = {**base, "cpu": str(cpu)}
            busy = CPU_UTIL[k]
            m.exporter.counter("node_cpu_seconds_total", {**labels, "mode": "user"}, busy * 0.7)
            m.exporter.counter("node_cpu_seconds_total", {**labels, "mode": "system"}, busy * 0.3)
            # iowait is idle time to the rule
            m.exporter.counter("node_cpu_seconds_total", {**labels, "mode": "iowait"}, 0.02)
            m.exporter.counter("node_cpu_seconds_total", {**labels, "mode": "idle"}, 0.98 - busy)
        m.exporter.gauge("node_memory_MemTotal_bytes", base, 8 * GIB)
        m.exporter.gauge("node_memory_MemAvailable_bytes", base, MEMORY_AVAILABLE[k])
    # 17 results of the rule: the last ten seconds' are all over full 5 s windows.
    m.prometheus.wait_for_samples(f'instance:node_cpu:ratio{{instance=~"tl-{group}-.*"}}', 17)
    return names


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "e2e"


def args(m: Monitoring, **more: Any) -> dict[str, Any]:
    return {
        "metricProvider": {"type": "Prometheus", "address": m.prometheus.url},
        "window": "10s",
        "refreshInterval": "1s",
        **more,
    }


def test_scores_from_prometheus_by_hand(monitoring: Monitoring) -> None:
    group = new_group()
    names = serve_load(monitoring, group)
    snap = Snapshot()
    for name in [*names.values(), f"tl-{group}-d"]:
        snap.set_node(make_node(name, cpu=str(CPUS), memory="8Gi"))
    infos = [snap.get(n) for n in [*names.values(), f"tl-{group}-d"]]
    tlp = TargetLoadPacking(_Handle(snap), args(monitoring))  # type: ignore[arg-type]
    lvrb = LoadVariationRiskBalancing(_Handle(snap), args(monitoring))  # type: ignore[arg-type]
    try:
        for plugin in (tlp, lvrb):
            assert plugin.refresher.refresh_once(), plugin.refresher.last_error
            data = plugin.refresher.data
            assert data is not None
            load = data.traffic[names["b"]]
            assert load.cpu_avg == pytest.approx(45.0)
            assert load.memory_avg == pytest.approx(50.0)
            assert load.cpu_std == pytest.approx(0.0, abs=1e-6)
        state = CycleState()
        # TargetLoadPacking, target 40 %, a pod of 500m requested (x 1.5: 750m predicted):
        # a: (400 + 750) / 4000 = 28.75 %: round(60 * 28.75 / 40 + 40) = round(83.1) = 83
        # b: (1800 + 750) / 4000 = 63.75 %: round(40 * 36.25 / 60) = round(24.2) = 24
        # c: 108.75 % > 100: 0; d: no load: 0
        small = make_pod("p", cpu="500m")
        assert [tlp.score(state, small, i)[0] for i in infos if i] == [83, 24, 0, 0]
        # LoadVariationRiskBalancing, a pod of 1 CPU and 1 GiB, no deviation:
        # a: cpu mu (400 + 1000) / 4000 = 0.35: 82.5; memory (2048 + 1024) / 8192 = 0.375:
        #    81.25; min 81.25 -> 81
        # b: cpu (1800 + 1000) / 4000 = 0.7: 65; memory (4096 + 1024) / 8192 = 0.625: 68.75 -> 65
        # c: cpu 1.15 -> 1: 50; memory (7168 + 1024) / 8192 = 1: 50 -> 50; d: 0
        big = make_pod("q", cpu="1", memory="1Gi")
        assert [lvrb.score(state, big, i)[0] for i in infos if i] == [81, 65, 50, 0]
    finally:
        tlp.close()
        lvrb.close()


def test_run_packs_pods_with_target_load_packing(
    monitoring: Monitoring,
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    tmp_path: Path,
) -> None:
    group = new_group()
    names = serve_load(monitoring, group)
    profile = f"tl-{group}"
    config = profile_config(
        profile, score=[("TargetLoadPacking", 1)], args={"TargetLoadPacking": args(monitoring)}
    )
    manifests = [annotated_node(n, group, cpu=str(CPUS)) for n in names.values()]
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        # The first pod starts the background query: scored without load (0 everywhere). It
        # predicts 2m of CPU (1m x 1.5, rounded), too little to change what follows.
        pod_in_group(admin_client, ns, profile, "warm-up", group, cpu="1m")
        bound_node(admin_client, ns, "warm-up", watch=proc)
        wait_for_log(proc, "TargetLoadPacking: no current load")
        wait_for_log(proc, "TargetLoadPacking: load of")
        placed = []
        for i in range(3):
            pod_in_group(admin_client, ns, profile, f"p{i}", group, cpu="500m")
            placed.append(bound_node(admin_client, ns, f"p{i}", watch=proc))
        # p0: a 83, b 24. p1: a holds p0's 750m, not measured yet: 47.5 %: 35 > 24.
        # p2: a 66.25 %: round(40 * 33.75 / 60) = 22 or 23 < b's 24: b.
        assert placed == [names["a"], names["a"], names["b"]]
