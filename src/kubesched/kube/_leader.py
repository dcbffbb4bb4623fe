"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

A candidate tries to acquire or renew every ``retry_period`` (jittered while waiting to
acquire). It may take the lease over when it is free, or when the holder has not changed the
record for ``leaseDurationSeconds`` **as measured on this candidate's clock since it last saw the
record change** (client-go's ``observedTime``), never by comparing ``renewTime`` with the local
clock, so skewed clocks between candidates do not matter. Writes are optimistic: the update
carries the resourceVersion that was read, and a conflict means someone else won. A leader that
cannot renew within ``renew_deadline`` stops leading.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

import msgspec

from kubesched.kube._client import APIClient, api_path
from kubesched.kube._errors import APIError, Conflict, NotFound
from kubesched.kube._events import format_micro_time

__all__ = ["JITTER_FACTOR", "LeaderElectionRecord", "LeaderElector", "default_identity"]

log = logging.getLogger(__name__)

#: client-go's ``JitterFactor``: waiting to acquire sleeps retry_period × [1, 2.2).
JITTER_FACTOR: Final = 1.2

Callback = Callable[[], Awaitable[None] | None]
LeaderCallback = Callable[[str], Awaitable[None] | None]


class LeaderElectionRecord(msgspec.Struct, rename="camel"):
    """A Lease's ``spec`` (the fields leader election uses)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0


class _LeaseMeta(msgspec.Struct, rename="camel"):
    resource_version: str = ""


class _Lease(msgspec.Struct):
    metadata: _LeaseMeta = msgspec.field(default_factory=_LeaseMeta)
    spec: LeaderElectionRecord = msgspec.field(default_factory=LeaderElectionRecord)


_lease_decoder = msgspec.json.Decoder(_Lease)
_record_encoder = msgspec.json.Encoder()


def default_identity() -> str:
    """``<hostname>_<uuid>``, the identity kube-scheduler uses."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """Campaign for a Lease and keep it while the process runs.

    ``await run()`` returns when leadership is lost (or raises ``CancelledError`` when the task
    is cancelled). Callbacks may be plain functions or coroutine functions:
    ``on_started_leading`` runs as a task that is cancelled when leadership ends;
    ``on_stopped_leading`` is called once after a term ends (not if this candidate never led);
    ``on_new_leader(identity)`` whenever the observed holder changes, including to ourselves.
    ``release_on_cancel`` clears the holder on a graceful stop so another candidate need not
    wait for the lease to expire.
    """

    def __init__(
        self,
        client: APIClient,
        *,
        namespace: str = "kube-system",
        name: str = "kube-scheduler",
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: LeaderCallback | None = None,
        release_on_cancel: bool = False,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period × {JITTER_FACTOR}")
        if retry_period <= 0:
            raise ValueError("retry_period must be positive")
        self._client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        if not self.identity:
            raise ValueError("identity must not be empty")
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._wall_clock = wall_clock
        self._path = api_path(
            "leases", group_version="coordination.k8s.io/v1", namespace=namespace, name=name
        )
        self._collection = api_path(
            "leases", group_version="coordination.k8s.io/v1", namespace=namespace
        )
        # What we last saw, when we saw it change, and the object to update.
        self._observed = LeaderElectionRecord()
        self._observed_raw = b""
        self._observed_time = 0.0
        self._lease: dict[str, Any] | None = None
        self._reported_leader = ""
        self._leading_task: asyncio.Task[None] | None = None

    # --- state -------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """Whether the last observed record names this candidate."""
        return self._observed.holder_identity == self.identity

    @property
    def leader(self) -> str:
        """The holder identity last observed (empty if none)."""
        return self._observed.holder_identity

    @property
    def observed_record(self) -> LeaderElectionRecord:
        """The lease spec last observed."""
        return self._observed

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > now

    def check(self, max_tolerable_expiration: float = 10.0) -> bool:
        """Health check (client-go's ``HealthzAdaptor``): false if we lead but stopped renewing.

        Healthy when not leading; when leading, healthy unless the lease expired more than
        ``max_tolerable_expiration`` seconds ago by our own observation.
        """
        if not self.is_leader:
            return True
        expiry = self._observed_time + self._observed.lease_duration_seconds
        return self._clock() <= expiry + max_tolerable_expiration

    # --- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire, lead (running ``on_started_leading``) and renew until leadership is lost."""
        led = False
        try:
            await self._acquire()
            led = True
            self._start_leading()
            if await self._renew_while_leading():
                log.error(
                    "lease %s/%s: leadership lost by %s", self.namespace, self.name, self.identity
                )
        finally:
            if led:
                await self._stop_leading()
                if self.release_on_cancel:
                    await asyncio.shield(self._release())

    async def _renew_while_leading(self) -> bool:
        """Renew until leadership is lost (True) or the leading work failed (False): a leader
        that no longer works gives the lease up, as kube-scheduler's process exits then."""
        leading = self._leading_task
        if leading is None:
            await self._renew()
            return True
        renewing = asyncio.ensure_future(self._renew())
        try:
            done, _ = await asyncio.wait({renewing, leading}, return_when=asyncio.FIRST_COMPLETED)
            if renewing not in done and (leading.cancelled() or leading.exception() is None):
                await renewing  # the work ended of itself: lead on, as before
        finally:
            if not renewing.done():
                renewing.cancel()
                await asyncio.gather(renewing, return_exceptions=True)
        if not renewing.cancelled():
            renewing.result()
            return True
        log.error(
            "lease %s/%s: the leader's work failed; giving the lease up",
            self.namespace,
            self.name,
        )
        return False

    async def _acquire(self) -> None:
        log.info("lease %s/%s: %s trying to acquire", self.namespace, self.name, self.identity)
        while True:
            succeeded = await self._try(self.retry_period * 5)
            self._maybe_report_transition()
            if succeeded:
                log.info("lease %s/%s: acquired by %s", self.namespace, self.name, self.identity)
                return
            jitter = 1.0 + random.random() * JITTER_FACTOR
            await asyncio.sleep(self.retry_period * jitter)

    async def _renew(self) -> None:
        while True:
            deadline = self._clock() + self.renew_deadline
            renewed = False
            while True:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                if await self._try(remaining):
                    renewed = True
                    break
                remaining = deadline - self._clock()
                if remaining <= 0:
                    break
                await asyncio.sleep(min(self.retry_period, remaining))
            self._maybe_report_transition()
            if not renewed or not self.is_leader:
                return
            await asyncio.sleep(self.retry_period)

    async def _try(self, budget: float) -> bool:
        try:
            async with asyncio.timeout(budget):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            log.warning("lease %s/%s: request timed out", self.namespace, self.name)
            return False
        except APIError as exc:
            log.warning("lease %s/%s: %s", self.namespace, self.name, exc)
            return False

    async def try_acquire_or_renew(self) -> bool:
        """One attempt, exactly client-go's ``tryAcquireOrRenew``; true if we hold the lease."""
        wall = self._wall_clock()
        now = self._clock()
        record = LeaderElectionRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.lease_duration),
            acquire_time=format_micro_time(wall),
            renew_time=format_micro_time(wall),
        )
        # 1. Fast path: we are the leader and believe the lease is ours; update optimistically.
        if self.is_leader and self._lease_valid(now) and self._lease is not None:
            record.acquire_time = self._observed.acquire_time
            record.lease_transitions = self._observed.lease_transitions
            try:
                await self._update(record)
            except APIError as exc:
                log.info(
                    "lease %s/%s: optimistic renew failed (%s)", self.namespace, self.name, exc
                )
            else:
                self._set_observed(record)
                return True

        # 2. Read the lease, or create it.
        try:
            raw = await self._client.get(self._path)
        except NotFound:
            created = await self._client.post(self._collection, self._new_lease(record))
            self._remember(created)
            self._set_observed(record)
            return True
        lease = self._remember(raw)
        old = lease.spec

        # 3. Check the holder and, by our own clock, the expiry.
        raw_record = _record_encoder.encode(old)
        if raw_record != self._observed_raw:
            self._set_observed(old, raw_record)
        if old.holder_identity and self._lease_valid(now) and not self.is_leader:
            return False

        # 4. Take over (or keep) the lease.
        if self.is_leader:
            record.acquire_time = old.acquire_time
            record.lease_transitions = old.lease_transitions
        else:
            record.lease_transitions = old.lease_transitions + 1
        await self._update(record)
        self._set_observed(record)
        return True

    def _set_observed(self, record: LeaderElectionRecord, raw: bytes | None = None) -> None:
        self._observed = record
        self._observed_raw = _record_encoder.encode(record) if raw is None else raw
        self._observed_time = self._clock()

    def _new_lease(self, record: LeaderElectionRecord) -> dict[str, Any]:
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": msgspec.to_builtins(record),
        }

    def _remember(self, raw: bytes) -> _Lease:
        self._lease = msgspec.json.decode(raw)
        return _lease_decoder.decode(raw)

    async def _update(self, record: LeaderElectionRecord) -> None:
        if self._lease is None:
            raise RuntimeError("lease not read yet")
        lease = dict(self._lease)
        spec = dict(lease.get("spec") or {})
        for key in (
            "holderIdentity",
            "leaseDurationSeconds",
            "acquireTime",
            "renewTime",
            "leaseTransitions",
        ):
            spec.pop(key, None)
        spec.update(msgspec.to_builtins(record))
        lease["spec"] = spec
        # The resourceVersion read is in metadata: the server rejects the write with 409 if the
        # lease changed meanwhile.
        updated = await self._client.put(self._path, lease)
        self._remember(updated)

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            log.info("lease %s/%s: new leader %s", self.namespace, self.name, holder)
        if self.on_new_leader is not None:
            self._call_soon(self.on_new_leader, holder)

    def _call_soon(self, fn: Callable[..., Awaitable[None] | None], *args: Any) -> None:
        try:
            result = fn(*args)
        except Exception:
            log.exception("leader election callback failed")
            return
        if inspect.isawaitable(result):
            task = asyncio.ensure_future(result)
            task.add_done_callback(_log_failure)

    def _start_leading(self) -> None:
        if self.on_started_leading is None:
            return
        try:
            result = self.on_started_leading()
        except Exception:
            log.exception("on_started_leading failed")
            return
        if inspect.isawaitable(result):
            self._leading_task = asyncio.ensure_future(result)
            self._leading_task.add_done_callback(_log_failure)

    async def _stop_leading(self) -> None:
        task, self._leading_task = self._leading_task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        if self.on_stopped_leading is not None:
            try:
                result = self.on_stopped_leading()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("on_stopped_leading failed")

    async def _release(self) -> bool:
        """Clear the holder so others can acquire at once (client-go's ``release``)."""
        if not self.is_leader or self._lease is None:
            return False
        wall = format_micro_time(self._wall_clock())
        record = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=wall,
            renew_time=wall,
            lease_transitions=self._observed.lease_transitions,
        )
        try:
            async with asyncio.timeout(self.renew_deadline):
                try:
                    await self._update(record)
                except Conflict:
                    # A renewal cancelled by the shutdown may still have reached the server
                    # and moved the resourceVersion on: read it again, release if still ours.
                    lease = self._remember(await self._client.get(self._path))
                    if lease.spec.holder_identity != self.identity:
                        return False
                    await self._update(record)
        except (APIError, TimeoutError) as exc:
            log.warning("lease %s/%s: release failed: %s", self.namespace, self.name, exc)
            return False
        self._set_observed(record)
        log.info("lease %s/%s: released by %s", self.namespace, self.name, self.identity)
        return True


def _log_failure(task: asyncio.Future[Any]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("leader election callback failed", exc_info=exc)
