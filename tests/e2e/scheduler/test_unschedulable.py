"""What ``kubesched run`` writes back: events, the PodScheduled condition, and its metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from sched_e2e import (
    NOT_HELPFUL,
    condition,
    create_all,
    create_pod,
    events_about,
    eventually,
    fit_error,
    get_pod,
    list_events,
    list_pods,
    node_manifest,
    pod_manifest,
    scheduler_config,
)

if TYPE_CHECKING:
    from sched_e2e import Client, MakeNodes, StartScheduler

pytestmark = pytest.mark.usefixtures("only_our_nodes")


def test_unschedulable_pod_gets_event_and_condition_then_schedules_on_a_new_node(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes(
        [
            node_manifest("small", cpu="1"),
            node_manifest(
                "tainted", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
            ),
            node_manifest("cordoned", unschedulable=True),
        ]
    )
    sched = kubesched(scheduler_config(profile))
    create_pod(admin_client, pod_manifest("big", namespace, profile, cpu="2"))
    # Preemption cannot help anywhere: "small" could never hold 2 cpus.
    expected = fit_error(
        3,
        {
            "Insufficient cpu": 1,
            "node(s) had untolerated taint(s)": 1,
            "node(s) were unschedulable": 1,
        },
        {NOT_HELPFUL: 3},
    )

    failed = eventually(
        lambda: events_about(list_events(admin_client, namespace), "big", "FailedScheduling"),
        bool,
        timeout=30,
        what="a FailedScheduling event",
        watch=sched,
    )
    pod = eventually(
        lambda: get_pod(admin_client, namespace, "big"),
        lambda p: condition(p, "PodScheduled") is not None,
        timeout=30,
        what="the PodScheduled condition",
    )

    [event] = failed
    # Listed from events.k8s.io/v1, with the fields only that version has.
    assert event["eventTime"]
    assert event["reportingInstance"].startswith(profile)
    assert (event["type"], event["reason"], event["action"]) == (
        "Warning",
        "FailedScheduling",
        "Scheduling",
    )
    assert event["note"] == expected
    assert event["reportingController"] == profile
    assert event["regarding"]["uid"] == pod["metadata"]["uid"]
    assert event["regarding"]["kind"] == "Pod"
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False",
        "Unschedulable",
        expected,
    )
    assert not pod["spec"].get("nodeName")
    assert sched.metric("scheduler_pending_pods", queue="unschedulable") == 1

    # A node it fits on arrives: the pod leaves the unschedulable queue and is bound there.
    make_nodes([node_manifest("roomy", cpu="8")])
    pod = eventually(
        lambda: get_pod(admin_client, namespace, "big"),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=30,
        what="the pod to be bound once a node fits",
        watch=sched,
    )
    assert pod["spec"]["nodeName"] == "roomy"
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert cond["status"] == "True"
    scheduled = eventually(
        lambda: events_about(list_events(admin_client, namespace), "big", "Scheduled"),
        bool,
        timeout=30,
        what="a Scheduled event",
    )
    assert [(e["type"], e["action"], e["note"]) for e in scheduled] == [
        ("Normal", "Binding", f"Successfully assigned {namespace}/big to roomy")
    ]
    assert sched.metric("scheduler_pending_pods", queue="unschedulable") == 0
    assert (
        sched.metric("scheduler_schedule_attempts_total", result="scheduled", profile=profile) == 1
    )


def test_metrics_count_scheduled_and_pending_pods(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes([node_manifest(f"m-{i}", cpu="2") for i in range(3)])
    sched = kubesched(scheduler_config(profile))
    fitting = [pod_manifest(f"fits-{i}", namespace, profile, cpu="200m") for i in range(24)]
    never = [pod_manifest(f"never-{i}", namespace, profile, cpu="3") for i in range(2)]
    # Someone else's pod: not counted by this scheduler.
    foreign = pod_manifest("foreign", namespace, "another-scheduler", cpu="100m")
    create_all(admin_client, create_pod, [*fitting, *never, foreign])

    pods = eventually(
        lambda: list_pods(admin_client, namespace),
        lambda ps: sum(1 for p in ps if p["spec"].get("nodeName")) == len(fitting),
        timeout=60,
        what=f"{len(fitting)} pods bound",
        watch=sched,
    )
    eventually(
        lambda: sched.metric("scheduler_pending_pods", queue="unschedulable"),
        lambda v: v == len(never),
        timeout=30,
        what="the unschedulable pods in the pending gauge",
    )

    assert {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")} == {
        p["metadata"]["name"] for p in fitting
    }
    # The counter moves once the binding's answer is back, a moment after the API shows it.
    scheduled = eventually(
        lambda: sched.metric(
            "scheduler_schedule_attempts_total", result="scheduled", profile=profile
        ),
        lambda v: v is not None and v >= len(fitting),
        timeout=10,
        what="scheduled attempts to count every bound pod",
    )
    assert scheduled == len(fitting)
    unschedulable = sched.metric(
        "scheduler_schedule_attempts_total", result="unschedulable", profile=profile
    )
    assert unschedulable is not None
    assert unschedulable >= len(never)
    assert sched.metric("scheduler_pending_pods", queue="active") == 0
    assert sched.metric("scheduler_pending_pods", queue="backoff") == 0
    assert sched.metric("scheduler_pending_pods", queue="gated") == 0
