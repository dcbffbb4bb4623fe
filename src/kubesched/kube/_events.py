"""Events (``events.k8s.io/v1``) and the pod status writes kube-scheduler makes.

:class:`EventRecorder` follows client-go's events/v1 broadcaster: recording never blocks (a
bounded queue, sent by background tasks, overflow dropped and counted; a caller that can wait
awaits :meth:`EventRecorder.room` first, so that events are dropped only while writes fail),
and an event identical
in type, action, reason, reporting controller, ``regarding`` and ``related`` to one recorded
recently is folded into the first one's ``series`` instead of creating another Event: the
second occurrence patches ``series.count`` to 2 at once, later ones only bump the count in
memory, written when the series goes quiet (``finish_after``, 6 min) or periodically
(``refresh_every``, 30 min).

:func:`update_pod_condition` is kube-scheduler's ``updatePod``: set a pod condition (and
optionally ``status.nominatedNodeName``) with a strategic merge patch of the ``status``
subresource, and skip the write when nothing would change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol

import msgspec

from kubesched.api import Pod, PodCondition
from kubesched.kube._client import APIClient, api_path
from kubesched.kube._errors import (
    AlreadyExists,
    APIError,
    NotFound,
    TemporaryAPIError,
    with_retries,
)

__all__ = [
    "ACTION_BINDING",
    "ACTION_PREEMPTING",
    "ACTION_SCHEDULING",
    "EVENT_TYPE_NORMAL",
    "EVENT_TYPE_WARNING",
    "EventRecorder",
    "EventSeries",
    "EventV1",
    "ObjectReference",
    "format_micro_time",
    "format_time",
    "object_reference",
    "truncate_message",
    "update_pod_condition",
]

log = logging.getLogger(__name__)

EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"
ACTION_SCHEDULING: Final = "Scheduling"
ACTION_BINDING: Final = "Binding"
ACTION_PREEMPTING: Final = "Preempting"

#: The API server rejects a longer ``note`` (events/v1 validation).
NOTE_LENGTH_LIMIT: Final = 1024
#: ... and a longer ``reportingInstance``.
REPORTING_INSTANCE_LIMIT: Final = 128


def format_micro_time(when: float) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_time(when: float) -> str:
    """A ``metav1.Time``: RFC 3339 in UTC, whole seconds."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectReference(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True):
    """``core/v1 ObjectReference``: what an event is about."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""
    resource_version: str = ""
    field_path: str = ""


class _Meta(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


class Referable(Protocol):
    """An API object with ``kind``, ``apiVersion`` and ``metadata`` (``Pod``, ``Node`` ...)."""

    @property
    def kind(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def metadata(self) -> _Meta: ...


def object_reference(obj: Referable) -> ObjectReference:
    """The reference client-go's ``reference.GetReference`` makes for ``obj``."""
    meta = obj.metadata
    return ObjectReference(
        kind=obj.kind,
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        api_version=obj.api_version,
        resource_version=meta.resource_version,
    )


class EventSeries(msgspec.Struct, rename="camel"):
    """``events/v1 EventSeries``."""

    count: int
    last_observed_time: str


class _EventMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str


class EventV1(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """An ``events.k8s.io/v1 Event`` as the recorder writes it."""

    api_version: str  # no defaults here: omit_defaults would leave these two out
    kind: str
    metadata: _EventMeta
    event_time: str
    series: EventSeries | None = None
    reporting_controller: str
    reporting_instance: str
    action: str
    reason: str
    regarding: ObjectReference
    related: ObjectReference | None = None
    note: str = ""
    type: str


def truncate_message(message: str) -> str:
    """kube-scheduler's ``truncateMessage`` for a FailedScheduling note: a message longer than
    an event's note may be keeps its first bytes and says it was cut (``" ..."``)."""
    suffix = " ..."
    if len(message.encode()) <= NOTE_LENGTH_LIMIT:
        return message
    return _truncate_utf8(message, NOTE_LENGTH_LIMIT - len(suffix)) + suffix


def _truncate_utf8(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    return data[:limit].decode("utf-8", "ignore")


@dataclass
class _Entry:
    event: EventV1
    first_seen: float
    last_observed: float
    count: int = 1
    dirty: bool = False  # a series count not yet written


_Key = tuple[str, str, str, str, ObjectReference, ObjectReference | None]
_Item = tuple[Literal["create"], EventV1] | tuple[Literal["series"], _Entry]


#: Events written at once. kube-scheduler writes each event in a goroutine of its own; with a
#: handful of writers here, a scheduler binding a backlog waits on its events' round trips
#: (binding cycles end once their event is queued).
WORKERS = 32


class EventRecorder:
    """Records ``events.k8s.io/v1`` Events in the background, aggregating repeats into series.

    ``reporting_controller`` is the profile's ``schedulerName`` (kube-scheduler uses
    ``default-scheduler``); ``reporting_instance`` defaults to ``<controller>-<hostname>`` as
    client-go's recorder does. Call :meth:`start` once inside the event loop and
    :meth:`aclose` on shutdown (it writes pending series counts and waits up to ``timeout``).
    :meth:`event` never blocks: when ``queue_size`` writes are already waiting the event is
    dropped and counted in :attr:`dropped`.
    """

    def __init__(
        self,
        client: APIClient,
        *,
        reporting_controller: str = "default-scheduler",
        reporting_instance: str | None = None,
        queue_size: int = 1000,
        workers: int = WORKERS,
        max_cached: int = 4096,
        finish_after: float = 360.0,
        refresh_every: float = 1800.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self.reporting_controller = reporting_controller
        instance = reporting_instance or f"{reporting_controller}-{socket.gethostname()}"
        self.reporting_instance = instance[:REPORTING_INSTANCE_LIMIT]
        self._queue: asyncio.Queue[_Item] = asyncio.Queue(maxsize=queue_size)
        self._workers = max(1, workers)
        self._max_cached = max(1, max_cached)
        self.finish_after = finish_after
        self.refresh_every = refresh_every
        self._clock = clock
        self._cache: OrderedDict[_Key, _Entry] = OrderedDict()
        self._tasks: list[asyncio.Task[None]] = []
        self._last_name = ""
        self._last_refresh = clock()
        # Callers waiting in :meth:`room`, first come first woken: one per place freed (waking
        # them all for each place made a backlog of thousands quadratic).
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Whether the last write failed: waiting for room would then stall callers for nothing.
        self.failing = False
        # Counters.
        self.recorded = 0
        self.aggregated = 0
        self.dropped = 0
        self.sent = 0
        self.failed = 0

    # --- recording ---------------------------------------------------------------------------

    def event(
        self,
        regarding: ObjectReference | Referable,
        *,
        type: str,
        reason: str,
        action: str,
        note: str,
        related: ObjectReference | Referable | None = None,
    ) -> None:
        """Record an event about ``regarding`` (a reference, or a ``Pod``/``Node`` itself).

        E.g. ``event(pod, type="Warning", reason="FailedScheduling", action="Scheduling",
        note="0/3 nodes are available: ...")``.
        """
        ref = regarding if isinstance(regarding, ObjectReference) else object_reference(regarding)
        rel = (
            None
            if related is None
            else related
            if isinstance(related, ObjectReference)
            else object_reference(related)
        )
        self.recorded += 1
        now = self._clock()
        key: _Key = (type, action, reason, self.reporting_controller, ref, rel)
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            entry.count += 1
            entry.last_observed = now
            self.aggregated += 1
            if entry.count == 2:
                self._enqueue(("series", entry))
            else:
                entry.dirty = True
            return
        event = EventV1(
            api_version="events.k8s.io/v1",
            kind="Event",
            metadata=_EventMeta(
                name=self._event_name(ref.name), namespace=ref.namespace or "default"
            ),
            event_time=format_micro_time(now),
            reporting_controller=self.reporting_controller,
            reporting_instance=self.reporting_instance,
            action=action,
            reason=reason,
            regarding=ref,
            related=rel,
            note=_truncate_utf8(note, NOTE_LENGTH_LIMIT),
            type=type,
        )
        self._cache[key] = _Entry(event=event, first_seen=now, last_observed=now)
        if len(self._cache) > self._max_cached:
            self._cache.popitem(last=False)
        self._enqueue(("create", event))

    def _event_name(self, name: str) -> str:
        candidate = f"{name}.{time.time_ns():x}"
        if candidate <= self._last_name and candidate.startswith(f"{name}."):
            candidate = f"{name}.{int(self._last_name.rsplit('.', 1)[1], 16) + 1:x}"
        self._last_name = candidate
        return candidate

    def _enqueue(self, item: _Item) -> bool:
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full: %d events dropped so far", self.dropped)
            return False
        return True

    @property
    def pending(self) -> int:
        """Writes waiting in the queue."""
        return self._queue.qsize()

    @property
    def full(self) -> bool:
        """Whether an event recorded now would be dropped."""
        return self._queue.full()

    async def room(self) -> None:
        """Wait until an event recorded next would be queued, unless writes are failing (the
        API server is down: then it is dropped, rather than holding the caller)."""
        while self._queue.full() and not self.failing and self._tasks:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                # A place this caller was woken for goes to the next one.
                if waiter.done() and not waiter.cancelled():
                    self._wake(1)
                raise
        if self.failing or not self._tasks:
            self._wake(len(self._waiters))  # nobody waits for a queue that does not move

    def _wake(self, count: int) -> None:
        while count and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                count -= 1

    # --- background --------------------------------------------------------------------------

    def start(self) -> None:
        """Start the sending tasks (idempotent)."""
        if self._tasks:
            return
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"event sender {i}")
            for i in range(self._workers)
        ]
        self._tasks.append(asyncio.create_task(self._maintain(), name="event series"))

    async def flush(self) -> None:
        """Wait until every queued write has been attempted (bound it with ``asyncio.timeout``)."""
        await self._queue.join()

    async def aclose(self, grace: float = 5.0) -> None:
        """Write pending series counts, wait up to ``grace`` seconds for the queue, stop."""
        if self._tasks:
            for entry in list(self._cache.values()):
                if entry.dirty:
                    entry.dirty = False
                    self._enqueue(("series", entry))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self.flush()
        tasks, self._tasks = self._tasks, []
        self._wake(len(self._waiters))
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _worker(self) -> None:
        while True:
            item = await self._queue.get()
            self._wake(1)
            try:
                await self._send(item)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.failed += 1
                log.exception("writing an event failed")
            finally:
                self._queue.task_done()

    async def _maintain(self) -> None:
        period = max(0.05, min(self.finish_after, self.refresh_every) / 2)
        while True:
            await asyncio.sleep(period)
            self.finish_series()

    def finish_series(self) -> None:
        """Drop quiet entries from the aggregation cache, writing final series counts.

        Called periodically by the background task; also every ``refresh_every`` seconds the
        counts of active series are written.
        """
        now = self._clock()
        refresh = now - self._last_refresh >= self.refresh_every
        if refresh:
            self._last_refresh = now
        for key, entry in list(self._cache.items()):
            quiet = entry.last_observed < now - self.finish_after
            if entry.count >= 2:
                if quiet:
                    if not entry.dirty or self._enqueue(("series", entry)):
                        del self._cache[key]
                elif refresh and entry.dirty and self._enqueue(("series", entry)):
                    entry.dirty = False
            elif quiet:
                del self._cache[key]

    async def _send(self, item: _Item) -> None:
        if item[0] == "create":
            await self._create(item[1])
            return
        entry = item[1]
        entry.dirty = False
        event = entry.event
        series = EventSeries(
            count=entry.count, last_observed_time=format_micro_time(entry.last_observed)
        )
        path = api_path(
            "events",
            group_version="events.k8s.io/v1",
            namespace=event.metadata.namespace,
            name=event.metadata.name,
        )
        try:
            await with_retries(
                lambda: self._client.patch(path, {"series": series}, patch_type="merge"),
                attempts=3,
                initial_delay=0.5,
            )
            self.sent += 1
        except NotFound:
            # The first event is not there (yet, or any more): create it with its series.
            try:
                await self._create(msgspec.structs.replace(event, series=series))
            except AlreadyExists:
                # Created by the "create" in flight meanwhile: patch once more.
                await self._client.patch(path, {"series": series}, patch_type="merge")
                self.sent += 1
        except APIError as exc:
            self.failed += 1
            log.warning("event %s series update failed: %s", event.metadata.name, exc)

    async def _create(self, event: EventV1) -> None:
        path = api_path(
            "events", group_version="events.k8s.io/v1", namespace=event.metadata.namespace
        )
        try:
            await with_retries(
                lambda: self._client.post(path, event), attempts=3, initial_delay=0.5
            )
            self.sent += 1
            self.failing = False
        except AlreadyExists:
            if event.series is not None:
                raise
            log.debug("event %s already exists", event.metadata.name)
        except APIError as exc:
            self.failed += 1
            # A temporary error outlived its retries: the server cannot take writes now.
            self.failing = isinstance(exc, TemporaryAPIError)
            if self.failing:
                self._wake(len(self._waiters))
            log.warning(
                "event %s (%s %s) rejected: %s",
                event.metadata.name,
                event.reason,
                event.regarding.name,
                exc,
            )


# --- pod status --------------------------------------------------------------------------------


def _condition_equal(old: PodCondition, new: PodCondition) -> bool:
    return (
        old.status == new.status
        and old.reason == new.reason
        and old.message == new.message
        and old.last_probe_time == new.last_probe_time
    )


async def update_pod_condition(
    client: APIClient,
    pod: Pod,
    condition: PodCondition | None,
    *,
    nominated_node_name: str | None = None,
    now: float | None = None,
) -> bool:
    """Set ``condition`` on the pod's status and/or its ``status.nominatedNodeName``.

    As kube-scheduler's ``updatePod``: the condition is compared with the one of the same type
    in ``pod`` (the cached copy); when status, reason, message and lastProbeTime are all equal
    and the nominated node is unchanged, nothing is written and ``False`` is returned.
    ``lastTransitionTime`` is now unless the status is the same as before. ``nominated_node_name``
    ``None`` leaves the field alone; ``""`` clears it. The write is a strategic merge patch of
    the ``status`` subresource (conditions merge by ``type``), retried on temporary errors.

    For a scheduling failure: ``PodCondition(type="PodScheduled", status="False",
    reason="Unschedulable", message=...)``.
    """
    status_patch: dict[str, Any] = {}
    if condition is not None:
        old = next((c for c in pod.status.conditions if c.type == condition.type), None)
        if old is None or not _condition_equal(old, condition):
            when = time.time() if now is None else now
            transition = (
                old.last_transition_time
                if old is not None and old.status == condition.status and old.last_transition_time
                else format_time(when)
            )
            entry: dict[str, Any] = {
                "type": condition.type,
                "status": condition.status,
                "reason": condition.reason,
                "message": condition.message,
                "lastTransitionTime": transition,
                "lastProbeTime": condition.last_probe_time,
            }
            if pod.metadata.generation > 0:
                entry["observedGeneration"] = pod.metadata.generation
            status_patch["conditions"] = [entry]
    if nominated_node_name is not None and nominated_node_name != pod.status.nominated_node_name:
        status_patch["nominatedNodeName"] = nominated_node_name or None
    if not status_patch:
        return False
    path = api_path(
        "pods", namespace=pod.metadata.namespace, name=pod.metadata.name, subresource="status"
    )
    body = {"status": status_patch}
    await with_retries(
        lambda: client.patch(path, body, patch_type="strategic"),
        attempts=4,
        initial_delay=0.01,
        factor=5.0,
        jitter=0.1,
    )
    return True
