"""Cluster objects other than Nodes and Pods that plugins read, as the front end feeds them.

kube-scheduler's plugins read PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes ... through listers of shared informers. Here the front end writes such objects into
the snapshot's :class:`ObjectStore` (``kubesched run`` from its reflectors, ``simulate`` from
its manifests) and plugins look them up by kind and name. A kind nobody feeds is simply empty.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol, TypeVar, cast

from kubesched.api import ObjectMeta

T = TypeVar("T")


class StoredObject(Protocol):
    """Any API struct with an ``ObjectMeta`` (``PersistentVolume``, ``StorageClass`` ...)."""

    @property
    def metadata(self) -> ObjectMeta: ...


def _key(name: str, namespace: str) -> str:
    return f"{namespace}/{name}" if namespace else name


#: Changes :meth:`ObjectStore.changes` remembers per kind.
CHANGE_LOG_SIZE = 4096


class ObjectStore:
    """Objects by kind (their Python type) and ``namespace/name`` (``name`` if cluster-scoped).

    Objects are values: a change replaces the stored object. :meth:`version` counts the changes
    to a kind, so a reader can cache what it derives from all objects of that kind, and
    :meth:`changes` tells what the last changes were, so that it can catch up incrementally.
    """

    __slots__ = ("_by_kind", "_log", "_versions")

    def __init__(self) -> None:
        self._by_kind: dict[type[Any], dict[str, Any]] = {}
        self._versions: dict[type[Any], int] = {}
        self._log: dict[type[Any], deque[tuple[Any, Any]]] = {}

    def _changed(self, kind: type[Any], old: Any, new: Any) -> None:
        self._versions[kind] = self._versions.get(kind, 0) + 1
        log = self._log.get(kind)
        if log is None:
            log = self._log[kind] = deque(maxlen=CHANGE_LOG_SIZE)
        log.append((old, new))

    def set(self, obj: StoredObject) -> None:
        """Add or replace ``obj``."""
        kind = type(obj)
        meta = obj.metadata
        objects = self._by_kind.setdefault(kind, {})
        key = _key(meta.name, meta.namespace)
        old = objects.get(key)
        objects[key] = obj
        self._changed(kind, old, obj)

    def delete(self, kind: type[T], name: str, namespace: str = "") -> T | None:
        """Forget an object; the one forgotten, if it was there."""
        objects = self._by_kind.get(kind)
        if objects is None:
            return None
        gone = objects.pop(_key(name, namespace), None)
        if gone is not None:
            self._changed(kind, gone, None)
        return cast("T | None", gone)

    def changes(self, kind: type[T], since: int) -> list[tuple[T | None, T | None]] | None:
        """``(old, new)`` for each change to ``kind`` after :meth:`version` was ``since``, oldest
        first (``old`` is ``None`` for an addition, ``new`` for a deletion); ``None`` when the
        log no longer reaches back that far (read every object again then)."""
        n = self._versions.get(kind, 0) - since
        if n <= 0:
            return []
        log = self._log.get(kind)
        if log is None or n > len(log) or since < 0:
            return None
        return list(itertools.islice(log, len(log) - n, None))

    def get(self, kind: type[T], name: str, namespace: str = "") -> T | None:
        """The object of ``kind`` named ``name`` (in ``namespace`` if namespaced)."""
        objects = self._by_kind.get(kind)
        if objects is None:
            return None
        return cast("T | None", objects.get(_key(name, namespace)))

    def list(self, kind: type[T]) -> Iterable[T]:
        """Every object of ``kind`` (a live view: do not change the store while iterating)."""
        return cast("Iterable[T]", self._by_kind.get(kind, {}).values())

    def count(self, kind: type[Any]) -> int:
        return len(self._by_kind.get(kind, {}))

    def version(self, kind: type[Any]) -> int:
        """How many times objects of ``kind`` were set or deleted."""
        return self._versions.get(kind, 0)
