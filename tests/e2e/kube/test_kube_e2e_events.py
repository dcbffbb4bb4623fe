"""Events and pod status writes against the real kube-apiserver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kube_e2e import pod_manifest

from kubesched.api import Pod, PodCondition
from kubesched.kube import APIClient, EventRecorder, api_path, update_pod_condition

pytestmark = pytest.mark.e2e


async def test_failed_scheduling_event_and_series(kubeconfig: Path, namespace: str) -> None:
    events_v1 = api_path("events", group_version="events.k8s.io/v1", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pod = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("p", namespace), type=Pod
        )
        recorder = EventRecorder(client, reporting_controller="kubesched-e2e")
        recorder.start()
        message = (
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available."
        )
        recorder.event(
            pod, type="Warning", reason="FailedScheduling", action="Scheduling", note=message
        )
        await recorder.flush()
        listed = json.loads(await client.get(events_v1))["items"]
        assert len(listed) == 1
        event = listed[0]
        assert event["reason"] == "FailedScheduling"
        assert event["type"] == "Warning"
        assert event["action"] == "Scheduling"
        assert event["note"] == message
        assert event["reportingController"] == "kubesched-e2e"
        assert event["reportingInstance"].startswith("kubesched-e2e-")
        assert event["regarding"]["uid"] == pod.metadata.uid
        assert event["regarding"]["kind"] == "Pod"
        assert len(event["eventTime"]) == len("2024-01-01T00:00:00.000000Z")
        # The same event seen through the core/v1 API, as kubectl describe shows it.
        core = json.loads(await client.get(api_path("events", namespace=namespace)))["items"]
        assert core[0]["reason"] == "FailedScheduling"
        assert core[0]["message"] == message
        assert core[0]["involvedObject"]["name"] == "p"

        # Repeats fold into the first event's series.
        recorder.event(
            pod, type="Warning", reason="FailedScheduling", action="Scheduling", note=message
        )
        recorder.event(
            pod, type="Warning", reason="FailedScheduling", action="Scheduling", note=message
        )
        await recorder.aclose()
        listed = json.loads(await client.get(events_v1))["items"]
    assert len(listed) == 1
    assert listed[0]["series"]["count"] == 3
    assert recorder.sent >= 2
    assert recorder.failed == 0
    assert recorder.dropped == 0


async def test_scheduled_event(kubeconfig: Path, namespace: str) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pod = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("p", namespace), type=Pod
        )
        recorder = EventRecorder(client)
        recorder.start()
        recorder.event(
            pod,
            type="Normal",
            reason="Scheduled",
            action="Binding",
            note=f"Successfully assigned {namespace}/p to node-1",
        )
        await recorder.aclose()
        events = json.loads(await client.get(api_path("events", namespace=namespace)))["items"]
    assert [(e["reason"], e["type"], e["reportingComponent"]) for e in events] == [
        ("Scheduled", "Normal", "default-scheduler")
    ]


async def test_pod_condition_and_nominated_node(kubeconfig: Path, namespace: str) -> None:
    path = api_path("pods", namespace=namespace, name="p")
    condition = PodCondition(
        type="PodScheduled",
        status="False",
        reason="Unschedulable",
        message="0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}.",
    )
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pod = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("p", namespace), type=Pod
        )
        assert await update_pod_condition(client, pod, condition, nominated_node_name="node-1")
        updated = await client.get(path, type=Pod)
        [scheduled] = [c for c in updated.status.conditions if c.type == "PodScheduled"]
        assert scheduled.status == "False"
        assert scheduled.reason == "Unschedulable"
        assert scheduled.message == condition.message
        assert scheduled.last_transition_time
        assert updated.status.nominated_node_name == "node-1"
        # Unchanged: no write, the resourceVersion stays.
        assert not await update_pod_condition(
            client, updated, condition, nominated_node_name="node-1"
        )
        again = await client.get(path, type=Pod)
        assert again.metadata.resource_version == updated.metadata.resource_version
        # Clearing the nominated node.
        assert await update_pod_condition(client, again, None, nominated_node_name="")
        cleared = await client.get(path, type=Pod)
    assert cleared.status.nominated_node_name == ""
    assert [c.reason for c in cleared.status.conditions if c.type == "PodScheduled"] == [
        "Unschedulable"
    ]
