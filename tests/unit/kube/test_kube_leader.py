"""Leader election against an in-memory Lease endpoint with optimistic concurrency."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from kube_fakes import Request, Response, error_response, eventually, json_response, make_client

from kubesched.kube import LeaderElector

PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"
COLLECTION = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"


class LeaseServer:
    """One Lease, with resourceVersion checks on PUT like the API server."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.down = False
        self.writes: list[dict[str, Any]] = []

    def __call__(self, request: Request) -> Response:
        if self.down:
            return error_response(503, "ServiceUnavailable", "etcd is down")
        path, method = request.url.path, request.method
        if method == "GET" and path == PATH:
            if self.lease is None:
                return error_response(404, "NotFound", 'leases "kube-scheduler" not found')
            return json_response(200, self.lease)
        if method == "POST" and path == COLLECTION:
            if self.lease is not None:
                return error_response(409, "AlreadyExists", "already exists")
            return self._store(json.loads(request.content), 201)
        if method == "PUT" and path == PATH:
            body = json.loads(request.content)
            if self.lease is None:
                return error_response(404, "NotFound", "not found")
            if body["metadata"].get("resourceVersion") != str(self.rv):
                return error_response(409, "Conflict", "the object has been modified")
            return self._store(body, 200)
        return error_response(405, "MethodNotAllowed", f"{method} {path}")

    def _store(self, body: dict[str, Any], code: int) -> Response:
        self.rv += 1
        body["metadata"]["resourceVersion"] = str(self.rv)
        body["metadata"].setdefault("labels", {"kept": "yes"})
        self.lease = body
        self.writes.append(json.loads(json.dumps(body["spec"])))
        return json_response(code, body)

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        return self.lease["spec"]


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _elector(server: LeaseServer, identity: str, clock: Clock, **kwargs: Any) -> LeaderElector:
    return LeaderElector(make_client(server), identity=identity, clock=clock, **kwargs)


def _fast(server: LeaseServer, **kwargs: Any) -> LeaderElector:
    """Candidate ``a`` on real time, with a lease of a second."""
    return LeaderElector(
        make_client(server),
        identity="a",
        lease_duration=1.0,
        renew_deadline=0.5,
        retry_period=0.1,
        **kwargs,
    )


async def test_first_candidate_creates_the_lease() -> None:
    server = LeaseServer()
    a = _elector(server, "a", Clock())
    assert await a.try_acquire_or_renew()
    assert a.is_leader
    assert server.spec["holderIdentity"] == "a"
    assert server.spec["leaseDurationSeconds"] == 15
    assert server.spec["leaseTransitions"] == 0
    assert server.spec["acquireTime"] == server.spec["renewTime"]
    assert server.spec["renewTime"].endswith("Z")
    assert len(server.spec["renewTime"]) == len("2024-01-01T00:00:00.000000Z")


async def test_holder_renews_and_keeps_acquire_time() -> None:
    server = LeaseServer()
    wall = Clock(1_700_000_000.0)
    a = LeaderElector(make_client(server), identity="a", clock=Clock(), wall_clock=wall)
    assert await a.try_acquire_or_renew()
    acquired = server.spec["acquireTime"]
    wall.now += 2
    assert await a.try_acquire_or_renew()
    assert server.spec["acquireTime"] == acquired
    assert server.spec["renewTime"] != acquired
    # The renewal went through the fast path: one PUT, no GET needed.
    assert len(server.writes) == 2
    # Labels and other fields of the Lease survive the update.
    assert server.lease is not None
    assert server.lease["metadata"]["labels"] == {"kept": "yes"}


async def test_other_candidate_waits_for_expiry_by_its_own_clock() -> None:
    server = LeaseServer()
    clock_a, clock_b = Clock(1000.0), Clock(5000.0)  # unrelated clocks
    a = _elector(server, "a", clock_a)
    b = _elector(server, "b", clock_b)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert b.leader == "a"
    # b measures expiry from when it saw the record last change, not from renewTime.
    clock_b.now += 14.0
    assert not await b.try_acquire_or_renew()
    # a renews: the record changes, b's observation restarts.
    assert await a.try_acquire_or_renew()
    clock_b.now += 14.0
    assert not await b.try_acquire_or_renew()
    clock_b.now += 14.0
    assert not await b.try_acquire_or_renew()
    # a stops renewing; 15 s after b last saw a change, b takes over.
    clock_b.now += 15.1
    assert await b.try_acquire_or_renew()
    assert b.is_leader
    assert server.spec["holderIdentity"] == "b"
    assert server.spec["leaseTransitions"] == 1
    # a's optimistic renewal now conflicts; it falls back, sees b, and is not leader.
    assert not await a.try_acquire_or_renew()
    assert not a.is_leader
    assert a.leader == "b"


async def test_released_lease_is_taken_at_once() -> None:
    server = LeaseServer()
    a = _elector(server, "a", Clock())
    b = _elector(server, "b", Clock())
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    assert await a._release()
    assert server.spec["holderIdentity"] == ""
    assert server.spec["leaseDurationSeconds"] == 1
    assert await b.try_acquire_or_renew()
    assert server.spec["leaseTransitions"] == 1


def test_durations_are_validated() -> None:
    server = LeaseServer()
    with pytest.raises(ValueError, match="lease_duration"):
        LeaderElector(make_client(server), lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew_deadline"):
        LeaderElector(make_client(server), lease_duration=15, renew_deadline=2, retry_period=2)
    assert "_" in LeaderElector(make_client(server)).identity


async def test_run_leads_then_stops_when_renewal_fails() -> None:
    server = LeaseServer()
    events: list[str] = []
    leading = asyncio.Event()
    cancelled = asyncio.Event()

    async def started() -> None:
        events.append("started")
        leading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    elector = _fast(
        server,
        on_started_leading=started,
        on_stopped_leading=lambda: events.append("stopped"),
        on_new_leader=lambda who: events.append(f"leader {who}"),
    )
    task = asyncio.create_task(elector.run())
    async with asyncio.timeout(2):
        await leading.wait()
    await asyncio.sleep(0.35)
    renewals = len(server.writes)
    assert renewals >= 3
    server.down = True
    loop = asyncio.get_running_loop()
    lost_at = loop.time()
    async with asyncio.timeout(3):
        await task
    # Gave up after the renew deadline, not the lease duration.
    assert loop.time() - lost_at < 0.9
    assert cancelled.is_set()
    assert events == ["leader a", "started", "stopped"]
    assert elector.check(max_tolerable_expiration=10)


async def test_release_on_cancel() -> None:
    server = LeaseServer()
    elector = _fast(
        server,
        release_on_cancel=True,
    )
    task = asyncio.create_task(elector.run())
    await eventually(lambda: elector.is_leader)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert server.spec["holderIdentity"] == ""


async def test_a_leader_whose_work_failed_gives_the_lease_up() -> None:
    """The leading work (the scheduling loop) raised: renewing on would keep the lease and
    schedule nothing, so run() ends, released, and the process can exit as kube-scheduler's."""
    server = LeaseServer()

    async def started() -> None:
        await asyncio.sleep(0.2)
        raise RuntimeError("the scheduling loop died")

    elector = _fast(
        server,
        release_on_cancel=True,
        on_started_leading=started,
    )
    async with asyncio.timeout(3):
        await elector.run()
    assert server.spec["holderIdentity"] == ""


async def test_a_leader_whose_work_ended_of_itself_leads_on() -> None:
    server = LeaseServer()

    async def started() -> None:
        return None

    elector = _fast(
        server,
        on_started_leading=started,
    )
    task = asyncio.create_task(elector.run())
    await eventually(lambda: elector.is_leader)
    await asyncio.sleep(0.35)
    assert not task.done()
    assert server.spec["holderIdentity"] == "a"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
