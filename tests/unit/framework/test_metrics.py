"""The loop's histograms expose what prometheus_client's would for the same observations."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from kubesched.framework import Code, FrameworkMetrics, LoopHistogram, exponential_buckets


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


def test_same_samples_as_prometheus_client() -> None:
    buckets = exponential_buckets(0.0001, 2, 12)
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    a = LoopHistogram("d_seconds", "doc", ["point"], buckets, ours)
    b = Histogram("d_seconds", "doc", ["point"], buckets=buckets, registry=theirs)
    # On a bound, between bounds, below the first, above the last.
    values = [0.0001, 0.0002, 0.00015, 0.00001, 0.5, 3.0, 0.0004, 0.0004]
    for i, v in enumerate(values):
        point = "Filter" if i % 2 else "Score"
        a.labels(point).observe(v)
        b.labels(point).observe(v)
    assert _samples(ours) == _samples(theirs)


def test_framework_metrics_count_observations() -> None:
    m = FrameworkMetrics()
    m.extension_point("Filter", Code.SUCCESS, "p", 0.001)
    m.extension_point("Filter", Code.SUCCESS, "p", 0.003)
    m.plugin("Fit", "Filter", Code.SUCCESS, 0.00002)
    got = _samples(m.registry)
    key = (("extension_point", "Filter"), ("profile", "p"), ("status", "Success"))
    assert got[("scheduler_framework_extension_point_duration_seconds_count", key)] == 2
    assert (
        abs(got[("scheduler_framework_extension_point_duration_seconds_sum", key)] - 0.004) < 1e-12
    )
    plugin = (("extension_point", "Filter"), ("plugin", "Fit"), ("status", "Success"))
    assert got[("scheduler_plugin_execution_duration_seconds_count", plugin)] == 1
