"""``/debug/queue``: the queue's pods as JSON, and the health listener serving it only when on."""

from __future__ import annotations

import asyncio

import msgspec
from prometheus_client import CollectorRegistry
from test_queue import FakeClock, fail, make_queue, pop

from builders import make_pod
from kubesched.api import PodSchedulingGate
from kubesched.scheduler import HealthServer
from kubesched.scheduler._debug import DEBUG_QUEUE_PATH, queue_document, queue_json


def test_document_names_each_pod_where_it_is_and_why() -> None:
    clock = FakeClock(100.0)
    q = make_queue(clock, pop_from_backoff=False)
    waiting, failing, gated = make_pod("waiting"), make_pod("failing"), make_pod("gated")
    gated = msgspec.structs.replace(
        gated,
        spec=msgspec.structs.replace(
            gated.spec, scheduling_gates=[PodSchedulingGate(name="example.com/g")]
        ),
    )
    q.add(failing)
    qpi = pop(q)
    clock.step(0.25)
    fail(q, qpi)  # an error: backoff
    q.add(waiting)
    q.add(gated)
    doc = queue_document(q, clock())
    by_name = {p["name"]: p for p in doc["pods"]}
    assert doc["counts"] == {"active": 1, "backoff": 1, "unschedulable": 0, "gated": 1}
    assert by_name["waiting"]["queue"] == "active"
    assert by_name["failing"] | {"unschedulablePlugins": None} == {
        "namespace": "default",
        "name": "failing",
        "queue": "backoff",
        "priority": 0,
        "schedulerName": "default-scheduler",
        "attempts": 1,
        "unschedulablePlugins": None,
        "pendingPlugins": [],
        "gatedBy": "",
        "queuedSeconds": 0.25,
        "retryInSeconds": 1.0,
    }
    assert by_name["gated"]["gatedBy"] == "SchedulingGates"
    assert msgspec.json.decode(queue_json(q, clock())) == doc


def test_unschedulable_pod_carries_its_rejecting_plugins() -> None:
    clock = FakeClock()
    q = make_queue(clock)
    q.add(make_pod("p"))
    fail(q, pop(q), "Fit", "Taints")
    (entry,) = queue_document(q, clock())["pods"]
    assert (entry["queue"], entry["unschedulablePlugins"]) == ("unschedulable", ["Fit", "Taints"])
    assert "retryInSeconds" not in entry


async def _get(port: int, path: str, method: str = "GET") -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


async def test_health_listener_serves_debug_only_when_given() -> None:
    off = HealthServer(CollectorRegistry(), port=0)
    on = HealthServer(CollectorRegistry(), port=0, debug={DEBUG_QUEUE_PATH: lambda: b'{"a":1}'})
    await off.start()
    await on.start()
    try:
        assert (await _get(off.port, DEBUG_QUEUE_PATH))[0] == 404
        assert await _get(on.port, DEBUG_QUEUE_PATH) == (200, b'{"a":1}')
        assert (await _get(on.port, DEBUG_QUEUE_PATH, "POST"))[0] == 405
    finally:
        await off.stop()
        await on.stop()
