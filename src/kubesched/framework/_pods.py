"""The PodTable: the pods a snapshot counts, as numpy columns, for counting pods per topology.

Inter-pod affinity and topology spreading ask, for each pod to schedule, how many existing pods
match a label selector in each topology domain (zone, hostname, ...). kube-scheduler answers by
visiting every pod on every node. Here each counted pod is a *row*: its node slot, whether it is
terminating, and a *group* id. Pods in one group share namespace, labels and pod (anti-)affinity,
so a selector or an affinity term is evaluated once per group, and the per-node or per-domain
counts follow from ``np.bincount`` over the rows. The pods of a Deployment form one group, so a
cluster of 10,000 pods typically has a few hundred groups.

Groups are reference-counted: a group id is reused once its last pod is gone, so groups of pods
with unique labels (StatefulSet pods) do not accumulate. Rows are reused the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec
import numpy as np

from kubesched.api import Affinity, Pod
from kubesched.framework._table import BoolArray, IdArray, IntArray

_INITIAL_ROWS = 256

GroupKey = tuple[str, tuple[tuple[str, str], ...], bytes]


class PodGroup:
    """Pods that share namespace, labels and ``spec.affinity`` pod (anti-)affinity.

    ``pod`` is one of them (the first counted), for reading fields the group key covers.
    ``memo`` is scratch space for plugins to keep what they derive from the group (parsed
    affinity terms); it lives as long as the group.
    """

    __slots__ = ("affinity", "gid", "labels", "memo", "namespace", "pod")

    def __init__(self, gid: int, pod: Pod) -> None:
        self.gid = gid
        self.pod = pod
        self.namespace = pod.metadata.namespace
        self.labels = pod.metadata.labels
        a = pod.spec.affinity
        self.affinity: Affinity | None = (
            a
            if a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)
            else None
        )
        self.memo: dict[str, Any] = {}


def _group_key(pod: Pod) -> GroupKey:
    a = pod.spec.affinity
    affinity = b""
    if a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None):
        affinity = msgspec.json.encode((a.pod_affinity, a.pod_anti_affinity))
    labels = tuple(sorted(pod.metadata.labels.items()))
    return (pod.metadata.namespace, labels, affinity)


class PodTable:
    """Rows over the pods of a snapshot. Mutated only by :class:`~kubesched.framework.Snapshot`.

    ``slots[:size]`` is each row's node slot (-1 for a free row), ``group_ids[:size]`` its group
    (0 for a free row), ``terminating[:size]`` whether the pod has a deletion timestamp.
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
        #: Group id -> group; id 0 is never used (free rows point at it).
        self.groups: list[PodGroup | None] = [None]
        self._refs: list[int] = [0]
        self._index: dict[GroupKey, int] = {}
        self._keys: list[GroupKey | None] = [None]
        self._free_groups: list[int] = []
        #: Ids of the groups whose pods have pod affinity or anti-affinity.
        self.with_affinity: set[int] = set()

    def __len__(self) -> int:
        return len(self._rows)

    # -- reading ---------------------------------------------------------------------------

    def live_groups(self) -> Iterator[PodGroup]:
        for g in self.groups:
            if g is not None:
                yield g

    def group_of(self, uid: str) -> PodGroup | None:
        row = self._rows.get(uid)
        return None if row is None else self.groups[int(self.group_ids[row])]

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
                self._grow()
            self.size += 1
        gid = self._intern(pod)
        self._rows[uid] = row
        self.slots[row] = slot
        self.group_ids[row] = gid
        self.terminating[row] = pod.metadata.deletion_timestamp is not None

    def remove(self, uid: str) -> None:
        row = self._rows.pop(uid, None)
        if row is None:
            return
        gid = int(self.group_ids[row])
        self.slots[row] = -1
        self.group_ids[row] = 0
        self.terminating[row] = False
        self._free_rows.append(row)
        self._release(gid)

    def _intern(self, pod: Pod) -> int:
        key = _group_key(pod)
        gid = self._index.get(key)
        if gid is None:
            gid = self._free_groups.pop() if self._free_groups else len(self.groups)
            group = PodGroup(gid, pod)
            if gid == len(self.groups):
                self.groups.append(group)
                self._refs.append(0)
                self._keys.append(key)
            else:
                self.groups[gid] = group
                self._keys[gid] = key
            self._index[key] = gid
            if group.affinity is not None:
                self.with_affinity.add(gid)
        self._refs[gid] += 1
        return gid

    def _release(self, gid: int) -> None:
        self._refs[gid] -= 1
        if self._refs[gid] > 0:
            return
        key = self._keys[gid]
        assert key is not None
        del self._index[key]
        self.groups[gid] = None
        self._keys[gid] = None
        self.with_affinity.discard(gid)
        self._free_groups.append(gid)

    def _grow(self) -> None:
        cap = len(self.slots) * 2
        slots = np.full(cap, -1, dtype=np.int64)
        slots[: len(self.slots)] = self.slots
        gids = np.zeros(cap, dtype=np.int32)
        gids[: len(self.group_ids)] = self.group_ids
        term = np.zeros(cap, dtype=np.bool_)
        term[: len(self.terminating)] = self.terminating
        self.slots, self.group_ids, self.terminating = slots, gids, term
