"""The PV and PVC assume cache: the store's objects, overlaid with the bindings the scheduler
decided but the API server does not show yet.

kube-scheduler's ``AssumeCache`` keeps, per object, the informer's latest version and an
"assumed" one (a PV with the ``claimRef`` Reserve put there, a PVC with the selected-node
annotation). Reads see the assumed object until the informer delivers a newer one, which then
wins; ``restore`` drops the assumption (Unreserve). Here the informer's objects live in the
snapshot's :class:`~kubesched.framework.ObjectStore`: an assumption remembers the stored object it
was made on, and stops applying as soon as the store holds another object under that name.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from kubesched import KubeschedError
from kubesched.api import (
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    persistent_volume_class,
)
from kubesched.framework import ObjectStore

T = TypeVar("T", PersistentVolume, PersistentVolumeClaim)


class AssumeError(KubeschedError):
    """An object cannot be assumed (it is not in the store)."""


class _Overlay(Generic[T]):
    __slots__ = ("_assumed", "_kind", "_store", "changes")

    def __init__(self, store: ObjectStore, kind: type[T]) -> None:
        self._store = store
        self._kind: type[T] = kind
        #: key -> (the stored object the assumption was made on, the assumed object).
        self._assumed: dict[tuple[str, str], tuple[T, T]] = {}
        #: How many assumptions were made or restored (what :meth:`get` answers beside the
        #: store's own changes).
        self.changes = 0

    def get(self, name: str, namespace: str = "") -> T | None:
        """The assumed object if its base is still the stored one, else the stored one."""
        stored = self._store.get(self._kind, name, namespace)
        entry = self._assumed.get((namespace, name))
        if entry is not None:
            if stored is entry[0]:
                return entry[1]
            del self._assumed[(namespace, name)]
        return stored

    def api_object(self, name: str, namespace: str = "") -> T | None:
        """The object as the API server last reported it (``GetAPIPV``/``GetAPIPVC``)."""
        return self._store.get(self._kind, name, namespace)

    def assume(self, obj: T) -> None:
        meta = obj.metadata
        stored = self._store.get(self._kind, meta.name, meta.namespace)
        if stored is None:
            raise AssumeError(f"{self._kind.__name__} {_key(meta.namespace, meta.name)} not found")
        if _newer(stored.metadata.resource_version, meta.resource_version):
            raise AssumeError(
                f"{self._kind.__name__} {_key(meta.namespace, meta.name)} has a newer version "
                f"{stored.metadata.resource_version} than {meta.resource_version}"
            )
        self._assumed[(meta.namespace, meta.name)] = (stored, obj)
        self.changes += 1

    def restore(self, name: str, namespace: str = "") -> None:
        if self._assumed.pop((namespace, name), None) is not None:
            self.changes += 1

    def __len__(self) -> int:
        return len(self._assumed)


class AssumeCache:
    """PVs and PVCs as VolumeBinding sees them: stored objects, with its own assumptions."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.pvs: _Overlay[PersistentVolume] = _Overlay(store, PersistentVolume)
        self.pvcs: _Overlay[PersistentVolumeClaim] = _Overlay(store, PersistentVolumeClaim)
        self._by_class: dict[str, list[str]] = {}
        self._by_class_version = -1

    def version(self) -> tuple[int, ...]:
        """A value that changes whenever what the cache answers may: the stored PVs, claims
        and storage classes, or an assumption."""
        store = self.store
        return (
            store.version(PersistentVolume),
            store.version(PersistentVolumeClaim),
            store.version(StorageClass),
            self.pvs.changes,
            self.pvcs.changes,
        )

    def pvs_of_class(self, class_name: str) -> list[PersistentVolume]:
        """``ListPVs(className)``: the PVs of a storage class, assumptions applied."""
        version = self.store.version(PersistentVolume)
        if version != self._by_class_version:
            index: dict[str, list[str]] = {}
            for pv in self.store.list(PersistentVolume):
                index.setdefault(persistent_volume_class(pv), []).append(pv.metadata.name)
            self._by_class = index
            self._by_class_version = version
        out = []
        for name in self._by_class.get(class_name, ()):
            current = self.pvs.get(name)
            # An assumption never changes a PV's class.
            if current is not None:
                out.append(current)
        return out


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def resource_version_int(rv: str) -> int | None:
    try:
        return int(rv)
    except ValueError:
        return None


def _newer(a: str, b: str) -> bool:
    """Whether resourceVersion ``a`` is newer than ``b`` (unparsable ones compare equal)."""
    x, y = resource_version_int(a), resource_version_int(b)
    return x is not None and y is not None and x > y
