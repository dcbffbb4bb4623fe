"""The framework's own Prometheus metrics, under kube-scheduler's names, for every front end.

``kubesched run`` and ``kubesched extender`` both time extension points and plugins the same
way; they extend :class:`FrameworkMetrics` with the metrics of their own.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from kubesched.framework._status import Code


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ``ExponentialBuckets``: ``start * factor**i`` for ``i < count``."""
    return [start * factor**i for i in range(count)]


class FrameworkMetrics:
    """The runtime's ``Metrics`` protocol; one registry per process (tests: their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=self.registry,
        )
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=self.registry,
        )
        # Labelled children by label values: ``labels()`` costs more than the observation itself
        # (about 11 of 14 µs here), and these are called several times per scheduling cycle.
        self._points: dict[tuple[str, Code, str], Histogram] = {}
        self._plugins: dict[tuple[str, str, Code], Histogram] = {}

    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None:
        key = (point, status, profile)
        child = self._points.get(key)
        if child is None:
            child = self.extension_point_duration.labels(point, status.label, profile)
            self._points[key] = child
        child.observe(seconds)

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None:
        key = (plugin, point, status)
        child = self._plugins.get(key)
        if child is None:
            child = self.plugin_execution_duration.labels(plugin, point, status.label)
            self._plugins[key] = child
        child.observe(seconds)
