"""Pods per topology domain, kept across scheduling cycles.

Inter-pod affinity asks, for each pod to schedule, how many existing pods some term selects in
each domain of the term's topology key (zone, hostname, ...), and the same for the terms of
existing pods that select the pod. Counted afresh, that is a pass over every counted pod per
term per cycle (``np.bincount`` over the rows of the :class:`PodTable`), while between two cycles
one or two pods come or go. So the counts are kept per question and brought up to date from the
pod table's change records (:meth:`PodTable.changes_since`). A pod's domain is its node's label:
a change to any Node (not only to the pods counted there) counts everything again.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

import numpy as np

from kubesched.framework._pods import PodGroup, PodTable
from kubesched.framework._table import MANY_ROWS, BoolArray, IdArray, IntArray, NodeTable

#: Questions kept, least recently asked dropped first: two arrays of one int64 per domain each.
KEPT = 64

#: Whether a group's pods are selected, and the weight each adds to its domain.
GroupWeight = Callable[[PodGroup], tuple[bool, int]]
#: The same for every group id at once (weights ``None``: 1 each), for a count afresh.
GroupMasks = Callable[[], tuple[BoolArray, IntArray | None]]


class DomainTally:
    """Per value id of the topology key's column (0: nodes without the label): how many
    selected pods are there (:attr:`pods`) and the sum of their weights (:attr:`weighted`).
    Read-only for callers."""

    __slots__ = ("groups", "layout", "pods", "table_version", "total", "version", "weighted")

    def __init__(
        self, table: NodeTable, pods: PodTable, pod_count: IntArray, weighted: IntArray
    ) -> None:
        self.pods = pod_count
        self.weighted = weighted
        #: ``pods.sum()``, kept as the counts change.
        self.total = int(pod_count.sum())
        self.version = pods.version
        self.table_version = table.version
        self.layout = table.layout
        #: Group id -> (that group, selected, weight), as found when counting changes.
        self.groups: dict[int, tuple[PodGroup, bool, int]] = {}

    @property
    def selected(self) -> bool:
        """Whether some selected pod is counted (on a node with the label or not)."""
        return self.total > 0

    @property
    def hit(self) -> bool:
        """Whether some selected pod is on a node with the label."""
        return self.total > int(self.pods[0])


class KeptDomainCounts:
    """:class:`DomainTally` per question, kept while the nodes stay as they are."""

    __slots__ = ("_entries", "_pods")

    def __init__(self) -> None:
        self._entries: dict[Hashable, DomainTally] = {}
        self._pods: PodTable | None = None

    def get(
        self,
        table: NodeTable,
        pods: PodTable,
        key: Hashable,
        topology_key: str,
        weigh: GroupWeight,
        masks: GroupMasks,
    ) -> DomainTally | None:
        """The tally of the pods ``weigh`` selects by the value of ``topology_key`` on their
        node; ``None`` when no node has ever had that label. ``key`` names the question: the
        same key must always mean the same ``weigh`` and ``masks``, which agree group by group.
        """
        col = table.labels.get(topology_key)
        if col is None:
            return None
        if pods is not self._pods:
            self._entries.clear()
            self._pods = pods
        entry = self._entries.pop((key, topology_key), None)
        if entry is None or not self._bring_up_to_date(entry, table, pods, col.ids, weigh):
            entry = _count(table, pods, col.ids, len(col.values), masks)
        self._entries[(key, topology_key)] = entry
        if len(self._entries) > KEPT:
            del self._entries[next(iter(self._entries))]
        return entry

    @staticmethod
    def _bring_up_to_date(
        entry: DomainTally,
        table: NodeTable,
        pods: PodTable,
        value_ids: IdArray,
        weigh: GroupWeight,
    ) -> bool:
        """Count the pod changes since the entry was made; ``False`` to count afresh."""
        if entry.layout != table.layout:
            return False
        if entry.table_version != table.version:
            rows = table.changed_rows_since(entry.table_version)
            if rows is None or rows[0]:
                return False
            entry.table_version = table.version
        if entry.version == pods.version:
            return True
        changes = pods.changes_since(entry.version)
        if changes is None or len(changes) > MANY_ROWS:
            return False
        counts, weighted, groups = entry.pods, entry.weighted, entry.groups
        for slot, group, delta in changes:
            known = groups.get(group.gid)
            if known is None or known[0] is not group:
                selected, weight = weigh(group)
                groups[group.gid] = (group, selected, weight)
            else:
                _, selected, weight = known
            if not selected:
                continue
            vid = int(value_ids[slot])
            if vid >= len(counts):
                return False
            counts[vid] += delta
            weighted[vid] += delta * weight
            entry.total += delta
        entry.version = pods.version
        return True


def _count(
    table: NodeTable, pods: PodTable, value_ids: IdArray, n_values: int, masks: GroupMasks
) -> DomainTally:
    group_mask, group_weights = masks()
    gids = pods.group_ids[: pods.size]
    # Free rows point at group id 0, which no group has.
    rows = group_mask[gids] & (gids != 0)
    vids = value_ids.take(pods.slots[: pods.size][rows])
    counts = np.bincount(vids, minlength=n_values).astype(np.int64)
    if group_weights is None:
        weighted = counts.copy()
    else:
        # Sums of integers far below 2**53: exact in float64.
        w = group_weights[gids][rows].astype(np.float64)
        weighted = np.bincount(vids, weights=w, minlength=n_values).astype(np.int64)
    return DomainTally(table, pods, counts, weighted)


__all__ = ["KEPT", "DomainTally", "GroupMasks", "GroupWeight", "KeptDomainCounts"]
