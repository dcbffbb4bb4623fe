"""NodeResourcesBalancedAllocation: favour nodes whose resources stay evenly used.

For each resource in ``resources`` (default cpu and memory) the plugin takes the share of the
node's allocatable that would be requested once the pod is placed there,
``fraction = (requested on the node + the pod's request) / allocatable``, capped at 1. Unlike
NodeResourcesFit's scoring it uses the requests as written (a container without a request counts
as 0). A scalar resource the pod does not request, and any resource the node has none of, is left
out. The score is ``int((1 - std) * 100)``, where ``std`` is the population standard deviation of
the fractions: with two fractions ``|f1 - f2| / 2``, with more
``sqrt(sum((f - mean)**2) / count)``, with fewer 0. A node where cpu and memory would be 75% and
50% used scores ``int((1 - 0.125) * 100) = 87``; one at 50% and 50% scores 100.

A pod that requests none of the resources (a BestEffort pod, for the defaults) is not scored at
all: PreScore returns Skip, so such pods are not all drawn to the same balanced node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import Pod
from kubesched.config import (
    ConfigError,
    NodeResourcesBalancedAllocationArgs,
    decode_args,
    validate_args,
)
from kubesched.framework import (
    SKIP,
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    PreScorePlugin,
    RowDerived,
    ScorePlugin,
    Status,
)
from kubesched.plugins.node_resources._allocation import (
    FEW_ROWS,
    FloatColumns,
    Scratch,
    WeightedResource,
    balanced_resource_score,
    balanced_scores,
    node_lists,
    pod_request_list,
)

NAME = "NodeResourcesBalancedAllocation"
PRE_SCORE_STATE_KEY = "PreScore" + NAME


@dataclass(slots=True)
class PreScoreState:
    """The pod's request of each configured resource (``balancedAllocationPreScoreState``)."""

    pod_requests: list[int]

    def clone(self) -> PreScoreState:
        return self


class BalancedAllocation(PreScorePlugin, ScorePlugin):
    """Scores nodes by how evenly the configured resources would be used with the pod."""

    name = NAME
    node_local = True
    args_type = NodeResourcesBalancedAllocationArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        if args is None:
            args = decode_args(NodeResourcesBalancedAllocationArgs, None)
        if not isinstance(args, NodeResourcesBalancedAllocationArgs):
            raise TypeError(
                "want args to be of type NodeResourcesBalancedAllocationArgs, "
                f"got {type(args).__name__}"
            )
        errors = validate_args(args)
        if errors:
            raise ConfigError(errors)
        super().__init__(handle, args)
        self._scratch = Scratch()
        self._columns = FloatColumns()
        self._scores = RowDerived()
        self.resources = [WeightedResource(r.name, int(r.weight)) for r in args.resources]

    def _pod_request_list(self, state: CycleState, pod: Pod) -> list[int]:
        return pod_request_list(state.pod_info_of(pod), self.resources, use_requested=True)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        requests = self._pod_request_list(state, pod)
        if not any(requests):
            # Scoring best-effort pods would send them all to the same node.
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(requests))
        return None

    def _requests(self, state: CycleState, pod: Pod) -> list[int]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, PreScoreState):
            return s.pod_requests
        return self._pod_request_list(state, pod)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        requests = self._requests(state, pod)
        if not any(requests):
            return 0, None
        return self._node_score(requests, node), None

    def _node_score(self, requests: list[int], node: NodeInfo) -> int:
        requested, allocatable = node_lists(node, self.resources, requests, True)
        return balanced_resource_score(requested, allocatable)

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        n = len(nodes)
        requests = self._requests(state, pod)
        if not any(requests):
            return np.zeros(n, dtype=np.int64), None
        t = nodes.table
        at = nodes.snapshot.at

        def scores_of(slots: IntArray) -> IntArray:
            if len(slots) > FEW_ROWS:
                return balanced_scores(
                    t, slots, self.resources, requests, self._scratch, self._columns
                )
            return np.fromiter(
                (self._node_score(requests, at(slot)) for slot in slots.tolist()),
                np.int64,
                len(slots),
            )

        return self._scores.get(t, tuple(requests), nodes.slots, scores_of), None


__all__ = ["NAME", "PRE_SCORE_STATE_KEY", "BalancedAllocation", "PreScoreState"]
