"""PigeonHole: kube-safe-scheduler's ``pigeon`` agent (policy-driven placement) as a Score plugin.

The original asks ``libpigeon`` (C), for each candidate node, the value of a policy's objective
function were the pod placed there; the objectives (``LOAD_BALANCE``, ``CONSOLIDATE``,
``A_BINPACK``) are ported from its sources and evaluated for every candidate at once. Resources,
objectives and the score: docs/plugins/pigeon.md.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from kubesched.api import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Pod, pod_requests
from kubesched.config import FieldError, decode_args
from kubesched.framework import (
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    ScorePlugin,
    Status,
)

NAME = "PigeonHole"

A_BINPACK = "A_BINPACK"
LOAD_BALANCE = "LOAD_BALANCE"
CONSOLIDATE = "CONSOLIDATE"
POLICIES = (A_BINPACK, LOAD_BALANCE, CONSOLIDATE)

#: The original's environment variables, read for the defaults.
ENV_POLICY_OBJECTIVE = "POLICY_OBJECTIVE"
ENV_NUM_RESOURCES = "NUM_RESOURCES"
DEFAULT_NUM_RESOURCES = 2
MAX_RESOURCES = 5
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"

MAX_NODE_SCORE = 100
#: The smallest demand of a pod that requests none (``CreatePodModel``).
MIN_CPU_DEMAND = 10
MIN_MEMORY_DEMAND_MIB = 16
#: ``DEMAND_STATS_SMOOTHING_FACTOR``: the demand history is a plain mean of the first
#: ``1 / 0.01`` pods, then an exponential mean with this factor.
SMOOTHING_FACTOR = 0.01
#: Objective values are rounded to this many decimals before ranking.
DECIMALS = 9

_MIB = 1 << 20
_GIB = 1 << 30

log = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]


def _default_policy() -> str:
    raw = os.environ.get(ENV_POLICY_OBJECTIVE, "")
    if not raw:
        return A_BINPACK
    if raw in POLICIES:
        return raw
    log.warning("ignoring %s=%r: not one of %s", ENV_POLICY_OBJECTIVE, raw, ", ".join(POLICIES))
    return A_BINPACK


def _default_num_resources() -> int:
    raw = os.environ.get(ENV_NUM_RESOURCES, "")
    if not raw:
        return DEFAULT_NUM_RESOURCES
    if raw.isdigit() and 0 < int(raw) <= MAX_RESOURCES:
        return int(raw)
    log.warning("ignoring %s=%r: not an integer from 1 to 5", ENV_NUM_RESOURCES, raw)
    return DEFAULT_NUM_RESOURCES


class PigeonHoleArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``PigeonHole``."""

    #: ``A_BINPACK``, ``LOAD_BALANCE`` or ``CONSOLIDATE`` (``POLICY_OBJECTIVE``).
    policy: str = msgspec.field(default_factory=_default_policy)
    #: How many of cpu, memory, pods, GPU, ephemeral-storage count (``NUM_RESOURCES``).
    num_resources: int = msgspec.field(default_factory=_default_num_resources)
    #: The resource LOAD_BALANCE and CONSOLIDATE look at (0 = cpu, 1 = memory, ...).
    policy_resource_index: int = 0
    #: The extended resource counted as GPUs.
    gpu_resource_name: str = DEFAULT_GPU_RESOURCE

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.policy not in POLICIES:
            errors.append(FieldError.not_supported(f"{path}.policy", self.policy, POLICIES))
        if not 1 <= self.num_resources <= MAX_RESOURCES:
            errors.append(
                FieldError.invalid(
                    f"{path}.numResources", self.num_resources, "must be between 1 and 5"
                )
            )
        elif not 0 <= self.policy_resource_index < self.num_resources:
            errors.append(
                FieldError.invalid(
                    f"{path}.policyResourceIndex",
                    self.policy_resource_index,
                    f"must be between 0 and numResources - 1 ({self.num_resources - 1})",
                )
            )
        if not self.gpu_resource_name:
            errors.append(FieldError.required(f"{path}.gpuResourceName"))
        return errors


# --- the objectives -------------------------------------------------------------------------


def prime_utilization(usage: FloatArray, capacity: FloatArray) -> FloatArray:
    """``usage / capacity`` (not clamped), 1 where the capacity is 0 (``lbfn.c``)."""
    safe = np.where(capacity > 0, capacity, 1.0)
    out: FloatArray = np.where(capacity > 0, usage / safe, 1.0)
    return out


def clamped_utilization(usage: FloatArray, capacity: FloatArray) -> FloatArray:
    """``resource_getutilization``: ``usage / capacity`` clamped to 0..1; without capacity, 0 when
    unused, else 1."""
    safe = np.where(capacity > 0, capacity, 1.0)
    ratio = np.clip(usage / safe, 0.0, 1.0)
    out: FloatArray = np.where(capacity > 0, ratio, np.where(usage == 0, 0.0, 1.0))
    return out


def load_balance_values(u: FloatArray, placed: FloatArray) -> FloatArray:
    """For each candidate ``i``: the population standard deviation of ``u`` with ``u[i]``
    replaced by ``placed[i]``."""
    n = len(u)
    s1 = u.sum() - u + placed
    s2 = (u * u).sum() - u * u + placed * placed
    var = np.maximum(s2 / n - (s1 / n) ** 2, 0.0)
    out: FloatArray = np.sqrt(var)
    return out


def _scaled_terms(x: FloatArray, a: FloatArray) -> FloatArray:
    """``term**2`` of ``unbalance_scaled`` for value ``x`` against mean ``a``."""
    below = np.where(x < a, (a - x) / np.where(a > 0, a, 1.0), 0.0)
    above = np.where(x > a, (x - a) / np.where(a < 1, 1.0 - a, 1.0), 0.0)
    out: FloatArray = below * below + above * above
    return out


def consolidate_values(u: FloatArray, placed: FloatArray) -> FloatArray:
    """For each candidate ``i``: ``unbalance_scaled`` of ``u`` with ``u[i]`` replaced by
    ``placed[i]``, in ``O(n log n)`` with prefix sums over the sorted values."""
    n = len(u)
    a = (u.sum() - u + placed) / n
    xs = np.sort(u)
    p1 = np.concatenate(([0.0], np.cumsum(xs)))
    p2 = np.concatenate(([0.0], np.cumsum(xs * xs)))
    lo = np.searchsorted(xs, a, side="left")
    hi = np.searchsorted(xs, a, side="right")
    # sum over x < a of (a - x)^2, and over x > a of (x - a)^2, for every node's current value
    below = lo * a * a - 2 * a * p1[lo] + p2[lo]
    count_above = n - hi
    above = count_above * a * a - 2 * a * (p1[n] - p1[hi]) + (p2[n] - p2[hi])
    safe_a = np.where(a > 0, a, 1.0)
    safe_b = np.where(a < 1, 1.0 - a, 1.0)
    total = below / (safe_a * safe_a) + above / (safe_b * safe_b)
    # the candidate itself: its current value out, its value with the pod in
    total = total - _scaled_terms(u, a) + _scaled_terms(placed, a)
    value = 1.0 - np.sqrt(np.maximum(total, 0.0) / n)
    out: FloatArray = np.where((a <= 0) | (a >= 1), 0.0, value)
    return out


def coefficient_of_variation(cov: FloatArray, mean: FloatArray) -> FloatArray:
    """``matrix_coefficient_variation_from_stats`` with Albert and Zhang's method, over the last
    two axes: ``cov`` ``(..., m, m)``, ``mean`` ``(..., m)``."""
    m = mean.shape[-1]
    if m == 1:
        var = cov[..., 0, 0]
        mu = mean[..., 0]
        ok = (mu != 0) & (var >= 0)
        out1: FloatArray = np.where(
            ok, np.sqrt(np.maximum(var, 0.0)) / np.where(mu != 0, mu, 1.0), 0.0
        )
        return out1
    nom = np.maximum(np.einsum("...i,...ij,...j->...", mean, cov, mean), 0.0)
    denom = np.einsum("...i,...i->...", mean, mean)
    ok = (denom > 0) & (nom > 0)
    out: FloatArray = np.where(ok, np.sqrt(nom) / np.where(denom > 0, denom, 1.0), 0.0)
    return out


@dataclass(slots=True)
class DemandStats:
    """``demandstats``: the mean and second moment of the demand vectors seen so far."""

    mean: FloatArray | None = None
    second: FloatArray | None = None
    count: int = 0

    def add(self, demand: FloatArray) -> None:
        count_max = max(int(1 / SMOOTHING_FACTOR), 1)
        if self.count < count_max:
            self.count += 1
        outer = np.outer(demand, demand)
        if self.mean is None or self.second is None or len(self.mean) != len(demand):
            self.mean = demand.astype(np.float64).copy()
            self.second = outer
            self.count = 1
            return
        f = 1.0 / self.count
        self.mean = (1 - f) * self.mean + f * demand
        self.second = (1 - f) * self.second + f * outer


def binpack_values(
    utilization: FloatArray, placed: FloatArray, capacity: FloatArray, history: DemandStats
) -> FloatArray:
    """``abpfn_getsystemvalue`` for each candidate: ``|c(system) - c(demand)|``.

    ``utilization`` and ``placed`` are ``(n, m)`` clamped utilizations now and with the pod on
    each node; ``capacity`` is ``(n, m)``.
    """
    n = utilization.shape[0]
    s = utilization.sum(axis=0)
    p = utilization.T @ utilization
    s_i = s[None, :] - utilization + placed
    p_i = (
        p[None, :, :]
        - utilization[:, :, None] * utilization[:, None, :]
        + placed[:, :, None] * placed[:, None, :]
    )
    mean = s_i / n
    cov = p_i / n - mean[:, :, None] * mean[:, None, :]
    c_system = coefficient_of_variation(cov, mean)
    # demand: history normalized by the mean capacity of the nodes that have some
    assert history.mean is not None
    assert history.second is not None
    has = capacity > 0
    counts = has.sum(axis=0)
    avg_cap = np.where(counts > 0, (capacity * has).sum(axis=0) / np.maximum(counts, 1), 0.0)
    scale = np.where(avg_cap > 0, avg_cap, 1.0)
    mu = history.mean / scale
    mu2 = history.second / np.outer(scale, scale)
    cov_d = mu2 - np.outer(mu, mu)
    c_demand = float(coefficient_of_variation(cov_d, mu))
    out: FloatArray = np.abs(c_system - c_demand)
    return out


def rank_values(values: FloatArray) -> IntArray:
    """The agent's ``ComputeRank``, on a 0..100 scale: NaN (cannot place) scores 0, the smallest
    value 100, the largest 1, linearly in between, rounded half away from zero."""
    out = np.zeros(len(values), dtype=np.int64)
    ok = ~np.isnan(values)
    if not ok.any():
        return out
    v = np.round(values[ok], DECIMALS)
    lo, hi = float(v.min()), float(v.max())
    span = max(hi - lo, 0.0)
    if span == 0:
        out[ok] = MAX_NODE_SCORE
        return out
    raw = 1.0 + (MAX_NODE_SCORE - 1) * (hi - v) / span
    rounded = np.sign(raw) * np.floor(np.abs(raw) + 0.5)
    out[ok] = np.clip(rounded, 0, MAX_NODE_SCORE).astype(np.int64)
    return out


# --- the plugin -----------------------------------------------------------------------------


class PigeonHole(ScorePlugin):
    """Scores nodes by a placement policy's objective with the pod placed on each of them."""

    name = NAME
    args_type = PigeonHoleArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(PigeonHoleArgs, args)
        super().__init__(handle, decoded)
        self.policy = decoded.policy
        self.num_resources = decoded.num_resources
        self.resource_index = decoded.policy_resource_index
        self.resources = (CPU, MEMORY, PODS, decoded.gpu_resource_name, EPHEMERAL_STORAGE)[
            : self.num_resources
        ]
        #: Demand vectors of the pods scored so far (A_BINPACK).
        self.history = DemandStats()

    def demand(self, pod: Pod) -> FloatArray:
        """The pod's demand in the agent's units (``CreatePodModel``)."""
        requests = pod_requests(pod)
        full = [
            max(requests.get(CPU, 0), 0) or MIN_CPU_DEMAND,
            (max(requests.get(MEMORY, 0), 0) // _MIB) or MIN_MEMORY_DEMAND_MIB,
            1,
            max(requests.get(self.resources[3], 0), 0) if self.num_resources > 3 else 0,
            max(requests.get(EPHEMERAL_STORAGE, 0), 0) // _GIB,
        ]
        return np.array(full[: self.num_resources], dtype=np.float64)

    def node_columns(self, nodes: Nodes) -> tuple[FloatArray, FloatArray]:
        """``(capacity, usage)``, each ``(n, numResources)``, in the agent's units."""
        table = nodes.table
        n = len(nodes)
        capacity = np.zeros((n, self.num_resources), dtype=np.int64)
        usage = np.zeros((n, self.num_resources), dtype=np.int64)
        for j, resource in enumerate(self.resources):
            col = table.resource_column(resource)
            if col is None:
                continue
            capacity[:, j] = table.allocatable[nodes.slots, col]
            usage[:, j] = table.requested[nodes.slots, col]
        for j, unit in ((1, _MIB), (4, _GIB)):
            if j < self.num_resources:
                capacity[:, j] //= unit
                usage[:, j] //= unit
        return capacity.astype(np.float64), usage.astype(np.float64)

    def objective(self, pod: Pod, nodes: Nodes) -> FloatArray:
        """The policy's objective with the pod on each node; NaN where it does not fit."""
        capacity, usage = self.node_columns(nodes)
        demand = self.demand(pod)
        fits = (demand[None, :] <= capacity - usage).all(axis=1)
        placed_usage = usage + demand[None, :]
        if self.policy == A_BINPACK:
            self.history.add(demand)
            values = binpack_values(
                clamped_utilization(usage, capacity),
                clamped_utilization(placed_usage, capacity),
                capacity,
                self.history,
            )
        else:
            r = self.resource_index
            u = prime_utilization(usage[:, r], capacity[:, r])
            placed = prime_utilization(placed_usage[:, r], capacity[:, r])
            if self.policy == LOAD_BALANCE:
                values = load_balance_values(u, placed)
            else:
                values = consolidate_values(u, placed)
        out: FloatArray = np.where(fits, values, np.nan)
        return out

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        if not len(nodes):
            return np.zeros(0, dtype=np.int64), None
        return rank_values(self.objective(pod, nodes)), None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        # The objective is about the whole set of nodes: scoring one node alone sees a cluster
        # of one, where it is the best (or cannot take the pod).
        one = Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        scores, status = self.score_nodes(state, pod, one)
        return int(scores[0]), status


__all__ = [
    "A_BINPACK",
    "CONSOLIDATE",
    "DEFAULT_NUM_RESOURCES",
    "ENV_NUM_RESOURCES",
    "ENV_POLICY_OBJECTIVE",
    "LOAD_BALANCE",
    "NAME",
    "POLICIES",
    "DemandStats",
    "PigeonHole",
    "PigeonHoleArgs",
    "binpack_values",
    "clamped_utilization",
    "coefficient_of_variation",
    "consolidate_values",
    "load_balance_values",
    "prime_utilization",
    "rank_values",
]
