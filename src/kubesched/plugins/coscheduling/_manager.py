"""The PodGroup manager: which pods belong to which group, and the group-level decisions
(``core.PodGroupManager`` of scheduler-plugins).

Members come from their own informer (:data:`~._api.MEMBER_KIND`, every pod carrying the
pod-group label) through the snapshot's object store; the index is caught up from the store's
change log, so a scheduling cycle pays only for what changed since the last one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from kubesched import KubeschedError
from kubesched.api import CPU, PODS, QuantityError, quantity_milli_value, quantity_value
from kubesched.framework import Snapshot
from kubesched.plugins.coscheduling._api import POD_GROUP_LABEL, Member, PodGroup

#: ``namespace/name`` of a PodGroup.
GroupKey = str


def group_key(namespace: str, name: str) -> GroupKey:
    return f"{namespace}/{name}"


def parse_time(text: str | None) -> float | None:
    """Epoch seconds of an RFC 3339 time, or ``None``."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Members:
    """Member pods by group, kept in step with the object store's :class:`Member` objects.

    ``on_gone(group, uid)`` is told of every member deleted or finished (as kube-scheduler's pod
    informer, which leaves finished pods out, reports them deleted).
    """

    def __init__(
        self, snapshot: Snapshot, on_gone: Callable[[GroupKey, str], None] | None = None
    ) -> None:
        self._objects = snapshot.objects
        self._on_gone = on_gone
        self._by_group: dict[GroupKey, dict[str, Member]] = {}
        self._version = 0
        #: Groups whose members changed since :meth:`take_changed` was last called.
        self._changed: set[GroupKey] = set()

    def sync(self) -> None:
        version = self._objects.version(Member)
        if version == self._version:
            return
        changes = self._objects.changes(Member, self._version)
        if changes is None:
            before = {(k, uid) for k, group in self._by_group.items() for uid in group}
            self._changed.update(self._by_group)
            self._by_group.clear()
            for m in self._objects.list(Member):
                self._add(m)
            for key, uid in before:
                now = self._by_group.get(key, {}).get(uid)
                if now is None or now.terminal:
                    self._gone(key, uid)
        else:
            for old, new in changes:
                if old is not None:
                    self._remove(old)
                if new is not None:
                    self._add(new)
                if old is not None and (new is None or new.terminal):
                    name = old.metadata.labels.get(POD_GROUP_LABEL)
                    if name:
                        self._gone(group_key(old.metadata.namespace, name), old.metadata.uid)
        self._version = version

    def _gone(self, key: GroupKey, uid: str) -> None:
        if self._on_gone is not None:
            self._on_gone(key, uid)

    def _add(self, m: Member) -> None:
        name = m.metadata.labels.get(POD_GROUP_LABEL)
        if name:
            key = group_key(m.metadata.namespace, name)
            self._by_group.setdefault(key, {})[m.metadata.uid] = m
            self._changed.add(key)

    def _remove(self, m: Member) -> None:
        name = m.metadata.labels.get(POD_GROUP_LABEL)
        if not name:
            return
        key = group_key(m.metadata.namespace, name)
        group = self._by_group.get(key)
        if group is not None and group.pop(m.metadata.uid, None) is not None:
            self._changed.add(key)
            if not group:
                del self._by_group[key]

    def of(self, key: GroupKey) -> Iterable[Member]:
        """Every member of the group, terminal ones included."""
        self.sync()
        return self._by_group.get(key, {}).values()

    def take_changed(self) -> set[GroupKey]:
        self.sync()
        changed, self._changed = self._changed, set()
        return changed


class _Expiring:
    """Keys that count for a while (go-cache's ``Add`` with an expiry, ``Get``, ``Delete``)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._until: dict[str, float] = {}
        self._clock = clock

    def add(self, key: str, seconds: float) -> None:
        self._until[key] = self._clock() + seconds

    def __contains__(self, key: object) -> bool:
        until = self._until.get(key) if isinstance(key, str) else None
        if until is None:
            return False
        if until <= self._clock():
            del self._until[key]  # type: ignore[arg-type]
            return False
        return True

    def discard(self, key: str) -> None:
        self._until.pop(key, None)


class MinResourcesError(KubeschedError, ValueError):
    """A ``spec.minResources`` quantity that does not parse; the message names the field."""


def min_resources(pg: PodGroup) -> dict[str, int]:
    """``spec.minResources`` in scheduler units (cpu in millicores), plus ``pods: minMember``."""
    out: dict[str, int] = {}
    for name, q in pg.spec.min_resources.items():
        try:
            out[name] = quantity_milli_value(q) if name == CPU else quantity_value(q)
        except (QuantityError, ValueError, TypeError) as err:
            raise MinResourcesError(
                f"PodGroup {group_key(pg.metadata.namespace, pg.metadata.name)}: "
                f"spec.minResources.{name}: {q!r} is not a quantity"
            ) from err
    out[PODS] = pg.spec.min_member
    return out


def resource_gap(
    snapshot: Snapshot, need: Mapping[str, int], own: Mapping[int, Mapping[str, int]]
) -> dict[str, int]:
    """``CheckClusterResource``: what is missing of ``need`` after taking each node's free room
    in turn (allocatable minus requested, the group's own pods ``own`` (slot -> requests) not
    counted as requested, their count under ``pods``). Empty when the nodes have room for all
    of it."""
    table = snapshot.table
    slots = snapshot.present_slots()
    gap: dict[str, int] = {}
    for name, amount in need.items():
        col = table.resource_column(name)
        if col is None:
            free = np.zeros(len(slots), dtype=np.int64)
        else:
            free = table.allocatable[slots, col] - table.requested[slots, col]
        if own:
            index = {int(s): i for i, s in enumerate(slots.tolist())}
            for slot, requests in own.items():
                i = index.get(slot)
                if i is not None:
                    free[i] += requests.get(name, 0)
        # Node by node the remaining need shrinks by the node's free room; it is met once it
        # reaches zero, that is once a running total of free room reaches the need.
        running = np.cumsum(free)
        if not len(running) or int(running.max()) < amount:
            gap[name] = amount - (int(running[-1]) if len(running) else 0)
    return gap


@dataclass(slots=True)
class GroupState:
    """What the plugin remembers of the groups between cycles."""

    clock: Callable[[], float] = time.monotonic
    #: Pods of a group that reached Permit here (assumed or bound), by UID.
    assigned: dict[GroupKey, set[str]] = field(default_factory=dict)
    #: When a group's last attempt failed (monotonic), for QueueSort's head-of-line fairness.
    last_failed: dict[GroupKey, float] = field(default_factory=dict)
    permitted: _Expiring = field(init=False)
    backed_off: _Expiring = field(init=False)

    def __post_init__(self) -> None:
        self.permitted = _Expiring(self.clock)
        self.backed_off = _Expiring(self.clock)

    def assigned_uids(self, key: GroupKey, members: Iterable[Member]) -> set[str]:
        """Members placed: reached Permit here, or bound and not finished."""
        uids = set(self.assigned.get(key, ()))
        uids.update(m.metadata.uid for m in members if m.spec.node_name and not m.terminal)
        return uids

    def assign(self, key: GroupKey, uid: str) -> None:
        self.assigned.setdefault(key, set()).add(uid)

    def unassign(self, key: GroupKey, uid: str) -> None:
        uids = self.assigned.get(key)
        if uids is not None:
            uids.discard(uid)
            if not uids:
                del self.assigned[key]

    def mark_failure(self, key: GroupKey) -> None:
        self.last_failed[key] = self.clock()

    def clear_failure(self, key: GroupKey) -> None:
        self.last_failed.pop(key, None)
