"""The PodTable: the pods a snapshot counts, as numpy columns, for counting pods per topology.

Inter-pod affinity and topology spreading ask, for each pod to schedule, how many existing pods
match a label selector in each topology domain (zone, hostname, ...). kube-scheduler answers by
visiting every pod on every node. Here each counted pod is a *row*: its node slot, whether it is
terminating, and a *group* id. Pods in one group share namespace, labels and pod (anti-)affinity;
groups have columns of their own (namespace, one interned column per label key), so a selector is
evaluated over all groups with a few numpy operations, and per-node or per-domain counts follow
from ``np.bincount`` over the rows. The pods of a Deployment form one group.

Groups whose pods have the same namespace and pod (anti-)affinity share an *affinity class*: the
terms of a StatefulSet's pods are the same even though each pod's labels differ, so they are
read once per class.

Groups and classes are reference-counted and their ids reused once their last pod is gone, so
pods with unique labels do not accumulate; rows are reused the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from typing import Any

import msgspec
import numpy as np

from kubesched.api import Affinity, Pod
from kubesched.framework._table import BoolArray, IdArray, IntArray, InternedColumn

_INITIAL_ROWS = 256
_INITIAL_GROUPS = 64
#: A label column is rebuilt when it holds this many values and four times the live groups.
_COMPACT_AT = 4096
#: How many row changes :meth:`PodTable.changes_since` remembers; a reader further behind counts
#: everything again.
_MAX_CHANGES = 4096

#: A change of rows: the node slot, the pod's group, +1 (counted) or -1 (no longer counted).
RowChange = tuple[int, "PodGroup", int]

ClassKey = tuple[str, bytes]
GroupKey = tuple[str, tuple[tuple[str, str], ...], bytes]


class AffinityClass:
    """Pods of one namespace with the same ``spec.affinity`` pod affinity and anti-affinity.

    ``pod`` is one of them, ``memo`` scratch space for plugins (parsed terms); both live as long
    as the class.
    """

    __slots__ = ("affinity", "cid", "memo", "namespace", "pod")

    def __init__(self, cid: int, pod: Pod, affinity: Affinity) -> None:
        self.cid = cid
        self.pod = pod
        self.namespace = pod.metadata.namespace
        self.affinity = affinity
        self.memo: dict[str, Any] = {}


class PodGroup:
    """Pods that share namespace, labels and pod (anti-)affinity.

    ``pod`` is one of them (the first counted); ``affinity_class`` is the id of their
    :class:`AffinityClass`, 0 when they have no pod affinity or anti-affinity. ``memo`` is
    scratch space for plugins; it lives as long as the group.
    """

    __slots__ = ("affinity", "affinity_class", "gid", "labels", "memo", "namespace", "pod")

    def __init__(self, gid: int, pod: Pod, affinity: Affinity | None, affinity_class: int) -> None:
        self.gid = gid
        self.pod = pod
        self.namespace = pod.metadata.namespace
        self.labels = pod.metadata.labels
        self.affinity = affinity
        self.affinity_class = affinity_class
        self.memo: dict[str, Any] = {}


def _pod_affinity(pod: Pod) -> tuple[Affinity | None, bytes]:
    a = pod.spec.affinity
    if a is None or (a.pod_affinity is None and a.pod_anti_affinity is None):
        return None, b""
    return a, msgspec.json.encode((a.pod_affinity, a.pod_anti_affinity))


class _Refs:
    """Reference-counted ids with reuse; id 0 is never handed out."""

    def __init__(self) -> None:
        self.refs: list[int] = [0]
        self.free: list[int] = []

    def new(self) -> int:
        if self.free:
            i = self.free.pop()
        else:
            i = len(self.refs)
            self.refs.append(0)
        return i

    def hold(self, i: int) -> None:
        self.refs[i] += 1

    def release(self, i: int) -> bool:
        """Drop a reference; ``True`` when it was the last (the id is free again)."""
        self.refs[i] -= 1
        if self.refs[i] > 0:
            return False
        self.free.append(i)
        return True


class PodTable:
    """Rows over the pods of a snapshot. Mutated only by :class:`~kubesched.framework.Snapshot`.

    Per row (``[:size]``): ``slots`` (node slot, -1 for a free row), ``group_ids`` (0 for a free
    row), ``terminating``. Per group id (``[:len(groups)]``): ``group_class`` (affinity class,
    0 for none), :attr:`namespaces` and :meth:`label` columns (``None`` where a group has no such
    label or the id is unused).
    """

    def __init__(self) -> None:
        cap = _INITIAL_ROWS
        self.slots: IntArray = np.full(cap, -1, dtype=np.int64)
        self.group_ids: IdArray = np.zeros(cap, dtype=np.int32)
        self.terminating: BoolArray = np.zeros(cap, dtype=np.bool_)
        #: Rows in use are below ``size``.
        self.size = 0
        self._rows: dict[str, int] = {}
        self._free_rows: list[int] = []

        gcap = _INITIAL_GROUPS
        self._gcap = gcap
        #: Group id -> group; id 0 is never used (free rows point at it).
        self.groups: list[PodGroup | None] = [None]
        self._group_refs = _Refs()
        self._group_index: dict[GroupKey, int] = {}
        self._group_keys: list[GroupKey | None] = [None]
        self.group_class: IdArray = np.zeros(gcap, dtype=np.int32)
        self.namespaces: InternedColumn[str | None] = InternedColumn(gcap, None)
        self._labels: dict[str, InternedColumn[str | None]] = {}

        #: Affinity class id -> class; id 0 is never used.
        self.classes: list[AffinityClass | None] = [None]
        self._class_refs = _Refs()
        self._class_index: dict[ClassKey, int] = {}
        self._class_keys: list[ClassKey | None] = [None]
        #: Bumped whenever an affinity class comes or goes.
        self.classes_version = 0

        #: How many row changes there have been (see :meth:`changes_since`).
        self.version = 0
        # Version ``_changes_base + i + 1`` made ``_changes[i]``.
        self._changes: list[RowChange] = []
        self._changes_base = 0

    def __len__(self) -> int:
        return len(self._rows)

    # -- reading ---------------------------------------------------------------------------

    def live_groups(self) -> Iterator[PodGroup]:
        for g in self.groups:
            if g is not None:
                yield g

    def affinity_classes(self) -> Iterator[AffinityClass]:
        for c in self.classes:
            if c is not None:
                yield c

    def group_of(self, uid: str) -> PodGroup | None:
        row = self._rows.get(uid)
        return None if row is None else self.groups[int(self.group_ids[row])]

    def label(self, key: str) -> InternedColumn[str | None] | None:
        """The column of label ``key`` over group ids, ``None`` if no group ever had it."""
        return self._labels.get(key)

    def label_mask(self, key: str, fn: Callable[[str | None], bool]) -> BoolArray:
        """``fn`` of each group's value of label ``key`` (``None`` when absent), evaluated once
        per distinct value; indexed by group id (unused ids included, read as ``None``)."""
        n = len(self.groups)
        col = self._labels.get(key)
        if col is None:
            return np.full(n, fn(None), dtype=np.bool_)
        return col.predicate(fn)[:n]

    def namespace_mask(self, names: Collection[str]) -> BoolArray:
        """Groups whose namespace is in ``names``, indexed by group id."""
        names = frozenset(names)
        return self.namespaces.predicate(lambda ns: ns in names)[: len(self.groups)]

    def live_mask(self) -> BoolArray:
        """Group ids in use."""
        live: BoolArray = self.namespaces.ids[: len(self.groups)] != 0
        return live

    def group_lookup(self, fn: Callable[[PodGroup], bool]) -> BoolArray:
        """``fn`` of every live group, indexed by group id (``False`` for unused ids)."""
        out = np.zeros(len(self.groups), dtype=np.bool_)
        for g in self.groups:
            if g is not None and fn(g):
                out[g.gid] = True
        return out

    def rows_where(self, group_mask: BoolArray, *, skip_terminating: bool = False) -> BoolArray:
        """Rows (of ``[:size]``) whose group is set in ``group_mask``."""
        rows = group_mask[self.group_ids[: self.size]]
        if skip_terminating:
            rows &= ~self.terminating[: self.size]
        return rows

    def changes_since(self, version: int) -> list[RowChange] | None:
        """The pods counted and no longer counted after :attr:`version` was ``version``, in
        order; ``None`` when that is too long ago to say. A group in a change is the pod's, even
        if its id has been reused since."""
        if version < self._changes_base:
            return None
        return self._changes[version - self._changes_base :]

    def count_by_slot(self, rows: BoolArray, capacity: int) -> IntArray:
        """How many of ``rows`` are on each node slot, for slots ``[0, capacity)``."""
        return np.bincount(self.slots[: self.size][rows], minlength=capacity).astype(np.int64)

    # -- writing (by the snapshot) ------------------------------------------------------------

    def add(self, uid: str, pod: Pod, slot: int) -> None:
        if uid in self._rows:
            self.remove(uid)
        row = self._free_rows.pop() if self._free_rows else self.size
        if row == self.size:
            if row == len(self.slots):
                self._grow_rows()
            self.size += 1
        gid = self._intern_group(pod)
        self._rows[uid] = row
        self.slots[row] = slot
        self.group_ids[row] = gid
        if pod.metadata.deletion_timestamp is not None:
            self.terminating[row] = True
        group = self.groups[gid]
        assert group is not None
        self._record((slot, group, 1))

    def remove(self, uid: str) -> None:
        row = self._rows.pop(uid, None)
        if row is None:
            return
        gid = int(self.group_ids[row])
        group = self.groups[gid]
        assert group is not None
        self._record((int(self.slots[row]), group, -1))
        self.slots[row] = -1
        self.group_ids[row] = 0
        self.terminating[row] = False
        self._free_rows.append(row)
        self._release_group(gid)

    def _record(self, change: RowChange) -> None:
        self._changes.append(change)
        self.version += 1
        if len(self._changes) > _MAX_CHANGES:
            drop = _MAX_CHANGES // 2
            del self._changes[:drop]
            self._changes_base += drop

    def _intern_group(self, pod: Pod) -> int:
        affinity, affinity_key = _pod_affinity(pod)
        ns = pod.metadata.namespace
        # Labels in the order they came: pods of one template list them alike (the API server
        # writes them sorted), and two groups of identical pods would only cost time.
        key = (ns, tuple(pod.metadata.labels.items()), affinity_key)
        gid = self._group_index.get(key)
        if gid is None:
            cid = 0 if affinity is None else self._intern_class(pod, affinity, (ns, affinity_key))
            gid = self._group_refs.new()
            group = PodGroup(gid, pod, affinity, cid)
            if gid == len(self.groups):
                self.groups.append(group)
                self._group_keys.append(key)
                if gid >= self._gcap:
                    self._grow_groups()
            else:
                self.groups[gid] = group
                self._group_keys[gid] = key
            self._group_index[key] = gid
            self.group_class[gid] = cid
            self.namespaces.set(gid, ns)
            for k, v in pod.metadata.labels.items():
                self._label_column(k).set(gid, v)
        self._group_refs.hold(gid)
        return gid

    def _release_group(self, gid: int) -> None:
        if not self._group_refs.release(gid):
            return
        group = self.groups[gid]
        key = self._group_keys[gid]
        assert group is not None
        assert key is not None
        del self._group_index[key]
        self.groups[gid] = None
        self._group_keys[gid] = None
        self.namespaces.set(gid, None)
        for k in group.labels:
            col = self._labels[k]
            col.set(gid, None)
        if group.affinity_class:
            self._release_class(group.affinity_class)
        self.group_class[gid] = 0

    def _intern_class(self, pod: Pod, affinity: Affinity, key: ClassKey) -> int:
        cid = self._class_index.get(key)
        if cid is None:
            cid = self._class_refs.new()
            cls = AffinityClass(cid, pod, affinity)
            if cid == len(self.classes):
                self.classes.append(cls)
                self._class_keys.append(key)
            else:
                self.classes[cid] = cls
                self._class_keys[cid] = key
            self._class_index[key] = cid
            self.classes_version += 1
        self._class_refs.hold(cid)
        return cid

    def _release_class(self, cid: int) -> None:
        if not self._class_refs.release(cid):
            return
        key = self._class_keys[cid]
        assert key is not None
        del self._class_index[key]
        self.classes[cid] = None
        self._class_keys[cid] = None
        self.classes_version += 1

    def _label_column(self, key: str) -> InternedColumn[str | None]:
        col = self._labels.get(key)
        if col is None:
            col = self._labels[key] = InternedColumn(self._gcap, None)
        elif len(col.values) >= _COMPACT_AT and len(col.values) > 4 * len(self._group_index):
            col = self._labels[key] = self._compacted(col)
        return col

    def _compacted(self, col: InternedColumn[str | None]) -> InternedColumn[str | None]:
        """The column with only the values live groups hold (values of gone pods dropped)."""
        fresh: InternedColumn[str | None] = InternedColumn(self._gcap, None)
        live = np.flatnonzero(col.ids[: len(self.groups)])
        for gid in live.tolist():
            fresh.set(gid, col.get(gid))
        return fresh

    def _grow_rows(self) -> None:
        cap = len(self.slots) * 2
        slots = np.full(cap, -1, dtype=np.int64)
        slots[: len(self.slots)] = self.slots
        gids = np.zeros(cap, dtype=np.int32)
        gids[: len(self.group_ids)] = self.group_ids
        term = np.zeros(cap, dtype=np.bool_)
        term[: len(self.terminating)] = self.terminating
        self.slots, self.group_ids, self.terminating = slots, gids, term

    def _grow_groups(self) -> None:
        cap = self._gcap * 2
        gc = np.zeros(cap, dtype=np.int32)
        gc[: self._gcap] = self.group_class
        self.group_class = gc
        self.namespaces.grow(cap)
        for col in self._labels.values():
            col.grow(cap)
        self._gcap = cap
