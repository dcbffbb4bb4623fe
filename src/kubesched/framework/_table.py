"""The NodeTable: what plugins read about every node, as numpy columns indexed by slot.

kube-scheduler runs each Filter and Score plugin once per node. In Python that loop costs
microseconds per node per plugin; a column operation over all nodes costs about the same as a
handful of loop iterations. So the cache keeps the fields hot plugins need as columns, updated
incrementally when a node or pod changes, never rebuilt per pod.

A *slot* is a node's row. Slots of deleted nodes are reused; ``present`` says which rows hold a
schedulable Node object. Attributes with few distinct values across nodes (label values, taint
sets) are *interned*: the column holds small integer ids, and a predicate is evaluated once per
distinct value and gathered (``lut[ids]``), so matching a node selector against 5,000 nodes costs
one evaluation per distinct label value plus one numpy gather.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Generic, TypeVar

import numpy as np
import numpy.typing as npt

from kubesched.api import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Taint
from kubesched.framework._admission import Doorkeeper

V = TypeVar("V", bound=Hashable)

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
IdArray = npt.NDArray[np.int32]

#: The resources every table has, at fixed column positions.
FIXED_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
_INITIAL_CAPACITY = 64
#: How many row changes :meth:`NodeTable.changed_rows_since` remembers; a reader further
#: behind recomputes everything.
_MAX_CHANGES = 4096
#: Beyond this many changed rows a reader of them (:class:`RowDerived`, the runtime's per-shape
#: cache) derives every row again, vectorized.
MANY_ROWS = 256
#: Keys a :class:`RowDerived` keeps by default: 8 bytes per node each (2.5 MB at 5,000 nodes
#: for 64). Workloads mix pod sizes; with fewer keys than sizes in rotation every key is
#: derived afresh before it is used again.
KEYS_KEPT = 64


class InternedColumn(Generic[V]):
    """A per-slot value stored as an id into a list of distinct values."""

    __slots__ = ("_index", "ids", "values")

    def __init__(self, capacity: int, default: V) -> None:
        self.values: list[V] = [default]
        self._index: dict[V, int] = {default: 0}
        self.ids: IdArray = np.zeros(capacity, dtype=np.int32)

    def intern(self, value: V) -> int:
        i = self._index.get(value)
        if i is None:
            i = len(self.values)
            self._index[value] = i
            self.values.append(value)
        return i

    def id_of(self, value: V) -> int | None:
        """The id of ``value`` if any node has ever had it."""
        return self._index.get(value)

    def set(self, slot: int, value: V) -> None:
        self.ids[slot] = self.intern(value)

    def get(self, slot: int) -> V:
        return self.values[int(self.ids[slot])]

    def predicate(self, fn: Callable[[V], bool]) -> BoolArray:
        """``fn`` of every slot's value, evaluated once per distinct value."""
        lut = np.fromiter((fn(v) for v in self.values), dtype=np.bool_, count=len(self.values))
        return lut[self.ids]

    def lookup(self, fn: Callable[[V], int]) -> IntArray:
        """Like :meth:`predicate` for an integer-valued function."""
        lut = np.fromiter((fn(v) for v in self.values), dtype=np.int64, count=len(self.values))
        return lut[self.ids]

    def grow(self, capacity: int) -> None:
        ids = np.zeros(capacity, dtype=np.int32)
        ids[: len(self.ids)] = self.ids
        self.ids = ids


TaintSet = tuple[Taint, ...]


class NodeTable:
    """Columns over node slots. Mutated only by :class:`~kubesched.framework.Snapshot`."""

    def __init__(self) -> None:
        cap = _INITIAL_CAPACITY
        self.capacity = cap
        self.names: list[str] = [""] * cap
        self.present: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(FIXED_RESOURCES)}
        #: ``allocatable[slot, resource_index[name]]``; CPU in millicores, pods under "pods".
        self.allocatable: IntArray = np.zeros((cap, len(FIXED_RESOURCES)), dtype=np.int64)
        #: Sum of requests of the pods on the node; the pod count under "pods".
        self.requested: IntArray = np.zeros((cap, len(FIXED_RESOURCES)), dtype=np.int64)
        #: CPU and memory requested with kube-scheduler's defaults for unset requests (scoring).
        self.non_zero_requested: IntArray = np.zeros((cap, 2), dtype=np.int64)
        self.unschedulable: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.taints: InternedColumn[TaintSet] = InternedColumn(cap, ())
        self.labels: dict[str, InternedColumn[str | None]] = {}
        #: Nodes where some pod uses a host port (NodePorts only looks at these).
        self.has_host_ports: BoolArray = np.zeros(cap, dtype=np.bool_)
        #: image name -> {slot: size in bytes} for images the node reports as present.
        self.images: dict[str, dict[int, int]] = {}
        #: Bumped whenever :attr:`images` changes.
        self.images_version = 0
        #: How many row changes there have been (see :meth:`changed_rows_since`).
        self.version = 0
        #: Bumped when rows move to new arrays or resource columns are added: values a reader
        #: derived per slot no longer line up with the columns and must be recomputed.
        self.layout = 0
        self._present_slots: IntArray | None = None
        self._present_leading = False
        # The slots of the last row changes: version ``_changes_base + i + 1`` changed
        # ``_changes[i]``.
        self._changes: list[int] = []
        #: Per change, whether only the pods counted on the node changed (not the Node).
        self._pods_only: list[bool] = []
        self._changes_base = 0
        self._last_rows: tuple[int, int, tuple[list[int], list[int]]] | None = None

    # -- reading ---------------------------------------------------------------------------

    def resource_column(self, name: str) -> int | None:
        """The column of a resource, or ``None`` if no node has ever offered or used it."""
        return self.resource_index.get(name)

    def label(self, key: str) -> InternedColumn[str | None]:
        """The column for a label key; every slot holds ``None`` where the node lacks it."""
        col = self.labels.get(key)
        if col is None:
            col = InternedColumn(self.capacity, None)
            self.labels[key] = col
        return col

    def label_predicate(self, key: str, fn: Callable[[str | None], bool]) -> BoolArray:
        return self.label(key).predicate(fn)

    def present_slots(self) -> IntArray:
        """The slots where :attr:`present` is true, ascending; the same read-only array until
        that changes, so callers may keep it."""
        if self._present_slots is None:
            slots = np.flatnonzero(self.present).astype(np.int64)
            slots.flags.writeable = False
            self._present_slots = slots
            self._present_leading = not len(slots) or int(slots[-1]) == len(slots) - 1
        return self._present_slots

    def is_leading(self, slots: IntArray) -> bool:
        """Whether ``slots`` is the array :meth:`present_slots` returned and that is
        ``0, 1, ..., n - 1``: a value per slot is then a slice away instead of a gather."""
        return slots is self._present_slots and self._present_leading

    def changed_rows_since(self, version: int) -> tuple[list[int], list[int]] | None:
        """The slots whose rows changed after :attr:`version` was ``version``, sorted, in two
        lists: the rows whose Node changed (or came, or went), and the rows where only the pods
        counted there did; ``None`` when that is too long ago to say.

        What is derived from each node's row alone (the pod's shape being the same) is kept
        across cycles and derived again for these rows only: between two pods usually one row
        changes (the node the previous pod was assumed on), out of thousands.
        """
        if version < self._changes_base:
            return None
        # Filter and Score of a cycle ask the same question: the answer is kept (read-only).
        last = self._last_rows
        if last is not None and last[0] == version and last[1] == self.version:
            return last[2]
        start = version - self._changes_base
        changes = self._changes[start:]
        rows: tuple[list[int], list[int]]
        if not changes:
            rows = [], []
        else:
            pods_only = self._pods_only[start:]
            if all(pods_only):
                rows = [], sorted(set(changes))
            else:
                nodes = {s for s, p in zip(changes, pods_only, strict=True) if not p}
                rows = sorted(nodes), sorted(set(changes) - nodes)
        self._last_rows = (version, self.version, rows)
        return rows

    # -- writing (by the snapshot) -------------------------------------------------------------

    def set_present(self, slot: int, present: bool) -> None:
        if self.present[slot] != present:
            self.present[slot] = present
            self._present_slots = None

    def touch(self, slot: int, *, pods_only: bool = False) -> None:
        """Record that the row of ``slot`` changed (any column, presence included);
        ``pods_only`` when the Node is as it was and only the pods counted there changed."""
        self._changes.append(slot)
        self._pods_only.append(pods_only)
        self.version += 1
        if len(self._changes) > _MAX_CHANGES:
            drop = _MAX_CHANGES // 2
            del self._changes[:drop]
            del self._pods_only[:drop]
            self._changes_base += drop

    def ensure_capacity(self, slots: int) -> None:
        if slots <= self.capacity:
            return
        cap = self.capacity
        while cap < slots:
            cap *= 2
        self.names.extend([""] * (cap - self.capacity))
        self.present = _grow1(self.present, cap)
        self.unschedulable = _grow1(self.unschedulable, cap)
        self.has_host_ports = _grow1(self.has_host_ports, cap)
        self.allocatable = _grow2(self.allocatable, cap, self.allocatable.shape[1])
        self.requested = _grow2(self.requested, cap, self.requested.shape[1])
        self.non_zero_requested = _grow2(self.non_zero_requested, cap, 2)
        self.taints.grow(cap)
        for col in self.labels.values():
            col.grow(cap)
        self.capacity = cap
        self.layout += 1

    def resource_slot(self, name: str) -> int:
        """The column of ``name``, added if new."""
        i = self.resource_index.get(name)
        if i is None:
            i = len(self.resource_index)
            self.resource_index[name] = i
            self.allocatable = _grow2(self.allocatable, self.capacity, i + 1)
            self.requested = _grow2(self.requested, self.capacity, i + 1)
            self.layout += 1
        return i

    def _resource_columns(self, values: Mapping[str, int]) -> list[tuple[int, int]]:
        # Columns first: adding one reallocates the arrays.
        return [(self.resource_slot(name), v) for name, v in values.items()]

    def set_allocatable(self, slot: int, values: Mapping[str, int]) -> None:
        cols = self._resource_columns(values)
        self.allocatable[slot, :] = 0
        for i, v in cols:
            self.allocatable[slot, i] = v

    def set_requested(self, slot: int, values: Mapping[str, int]) -> None:
        index = self.resource_index
        if not values.keys() <= index.keys():
            self._resource_columns(values)
        # Runs on every assume and confirmation: one row view, not a 2-D index per value.
        row = self.requested[slot]
        row[:] = 0
        for name, v in values.items():
            row[index[name]] = v

    def set_labels(self, slot: int, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        for key in old.keys() - new.keys():
            self.label(key).set(slot, None)
        for key, value in new.items():
            if old.get(key) != value or self.labels.get(key) is None:
                self.label(key).set(slot, value)


class _RowValues:
    __slots__ = ("layout", "nonzero", "values", "version")

    def __init__(self, table: NodeTable, derive: Callable[[IntArray], IntArray]) -> None:
        #: Per slot; 0 in rows without a node.
        self.values: IntArray = np.zeros(table.capacity, dtype=np.int64)
        present = table.present_slots()
        self.values[present] = derive(present)
        #: How many values are not 0.
        self.nonzero = int(np.count_nonzero(self.values))
        self.version = table.version
        self.layout = table.layout


class RowDerived:
    """Per-slot values a plugin derives from each node's row alone, kept across cycles.

    A Filter or Score over all nodes costs a few dozen passes over the columns. But for a given
    pod *shape* (the key: its requests, its checks, whatever the derivation depends on besides
    the row) a node's value changes only when its row does, and between two scheduling cycles
    one or two rows change out of thousands. So the values are kept per key, for the last few
    keys used, and brought up to date with :meth:`NodeTable.changed_rows_since`: the derivation runs
    on the changed rows only. The result equals deriving every row afresh. A key is kept from
    its second use on, if that comes soon enough (:class:`Doorkeeper`); otherwise the values
    are derived on the slots asked about only.
    """

    __slots__ = ("_doorkeeper", "_entries", "_max_keys", "_reads_pods", "_table")

    def __init__(self, max_keys: int = KEYS_KEPT, *, reads_pods: bool = True) -> None:
        self._entries: dict[Hashable, _RowValues] = {}
        self._max_keys = max_keys
        # Without it, a row where only the pods counted on the node changed keeps its value.
        self._reads_pods = reads_pods
        self._table: NodeTable | None = None
        # A key in rotation with more others than are kept would be dropped before its reuse.
        self._doorkeeper = Doorkeeper(window=2 * max_keys)

    def get(
        self,
        table: NodeTable,
        key: Hashable,
        slots: IntArray,
        derive: Callable[[IntArray], IntArray],
    ) -> IntArray:
        """``derive(slots)``, from the values kept for ``key``.

        ``derive`` maps slots to one int64 value each, reading nothing but those slots' rows of
        ``table`` and what ``key`` stands for. The result is a new array.
        """
        if not self._admitted(table, key):
            return derive(slots)
        return self._of(self._current(table, key, derive), table, slots)

    def get_unless_zero(
        self,
        table: NodeTable,
        key: Hashable,
        slots: IntArray,
        derive: Callable[[IntArray], IntArray],
    ) -> IntArray | None:
        """Like :meth:`get`, or ``None`` when every value is 0 (known without looking at them
        when ``slots`` are all the nodes: a Filter where every node passes)."""
        if not self._admitted(table, key):
            values = derive(slots)
            return values if np.count_nonzero(values) else None
        entry = self._current(table, key, derive)
        if not entry.nonzero:
            return None
        out = self._of(entry, table, slots)
        return out if table.is_leading(slots) or np.count_nonzero(out) else None

    def _admitted(self, table: NodeTable, key: Hashable) -> bool:
        return (table is self._table and key in self._entries) or self._doorkeeper.admit(key)

    @staticmethod
    def _of(entry: _RowValues, table: NodeTable, slots: IntArray) -> IntArray:
        if table.is_leading(slots):
            return entry.values[: len(slots)].copy()
        out: IntArray = entry.values.take(slots)
        return out

    def _current(
        self, table: NodeTable, key: Hashable, derive: Callable[[IntArray], IntArray]
    ) -> _RowValues:
        if table is not self._table:
            self._entries.clear()
            self._table = table
        entry = self._entries.pop(key, None)
        changed = None if entry is None else table.changed_rows_since(entry.version)
        rows: list[int] = []
        if changed:
            rows = sorted(changed[0] + changed[1]) if self._reads_pods else changed[0]
        if (
            entry is None
            or changed is None
            or entry.layout != table.layout
            or len(rows) > MANY_ROWS
        ):
            entry = _RowValues(table, derive)
        else:
            self._rederive(entry, table, rows, derive)
        # Most recently used last: the first key is the one to drop.
        self._entries[key] = entry
        if len(self._entries) > self._max_keys:
            del self._entries[next(iter(self._entries))]
        return entry

    @staticmethod
    def _rederive(
        entry: _RowValues,
        table: NodeTable,
        rows: list[int],
        derive: Callable[[IntArray], IntArray],
    ) -> None:
        """Bring ``entry`` up to date: ``rows`` derived again, one by one (a few rows, the
        usual case, cost less so than as numpy calls)."""
        values, present = entry.values, table.present
        nonzero = entry.nonzero
        live = []
        for r in rows:
            if values[r]:
                nonzero -= 1
                # Rows whose node is gone hold 0: ``nonzero`` counts present rows only.
                values[r] = 0
            if present[r]:
                live.append(r)
        if live:
            derived = derive(np.array(live, dtype=np.int64)).tolist()
            for r, v in zip(live, derived, strict=True):
                if v:
                    values[r] = v
                    nonzero += 1
        entry.nonzero = nonzero
        entry.version = table.version


def _grow1(a: npt.NDArray[np.bool_], cap: int) -> npt.NDArray[np.bool_]:
    out = np.zeros(cap, dtype=a.dtype)
    out[: len(a)] = a
    return out


def _grow2(a: IntArray, rows: int, cols: int) -> IntArray:
    out = np.zeros((rows, cols), dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out
