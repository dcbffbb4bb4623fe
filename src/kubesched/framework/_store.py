"""Cluster objects other than Nodes and Pods that plugins read, as the front end feeds them.

kube-scheduler's plugins read PersistentVolumes, PersistentVolumeClaims, StorageClasses,
CSINodes ... through listers of shared informers. Here the front end writes such objects into
the snapshot's :class:`ObjectStore` (``kubesched run`` from its reflectors, ``simulate`` from
its manifests) and plugins look them up by kind and name. A kind nobody feeds is simply empty.
"""

from __future__ import annotations

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


class ObjectStore:
    """Objects by kind (their Python type) and ``namespace/name`` (``name`` if cluster-scoped).

    Objects are values: a change replaces the stored object. :meth:`version` counts the changes
    to a kind, so a reader can cache what it derives from all objects of that kind.
    """

    __slots__ = ("_by_kind", "_versions")

    def __init__(self) -> None:
        self._by_kind: dict[type[Any], dict[str, Any]] = {}
        self._versions: dict[type[Any], int] = {}

    def set(self, obj: StoredObject) -> None:
        """Add or replace ``obj``."""
        kind = type(obj)
        meta = obj.metadata
        self._by_kind.setdefault(kind, {})[_key(meta.name, meta.namespace)] = obj
        self._versions[kind] = self._versions.get(kind, 0) + 1

    def delete(self, kind: type[T], name: str, namespace: str = "") -> T | None:
        """Forget an object; the one forgotten, if it was there."""
        objects = self._by_kind.get(kind)
        if objects is None:
            return None
        gone = objects.pop(_key(name, namespace), None)
        if gone is not None:
            self._versions[kind] = self._versions.get(kind, 0) + 1
        return cast("T | None", gone)

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
