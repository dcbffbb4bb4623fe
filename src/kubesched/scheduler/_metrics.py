"""The scheduler's Prometheus metrics, under kube-scheduler's names and labels.

Dashboards and alerts written for kube-scheduler (``scheduler_schedule_attempts_total``,
``scheduler_pending_pods``, ...) work unchanged on kubesched.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from kubesched.framework import FrameworkMetrics, LoopHistogram
from kubesched.framework import exponential_buckets as _exponential

#: ``scheduler_queue_incoming_pods_total``: sub-queue (``active``, ``backoff``,
#: ``unschedulable``) -> the event that moved pods into it -> how many it moved. Every pod enters
#: activeQ at least once, so the queue increments these dicts in place: no call, no lock.
IncomingPodsCounts = dict[str, dict[str, int]]


class SchedulerMetrics(FrameworkMetrics):
    """One registry per scheduler process (tests build their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        r = self.registry
        # This and the binding duration are observed for every pod by the scheduling loop: the
        # framework's lock-free histogram, as for its own per-cycle observations.
        self.scheduling_attempt_duration = LoopHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.schedule_attempts = _AttemptsCounter(self.scheduling_attempt_duration, r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in "
            "activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number "
            "of pods in unschedulablePods that the scheduler attempted to schedule and failed; "
            "'gated' is the number of unschedulable pods waiting on scheduling gates.",
            ["queue"],
            registry=r,
        )
        self.binding_duration = LoopHistogram(
            "scheduler_binding_duration_seconds",
            "Binding latency in seconds",
            [],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        ).labels()
        self.queue_incoming_pods: IncomingPodsCounts = {}
        _IncomingPodsCounter(self.queue_incoming_pods, r)

        self.undecodable_objects = Counter(
            "kubesched_undecodable_objects_total",
            "Objects the informers could not decode (each retries every unschedulable pod), "
            "by resource.",
            ["resource"],
            registry=r,
        )

        # Pending pods per sub-queue: the gauges read them when scraped, so that the queue's
        # reports (one per pop) are a dict update, without prometheus_client's lock.
        self._pending: dict[str, int] = {}
        # As kube-scheduler: every queue's series exists from the start, at 0, so dashboards and
        # alerts see an idle scheduler rather than no data.
        self.set_pending(dict.fromkeys(("active", "backoff", "unschedulable", "gated"), 0))

    def count_dropped_events(self, read: Callable[[], Mapping[str, int]]) -> None:
        """``kubesched_events_dropped_total{profile}``, read from ``read`` (profile -> events
        the recorder dropped: only while the API server failed to take them) when scraped."""
        self.registry.register(_ReadCounter(_DROPPED_EVENTS, "profile", read))

    def count_handler_errors(self, read: Callable[[], Mapping[str, int]]) -> None:
        """``kubesched_informer_handler_errors_total{resource}``, read from ``read`` (resource
        -> changes the scheduler failed to take in) when scraped."""
        self.registry.register(_ReadCounter(_HANDLER_ERRORS, "resource", read))

    def attempt(self, result: str, profile: str, seconds: float) -> None:
        self.scheduling_attempt_duration.labels(result, profile).observe(seconds)

    def set_pending(self, counts: dict[str, int]) -> None:
        """Set the sub-queues' counts (the queue passes those that changed)."""
        pending = self._pending
        for queue, n in counts.items():
            new = queue not in pending
            pending[queue] = n
            if new:
                self.pending_pods.labels(queue).set_function(partial(pending.__getitem__, queue))


class _IncomingPodsCounter(Collector):
    """``scheduler_queue_incoming_pods_total``, read off :data:`IncomingPodsCounts` when
    scraped."""

    _NAME = "scheduler_queue_incoming_pods"
    _DOC = "Number of pods added to scheduling queues by event and queue type."

    def __init__(self, counts: IncomingPodsCounts, registry: CollectorRegistry) -> None:
        self._counts = counts
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for queue, by_event in list(self._counts.items()):
            for event, n in list(by_event.items()):
                family.add_metric([queue, event], float(n))
        yield family

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._NAME, self._DOC, labels=["queue", "event"])


class _AttemptsCounter(Collector):
    """``scheduler_schedule_attempts_total``, read off the attempt-duration histogram's counts
    when scraped.

    kube-scheduler increments the counter and observes the histogram together, for every attempt
    and with the same labels, so the two counts are the same; an attempt then costs one lock-free
    observation rather than also a prometheus_client ``Counter.inc`` (which takes a lock).
    """

    _NAME = "scheduler_schedule_attempts"
    _DOC = (
        "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
        "not be scheduled, while 'error' means an internal scheduler problem."
    )

    def __init__(self, durations: LoopHistogram, registry: CollectorRegistry) -> None:
        self._durations = durations
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for labels, child in self._durations.children():
            family.add_metric(list(labels), float(sum(list(child.counts))))
        yield family

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._NAME, self._DOC, labels=["result", "profile"])


_DROPPED_EVENTS = (
    "kubesched_events_dropped",
    "Events not written, by profile: dropped while the API server was failing writes.",
)
_HANDLER_ERRORS = (
    "kubesched_informer_handler_errors",
    "Informer changes the scheduler failed to take in (a bug: logged with its traceback), by "
    "resource; the pods waiting on such a change may wait longer.",
)


class _ReadCounter(Collector):
    """A counter by one label, read from the counts kept elsewhere when scraped."""

    def __init__(
        self, name_doc: tuple[str, str], label: str, read: Callable[[], Mapping[str, int]]
    ) -> None:
        self._name, self._doc = name_doc
        self._label = label
        self._read = read

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for value, n in self._read().items():
            family.add_metric([value], float(n))
        yield family

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(self._name, self._doc, labels=[self._label])
