"""VolumeBinding's score (``StorageCapacityScoring``): how full the PVs a node would bind get.

Per storage class of the static bindings on a node, utilization is the claims' requests over the
PVs' capacities (100 when the capacity is 0 or too small); the shape maps it to 0..100 and the
node scores the rounded mean over its classes. Nodes without static bindings score 0
(kube-scheduler would score dynamic provisioning from CSIStorageCapacity objects, which kubesched
does not read).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil

import numpy as np

from kubesched.framework import MAX_NODE_SCORE, BoolArray, IntArray, Nodes
from kubesched.plugins.volume_binding._binder import Finder, storage_capacity, storage_request

MAX_UTILIZATION = 100
#: The top of the 0..N scale shape points use (``config.MaxCustomPriorityScore``).
MAX_CUSTOM_PRIORITY_SCORE = 10

Shape = Sequence[tuple[int, int]]


def broken_linear(shape: Shape, p: int) -> int:
    """``helper.BuildBrokenLinearFunction``: the piecewise-linear function through ``shape``'s
    ``(utilization, score)`` points, flat beyond both ends, in Go's integer arithmetic."""
    for i, (u, s) in enumerate(shape):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = shape[i - 1]
            num = (s - s0) * (p - u0)
            den = u - u0
            q = abs(num) // abs(den)
            return s0 + (q if (num >= 0) == (den > 0) else -q)
    return shape[-1][1]


def scale_shape(points: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Shape points with scores scaled from 0..10 to 0..100."""
    factor = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    return [(u, s * factor) for u, s in points]


def static_binding_scores(shape: Shape, finder: Finder, nodes: Nodes) -> IntArray:
    """The score of each of ``nodes`` from the static bindings Filter chose there."""
    lut = np.array([broken_linear(shape, p) for p in range(MAX_UTILIZATION + 1)], dtype=np.int64)
    n = len(nodes)
    slots = nodes.slots
    # Storage class -> per node: requested, capacity, and whether the node binds a PV of it.
    classes: dict[str, tuple[IntArray, IntArray, BoolArray]] = {}
    for k in finder.match_order:
        chosen = finder.chosen[k].take(slots)
        has = chosen >= 0
        if not has.any():
            continue
        req = ceil(storage_request(finder.delay[k]))
        for i in np.unique(chosen[has]).tolist():
            pv = finder.pv_list[i]
            r, c, present = classes.setdefault(
                pv.spec.storage_class_name,
                (np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64), np.zeros(n, np.bool_)),
            )
            at = chosen == i
            r[at] += req
            c[at] += ceil(storage_capacity(pv))
            present |= at
    total = np.zeros(n, dtype=np.int64)
    count = np.zeros(n, dtype=np.int64)
    for r, c, present in classes.values():
        full = (c == 0) | (r > c)
        util = np.where(full, MAX_UTILIZATION, r * MAX_UTILIZATION // np.maximum(c, 1))
        total += np.where(present, lut[np.clip(util, 0, MAX_UTILIZATION)], 0)
        count += present
    # math.Round: halves away from zero (scores are never negative).
    mean = np.floor(total / np.maximum(count, 1) + 0.5).astype(np.int64)
    out: IntArray = np.where(count > 0, mean, 0)
    return out


__all__ = ["MAX_CUSTOM_PRIORITY_SCORE", "broken_linear", "scale_shape", "static_binding_scores"]
