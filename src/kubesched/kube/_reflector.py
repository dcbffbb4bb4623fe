"""List, then watch: keep an in-memory copy of one resource type and tell a handler what changed.

This is client-go's reflector and informer in one piece. The first list is paginated and served
from the watch cache (``resourceVersion=0``); the watch asks for bookmarks and a randomized
``timeoutSeconds`` (5–10 minutes by default), and resumes from the last resourceVersion seen
after the server ends it or the connection drops (with jittered backoff, 0.8 s doubling to
30 s). When the server answers 410 Gone (the resourceVersion was compacted away) the reflector
lists again and reconciles: objects missing from the new list are reported deleted, objects with
a new resourceVersion are reported updated, so the consumer's view converges.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import random
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast

import msgspec

from kubesched.api import ObjectList, WatchEvent, gc_paused
from kubesched.kube._client import APIClient, decoder_for
from kubesched.kube._errors import (
    APIError,
    Backoff,
    Forbidden,
    Gone,
    NotFound,
    Status,
    error_from_status,
)

__all__ = [
    "EventHandler",
    "KubeObject",
    "ReconcileResult",
    "Reflector",
    "ResourceEventHandler",
    "Store",
    "object_key",
    "reconcile",
]

log = logging.getLogger(__name__)


class ObjectMetaLike(Protocol):
    """The part of ``ObjectMeta`` the reflector reads."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def resource_version(self) -> str: ...


class KubeObject(Protocol):
    """Any struct with a ``metadata`` like ``ObjectMeta`` (``Pod``, ``Node`` ...)."""

    @property
    def metadata(self) -> ObjectMetaLike: ...


T = TypeVar("T", bound=KubeObject)
T_contra = TypeVar("T_contra", bound=KubeObject, contravariant=True)


def object_key(obj: KubeObject) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's key function)."""
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


class EventHandler(Protocol[T_contra]):
    """What a reflector calls. Calls are synchronous, in order, on the event loop."""

    def on_add(self, obj: T_contra) -> None:
        """``obj`` appeared (in the first list, a later list, or a watch ADDED event)."""

    def on_update(self, old: T_contra, new: T_contra) -> None:
        """``old`` was replaced by ``new`` (same key, different resourceVersion)."""

    def on_delete(self, obj: T_contra) -> None:
        """``obj`` is gone; after a re-list this is the last state the reflector had."""

    def on_synced(self) -> None:
        """The first list has been delivered (client-go's ``HasSynced`` turning true)."""

    def on_undecodable(self, key: str) -> None:
        """The object under ``key`` changed but could not be decoded; the store keeps what it
        had (or, for a deletion of an object it had, delivers ``on_delete`` too)."""


class ResourceEventHandler(Generic[T]):
    """An :class:`EventHandler` doing nothing: subclass and override what you need."""

    def on_add(self, obj: T) -> None:
        """See :meth:`EventHandler.on_add`."""

    def on_update(self, old: T, new: T) -> None:
        """See :meth:`EventHandler.on_update`."""

    def on_delete(self, obj: T) -> None:
        """See :meth:`EventHandler.on_delete`."""

    def on_synced(self) -> None:
        """See :meth:`EventHandler.on_synced`."""

    def on_undecodable(self, key: str) -> None:
        """See :meth:`EventHandler.on_undecodable`."""


class Store(Generic[T]):
    """Objects by key (``namespace/name``): the informer's indexer, read-only to consumers."""

    def __init__(self) -> None:
        self._items: dict[str, T] = {}

    def get(self, key: str) -> T | None:
        """The object stored under ``key``, or ``None``."""
        return self._items.get(key)

    def get_by_name(self, namespace: str, name: str) -> T | None:
        """The object ``namespace/name`` (``namespace`` empty for cluster-scoped objects)."""
        return self._items.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[T]:
        """All objects, in no particular order."""
        return list(self._items.values())

    def keys(self) -> builtins.list[str]:
        """All keys."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._items.values()))


@dataclass
class ReconcileResult(Generic[T]):
    """What changed between the store and a fresh list."""

    added: list[T] = field(default_factory=list)
    updated: list[tuple[T, T]] = field(default_factory=list)
    deleted: list[T] = field(default_factory=list)
    unchanged: int = 0

    def __bool__(self) -> bool:
        return bool(self.added or self.updated or self.deleted)


def reconcile(
    current: dict[str, T], listed: Iterable[T]
) -> tuple[dict[str, T], ReconcileResult[T]]:
    """Compare the stored objects with a fresh list; return the new contents and the changes.

    An object is unchanged when its resourceVersion is the same. An object whose UID changed
    (deleted and re-created under the same name while we were not watching) is reported as a
    delete of the old one and an add of the new one, not as an update.
    """
    result: ReconcileResult[T] = ReconcileResult()
    fresh: dict[str, T] = {}
    for obj in listed:
        key = object_key(obj)
        fresh[key] = obj
        old = current.get(key)
        if old is None:
            result.added.append(obj)
        elif old.metadata.uid and obj.metadata.uid and old.metadata.uid != obj.metadata.uid:
            result.deleted.append(old)
            result.added.append(obj)
        elif old.metadata.resource_version != obj.metadata.resource_version:
            result.updated.append((old, obj))
        else:
            fresh[key] = old  # keep the instance consumers already hold
            result.unchanged += 1
    for key, old in current.items():
        if key not in fresh:
            result.deleted.append(old)
    return fresh, result


# Lenient views used to name an object that failed to decode, and to read a bookmark.
class _PeekMeta(msgspec.Struct, rename="camel"):
    name: Any = ""
    namespace: Any = ""
    resource_version: Any = ""


class _Peek(msgspec.Struct):
    kind: Any = ""
    metadata: _PeekMeta | None = None


_peek_decoder = msgspec.json.Decoder(_Peek)
_event_decoder = msgspec.json.Decoder(WatchEvent)
_status_decoder = msgspec.json.Decoder(Status)


def _peek(raw: bytes | msgspec.Raw) -> _PeekMeta:
    try:
        peek = _peek_decoder.decode(raw)
    except msgspec.DecodeError:
        return _PeekMeta()
    return peek.metadata or _PeekMeta()


def _describe(meta: _PeekMeta) -> str:
    ns, name = meta.namespace, meta.name
    if not name:
        return "<unnamed>"
    return f"{ns}/{name}" if ns else str(name)


class _WatchEnded(Exception):  # noqa: N818  (not an error)
    """The watch stream ended without an error (server timeout)."""


class Reflector(Generic[T]):
    """Keeps :attr:`store` in step with the API server for one resource path.

    ``Reflector(client, path="/api/v1/pods", type=Pod, handler=h,
    field_selector="status.phase!=Succeeded,status.phase!=Failed")``; then ``start()`` (or
    ``await run()`` in a task of your own) and ``await wait_synced()``. ``handler`` gets
    ``on_add`` / ``on_update`` / ``on_delete`` and, once, ``on_synced``; an exception from it is
    logged and does not stop the reflector. An object that fails to decode into ``type`` is
    logged with its namespace/name, counted, skipped and reported to ``on_undecodable``.

    ``min_watch_timeout`` (seconds) sets each watch's ``timeoutSeconds`` to a random value
    between it and twice it. ``backoff`` paces reconnects (default 0.8 s doubling to 30 s,
    jittered by up to 100 %).

    With ``tolerate_missing``, a path the server does not serve (404: a CRD not installed) or
    will not list (403) counts as empty: the reflector reports synced with no objects (deleting
    any it had) and lists again after each backoff until the server answers, so a consumer
    waiting for sync is not held forever by an optional kind.

    With ``deliver_after``, the first list is fetched at once but handed to the handler only
    once that event is set (the watch then starts from the list's resourceVersion, so nothing
    is missed meanwhile): a consumer that needs other kinds first need not wait for this one's
    list before asking for it.
    """

    def __init__(
        self,
        client: APIClient,
        path: str,
        type: type[T],
        handler: EventHandler[T] | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        min_watch_timeout: float = 300.0,
        name: str | None = None,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
        tolerate_missing: bool = False,
        deliver_after: asyncio.Event | None = None,
    ) -> None:
        self._client = client
        self._deliver_after = deliver_after
        self.tolerate_missing = tolerate_missing
        #: Whether the last list found the path not served (``tolerate_missing`` only).
        self.missing = False
        self.path = path
        self.type = type
        self.handler = handler
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.name = name or path
        self._rng = rng or random.Random()
        self._backoff = backoff or Backoff(0.8, 30.0, factor=2.0, jitter=1.0, rng=self._rng)
        self._decoder = decoder_for(type)
        self._list_decoder = decoder_for(cast(Any, ObjectList)[type])
        self._raw_list_decoder = decoder_for(ObjectList[msgspec.Raw])
        self.store: Store[T] = Store()
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # client-go's lastSyncResourceVersion and isLastSyncResourceVersionUnavailable.
        self._rv = ""
        self._rv_unavailable = False
        self._need_list = True
        # Counters, for tests and metrics.
        self.lists = 0
        self.relists = 0
        self.watches = 0
        self.events = 0
        self.bookmarks = 0
        self.decode_errors = 0
        self.handler_errors = 0

    # --- public state ------------------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        """The last resourceVersion seen (from a list, an event or a bookmark)."""
        return self._rv

    @property
    def has_synced(self) -> bool:
        """Whether the first list has been delivered."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Wait until the first list has been delivered (bound it with ``asyncio.timeout``)."""
        await self._synced.wait()

    def get(self, key: str) -> T | None:
        """The stored object under ``namespace/name`` (or ``name``), or ``None``."""
        return self.store.get(key)

    def list(self) -> builtins.list[T]:
        """All stored objects."""
        return self.store.list()

    # --- running -----------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run in a background task (once); returns the task."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"reflector {self.name}")
        return self._task

    async def stop(self) -> None:
        """Cancel the background task started by :meth:`start` and wait for it."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if (current := asyncio.current_task()) is not None and current.cancelling():
                    raise

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise; errors are retried."""
        backoff = self._backoff
        while True:
            try:
                if self._need_list:
                    await self._list()
                    backoff.reset()
                await self._watch(backoff)
            except Gone as exc:
                # As client-go: re-list from the last resourceVersion seen ("not older than",
                # served by the watch cache); _list falls back to a quorum list if that is too
                # old as well.
                log.info("%s: watch expired (%s); re-listing", self.name, exc.message)
                self._need_list = True
            except _WatchEnded:
                await asyncio.sleep(backoff.next())
            except APIError as exc:
                delay = backoff.next()
                if self.tolerate_missing and isinstance(exc, NotFound | Forbidden):
                    self._missing(exc, delay)
                else:
                    log.warning("%s: %s; retrying in %.1fs", self.name, exc, delay)
                await asyncio.sleep(delay)
            except msgspec.DecodeError as exc:
                delay = backoff.next()
                log.warning("%s: undecodable list (%s); retrying in %.1fs", self.name, exc, delay)
                await asyncio.sleep(delay)
            except Exception:
                # A bug must not end the informer silently: say so, and keep going.
                delay = backoff.next()
                log.exception("%s: unexpected error; retrying in %.1fs", self.name, delay)
                await asyncio.sleep(delay)

    # --- list --------------------------------------------------------------------------------

    def _relist_resource_version(self) -> str:
        if self._rv_unavailable:
            return ""  # a consistent read from etcd
        if not self._rv:
            return "0"  # the first list: any version, from the watch cache
        return self._rv

    async def _list(self) -> None:
        rv = self._relist_resource_version()
        try:
            items, list_rv = await self._list_pages(rv)
        except Gone:
            if rv == "":
                raise
            log.info("%s: resourceVersion %s too old to list; listing from etcd", self.name, rv)
            self._rv_unavailable = True
            items, list_rv = await self._list_pages("")
        first = not self.has_synced
        if first and self._deliver_after is not None:
            await self._deliver_after.wait()
        if self.missing:
            log.info("%s: served now; %d objects", self.name, len(items))
            self.missing = False
        if not first:
            self.relists += 1
        self.lists += 1
        self._replace(items)
        self._rv = list_rv
        self._rv_unavailable = False
        self._need_list = False
        if first:
            self._mark_synced()

    def _missing(self, exc: APIError, delay: float) -> None:
        """The path is not served or not allowed: empty, synced, listed again later."""
        if not self.missing:
            log.warning(
                "%s: %s; treated as empty, looking again every %.0fs at most",
                self.name,
                exc,
                self._backoff.cap,
            )
        else:
            log.debug("%s: still %s; again in %.1fs", self.name, exc, delay)
        self.missing = True
        self._need_list = True
        self._replace([])
        if not self.has_synced:
            self._mark_synced()

    def _mark_synced(self) -> None:
        """The first list is delivered: say so, once."""
        self._synced.set()
        if self.handler is not None:
            try:
                self.handler.on_synced()
            except Exception:
                self.handler_errors += 1
                log.exception("%s: on_synced failed", self.name)

    async def _list_pages(self, rv: str) -> tuple[builtins.list[T], str]:
        # client-go pages with limit=500 except when listing at a specific resourceVersion,
        # which only the watch cache can serve and only without a limit.
        limit: int | None = self.page_size if self.page_size > 0 else None
        if rv not in ("", "0"):
            limit = None
        items: builtins.list[T] = []
        cont = ""
        list_rv = ""
        while True:
            params: dict[str, str | int | None] = {
                "labelSelector": self.label_selector,
                "fieldSelector": self.field_selector,
                "limit": limit,
            }
            if cont:
                params["continue"] = cont
            else:
                params["resourceVersion"] = rv
            try:
                data = await self._client.request("GET", self.path, params=params)
            except Gone:
                if not cont:
                    raise
                # The continue token expired: one full list at the original version, as
                # client-go's pager does.
                log.info("%s: list continuation expired; listing in one request", self.name)
                limit, cont, items = None, "", []
                continue
            page_items, list_rv, cont = self._decode_list(data)
            items.extend(page_items)
            if not cont:
                return items, list_rv

    def _decode_list(self, data: bytes) -> tuple[builtins.list[T], str, str]:
        try:
            with gc_paused():
                page = self._list_decoder.decode(data)
            return page.items, page.metadata.resource_version, page.metadata.continue_
        except msgspec.ValidationError:
            pass  # one bad item: decode them one by one below
        raw = self._raw_list_decoder.decode(data)
        items: builtins.list[T] = []
        for item in raw.items:
            obj = self._decode_object(item, "list")
            if obj is not None:
                items.append(obj)
        return items, raw.metadata.resource_version, raw.metadata.continue_

    def _decode_object(self, raw: msgspec.Raw, what: str) -> T | None:
        try:
            return self._decoder.decode(raw)
        except msgspec.DecodeError as exc:
            self.decode_errors += 1
            meta = _peek(raw)
            log.warning("%s: skipping %s in %s: %s", self.name, _describe(meta), what, exc)
            if self.handler is not None and meta.name:
                key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
                try:
                    self.handler.on_undecodable(key)
                except Exception:
                    self.handler_errors += 1
                    log.exception("%s: on_undecodable(%s) failed", self.name, key)
            return None

    def _replace(self, items: Iterable[T]) -> None:
        fresh, diff = reconcile(self.store._items, items)
        self.store._items = fresh
        with gc_paused():
            for old in diff.deleted:
                self._emit_delete(old)
            for new in diff.added:
                self._emit_add(new)
            for old, new in diff.updated:
                self._emit_update(old, new)
        if self.relists or diff.deleted or diff.updated:
            log.info(
                "%s: listed %d objects: %d added, %d updated, %d deleted",
                self.name,
                len(fresh),
                len(diff.added),
                len(diff.updated),
                len(diff.deleted),
            )

    # --- watch -------------------------------------------------------------------------------

    async def _watch(self, backoff: Backoff) -> None:
        timeout_seconds = max(1, int(self.min_watch_timeout * (self._rng.random() + 1.0)))
        params: dict[str, str | int | None] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self._rv,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": self.label_selector,
            "fieldSelector": self.field_selector,
        }
        self.watches += 1
        started = time.monotonic()
        received = 0
        async with self._client.stream(
            self.path, params=params, read_timeout=timeout_seconds + 30.0
        ) as lines:
            async for line in lines:
                if not received:
                    backoff.reset()
                received += 1
                self._handle_line(line)
        if time.monotonic() - started < 1.0:
            # Ended at once (a proxy closing it, a server in trouble): do not spin.
            raise _WatchEnded

    def _handle_line(self, line: bytes) -> None:
        try:
            event = _event_decoder.decode(line)
        except msgspec.DecodeError as exc:
            self.decode_errors += 1
            log.warning("%s: skipping undecodable watch event: %s", self.name, exc)
            return
        kind = event.type
        if kind == "BOOKMARK":
            self.bookmarks += 1
            rv = _peek(event.object).resource_version
            if rv and isinstance(rv, str):
                self._rv = rv
            return
        if kind == "ERROR":
            try:
                status = _status_decoder.decode(event.object)
            except msgspec.DecodeError:
                status = Status(message=bytes(event.object)[:512].decode("utf-8", "replace"))
            raise error_from_status(status)
        self.events += 1
        obj = self._decode_object(event.object, f"{kind} event")
        if obj is None:
            meta = _peek(event.object)
            rv = meta.resource_version
            if rv and isinstance(rv, str):
                self._rv = rv
            if kind == "DELETED" and meta.name:
                # Gone all the same: what the store had is what was deleted.
                key = f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name
                old = self.store._items.pop(key, None)
                if old is not None:
                    self._emit_delete(old)
            return
        key = object_key(obj)
        items = self.store._items
        if kind == "DELETED":
            items.pop(key, None)
            self._rv = obj.metadata.resource_version
            self._emit_delete(obj)
        elif kind in ("ADDED", "MODIFIED"):
            old = items.get(key)
            items[key] = obj
            self._rv = obj.metadata.resource_version
            if old is None:
                self._emit_add(obj)
            elif old.metadata.uid and obj.metadata.uid and old.metadata.uid != obj.metadata.uid:
                self._emit_delete(old)
                self._emit_add(obj)
            else:
                self._emit_update(old, obj)
        else:
            log.warning("%s: ignoring watch event of type %r", self.name, kind)

    # --- delivery ----------------------------------------------------------------------------

    def _emit_add(self, obj: T) -> None:
        if self.handler is not None:
            try:
                self.handler.on_add(obj)
            except Exception:
                self.handler_errors += 1
                log.exception("%s: on_add(%s) failed", self.name, object_key(obj))

    def _emit_update(self, old: T, new: T) -> None:
        if self.handler is not None:
            try:
                self.handler.on_update(old, new)
            except Exception:
                self.handler_errors += 1
                log.exception("%s: on_update(%s) failed", self.name, object_key(new))

    def _emit_delete(self, obj: T) -> None:
        if self.handler is not None:
            try:
                self.handler.on_delete(obj)
            except Exception:
                self.handler_errors += 1
                log.exception("%s: on_delete(%s) failed", self.name, object_key(obj))
