"""The extender's Prometheus metrics.

Per verb: request latency as the extender measures it (from the first byte of the body read to
the answer) and the time a request waited for the worker thread. The framework's own histograms
keep kube-scheduler's names, so a dashboard for kube-scheduler's plugins reads the extender's too.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram

from kubesched.framework import Code


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class ExtenderMetrics:
    """One registry per extender process (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.request_duration = Histogram(
            "extender_request_duration_seconds",
            "Latency of extender requests, by verb, profile and HTTP status code.",
            ["verb", "profile", "code"],
            buckets=_exponential(0.00025, 2, 16),
            registry=r,
        )
        self.queue_wait = Histogram(
            "extender_queue_wait_seconds",
            "Time a request waited for the worker thread that runs the plugins.",
            ["verb"],
            buckets=_exponential(0.00005, 2, 16),
            registry=r,
        )
        self.nodes = Gauge(
            "extender_cache_nodes",
            "Nodes known to the extender: from informers ('informer') or request bodies ('body').",
            ["source"],
            registry=r,
        )
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_exponential(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=_exponential(0.00001, 1.5, 20),
            registry=r,
        )

    # framework.Metrics
    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None:
        self.extension_point_duration.labels(point, status.label, profile).observe(seconds)

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        self.plugin_execution_duration.labels(plugin, point, status.label).observe(seconds)

    def request(self, verb: str, profile: str, code: int, seconds: float) -> None:
        self.request_duration.labels(verb, profile, str(code)).observe(seconds)
