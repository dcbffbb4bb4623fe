"""``kubesched annotate-nodes`` against a real Prometheus and kube-apiserver: the annotations it
writes for series the test controls, stale annotations removed, nodes without data left alone,
rounds repeated on an interval, and a clear failure when Prometheus is down."""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.annotator.field_e2e import annotated_node, new_group, nodes
from e2e.annotator.prom_e2e import Monitoring, free_port, shared_prometheus
from e2e.scheduler.sched_e2e import eventually, kubesched_argv
from kubesched.annotator import Options, annotate_once
from kubesched.cluster import ClusterInfo
from kubesched.kube import APIClient
from kubesched.plugins.network_traffic import PrometheusClient

if TYPE_CHECKING:
    from conftest import AdminClient

GI = 1 << 30
SAFE_KEYS = ("mean-free-cpu", "std-free-cpu", "mean-free-memory", "std-free-memory")


@pytest.fixture(scope="session")
def monitoring() -> Iterator[Monitoring]:
    with shared_prometheus() as m:
        yield m


def annotations(client: AdminClient, name: str) -> dict[str, str]:
    node = client.get(f"/api/v1/nodes/{name}").expect(200).json()
    return dict(node["metadata"].get("annotations") or {})


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*kubesched_argv(), "annotate-nodes", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_once_writes_the_statistics(
    monitoring: Monitoring, admin_client: AdminClient, control_plane: ClusterInfo
) -> None:
    g = new_group()
    a, b, c, d = (f"an-{g}-{k}" for k in "abcd")
    ex = monitoring.exporter
    ex.node_idle_cpu(a, 2.5)  # 2500 millicores free, on two CPUs
    ex.node_free_memory(a, 6 * GI)
    ex.node_idle_cpu(b, 1.0)  # no memory series for b
    ex.node_idle_cpu(c, 3.0)  # c is not a node of the cluster
    ex.node_free_memory(c, GI)
    # a 2s window of 2s rates: 5 samples cover every point
    monitoring.prometheus.wait_for_samples(
        f'node_cpu_seconds_total{{kubernetes_node=~"an-{g}-.*"}}', 6
    )
    old = {"mean-free-memory": "123", "std-free-memory": "4", "other": "kept"}
    manifests = [
        annotated_node(a, g),
        annotated_node(b, g, annotations=old),
        annotated_node(d, g, annotations={"mean-free-cpu": "7"}),
    ]
    with nodes(admin_client, manifests):
        before = time.time()
        done = run_cli(
            f"--prometheus={monitoring.prometheus.url}",
            f"--kubeconfig={control_plane.kubeconfig}",
            "--once",
            "--window=2s",
            "--step=1s",
            "--rate-window=2s",
        )
        assert done.returncode == 0, done.stderr
        got_a, got_b, got_d = (annotations(admin_client, n) for n in (a, b, d))

    assert float(got_a["mean-free-cpu"]) == pytest.approx(2500, abs=1e-3)
    assert float(got_a["std-free-cpu"]) == pytest.approx(0, abs=1e-3)
    assert got_a["mean-free-memory"] == str(6 * GI)
    assert got_a["std-free-memory"] == "0"
    stamp = datetime.fromisoformat(got_a["kubesched.io/stats-updated-at"].replace("Z", "+00:00"))
    assert before - 1 <= stamp.timestamp() <= time.time()
    # b: cpu written; the old memory statistics removed, other annotations kept
    assert float(got_b["mean-free-cpu"]) == pytest.approx(1000, abs=1e-3)
    assert "mean-free-memory" not in got_b
    assert "std-free-memory" not in got_b
    assert got_b["other"] == "kept"
    # d: no data, left as it was
    assert got_d == {"mean-free-cpu": "7"}
    # the table of what was written, and the log of the round
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["NODE", *SAFE_KEYS]
    assert lines[1].split()[0] == a
    assert lines[1].split()[3] == str(6 * GI)
    assert lines[2].split()[3:] == ["-", "-"]
    assert lines[3].split() == [d, "-", "-", "-", "-"]
    assert "annotated 2 node(s); 1 without data" in done.stderr
    assert f"not in the cluster: {c}" in done.stderr


def test_sample_standard_deviation_of_the_points(
    monitoring: Monitoring, admin_client: AdminClient, control_plane: ClusterInfo
) -> None:
    g = new_group()
    name = f"an-{g}-noisy"
    # free memory 1Gi on even seconds, 3Gi on odd ones
    monitoring.exporter.node_free_memory(name, lambda ms: GI if (ms // 1000) % 2 == 0 else 3 * GI)
    monitoring.exporter.node_idle_cpu(name, 1.5)
    monitoring.prometheus.wait_for_samples(
        f'node_memory_MemAvailable_bytes{{kubernetes_node="{name}"}}', 6
    )
    options = Options(prometheus=monitoring.prometheus.url, window=4.0, step=1.0, rate_window="2s")
    now = time.time()

    async def annotate() -> Any:
        api = APIClient.from_kubeconfig(control_plane.kubeconfig)
        try:
            return await annotate_once(
                api, PrometheusClient(options.prometheus), options, clock=lambda: now
            )
        finally:
            await api.aclose()

    with nodes(admin_client, [annotated_node(name, g)]):
        result = asyncio.run(annotate())
        got = annotations(admin_client, name)
    assert name in result.annotated
    # the same points, and the statistics by hand: mean, and the sample deviation (n - 1)
    [series] = PrometheusClient(options.prometheus).query_range(
        f'max by (kubernetes_node) (node_memory_MemAvailable_bytes{{kubernetes_node="{name}"}})',
        now - 4,
        now,
        1,
    )
    values = [v for _, v in series.points]
    n = len(values)
    assert n == 5
    assert set(values) == {GI, 3 * GI}
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    assert float(got["mean-free-memory"]) == pytest.approx(mean, rel=1e-12)
    assert float(got["std-free-memory"]) == pytest.approx(sd, rel=1e-12)
    assert sd > 0


def test_rounds_follow_the_series(
    monitoring: Monitoring, admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    g = new_group()
    name = f"an-{g}-a"
    monitoring.exporter.node_free_memory(name, 6 * GI)
    monitoring.prometheus.wait_for_samples(
        f'node_memory_MemAvailable_bytes{{kubernetes_node="{name}"}}', 3
    )
    log = tmp_path / "annotator.log"
    with nodes(admin_client, [annotated_node(name, g)]), open(log, "w") as out:
        proc = subprocess.Popen(
            [
                *kubesched_argv(),
                "annotate-nodes",
                f"--prometheus={monitoring.prometheus.url}",
                f"--kubeconfig={control_plane.kubeconfig}",
                "--interval=0.5",
                "--window=2s",
                "--step=1s",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            eventually(
                lambda: annotations(admin_client, name).get("mean-free-memory"),
                lambda v: v == str(6 * GI),
                timeout=20,
                what="the first round",
            )
            monitoring.exporter.node_free_memory(name, 2 * GI)
            eventually(
                lambda: annotations(admin_client, name).get("mean-free-memory"),
                lambda v: v == str(2 * GI),
                timeout=20,
                what="a round after the change",
            )
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(15)
    assert code == 0, log.read_text()


def test_prometheus_down_fails_the_round(control_plane: ClusterInfo) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    done = run_cli(f"--prometheus={dead}", f"--kubeconfig={control_plane.kubeconfig}", "--once")
    assert done.returncode == 1
    assert f"Error: Prometheus at {dead}: cannot reach {dead}" in done.stderr
