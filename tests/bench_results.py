"""A finished `bench e2e` run's figures for tests of what reports them (tables, comparisons,
failed parts), shared by the bench's unit tests."""

from __future__ import annotations

from kubesched.bench import E2EResult


def e2e_result(scheduler: str, throughput: float = 100.0, *, events: int = 500) -> E2EResult:
    """``scheduler``'s run of the ``small`` workload: 500 measured pods, all bound."""
    return E2EResult(
        scheduler=scheduler,
        workload="small",
        arrival="rate",
        nodes=100,
        init_pods=100,
        measured_pods=500,
        pods_bound=500,
        events_written=events,
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
        startup_s=None,
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
