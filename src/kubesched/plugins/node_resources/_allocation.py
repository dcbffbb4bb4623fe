"""What NodeResourcesFit's scoring and NodeResourcesBalancedAllocation share.

Both score a node from two numbers per configured resource: what the node can give
(*allocatable*) and what would be taken once the pod is placed there (*requested*: what the pods
already on the node request, plus this pod's request). kube-scheduler's
``resourceAllocationScorer`` builds those two lists and hands them to a scoring function; this
module does the same, once per node (:func:`allocatable_requested`, the reference) and for all
nodes at once as numpy arrays (:func:`resource_matrix`).

Which numbers count, exactly as upstream (``calculateResourceAllocatableRequest``):

- ``cpu`` and ``memory``: the node's allocatable, and its *non-zero* requested sum (a container
  without a request counts as 100m CPU / 200Mi memory) plus the pod's non-zero request. A plugin
  built with ``use_requested`` (BalancedAllocation) uses the plain requested sums instead.
- ``ephemeral-storage``: allocatable, and the plain requested sum plus the pod's request.
- a scalar resource (extended resources such as ``example.com/gpu``, ``hugepages-*``, ...):
  skipped when the pod does not request it; else the node's allocatable for it and its requested
  sum plus the pod's request.
- anything else (``pods``, ``storage``, unknown names): skipped.

A resource whose allocatable on a node is 0 (including "skipped") is left out of that node's
score entirely: it adds neither to the weighted sum nor to the sum of weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kubesched.api import CPU, EPHEMERAL_STORAGE, MEMORY, Pod, is_scalar_resource_name, pod_requests
from kubesched.config import MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO
from kubesched.framework import IntArray, NodeInfo, NodeTable

#: kube-scheduler's ``framework.MaxNodeScore``.
MAX_NODE_SCORE = 100

#: Below this allocatable, integer quotients of the scoring formulas are computed exactly in
#: float64: every operand is an integer below 2**53 and ``capacity * 101 < 2**53``, so flooring a
#: correctly rounded float quotient gives the integer quotient. Above it (70 TB of memory on one
#: node) the exact int64 path runs instead.
FLOAT_EXACT_LIMIT = 2**46


@dataclass(frozen=True, slots=True)
class WeightedResource:
    """A configured resource and its weight (``config.ResourceSpec``)."""

    name: str
    weight: int


def pod_request_list(
    pod: Pod, resources: Sequence[WeightedResource], use_requested: bool
) -> list[int]:
    """``calculatePodResourceRequestList``: the pod's request of each configured resource.

    Init containers, sidecars, pod-level resources and overhead count as in ``PodRequests``. Unless
    ``use_requested``, a container that sets no CPU or memory request counts as 100m / 200Mi.
    CPU is in millicores, everything else in whole units; a resource the pod does not request is 0.
    """
    reqs = pod_requests(pod, non_missing=not use_requested)
    return [reqs.get(r.name, 0) for r in resources]


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
    for i, r in enumerate(resources):
        a, q = allocatable_requested(info, r.name, pod_requests_list[i], use_requested)
        if a == 0:
            continue
        allocatable[i] = a
        requested[i] = q
    return requested, allocatable


@dataclass(slots=True)
class ResourceMatrix:
    """Per-node values of the resources that can count, one row per resource.

    ``allocatable[i, j]`` and ``requested[i, j]`` are for resource ``rows[i]`` (an index into the
    configured resources) on node ``j``; ``requested`` includes the pod. Resources that count on no
    node are absent. A node where ``allocatable`` is 0 leaves that row out of its score.
    """

    rows: list[int]
    allocatable: IntArray
    requested: IntArray


def resource_matrix(
    table: NodeTable,
    slots: IntArray,
    resources: Sequence[WeightedResource],
    pod_requests_list: Sequence[int],
    use_requested: bool,
) -> ResourceMatrix:
    """:func:`allocatable_requested` for every node of ``slots`` at once."""
    plan: list[tuple[int, int, IntArray, int]] = []
    for i, r in enumerate(resources):
        pod_request = pod_requests_list[i]
        name = r.name
        if name in (CPU, MEMORY):
            alloc_col = table.resource_index[name]
            if use_requested:
                plan.append((i, alloc_col, table.requested[:, alloc_col], pod_request))
            else:
                nz = 0 if name == CPU else 1
                plan.append((i, alloc_col, table.non_zero_requested[:, nz], pod_request))
        elif name == EPHEMERAL_STORAGE or (is_scalar_resource_name(name) and pod_request != 0):
            col = table.resource_index.get(name)
            if col is not None:
                plan.append((i, col, table.requested[:, col], pod_request))
    n = len(slots)
    alloc = np.empty((len(plan), n), dtype=np.int64)
    req = np.empty((len(plan), n), dtype=np.int64)
    for k, (_, col, used, _) in enumerate(plan):
        np.take(table.allocatable[:, col], slots, out=alloc[k])
        np.take(used, slots, out=req[k])
    if plan:
        req += np.array([p[3] for p in plan], dtype=np.int64)[:, None]
    return ResourceMatrix([p[0] for p in plan], alloc, req)


# --- scoring functions, one node at a time (the reference the vectorized forms must equal) -----


def least_requested_score(requested: int, capacity: int) -> int:
    """``leastRequestedScore``: the free share of the resource, 0..100, rounded down."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """``mostRequestedScore``: the used share of the resource, 0..100, rounded down; a request
    above capacity counts as full."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def weighted_score(
    requested: Sequence[int],
    allocatable: Sequence[int],
    resources: Sequence[WeightedResource],
    per_resource: str,
) -> int:
    """``leastResourceScorer`` / ``mostResourceScorer``: the weighted mean of the per-resource
    scores over the resources with allocatable > 0, rounded down."""
    fn = least_requested_score if per_resource == "least" else most_requested_score
    node_score = weight_sum = 0
    for q, a, r in zip(requested, allocatable, resources, strict=True):
        if a == 0:
            continue
        node_score += fn(q, a) * r.weight
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
    m: ResourceMatrix,
    n: int,
    weights: Sequence[int],
    strategy: str,
    lut: IntArray | None = None,
) -> IntArray:
    """The score of each node under a NodeResourcesFit strategy, equal to
    :func:`weighted_score` / :func:`requested_to_capacity_ratio_score` node by node.

    ``weights`` are those of all configured resources (``m.rows`` index into them); ``lut`` is
    :func:`shape_lut` of the shape, for ``RequestedToCapacityRatio``.
    """
    if not m.rows:
        return np.zeros(n, dtype=np.int64)
    a, q = m.allocatable, m.requested
    w = np.array([weights[i] for i in m.rows], dtype=np.int64)[:, None]
    valid = a > 0
    result: IntArray
    if int(a.max()) < FLOAT_EXACT_LIMIT:
        # Every quotient below is of non-negative integers held exactly in float64, at most 100,
        # with a divisor under 2**46: flooring the float quotient is the integer quotient.
        af = a.astype(np.float64)
        qf = q.astype(np.float64)
        den = np.maximum(af, 1.0)
        if strategy == REQUESTED_TO_CAPACITY_RATIO:
            assert lut is not None
            p = np.where(qf > af, 100.0, np.floor(np.minimum(qf, af) * MAX_NODE_SCORE / den))
            raw = lut[p.astype(np.int64)]
            counted = valid & (raw > 0)
            node_score = (raw * w * counted).sum(axis=0).astype(np.float64)
            weight_sum = (w * counted).sum(axis=0).astype(np.float64)
            # math.Round(ns / ws) for non-negative values: floor((2 ns + ws) / (2 ws)).
            out = np.floor((2.0 * node_score + weight_sum) / np.maximum(2.0 * weight_sum, 1.0))
            result = out.astype(np.int64)
            return result
        if strategy == MOST_ALLOCATED:
            per = np.floor(np.minimum(qf, af) * MAX_NODE_SCORE / den)
        else:
            per = np.floor(np.maximum(af - qf, 0.0) * MAX_NODE_SCORE / den)
        node_score_f = (per * w).sum(axis=0)
        weight_sum_f = (w * valid).sum(axis=0).astype(np.float64)
        result = np.floor(node_score_f / np.maximum(weight_sum_f, 1.0)).astype(np.int64)
        return result
    # Exact int64 arithmetic for very large allocatable values.
    den_i = np.maximum(a, 1)
    if strategy == REQUESTED_TO_CAPACITY_RATIO:
        assert lut is not None
        p_i = np.where(q > a, 100, np.minimum(q, a) * MAX_NODE_SCORE // den_i)
        raw = lut[p_i]
        counted = valid & (raw > 0)
        node_score_i = (raw * w * counted).sum(axis=0)
        weight_sum_i = (w * counted).sum(axis=0)
        result = (2 * node_score_i + weight_sum_i) // np.maximum(2 * weight_sum_i, 1)
        return result
    if strategy == MOST_ALLOCATED:
        per_i = np.minimum(q, a) * MAX_NODE_SCORE // den_i
    else:
        per_i = np.maximum(a - q, 0) * MAX_NODE_SCORE // den_i
    weight_sum_i = (w * valid).sum(axis=0)
    result = (per_i * w).sum(axis=0) // np.maximum(weight_sum_i, 1)
    return result


def balanced_resource_score(requested: Sequence[int], allocatable: Sequence[int]) -> int:
    """``balancedResourceScorer``: ``(1 - std) * 100`` truncated, where std is the standard
    deviation of the requested/allocatable fractions (each capped at 1) of the resources with
    allocatable > 0; with two fractions it is ``|f1 - f2| / 2``, with fewer it is 0. Float64
    arithmetic in Go's order of operations."""
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


def balanced_scores(m: ResourceMatrix, n: int) -> IntArray:
    """:func:`balanced_resource_score` of every node, bit for bit.

    Each node uses only its rows with allocatable > 0, in order. Adding 0.0 to a float sum is
    exact, so summing every row with the others zeroed gives the same float as summing the
    counted rows alone; the two-fraction case picks each node's first and second counted row.
    """
    if not m.rows:
        return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
    a, q = m.allocatable, m.requested
    valid = a > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(valid, np.minimum(q.astype(np.float64) / a.astype(np.float64), 1.0), 0.0)
    count = np.zeros(n, dtype=np.int64)
    first = np.zeros(n)
    second = np.zeros(n)
    total = np.zeros(n)
    for i in range(len(m.rows)):
        v = valid[i]
        first = np.where(v & (count == 0), frac[i], first)
        second = np.where(v & (count == 1), frac[i], second)
        count += v
        total = total + frac[i]
    std = np.abs((first - second) / 2)
    many = count > 2
    if many.any():
        k = np.maximum(count, 1).astype(np.float64)
        mean = total / k
        acc = np.zeros(n)
        for i in range(len(m.rows)):
            d = frac[i] - mean
            acc = acc + np.where(valid[i], d * d, 0.0)
        std = np.where(many, np.sqrt(acc / k), std)
    std = np.where(count >= 2, std, 0.0)
    return ((1 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


__all__ = [
    "FLOAT_EXACT_LIMIT",
    "MAX_NODE_SCORE",
    "ResourceMatrix",
    "WeightedResource",
    "allocatable_requested",
    "balanced_resource_score",
    "balanced_scores",
    "broken_linear",
    "go_div",
    "least_requested_score",
    "most_requested_score",
    "node_lists",
    "pod_request_list",
    "requested_to_capacity_ratio_score",
    "resource_matrix",
    "shape_lut",
    "strategy_scores",
    "weighted_score",
]
