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

V = TypeVar("V", bound=Hashable)

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
IdArray = npt.NDArray[np.int32]

#: The resources every table has, at fixed column positions.
FIXED_RESOURCES = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)
_INITIAL_CAPACITY = 64


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

    # -- writing (by the snapshot) -------------------------------------------------------------

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

    def resource_slot(self, name: str) -> int:
        """The column of ``name``, added if new."""
        i = self.resource_index.get(name)
        if i is None:
            i = len(self.resource_index)
            self.resource_index[name] = i
            self.allocatable = _grow2(self.allocatable, self.capacity, i + 1)
            self.requested = _grow2(self.requested, self.capacity, i + 1)
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
        cols = self._resource_columns(values)
        self.requested[slot, :] = 0
        for i, v in cols:
            self.requested[slot, i] = v

    def set_labels(self, slot: int, old: Mapping[str, str], new: Mapping[str, str]) -> None:
        for key in old.keys() - new.keys():
            self.label(key).set(slot, None)
        for key, value in new.items():
            if old.get(key) != value or self.labels.get(key) is None:
                self.label(key).set(slot, value)


def _grow1(a: npt.NDArray[np.bool_], cap: int) -> npt.NDArray[np.bool_]:
    out = np.zeros(cap, dtype=a.dtype)
    out[: len(a)] = a
    return out


def _grow2(a: IntArray, rows: int, cols: int) -> IntArray:
    out = np.zeros((rows, cols), dtype=a.dtype)
    out[: a.shape[0], : a.shape[1]] = a
    return out
