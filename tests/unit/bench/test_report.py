"""Tables and the throughput plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.bench import E2EResult, core_table, e2e_table, plot_throughput, run_core


def result(scheduler: str, throughput: float) -> E2EResult:
    return E2EResult(
        scheduler=scheduler,
        workload="small",
        nodes=100,
        init_pods=100,
        measured_pods=500,
        throughput_pods_per_s=throughput,
        throughput_interval_s=1.0,
        throughput_series=[10.0, throughput, throughput * 2],
        throughput_window_p50=throughput,
        throughput_window_max=throughput * 2,
        latency_p50_s=0.1,
        latency_p90_s=0.2,
        latency_p99_s=0.3,
        latency_max_s=0.4,
        latency_mean_s=0.15,
        cpu_s=2.0,
        cpu_per_pod_ms=4.0,
        cpu_total_s=3.0,
        peak_rss_bytes=50_000_000,
        overcommitted_nodes=0,
        unbound_pods=0,
        constraint_violations=0,
        cpu_fraction_std=0.1,
        cpu_fraction_mean=0.3,
        creation_pods_per_s=500.0,
        measured_duration_s=5.0,
        apiserver_cpu_s=4.0,
        bench_client_cpu_s=0.5,
        kubernetes_version="v1.34.4",
    )


def test_e2e_table_has_a_column_per_scheduler() -> None:
    text = e2e_table([result("kubesched", 90.0), result("kube-scheduler", 120.0)])
    lines = text.splitlines()
    assert lines[0].startswith("bench e2e: workload small, 100 nodes")
    assert "kubesched" in lines[1]
    assert "kube-scheduler" in lines[1]
    assert any(
        line.startswith("throughput (pods/s)") and "90.0" in line and "120.0" in line
        for line in lines
    )
    assert any(line.startswith("overcommitted nodes") for line in lines)
    assert e2e_table([]) == "no results"


def test_core_table() -> None:
    text = core_table(run_core(nodes=3, pods=5))
    assert "bench core: 3 nodes, 5 pods, profile default, plugins core" in text
    assert "scheduled" in text
    assert "5 / 5" in text
    assert "0 overcommitted nodes" in text


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "t.png"
    plot_throughput([result("kubesched", 90.0), result("kube-scheduler", 120.0)], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
