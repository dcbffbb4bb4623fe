"""SchedulerMetrics: the values land under kube-scheduler's names and labels, also when the
labelled children are reused."""

from __future__ import annotations

from prometheus_client import generate_latest

from builders import make_pod
from kubesched.config import default_config
from kubesched.framework import Code, Snapshot, build_frameworks
from kubesched.plugins import default_registry
from kubesched.scheduler import SchedulerMetrics, SchedulingQueue, new_scheduler


def value(m: SchedulerMetrics, name: str, **labels: str) -> float | None:
    v = m.registry.get_sample_value(name, labels)
    return None if v is None else float(v)


def test_observations_accumulate_per_label_set() -> None:
    m = SchedulerMetrics()
    for _ in range(3):
        m.plugin("NodeResourcesFit", "Filter", Code.SUCCESS, 0.001)
    m.plugin("NodeResourcesFit", "Filter", Code.UNSCHEDULABLE, 0.002)
    m.extension_point("Score", Code.SUCCESS, "p", 0.5)
    m.extension_point("Score", Code.SUCCESS, "p", 0.25)
    m.attempt("scheduled", "p", 0.1)
    m.attempt("scheduled", "p", 0.1)
    m.attempt("unschedulable", "p", 0.1)
    name = "scheduler_plugin_execution_duration_seconds_count"
    labels = {"plugin": "NodeResourcesFit", "extension_point": "Filter"}
    assert value(m, name, **labels, status="Success") == 3
    assert value(m, name, **labels, status="Unschedulable") == 1
    assert (
        value(
            m,
            "scheduler_framework_extension_point_duration_seconds_sum",
            extension_point="Score",
            status="Success",
            profile="p",
        )
        == 0.75
    )
    total = "scheduler_schedule_attempts_total"
    assert value(m, total, result="scheduled", profile="p") == 2
    assert value(m, total, result="unschedulable", profile="p") == 1
    attempt = "scheduler_scheduling_attempt_duration_seconds"
    assert value(m, f"{attempt}_count", result="scheduled", profile="p") == 2
    assert value(m, f"{attempt}_sum", result="scheduled", profile="p") == 0.2
    assert value(m, f"{attempt}_bucket", result="scheduled", profile="p", le="0.128") == 2
    assert value(m, f"{attempt}_bucket", result="scheduled", profile="p", le="0.064") == 0


def test_binding_duration_is_exposed_from_the_start() -> None:
    m = SchedulerMetrics()
    assert value(m, "scheduler_binding_duration_seconds_count") == 0
    m.binding_duration.observe(0.003)
    assert value(m, "scheduler_binding_duration_seconds_count") == 1
    assert value(m, "scheduler_binding_duration_seconds_bucket", le="0.004") == 1
    assert value(m, "scheduler_binding_duration_seconds_bucket", le="0.002") == 0


def test_pending_pods_follow_the_latest_counts() -> None:
    m = SchedulerMetrics()
    m.set_pending({"active": 3, "backoff": 0})
    m.set_pending({"active": 3, "backoff": 2})
    m.set_pending({"active": 0, "backoff": 2})
    assert value(m, "scheduler_pending_pods", queue="active") == 0
    assert value(m, "scheduler_pending_pods", queue="backoff") == 2


def test_queue_incoming_pods_are_counted_per_queue_and_event() -> None:
    m = SchedulerMetrics()
    q = SchedulingQueue(less=lambda a, b: False, incoming_pods_metric=m.queue_incoming_pods)
    name = "scheduler_queue_incoming_pods_total"
    assert value(m, name, queue="active", event="UnschedulablePodAdd") is None
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    qpi = q.try_pop()
    assert qpi is not None
    q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)  # an error: to backoffQ
    assert value(m, name, queue="active", event="UnschedulablePodAdd") == 2
    assert value(m, name, queue="backoff", event="ScheduleAttemptFailure") == 1
    assert value(m, name, queue="unschedulable", event="ScheduleAttemptFailure") is None
    text = generate_latest(m.registry).decode()
    assert "# TYPE scheduler_queue_incoming_pods_total counter" in text


def test_schedulers_put_together_count_their_queue_moves() -> None:
    m = SchedulerMetrics()
    snapshot = Snapshot()
    config = default_config()
    frameworks = build_frameworks(config, default_registry(), snapshot, metrics=m)
    scheduler = new_scheduler(config, frameworks, snapshot, _NoWrites(), metrics=m)
    scheduler.queue.add(make_pod("p"))
    assert (
        value(m, "scheduler_queue_incoming_pods_total", queue="active", event="UnschedulablePodAdd")
        == 1
    )


class _NoWrites:
    def scheduled(self, pod: object, node: str, profile: str) -> None:
        raise AssertionError("nothing is scheduled here")

    def failed(
        self, pod: object, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        raise AssertionError("nothing fails here")


def test_informer_handler_errors_are_read_when_scraped() -> None:
    m = SchedulerMetrics()
    errors = {"/api/v1/pods": 0}
    m.count_handler_errors(lambda: errors)
    name = "kubesched_informer_handler_errors_total"
    assert value(m, name, resource="/api/v1/pods") == 0
    errors["/api/v1/pods"] = 2
    assert value(m, name, resource="/api/v1/pods") == 2
