"""The framework's own Prometheus metrics, under kube-scheduler's names, for every front end.

``kubesched run`` and ``kubesched extender`` both time extension points and plugins the same
way; they extend :class:`FrameworkMetrics` with the metrics of their own.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from kubesched.framework._status import Code

#: Bucket bounds written as the Go client writes them (``le="0.0001"``, ``le="+Inf"``).
_go_float = cast(Callable[[float], str], floatToGoString)


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ``ExponentialBuckets``: ``start * factor**i`` for ``i < count``."""
    return [start * factor**i for i in range(count)]


class HistogramChild:
    """One label combination of a :class:`LoopHistogram`."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: list[float]) -> None:
        self._bounds = bounds
        #: Per bucket (not cumulative), the last one +Inf.
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        # ``le``: a value equal to a bound belongs to that bound's bucket.
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class LoopHistogram(Collector):
    """A labelled Prometheus histogram for the scheduling loop's hot path.

    prometheus_client's ``Histogram.observe`` takes two locks and walks the buckets: about
    1.3 µs, several times per scheduling cycle (7% of the loop at 5,000 nodes). Here an
    observation is a bisect and two additions, without a lock: observe from one thread at a
    time (the scheduling loop's, or the extender's worker); a scrape from another thread reads
    counts that may be one observation apart, as any scrape during observations does. It is
    exposed as prometheus_client's histograms are (``_bucket`` with ``le``, ``_count``,
    ``_sum``), without the ``_created`` series, as kube-scheduler's Go client.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = list(labelnames)
        self._bounds = sorted(float(b) for b in buckets)
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        registry.register(self)

    def labels(self, *values: str) -> HistogramChild:
        if len(values) != len(self._labelnames):
            raise ValueError(f"{self._name}: expected labels {self._labelnames}, got {values}")
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = HistogramChild(self._bounds)
        return child

    def children(self) -> list[tuple[tuple[str, ...], HistogramChild]]:
        """Every label combination observed so far, with its child."""
        return list(self._children.items())

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)
        bounds = [_go_float(b) for b in self._bounds] + ["+Inf"]
        for values, child in self.children():
            cumulative, running = [], 0
            for bound, n in zip(bounds, list(child.counts), strict=True):
                running += n
                cumulative.append((bound, float(running)))
            family.add_metric(list(values), cumulative, child.sum)
        yield family

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=self._labelnames)


class Metrics(Protocol):
    """Where the runtime reports durations (kube-scheduler's framework metrics)."""

    def extension_point(self, point: str, status: Code, profile: str, seconds: float) -> None: ...

    def plugin(self, plugin: str, point: str, status: Code, seconds: float) -> None: ...


class FrameworkMetrics:
    """The runtime's :class:`Metrics`; one registry per process (tests: their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.extension_point_duration = LoopHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=self.registry,
        )
        self.plugin_execution_duration = LoopHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=self.registry,
        )
        # Labelled children by label values: ``labels()`` costs more than the observation itself
        # (about 11 of 14 µs here), and these are called several times per scheduling cycle.
        self._points: dict[tuple[str, Code, str], HistogramChild] = {}
        self._plugins: dict[tuple[str, str, Code], HistogramChild] = {}

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
