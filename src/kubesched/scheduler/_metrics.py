"""The scheduler's Prometheus metrics, under kube-scheduler's names and labels.

Dashboards and alerts written for kube-scheduler (``scheduler_schedule_attempts_total``,
``scheduler_pending_pods``, ...) work unchanged on kubesched.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kubesched.framework import Code


def _exponential(start: float, factor: float, count: int) -> list[float]:
    return [start * factor**i for i in range(count)]


class SchedulerMetrics:
    """One registry per scheduler process (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod "
            "could not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=r,
        )
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods that the scheduler attempted to schedule and failed; "
            "'gated' is the number of unschedulable pods waiting on scheduling gates.",
            ["queue"],
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
        self.binding_duration = Histogram(
            "scheduler_binding_duration_seconds",
            "Binding latency in seconds",
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )

        # Labelled children by label values: ``labels()`` costs more than the observation itself
        # (about 11 of 14 µs here), and these are called several times per scheduling cycle.
        self._points: dict[tuple[str, Code, str], Histogram] = {}
        self._plugins: dict[tuple[str, str, Code], Histogram] = {}
        self._attempts: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self._pending: dict[str, tuple[Gauge, int]] = {}
        # As kube-scheduler: every queue's series exists from the start, at 0, so dashboards and
        # alerts see an idle scheduler rather than no data.
        self.set_pending(dict.fromkeys(("active", "backoff", "unschedulable", "gated"), 0))

    # framework.Metrics
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

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        key = (result, profile)
        children = self._attempts.get(key)
        if children is None:
            children = (
                self.schedule_attempts.labels(result, profile),
                self.scheduling_attempt_duration.labels(result, profile),
            )
            self._attempts[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def set_pending(self, counts: dict[str, int]) -> None:
        """Only the sub-queues whose count changed are set."""
        pending = self._pending
        for queue, n in counts.items():
            known = pending.get(queue)
            if known is None:
                gauge = self.pending_pods.labels(queue)
            elif known[1] == n:
                continue
            else:
                gauge = known[0]
            gauge.set(n)
            pending[queue] = (gauge, n)
