"""The extender's Prometheus metrics.

Per verb: request latency as the extender measures it (from the first byte of the body read to
the answer) and the time a request waited for the worker thread. The framework's own histograms
keep kube-scheduler's names, so a dashboard for kube-scheduler's plugins reads the extender's too.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram

from kubesched.framework import FrameworkMetrics
from kubesched.framework import exponential_buckets as _exponential


class ExtenderMetrics(FrameworkMetrics):
    """One registry per extender process (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
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

        # Children by labels: looking them up through labels() costs more than observing.
        self._requests: dict[tuple[str, str, int], Histogram] = {}
        self._waits: dict[str, Histogram] = {}

    def request(self, verb: str, profile: str, code: int, seconds: float) -> None:
        key = (verb, profile, code)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.request_duration.labels(verb, profile, str(code))
        child.observe(seconds)

    def queue_waited(self, verb: str, seconds: float) -> None:
        child = self._waits.get(verb)
        if child is None:
            child = self._waits[verb] = self.queue_wait.labels(verb)
        child.observe(seconds)
