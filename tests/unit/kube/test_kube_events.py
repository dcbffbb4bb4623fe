"""EventRecorder (events/v1 bodies, series aggregation, bounded queue) and update_pod_condition."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import msgspec
import pytest
from kube_fakes import (
    Request,
    Response,
    error_response,
    eventually,
    json_response,
    make_client,
    pod,
)

from kubesched.api import Pod, PodCondition
from kubesched.kube import EventRecorder, ObjectReference, truncate_message, update_pod_condition


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.25

    def __call__(self) -> float:
        return self.now


class EventServer:
    """Records event writes; answers POST with 201 and PATCH with 200 (or scripted errors)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.patch_errors: list[Response] = []

    def __call__(self, request: Request) -> Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        if request.method == "PATCH" and self.patch_errors:
            return self.patch_errors.pop(0)
        return json_response(201 if request.method == "POST" else 200, body or {})


def _pod(name: str = "web-1", uid: str = "u-1") -> Pod:
    return msgspec.convert(pod(name, "5", uid=uid), Pod)


def _recorder(server: EventServer, clock: Clock, **kwargs: Any) -> EventRecorder:
    return EventRecorder(
        make_client(server),
        reporting_controller="my-scheduler",
        reporting_instance="my-scheduler-host",
        clock=clock,
        **kwargs,
    )


async def test_event_body_is_events_v1() -> None:
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock)
    recorder.start()
    recorder.event(
        _pod(),
        type="Normal",
        reason="Scheduled",
        action="Binding",
        note="Successfully assigned ns/web-1 to n1",
    )
    await recorder.aclose()
    [(method, path, body)] = server.requests
    assert method == "POST"
    assert path == "/apis/events.k8s.io/v1/namespaces/ns/events"
    assert body["apiVersion"] == "events.k8s.io/v1"
    assert body["kind"] == "Event"
    assert re.fullmatch(r"web-1\.[0-9a-f]+", body["metadata"]["name"])
    assert body["metadata"]["namespace"] == "ns"
    assert body["eventTime"] == "2023-11-14T22:13:20.250000Z"
    assert body["reportingController"] == "my-scheduler"
    assert body["reportingInstance"] == "my-scheduler-host"
    assert body["action"] == "Binding"
    assert body["reason"] == "Scheduled"
    assert body["type"] == "Normal"
    assert body["note"] == "Successfully assigned ns/web-1 to n1"
    assert body["regarding"] == {
        "kind": "Pod",
        "namespace": "ns",
        "name": "web-1",
        "uid": "u-1",
        "apiVersion": "v1",
        "resourceVersion": "5",
    }
    assert "series" not in body
    assert "related" not in body
    assert recorder.sent == 1


async def test_default_reporting_instance_and_long_note() -> None:
    server = EventServer()
    recorder = EventRecorder(make_client(server))
    assert recorder.reporting_controller == "default-scheduler"
    assert recorder.reporting_instance.startswith("default-scheduler-")
    recorder.start()
    recorder.event(
        _pod(), type="Warning", reason="FailedScheduling", action="Scheduling", note="é" * 1000
    )
    await recorder.aclose()
    note = server.requests[0][2]["note"]
    assert len(note.encode()) <= 1024
    assert note == "é" * 512


async def test_repeats_are_aggregated_into_a_series() -> None:
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock, finish_after=360.0, refresh_every=1800.0)
    recorder.start()
    failing = _pod()
    for i in range(5):
        clock.now += 1
        recorder.event(
            failing, type="Warning", reason="FailedScheduling", action="Scheduling", note=f"try {i}"
        )
        await recorder.flush()
    # Another pod, another reason: events of their own.
    recorder.event(
        _pod("web-2", "u-2"),
        type="Warning",
        reason="FailedScheduling",
        action="Scheduling",
        note="x",
    )
    recorder.event(failing, type="Normal", reason="Scheduled", action="Binding", note="y")
    await recorder.flush()
    methods = [(m, b.get("series")) for m, _, b in server.requests]
    first_name = server.requests[0][2]["metadata"]["name"]
    assert methods[0] == ("POST", None)
    # The second occurrence patches count 2 at once; later ones wait.
    assert methods[1][0] == "PATCH"
    assert methods[1][1]["count"] == 2
    assert server.requests[1][1].endswith(f"/namespaces/ns/events/{first_name}")
    assert [m for m, _ in methods[2:]] == ["POST", "POST"]
    assert recorder.aggregated == 4
    # The series goes quiet: its final count is written and the entry dropped.
    clock.now += 400
    recorder.finish_series()
    await recorder.flush()
    method, path, body = server.requests[-1]
    assert method == "PATCH"
    assert path.endswith(first_name)
    assert body["series"]["count"] == 5
    assert body["series"]["lastObservedTime"] == "2023-11-14T22:13:25.250000Z"
    before = len(server.requests)
    recorder.event(
        failing, type="Warning", reason="FailedScheduling", action="Scheduling", note="again"
    )
    await recorder.aclose()
    assert server.requests[before][0] == "POST"


async def test_active_series_is_refreshed() -> None:
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock, finish_after=360.0, refresh_every=60.0)
    recorder.start()
    for _ in range(3):
        recorder.event(
            _pod(), type="Warning", reason="FailedScheduling", action="Scheduling", note="n"
        )
    await recorder.flush()
    assert len(server.requests) == 2
    clock.now += 61
    recorder.finish_series()
    await recorder.flush()
    assert server.requests[-1][2]["series"]["count"] == 3


async def test_series_patch_of_missing_event_creates_it() -> None:
    server, clock = EventServer(), Clock()
    server.patch_errors.append(error_response(404, "NotFound", "events not found"))
    recorder = _recorder(server, clock)
    recorder.start()
    recorder.event(_pod(), type="Warning", reason="FailedScheduling", action="Scheduling", note="n")
    recorder.event(_pod(), type="Warning", reason="FailedScheduling", action="Scheduling", note="n")
    await recorder.aclose()
    assert [m for m, _, _ in server.requests] == ["POST", "PATCH", "POST"]
    assert server.requests[2][2]["series"]["count"] == 2


async def test_full_queue_drops_and_counts() -> None:
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock, queue_size=3)
    for i in range(10):
        recorder.event(
            _pod(f"p{i}", f"u{i}"), type="Normal", reason="Scheduled", action="Binding", note="n"
        )
    assert recorder.dropped == 7
    assert recorder.pending == 3
    recorder.start()
    await recorder.aclose()
    assert len(server.requests) == 3


async def test_a_caller_that_waits_for_room_loses_no_event() -> None:
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock, queue_size=2, workers=1)
    recorder.start()

    async def record(i: int) -> None:
        await recorder.room()
        recorder.event(
            _pod(f"p{i}", f"u{i}"), type="Normal", reason="Scheduled", action="Binding", note="n"
        )

    await asyncio.gather(*(record(i) for i in range(20)))
    await recorder.aclose()
    assert recorder.dropped == 0
    assert len(server.requests) == 20


async def test_each_place_freed_wakes_one_waiting_caller() -> None:
    """A backlog of callers waiting for room costs each of them a wake-up or two, not one per
    event written before its turn (quadratic: 30,000 bindings waiting stalled the recorder)."""
    server, clock = EventServer(), Clock()
    recorder = _recorder(server, clock, queue_size=1, workers=1)
    checks = 0
    full = recorder._queue.full

    def counting_full() -> bool:
        nonlocal checks
        checks += 1
        return full()

    recorder._queue.full = counting_full  # type: ignore[method-assign]
    recorder.start()
    waiting = 300

    async def record(i: int) -> None:
        await recorder.room()
        recorder.event(
            _pod(f"p{i}", f"u{i}"), type="Normal", reason="Scheduled", action="Binding", note="n"
        )

    await asyncio.gather(*(record(i) for i in range(waiting)))
    await recorder.aclose()
    assert (recorder.dropped, len(server.requests)) == (0, waiting)
    assert checks < 4 * waiting


async def test_while_writes_fail_waiting_stops_and_events_are_dropped() -> None:
    def handler(request: Request) -> Response:
        return error_response(503, "ServiceUnavailable", "etcd is down")

    recorder = EventRecorder(make_client(handler), queue_size=1, workers=1)
    ref = ObjectReference(kind="Node", name="n1", api_version="v1")
    recorder.start()
    recorder.event(ref, type="Normal", reason="R", action="A", note="1")
    await eventually(lambda: recorder.failing, within=10)
    for i in range(3):
        recorder.event(ref, type="Normal", reason=f"R{i}", action="A", note="n")
    # Full, but the server is failing: room() does not hold the caller.
    async with asyncio.timeout(1):
        await recorder.room()
    await recorder.aclose(grace=0.1)
    assert recorder.dropped >= 2


async def test_rejected_event_is_counted_not_raised() -> None:
    def handler(request: Request) -> Response:
        return error_response(422, "Invalid", "note: Too long")

    recorder = EventRecorder(make_client(handler))
    recorder.start()
    recorder.event(
        ObjectReference(kind="Node", name="n1", api_version="v1"),
        type="Normal",
        reason="R",
        action="A",
        note="n",
    )
    await recorder.aclose()
    assert recorder.failed == 1
    assert recorder.sent == 0


# --- update_pod_condition ------------------------------------------------------------------------


def _unschedulable(message: str) -> PodCondition:
    return PodCondition(
        type="PodScheduled", status="False", reason="Unschedulable", message=message
    )


def _patches(handler_log: list[Request]) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in handler_log]


@pytest.fixture
def status_server() -> tuple[list[Request], Any]:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return json_response(200, {})

    return seen, handler


async def test_condition_added(status_server: tuple[list[Request], Any]) -> None:
    seen, handler = status_server
    p = msgspec.convert(
        {**pod("a", "5"), "metadata": {**pod("a", "5")["metadata"], "generation": 2}}, Pod
    )
    async with make_client(handler) as client:
        wrote = await update_pod_condition(
            client, p, _unschedulable("0/3 nodes are available"), now=1_700_000_000
        )
    assert wrote
    [request] = seen
    assert request.method == "PATCH"
    assert request.url.path == "/api/v1/namespaces/ns/pods/a/status"
    assert request.headers["content-type"] == "application/strategic-merge-patch+json"
    assert json.loads(request.content) == {
        "status": {
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": "0/3 nodes are available",
                    "lastTransitionTime": "2023-11-14T22:13:20Z",
                    "lastProbeTime": None,
                    "observedGeneration": 2,
                }
            ]
        }
    }


async def test_unchanged_condition_is_not_written(
    status_server: tuple[list[Request], Any],
) -> None:
    seen, handler = status_server
    data = pod("a", "5")
    data["status"] = {
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "same",
                "lastTransitionTime": "2020-01-01T00:00:00Z",
            }
        ],
        "nominatedNodeName": "n1",
    }
    p = msgspec.convert(data, Pod)
    async with make_client(handler) as client:
        assert not await update_pod_condition(client, p, _unschedulable("same"))
        assert not await update_pod_condition(
            client, p, _unschedulable("same"), nominated_node_name="n1"
        )
        assert not await update_pod_condition(client, p, None)
        # A new message keeps the transition time (the status did not change).
        assert await update_pod_condition(client, p, _unschedulable("different"))
        # Only the nominated node changes: set, then cleared.
        assert await update_pod_condition(
            client, p, _unschedulable("same"), nominated_node_name="n2"
        )
        assert await update_pod_condition(client, p, None, nominated_node_name="")
    first, second, third = _patches(seen)
    assert first["status"]["conditions"][0]["lastTransitionTime"] == "2020-01-01T00:00:00Z"
    assert first["status"]["conditions"][0]["message"] == "different"
    assert "nominatedNodeName" not in first["status"]
    assert second == {"status": {"nominatedNodeName": "n2"}}
    assert third == {"status": {"nominatedNodeName": None}}


async def test_condition_write_is_retried_on_temporary_errors() -> None:
    answers = [error_response(503, "ServiceUnavailable"), json_response(200, {})]
    calls = 0

    def handler(request: Request) -> Response:
        nonlocal calls
        calls += 1
        return answers.pop(0)

    async with make_client(handler) as client:
        p = msgspec.convert(pod("a", "5"), Pod)
        assert await update_pod_condition(client, p, _unschedulable("m"))
    assert calls == 2


async def test_recorder_close_without_start_is_harmless() -> None:
    recorder = EventRecorder(make_client(EventServer()))
    recorder.event(_pod(), type="Normal", reason="Scheduled", action="Binding", note="n")
    await recorder.aclose()
    await asyncio.sleep(0)


async def test_events_get_a_rate_limiter_of_their_own() -> None:
    client = make_client(EventServer(), qps=5, burst=7)
    events = client.with_own_limiter()
    assert events.limiter is not client.limiter
    assert (events.limiter.qps, events.limiter.burst) == (5, 7)
    # Same connections: closing the original is enough.
    assert events.transport is client.transport


def test_a_failed_scheduling_message_is_cut_as_kube_scheduler_cuts_it() -> None:
    """``truncateMessage``: up to 1,024 bytes as it is; longer, its first 1,020 bytes and
    ``" ..."`` (never half a character)."""
    assert truncate_message("x" * 1024) == "x" * 1024
    assert truncate_message("x" * 1025) == "x" * 1020 + " ..."
    cut = truncate_message("é" * 600)
    assert cut == "é" * 510 + " ..."
    assert len(cut.encode()) <= 1024
