"""What NodeResourcesFit's scoring and NodeResourcesBalancedAllocation share.

Both score a node from two numbers per configured resource: what the node can give
(*allocatable*) and what would be taken once the pod is placed there (*requested*), counted
as kube-scheduler's ``calculateResourceAllocatableRequest`` counts them
(docs/plugins/node-resources.md): once per node (:func:`allocatable_requested`, the
reference) and for all nodes at once as numpy arrays (:func:`resource_matrix`). A resource whose
allocatable on a node is 0 is left out of that node's score entirely.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.api import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name
from kubesched.config import LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO
from kubesched.framework import MANY_ROWS, BoolArray, IntArray, NodeInfo, NodeTable, PodInfo

FloatArray = npt.NDArray[np.float64]

#: kube-scheduler's ``framework.MaxNodeScore``.
MAX_NODE_SCORE = 100

#: Below this allocatable, integer quotients of the scoring formulas are computed exactly in
#: float64: every operand is an integer below 2**53 and ``capacity * 101 < 2**53``, so flooring a
#: correctly rounded float quotient gives the integer quotient. Above it (70 TB of memory on one
#: node) the exact int64 path runs instead.
FLOAT_EXACT_LIMIT = 2**46

#: Up to this many nodes the per-node functions cost less than the vectorized ones, whose numpy
#: calls cost a microsecond or more each whatever the size (rows changed since the last cycle).
FEW_ROWS = 16


@dataclass(frozen=True, slots=True)
class WeightedResource:
    """A configured resource and its weight (``config.ResourceSpec``)."""

    name: str
    weight: int


def pod_request_list(
    pod: PodInfo, resources: Sequence[WeightedResource], use_requested: bool
) -> list[int]:
    """``calculatePodResourceRequestList``: the pod's request of each configured resource.

    Init containers, sidecars, pod-level resources and overhead count as in ``PodRequests``. Unless
    ``use_requested``, a container that sets no CPU or memory request counts as 100m / 200Mi.
    CPU is in millicores, everything else in whole units; a resource the pod does not request is 0.
    """
    reqs = pod.requests
    if use_requested:
        return [reqs.get(r.name, 0) for r in resources]
    # The non-zero requests differ from the requests in cpu and memory only.
    return [
        pod.non_zero_cpu
        if r.name == CPU
        else pod.non_zero_memory
        if r.name == MEMORY
        else reqs.get(r.name, 0)
        for r in resources
    ]


def allocatable_requested(
    info: NodeInfo, name: str, pod_request: int, use_requested: bool
) -> tuple[int, int]:
    """``calculateResourceAllocatableRequest`` for one node: ``(allocatable, requested)``.

    ``requested`` already includes ``pod_request``. ``(0, 0)`` means the resource does not count
    on this node (see the module docstring).
    """
    if pod_request == 0 and is_scalar_resource_name(name):
        return 0, 0
    alloc = info.allocatable
    if name == CPU:
        used = info.requested.get(CPU, 0) if use_requested else info.non_zero_cpu
        return alloc.get(CPU, 0), used + pod_request
    if name == MEMORY:
        used = info.requested.get(MEMORY, 0) if use_requested else info.non_zero_memory
        return alloc.get(MEMORY, 0), used + pod_request
    if name == EPHEMERAL_STORAGE:
        used = info.requested.get(EPHEMERAL_STORAGE, 0)
        return alloc.get(EPHEMERAL_STORAGE, 0), used + pod_request
    if is_scalar_resource_name(name) and name in alloc:
        return alloc[name], info.requested.get(name, 0) + pod_request
    return 0, 0


def node_lists(
    info: NodeInfo,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    use_requested: bool,
) -> tuple[list[int], list[int]]:
    """The ``(requested, allocatable)`` lists ``resourceAllocationScorer.score`` builds for a node:
    entries of resources that do not count on the node are 0 in both."""
    requested = [0] * len(resources)
    allocatable = [0] * len(resources)
    alloc = info.allocatable
    for i, r in enumerate(resources):
        name = r.name
        # CPU and memory inline: this runs for every node that changed, every cycle.
        if name == CPU:
            a = alloc.get(CPU, 0)
            used = info.requested.get(CPU, 0) if use_requested else info.non_zero_cpu
            q = used + pod_requests_list[i]
        elif name == MEMORY:
            a = alloc.get(MEMORY, 0)
            used = info.requested.get(MEMORY, 0) if use_requested else info.non_zero_memory
            q = used + pod_requests_list[i]
        else:
            a, q = allocatable_requested(info, name, pod_requests_list[i], use_requested)
        if a == 0:
            continue
        allocatable[i] = a
        requested[i] = q
    return requested, allocatable


class Scratch:
    """Reusable work arrays for the vectorized forms, owned by one plugin instance.

    Gathering a few columns for thousands of nodes makes arrays of a few hundred KB. Allocating
    and freeing such arrays on every call makes glibc's malloc return the memory to the system
    and fault it back in, which can cost more than the computation. Reusing the same arrays
    avoids that. An array handed out here is valid until the next call that uses the same key,
    so results must never alias it.
    """

    __slots__ = ("_buffers",)

    def __init__(self) -> None:
        self._buffers: dict[str, npt.NDArray[Any]] = {}

    def get(self, key: str, shape: tuple[int, ...], dtype: type[np.generic]) -> npt.NDArray[Any]:
        """A C-contiguous array of ``shape`` and ``dtype``, contents undefined."""
        size = math.prod(shape)
        buf = self._buffers.get(key)
        if buf is None or buf.dtype != dtype or buf.size < size:
            buf = np.empty(max(size, 1024), dtype=dtype)
            self._buffers[key] = buf
        return buf[:size].reshape(shape)


@dataclass(slots=True)
class ResourceMatrix:
    """Per-node values of the resources that can count, for the nodes of one call.

    Row ``k`` is configured resource ``rows[k]``: ``allocatable[k, j]`` and ``used[k, j]`` (what
    node ``j``'s pods request, without this pod) for the call's ``j``-th slot, and ``pod[k]`` the
    pod's request. Resources that count on no node have no row. On a node where ``allocatable``
    is 0 the resource is left out of the score.

    Rows are stacked so that each numpy operation covers every resource at once: at a few
    thousand nodes the cost of a numpy call is as much its fixed overhead as its work.
    """

    rows: list[int]
    allocatable: npt.NDArray[Any]
    used: npt.NDArray[Any]
    pod: list[int]
    #: The call's slots, and how many leading rows the columns cover instead when they do (see
    #: :func:`covering_rows`): a result per column is :meth:`picked` to one per slot.
    slots: IntArray
    covered: int | None
    #: Whether ``used`` has the pod's requests added already (read from :class:`FloatColumns`).
    with_pod: bool = False

    def picked(self, values: IntArray) -> IntArray:
        """``values``, one per column, as one per slot of the call."""
        return picked(values, self.slots, self.covered)


def resource_matrix(
    table: NodeTable,
    slots: IntArray,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    use_requested: bool,
    dtype: type[np.int64] | type[np.float64] = np.int64,
    scratch: Scratch | None = None,
) -> ResourceMatrix:
    """:func:`allocatable_requested` for every node of ``slots`` at once, as ``dtype``; the
    arrays live in ``scratch`` when given."""
    plan = _matrix_plan(table, resources, pod_requests_list, use_requested)
    scratch = scratch or Scratch()
    covered = covering_rows(slots)
    n = len(slots) if covered is None else covered
    alloc = scratch.get("allocatable", (len(plan), n), dtype)
    used = scratch.get("used", (len(plan), n), dtype)
    if plan:
        alloc_rows = rows_of(table.allocatable, slots, covered, scratch, "allocatable rows")
        requested_rows = non_zero_rows = None
        for k, (_, col, non_zero, used_col) in enumerate(plan):
            alloc[k] = alloc_rows[:, col]
            if non_zero:
                if non_zero_rows is None:
                    non_zero_rows = rows_of(
                        table.non_zero_requested, slots, covered, scratch, "non-zero rows"
                    )
                used[k] = non_zero_rows[:, used_col]
            else:
                if requested_rows is None:
                    requested_rows = rows_of(
                        table.requested, slots, covered, scratch, "requested rows"
                    )
                used[k] = requested_rows[:, used_col]
    pod = [pod_requests_list[p[0]] for p in plan]
    return ResourceMatrix([p[0] for p in plan], alloc, used, pod, slots, covered)


def _matrix_plan(
    table: NodeTable,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    use_requested: bool,
) -> list[tuple[int, int, bool, int]]:
    """Per resource that can count: (configured index, allocatable column, whether "used" is
    the non-zero requested, its column)."""
    plan: list[tuple[int, int, bool, int]] = []
    for i, r in enumerate(resources):
        name = r.name
        if name in (CPU, MEMORY):
            col = table.resource_index[name]
            if use_requested:
                plan.append((i, col, False, col))
            else:
                plan.append((i, col, True, 0 if name == CPU else 1))
        elif name == EPHEMERAL_STORAGE or (
            is_scalar_resource_name(name) and pod_requests_list[i] != 0
        ):
            col_or_none = table.resource_index.get(name)
            if col_or_none is not None:
                plan.append((i, col_or_none, False, col_or_none))
    return plan


def columns_matrix(
    table: NodeTable,
    slots: IntArray,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    use_requested: bool,
    columns: FloatColumns | None,
    scratch: Scratch | None,
) -> ResourceMatrix | None:
    """:func:`resource_matrix` as float64, read from ``columns``, with the pod's requests
    added to ``used`` (``with_pod``); ``None`` without columns or scratch, when no resource
    counts, or when some value is not held exactly as a float (the caller's own path then)."""
    if columns is None or scratch is None:
        return None
    rows, sources = columns.plan(table, resources, pod_requests_list, use_requested)
    pod = [pod_requests_list[i] for i in rows]
    if not rows or max(pod) >= FLOAT_EXACT_LIMIT or min(pod) <= -FLOAT_EXACT_LIMIT:
        return None
    values = columns.get(table, sources)
    if values is None:
        return None
    k = len(rows)
    covered = covering_rows(slots)
    values = values.take(slots, axis=1) if covered is None else values[:, :covered]
    # A copy with the pod added in the same pass: the callers compute in place.
    used = scratch.get("used", (k, values.shape[1]), np.float64)
    np.add(values[k:], np.array(pod, dtype=np.float64)[:, None], out=used)
    return ResourceMatrix(rows, values[:k], used, pod, slots, covered, True)


#: The table columns :class:`FloatColumns` reads: allocatable, requested, non-zero requested.
_ALLOCATABLE, _REQUESTED, _NON_ZERO = 0, 1, 2
#: Plans :meth:`FloatColumns.plan` keeps (one per table layout and zero requests' pattern).
_PLANS_KEPT = 64


class FloatColumns:
    """Resource columns of a table as float64 rows (one per column, one value per slot), kept
    in step with the table: between two scheduling cycles only the rows it changed (the node
    the last pod was assumed on) are converted again.

    Both scorers read the same few columns of every node for every pod; gathering and
    converting them took a quarter of NodeResourcesFit's and BalancedAllocation's Score.
    """

    __slots__ = ("_kept", "_plans", "_plans_of")

    def __init__(self) -> None:
        self._kept: dict[tuple[tuple[int, int], ...], _Converted] = {}
        self._plans: dict[Hashable, tuple[list[int], tuple[tuple[int, int], ...]]] = {}
        self._plans_of: NodeTable | None = None

    def plan(
        self,
        table: NodeTable,
        resources: Sequence[WeightedResource],
        pod_requests_list: Sequence[int],
        use_requested: bool,
    ) -> tuple[list[int], tuple[tuple[int, int], ...]]:
        """:func:`_matrix_plan` as the configured indices of its resources and the sources
        :meth:`get` reads for them (allocatable rows, then used rows), kept per table layout
        and which of the pod's requests are 0 (all the plan depends on but ``resources``, which
        the owner keeps the same)."""
        if table is not self._plans_of:
            self._plans.clear()
            self._plans_of = table
        key = (table.layout, use_requested, *(v == 0 for v in pod_requests_list))
        kept = self._plans.get(key)
        if kept is None:
            plan = _matrix_plan(table, resources, pod_requests_list, use_requested)
            sources = tuple((_ALLOCATABLE, col) for _, col, _, _ in plan) + tuple(
                (_NON_ZERO if non_zero else _REQUESTED, used_col)
                for _, _, non_zero, used_col in plan
            )
            if len(self._plans) >= _PLANS_KEPT:
                self._plans.clear()
            kept = self._plans[key] = ([p[0] for p in plan], sources)
        return kept

    def get(self, table: NodeTable, sources: tuple[tuple[int, int], ...]) -> FloatArray | None:
        """Row ``i``: column ``sources[i][1]`` of the table's array ``sources[i][0]``, over
        every slot; ``None`` when a value is too large to compute with exactly as a float
        (:data:`FLOAT_EXACT_LIMIT`). Read-only."""
        kept = self._kept.get(sources)
        if kept is None or kept.table is not table or kept.layout != table.layout:
            kept = self._kept[sources] = _Converted(table, sources)
        elif kept.version != table.version:
            rows = table.changed_rows_since(kept.version)
            if rows is None or len(rows[0]) + len(rows[1]) > MANY_ROWS:
                kept = self._kept[sources] = _Converted(table, sources)
            else:
                kept.update(table, sources, (*rows[0], *rows[1]))
        return kept.values if kept.exact else None


class _Converted:
    __slots__ = ("exact", "layout", "table", "values", "version")

    def __init__(self, table: NodeTable, sources: tuple[tuple[int, int], ...]) -> None:
        self.table = table
        self.layout = table.layout
        self.version = table.version
        arrays = _arrays(table)
        self.values: FloatArray = np.empty((len(sources), table.capacity))
        for i, (a, col) in enumerate(sources):
            self.values[i] = arrays[a][:, col]
        self.exact = bool(np.abs(self.values).max(initial=0.0) < FLOAT_EXACT_LIMIT)
        # Handed out as they are: a reader writing into them would corrupt every later one.
        self.values.flags.writeable = False

    def update(
        self, table: NodeTable, sources: tuple[tuple[int, int], ...], rows: Iterable[int]
    ) -> None:
        arrays = _arrays(table)
        values = self.values
        values.flags.writeable = True
        for r in rows:
            column = [arrays[a].item(r, col) for a, col in sources]
            values[:, r] = column
            if max(column) >= FLOAT_EXACT_LIMIT or min(column) <= -FLOAT_EXACT_LIMIT:
                self.exact = False
        values.flags.writeable = False
        self.version = table.version


def _arrays(table: NodeTable) -> tuple[IntArray, IntArray, IntArray]:
    return table.allocatable, table.requested, table.non_zero_requested


#: Below this share of the rows they span, a call's slots are gathered; at or above it the
#: computation covers every row up to the last slot and picks the slots' results after.
COVERING_SHARE = 0.85


def covering_rows(slots: IntArray) -> int | None:
    """How many leading table rows to compute over instead of gathering ``slots``' rows, or
    ``None`` to gather them.

    Gathering copies each slot's whole row; when the slots are most of the rows up to the last
    of them (Score on the nodes Filter kept, usually nearly all), computing over those rows in
    place and taking the slots' results costs less: one gather of the results instead of one
    per input table. The extra rows (nodes Filter rejected, slots of no node) are computed and
    dropped; a row of no node holds zeros, which every vectorized form already handles.
    """
    n = len(slots)
    if n <= FEW_ROWS:
        return None
    last = int(slots.max()) + 1
    return last if n >= COVERING_SHARE * last else None


def rows_of(
    array: IntArray, slots: IntArray, covered: int | None, scratch: Scratch, key: str
) -> IntArray:
    """The rows of ``array`` a call computes over: the first ``covered`` rows as they are, or
    ``slots``' rows gathered (:func:`gather_rows`) when ``covered`` is ``None``."""
    if covered is not None:
        return array[:covered]
    return gather_rows(array, slots, scratch, key)


def picked(values: IntArray, slots: IntArray, covered: int | None) -> IntArray:
    """``values`` computed over :func:`rows_of` as one per slot of ``slots``."""
    if covered is None or covered == len(slots):
        return values
    out: IntArray = values.take(slots)
    return out


def gather_rows(array: IntArray, slots: IntArray, scratch: Scratch, key: str) -> IntArray:
    """``array[slots]`` (whole rows) into a scratch array."""
    out: IntArray = scratch.get(key, (len(slots), array.shape[1]), np.int64)
    # Slots are always valid rows. With mode="raise" numpy would gather into a temporary first.
    np.take(array, slots, axis=0, out=out, mode="clip")
    return out


# --- scoring functions, one node at a time (the reference the vectorized forms must equal) -----


def weighted_score(
    requested: Sequence[int],
    allocatable: Sequence[int],
    resources: Sequence[WeightedResource],
    per_resource: str,
) -> int:
    """``leastResourceScorer`` / ``mostResourceScorer``: the weighted mean of the per-resource
    scores over the resources with allocatable > 0, rounded down."""
    least = per_resource == "least"
    node_score = weight_sum = 0
    for q, a, r in zip(requested, allocatable, resources, strict=True):
        if a == 0:
            continue
        # ``leastRequestedScore``: the free share, 0..100, rounded down, 0 when over capacity;
        # ``mostRequestedScore``: the used share, a request above capacity counting as full.
        if least:
            score = 0 if q > a else (a - q) * MAX_NODE_SCORE // a
        else:
            score = (q if q < a else a) * MAX_NODE_SCORE // a
        node_score += score * r.weight
        weight_sum += r.weight
    return 0 if weight_sum == 0 else node_score // weight_sum


def go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def broken_linear(shape: Sequence[tuple[int, int]], p: int) -> int:
    """``helper.BuildBrokenLinearFunction``: the piecewise-linear function through the
    ``(utilization, score)`` points, constant before the first and after the last, with Go's
    truncating integer division on each segment."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            return s0 + go_div((s - s0) * (p - u0), u - u0)
    return shape[-1][1]


def requested_to_capacity_ratio_score(
    requested: Sequence[int],
    allocatable: Sequence[int],
    resources: Sequence[WeightedResource],
    shape: Sequence[tuple[int, int]],
) -> int:
    """``buildRequestedToCapacityRatioScorerFunction``: each resource's utilization percentage
    (100 when over capacity) through the shape; resources scoring 0 are left out of the weighted
    mean, which is rounded half away from zero (``math.Round``)."""
    node_score = weight_sum = 0
    for q, a, r in zip(requested, allocatable, resources, strict=True):
        if a == 0:
            continue
        p = 100 if q > a else q * 100 // a
        s = broken_linear(shape, p)
        if s > 0:
            node_score += s * r.weight
            weight_sum += r.weight
    if weight_sum == 0:
        return 0
    return (2 * node_score + weight_sum) // (2 * weight_sum)


def shape_lut(shape: Sequence[tuple[int, int]]) -> IntArray:
    """The shape's value at every utilization 0..100 (all a score can see)."""
    return np.array([broken_linear(shape, p) for p in range(101)], dtype=np.int64)


# --- the same, for all nodes at once ---------------------------------------------------------


def strategy_scores(
    table: NodeTable,
    slots: IntArray,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    strategy: str,
    lut: IntArray | None = None,
    scratch: Scratch | None = None,
    columns: FloatColumns | None = None,
) -> IntArray:
    """The score of each node of ``slots`` under a NodeResourcesFit strategy, equal to
    :func:`weighted_score` / :func:`requested_to_capacity_ratio_score` node by node.

    ``lut`` is :func:`shape_lut` of the shape, for ``RequestedToCapacityRatio``.
    """
    m = columns_matrix(table, slots, resources, pod_requests_list, False, columns, scratch)
    if m is None:
        m = resource_matrix(table, slots, resources, pod_requests_list, False, np.float64, scratch)
    if not m.rows or len(slots) == 0:
        return np.zeros(len(slots), dtype=np.int64)
    a = m.allocatable
    # Read from FloatColumns (``with_pod``), every value is known to be under the limit.
    if not m.with_pod and a.max() >= FLOAT_EXACT_LIMIT:
        m = resource_matrix(table, slots, resources, pod_requests_list, False, np.int64)
        return m.picked(_strategy_scores_int(m, resources, strategy, lut))
    # Every quotient below is of non-negative integers held exactly in float64, at most 100,
    # with a divisor under 2**46: flooring the float quotient is the integer quotient.
    w = [resources[i].weight for i in m.rows]
    x = m.used
    if not m.with_pod:
        for k, p in enumerate(m.pod):
            if p:
                x[k] += p
    all_valid = bool(a.min() > 0)
    if strategy == MOST_ALLOCATED:
        np.minimum(x, a, out=x)
    elif strategy == LEAST_ALLOCATED:
        np.subtract(a, x, out=x)
        np.maximum(x, 0.0, out=x)
    x *= MAX_NODE_SCORE
    x /= a if all_valid else np.maximum(a, 1.0)
    np.floor(x, out=x)
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        assert lut is not None
        # Utilization R * 100 // A, and 100 when R > A: the clamped floor is both.
        np.minimum(x, float(MAX_NODE_SCORE), out=x)
        x = lut.astype(np.float64)[x.astype(np.intp)]
        if not all_valid:
            x[a == 0] = 0.0
        # Resources scoring 0 count in neither sum.
        counted = _weighted_rows(x > 0, w)
        node_score = _weighted_rows(x, w)
        # math.Round(ns / ws) for non-negative values: floor((2 ns + ws) / (2 ws)).
        node_score *= 2.0
        node_score += counted
        counted *= 2.0
        np.maximum(counted, 1.0, out=counted)
        node_score /= counted
    else:
        node_score = _weighted_rows(x, w)
        if all_valid:
            node_score /= float(sum(w))
        else:
            weight_sum = _weighted_rows(a > 0, w)
            np.maximum(weight_sum, 1.0, out=weight_sum)
            node_score /= weight_sum
    np.floor(node_score, out=node_score)
    return m.picked(node_score.astype(np.int64))


def _weighted_rows(x: FloatArray | BoolArray, w: Sequence[int]) -> FloatArray:
    """``sum(w[k] * x[k])`` over the rows, as float64."""
    out: FloatArray
    if any(v != 1 for v in w):
        out = np.asarray(np.array(w, dtype=np.float64) @ x, dtype=np.float64)
    elif len(w) == 1:
        out = x[0].astype(np.float64)
    elif len(w) == 2:
        out = np.add(x[0], x[1], dtype=np.float64)
    else:
        out = x.sum(axis=0, dtype=np.float64)
    return out


def _strategy_scores_int(
    m: ResourceMatrix,
    resources: Sequence[WeightedResource],
    strategy: str,
    lut: IntArray | None,
) -> IntArray:
    """:func:`strategy_scores` in exact int64 arithmetic, for allocatable values too large for
    the float64 path (70 TB of memory on one node)."""
    a = m.allocatable
    q = m.used + np.array(m.pod, dtype=np.int64)[:, None]
    w = np.array([resources[i].weight for i in m.rows], dtype=np.int64)[:, None]
    den = np.maximum(a, 1)
    valid = a > 0
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        assert lut is not None
        p = np.where(q > a, 100, np.minimum(q, a) * MAX_NODE_SCORE // den)
        raw = np.where(valid, lut[p], 0)
        node_score = (raw * w).sum(axis=0)
        weight_sum = ((raw > 0) * w).sum(axis=0)
        result: IntArray = (2 * node_score + weight_sum) // np.maximum(2 * weight_sum, 1)
        return result
    if strategy == MOST_ALLOCATED:
        per = np.minimum(q, a) * MAX_NODE_SCORE // den
    else:
        per = np.maximum(a - q, 0) * MAX_NODE_SCORE // den
    weight_sum = (valid * w).sum(axis=0)
    return np.asarray((per * w).sum(axis=0) // np.maximum(weight_sum, 1), dtype=np.int64)


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScorer``: ``(1 - std) * 100`` truncated, where std is the standard
    deviation of the requested/allocatable fractions (each capped at 1) of the resources with
    allocatable > 0; with two fractions it is ``|f1 - f2| / 2``, with fewer it is 0. Float64
    arithmetic in Go's order of operations."""
    if len(requested) == 2 and allocatable[0] and allocatable[1]:
        # The default (cpu and memory, both on the node), on every changed node each cycle.
        f0 = float(requested[0]) / float(allocatable[0])
        f1 = float(requested[1]) / float(allocatable[1])
        std = abs(((f0 if f0 <= 1 else 1.0) - (f1 if f1 <= 1 else 1.0)) / 2)
        return int((1 - std) * float(MAX_NODE_SCORE))
    fractions: list[float] = []
    total = 0.0
    for q, a in zip(requested, allocatable, strict=True):
        if a == 0:
            continue
        f = float(q) / float(a)
        if f > 1:
            f = 1.0
        total += f
        fractions.append(f)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / len(fractions)
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / len(fractions))
    return int((1 - std) * float(MAX_NODE_SCORE))


def balanced_scores(
    table: NodeTable,
    slots: IntArray,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    scratch: Scratch | None = None,
    columns: FloatColumns | None = None,
) -> IntArray:
    """:func:`balanced_resource_score` of every node, bit for bit.

    Each node uses only its resources with allocatable > 0, in order. Adding 0.0 to a float sum
    is exact, so summing every resource with the others zeroed gives the same float as summing
    the counted ones alone; the two-fraction case picks each node's first and second counted one.
    """
    n = len(slots)
    m = columns_matrix(table, slots, resources, pod_requests_list, True, columns, scratch)
    if m is not None:
        # Integers under 2**46, so their float sum is the float of the int64 sum Go converts.
        a, f = m.allocatable, m.used
    else:
        m = resource_matrix(table, slots, resources, pod_requests_list, True, np.int64, scratch)
        a = m.allocatable.astype(np.float64)
        # The requested sum is an int64 in Go, converted to float64 once.
        q = m.used
        for k, p in enumerate(m.pod):
            if p:
                q[k] += p
        f = q.astype(np.float64)
    r = len(m.rows)
    if r == 0 or n == 0:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    width = a.shape[1]
    all_valid = bool(a.min() > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(f, a, out=f)
    np.minimum(f, 1.0, out=f)
    if all_valid:
        # Every node counts every resource.
        if r == 1:
            return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
        if r == 2:
            std = np.subtract(f[0], f[1])
            std /= 2
            np.abs(std, out=std)
            return m.picked(_balanced_score(std))
        total = f[0].copy()
        for k in range(1, r):
            total += f[k]
        mean = total / r
        acc = np.zeros(width)
        for k in range(r):
            d = f[k] - mean
            d *= d
            acc += d
        acc /= r
        return m.picked(_balanced_score(np.sqrt(acc, out=acc)))
    valid = a > 0
    f[~valid] = 0.0
    count = np.zeros(width, dtype=np.int64)
    first = np.zeros(width)
    second = np.zeros(width)
    total = np.zeros(width)
    for k in range(r):
        first = np.where(valid[k] & (count == 0), f[k], first)
        second = np.where(valid[k] & (count == 1), f[k], second)
        count += valid[k]
        total = total + f[k]
    std = np.abs((first - second) / 2)
    many = count > 2
    if many.any():
        k_nodes = np.maximum(count, 1).astype(np.float64)
        mean = total / k_nodes
        acc = np.zeros(width)
        for k in range(r):
            d = f[k] - mean
            acc = acc + np.where(valid[k], d * d, 0.0)
        std = np.where(many, np.sqrt(acc / k_nodes), std)
    std = np.where(count >= 2, std, 0.0)
    return m.picked(_balanced_score(std))


def _balanced_score(std: FloatArray) -> IntArray:
    """``int64((1 - std) * MaxNodeScore)``: truncation, the value being non-negative."""
    out = 1.0 - std
    out *= float(MAX_NODE_SCORE)
    result: IntArray = out.astype(np.int64)
    return result


__all__ = [
    "FEW_ROWS",
    "FLOAT_EXACT_LIMIT",
    "MAX_NODE_SCORE",
    "FloatColumns",
    "ResourceMatrix",
    "Scratch",
    "WeightedResource",
    "allocatable_requested",
    "balanced_resource_score",
    "balanced_scores",
    "broken_linear",
    "columns_matrix",
    "covering_rows",
    "gather_rows",
    "go_div",
    "node_lists",
    "picked",
    "pod_request_list",
    "requested_to_capacity_ratio_score",
    "resource_matrix",
    "rows_of",
    "shape_lut",
    "strategy_scores",
    "weighted_score",
]
