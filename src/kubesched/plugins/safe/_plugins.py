"""The SafeOverload and SafeBalance plugins."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.api import Pod, pod_requests
from kubesched.config import decode_args
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    ScorePlugin,
    Status,
)
from kubesched.plugins.safe._beta import FloatArray
from kubesched.plugins.safe._common import SafeBalanceArgs, SafeOverloadArgs, SafePlugin
from kubesched.plugins.safe._stats import (
    CPU,
    MEMORY,
    BoolArray,
    balance_scores,
    combine,
    overload_scores,
    rank,
)

SAFE_OVERLOAD = "SafeOverload"
SAFE_BALANCE = "SafeBalance"

#: Filter reasons, one per resource whose risk is too high.
ERR_REASON_CPU = "node(s) were at risk of cpu overload"
ERR_REASON_MEMORY = "node(s) were at risk of memory overload"

_STATE_KEY = "Filter" + SAFE_OVERLOAD
#: Request sizes whose ranks SafeOverload keeps.
_RANK_CACHE_SIZE = 64


@dataclass(slots=True)
class _Risks:
    """Risks computed at Filter for one pod, kept for Score: full-table arrays by slot."""

    computed: BoolArray
    risk: dict[str, FloatArray]
    ok: dict[str, BoolArray]


def _single(node: NodeInfo, handle: Handle) -> Nodes:
    return Nodes(handle.snapshot, np.array([node.slot], dtype=np.int64))


class SafeOverload(SafePlugin, FilterPlugin, ScorePlugin, EnqueueExtensions):
    """Rejects nodes whose risk of overload is too high, and prefers the least risky ones."""

    name = SAFE_OVERLOAD
    args_type = SafeOverloadArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(SafeOverloadArgs, args)
        super().__init__(handle, decoded)
        self.threshold = decoded.utilization / 100.0
        self.percentile = decoded.percentile / 100.0
        self.forecast_weight = decoded.forecast_weight / 100.0
        self.max_stats_age = decoded.max_stats_age
        # (resource, request) -> (rank by slot, the row generation it was computed at)
        self._rank_cache: dict[tuple[str, int], tuple[FloatArray, npt.NDArray[np.int64]]] = {}

    def risks(self, pod: Pod, nodes: Nodes) -> tuple[dict[str, FloatArray], dict[str, BoolArray]]:
        """``risk = 1 - rank(mu, sigma, utilization)`` per resource, and where it is known.

        Ranks are kept per request size and node (replicas ask the same), until the node's
        statistics or allocatable amount change."""
        u = self.utilization(pod, nodes)
        demand = pod_requests(pod)
        risk = {}
        for r in (CPU, MEMORY):
            ranks = self._ranks(r, demand.get(r, 0), nodes, u.mu[r], u.sigma[r])
            risk[r] = 1.0 - ranks
        return risk, u.ok

    def _ranks(
        self, resource: str, demand: int, nodes: Nodes, mu: FloatArray, sigma: FloatArray
    ) -> FloatArray:
        key = (resource, demand)
        generation = self._table.generation
        entry = self._rank_cache.pop(key, None)
        if entry is None or len(entry[0]) < len(generation):
            entry = (np.zeros(len(generation), dtype=np.float64), np.full(len(generation), -1))
        self._rank_cache[key] = entry  # most recently used last
        if len(self._rank_cache) > _RANK_CACHE_SIZE:
            self._rank_cache.pop(next(iter(self._rank_cache)))
        values, computed_at = entry
        slots = nodes.slots
        stale = computed_at[slots] != generation[slots]
        if stale.any():
            fresh = slots[stale]
            values[fresh] = rank(mu[stale], sigma[stale], self.threshold)
            computed_at[fresh] = generation[fresh]
        out: FloatArray = values[slots]
        return out

    # -- Filter --------------------------------------------------------------------------------

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        risk, ok = self.risks(pod, nodes)
        cap = nodes.table.capacity
        kept = _Risks(
            np.zeros(cap, dtype=np.bool_),
            {r: np.zeros(cap, dtype=np.float64) for r in (CPU, MEMORY)},
            {r: np.zeros(cap, dtype=np.bool_) for r in (CPU, MEMORY)},
        )
        kept.computed[nodes.slots] = True
        for r in (CPU, MEMORY):
            kept.risk[r][nodes.slots] = risk[r]
            kept.ok[r][nodes.slots] = ok[r]
        state.write(_STATE_KEY, kept)
        cpu_fails = ok[CPU] & (risk[CPU] > self.percentile)
        memory_fails = ok[MEMORY] & (risk[MEMORY] > self.percentile)
        ids = cpu_fails.astype(np.int32) + 2 * memory_fails.astype(np.int32)
        unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return NodeStatuses(
            ids,
            [
                None,
                Status(unresolvable, ERR_REASON_CPU),
                Status(unresolvable, ERR_REASON_MEMORY),
                Status(unresolvable, ERR_REASON_CPU, ERR_REASON_MEMORY),
            ],
        )

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        verdict = self.filter_nodes(state, pod, _single(node, self.handle))
        return verdict.statuses[int(verdict.ids[0])]

    # -- Score ---------------------------------------------------------------------------------

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        kept = state.get(_STATE_KEY)
        if isinstance(kept, _Risks) and bool(kept.computed[nodes.slots].all()):
            risk = {r: kept.risk[r][nodes.slots] for r in (CPU, MEMORY)}
            ok = {r: kept.ok[r][nodes.slots] for r in (CPU, MEMORY)}
        else:
            risk, ok = self.risks(pod, nodes)
        cpu = overload_scores(risk[CPU], self.percentile)
        memory = overload_scores(risk[MEMORY], self.percentile)
        return combine(cpu, ok[CPU], memory, ok[MEMORY]), None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(state, pod, _single(node, self.handle))
        return int(scores[0]), status

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # New statistics arrive as annotation updates; a new or resized node may take the pod.
        action = ActionType.ADD | ActionType.UPDATE_NODE_ANNOTATION
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", action | ActionType.UPDATE_NODE_ALLOCATABLE), None
            )
        ]


class SafeBalance(SafePlugin, ScorePlugin):
    """Prefers nodes with low mean utilization and low variability."""

    name = SAFE_BALANCE
    args_type = SafeBalanceArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(SafeBalanceArgs, args)
        super().__init__(handle, decoded)
        self.forecast_weight = decoded.forecast_weight / 100.0
        self.max_stats_age = decoded.max_stats_age

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        u = self.utilization(pod, nodes)
        cpu = balance_scores(u.mu[CPU], u.sigma[CPU])
        memory = balance_scores(u.mu[MEMORY], u.sigma[MEMORY])
        return combine(cpu, u.ok[CPU], memory, u.ok[MEMORY]), None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(state, pod, _single(node, self.handle))
        return int(scores[0]), status
