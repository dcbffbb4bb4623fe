"""The devices allocated claims take, kept up to date claim by claim.

Each binding changes a claim (its allocation, its ``reservedFor``), so a set rebuilt from every
claim whenever one changes costs a pass over all claims per scheduling cycle: 5,000 claims in
scheduler_perf's SchedulingWithResourceClaimTemplate. Here a change recounts the changed claims
alone, and each pool has a version that moves when its taken devices do, so that an answer the
allocator gave on a node can be kept while the node's pools are untouched.
"""

from __future__ import annotations

import itertools
from collections import Counter, deque
from collections.abc import Callable, Mapping

from kubesched.api import ResourceClaim
from kubesched.framework import ObjectStore
from kubesched.plugins.dynamic_resources._allocator import DeviceID

#: A pool by its driver and name.
PoolKey = tuple[str, str]

_NONE: frozenset[DeviceID] = frozenset()
#: Pool changes :meth:`TakenDevices.changed_since` can look back over.
_LOG_SIZE = 4096


class TakenDevices:
    """Devices of every allocated claim and of the allocations in flight (admin access takes
    none): :attr:`devices` is the allocator's ``allocated`` set.

    Claims changed in the store are found in its change log; the plugin's own overlays (claims
    allocated in flight, claims as PreBind wrote them) are marked with :meth:`touch`. The whole
    store is read again only when the log no longer reaches back.
    """

    __slots__ = (
        "_count",
        "_dirty",
        "_held",
        "_log",
        "_pool_versions",
        "_stamps",
        "_version",
        "devices",
        "stamp",
    )

    def __init__(self) -> None:
        self.devices: set[DeviceID] = set()
        self._count: Counter[DeviceID] = Counter()
        #: ``namespace/name`` -> the devices that claim takes.
        self._held: dict[tuple[str, str], frozenset[DeviceID]] = {}
        self._pool_versions: dict[PoolKey, int] = {}
        # Versions are never reused, so that a kept answer cannot match a pool by accident.
        self._stamps = itertools.count(1)
        #: The last version given to a pool (0: none yet).
        self.stamp = 0
        #: The pools whose versions moved, with the version each got, oldest first.
        self._log: deque[tuple[int, PoolKey]] = deque(maxlen=_LOG_SIZE)
        self._version = -1
        self._dirty: set[tuple[str, str]] = set()

    def touch(self, namespace: str, name: str) -> None:
        """The plugin's view of claim ``namespace/name`` changed (in flight, or assumed)."""
        self._dirty.add((namespace, name))

    def changed_since(self, stamp: int) -> set[PoolKey] | None:
        """The pools whose taken devices changed after :attr:`stamp` was ``stamp``; ``None``
        when that is further back than the log reaches."""
        if stamp == self.stamp:
            return set()
        log = self._log
        if not log or log[0][0] > stamp + 1:
            return None
        out: set[PoolKey] = set()
        for version, pool in reversed(log):
            if version <= stamp:
                break
            out.add(pool)
        return out

    def versions(self, pools: tuple[PoolKey, ...]) -> tuple[int, ...]:
        """Per pool, a number that changes whenever the pool's taken devices do."""
        get = self._pool_versions.get
        return tuple([get(k, 0) for k in pools])

    def update(
        self,
        store: ObjectStore,
        effective: Callable[[ResourceClaim], ResourceClaim],
        in_flight: Mapping[str, ResourceClaim],
    ) -> None:
        """Recount the claims changed since the last call. ``effective`` gives a stored claim
        as the plugin sees it; ``in_flight`` holds the claims allocated in flight, by UID."""
        changes = store.changes(ResourceClaim, self._version)
        self._version = store.version(ResourceClaim)
        dirty = self._dirty
        if changes is None:
            dirty.update((c.metadata.namespace, c.metadata.name) for c in store.list(ResourceClaim))
            dirty.update(self._held)
            dirty.update((c.metadata.namespace, c.metadata.name) for c in in_flight.values())
        else:
            for old, new in changes:
                for c in (old, new):
                    if c is not None:
                        dirty.add((c.metadata.namespace, c.metadata.name))
        if not dirty:
            return
        self._dirty = set()
        # Made when first needed: up to a thousand claims may be in flight.
        orphans: dict[tuple[str, str], list[ResourceClaim]] | None = None
        for key in dirty:
            stored = store.get(ResourceClaim, key[1], key[0])
            if stored is not None:
                claim = in_flight.get(stored.metadata.uid) or effective(stored)
                self._set(key, _devices_of(claim))
                continue
            # Allocated in flight, and gone from the store meanwhile: still taken.
            if orphans is None:
                orphans = {}
                for c in in_flight.values():
                    orphans.setdefault((c.metadata.namespace, c.metadata.name), []).append(c)
            self._set(key, frozenset().union(*map(_devices_of, orphans.get(key, ()))))

    def _set(self, key: tuple[str, str], devices: frozenset[DeviceID]) -> None:
        old = self._held.get(key, _NONE)
        if old == devices:
            return
        if devices:
            self._held[key] = devices
        else:
            del self._held[key]
        count = self._count
        for d in old - devices:
            count[d] -= 1
            if not count[d]:
                del count[d]
                self.devices.discard(d)
                self._moved(d[:2])
        for d in devices - old:
            count[d] += 1
            if count[d] == 1:
                self.devices.add(d)
                self._moved(d[:2])

    def _moved(self, pool: PoolKey) -> None:
        self.stamp = stamp = next(self._stamps)
        self._pool_versions[pool] = stamp
        self._log.append((stamp, pool))


def _devices_of(claim: ResourceClaim) -> frozenset[DeviceID]:
    allocation = claim.status.allocation
    if allocation is None:
        return _NONE
    return frozenset(
        (r.driver, r.pool, r.device) for r in allocation.devices.results if not r.admin_access
    )


__all__ = ["PoolKey", "TakenDevices"]
