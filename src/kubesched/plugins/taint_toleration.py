"""TaintToleration: nodes repel pods with taints; pods accept some taints with tolerations.

A *taint* on a node is ``key=value:effect``. A *toleration* on a pod names taints the pod accepts
(by key and value, or by key alone with ``operator: Exists``; an empty key with ``Exists``
accepts everything; an empty effect matches every effect). The effect says how hard the node
pushes back:

- ``NoSchedule`` and ``NoExecute``: a pod that does not tolerate such a taint cannot go there
  (Filter), with the reason ``node(s) had untolerated taint(s)`` (v1.34 does not name the taint,
  so nodes with different taints add up to one count in the FailedScheduling message).
- ``PreferNoSchedule``: the node is avoided but not forbidden (Score). A node scores lower the
  more ``PreferNoSchedule`` taints it has that the pod does not tolerate; after normalization
  the node with the most such taints gets 0 and nodes with none get 100.

Vectorized over the node table's interned taint sets: nodes share a handful of distinct taint
lists, so each distinct list is checked once per pod and the verdict gathered to every node.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import msgspec
import numpy as np

from kubesched.api import (
    TAINT_EFFECT_PREFER_NO_SCHEDULE,
    Node,
    Pod,
    Taint,
    Toleration,
    find_untolerated_taint,
    toleration_tolerates_taint,
)
from kubesched.framework import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreScorePlugin,
    QueueingHint,
    ScorePlugin,
    Status,
    node_for,
)
from kubesched.plugins.helper import (
    DO_NOT_SCHEDULE_TAINT_EFFECTS,
    as_objects,
    default_normalize_score,
)

NAME = "TaintToleration"

#: Filter reason for a node with a NoSchedule/NoExecute taint the pod does not tolerate, as the
#: real kube-scheduler v1.34.4 writes it (recorded by the conformance suite).
ERR_REASON_UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
#: kube-scheduler exports this older wording as ``ErrReasonNotMatch``; Filter does not use it.
ERR_REASON_NOT_MATCH = "node(s) had taints that the pod didn't tolerate"

#: CycleState key for the tolerations Score looks at, written by PreScore.
PRE_SCORE_STATE_KEY = "PreScore" + NAME


def untolerated_taint_reason(taint: Taint) -> str:
    """The Filter reason for a node where ``taint`` is the first one not tolerated."""
    del taint  # v1.34 reports the fact, not the taint
    return ERR_REASON_UNTOLERATED_TAINT


def prefer_no_schedule_tolerations(tolerations: list[Toleration]) -> tuple[Toleration, ...]:
    """The tolerations that can tolerate a ``PreferNoSchedule`` taint (that effect, or none)."""
    return tuple(
        t for t in tolerations if not t.effect or t.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE
    )


def count_intolerable_prefer_no_schedule(
    taints: tuple[Taint, ...] | list[Taint], tolerations: tuple[Toleration, ...]
) -> int:
    """How many ``PreferNoSchedule`` taints no toleration tolerates: the raw score (lower is
    better)."""
    return sum(
        1
        for taint in taints
        if taint.effect == TAINT_EFFECT_PREFER_NO_SCHEDULE
        and not any(toleration_tolerates_taint(t, taint) for t in tolerations)
    )


class _PreScoreState:
    __slots__ = ("tolerations",)

    def __init__(self, tolerations: tuple[Toleration, ...]) -> None:
        self.tolerations = tolerations


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    """Filter on NoSchedule/NoExecute taints; score by untolerated PreferNoSchedule taints."""

    name = NAME
    node_local = True
    node_local_reads_pods = False

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        return msgspec.json.encode(pod.spec.tolerations)

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        taint = find_untolerated_taint(
            node_for(node).spec.taints, pod.spec.tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS
        )
        if taint is None:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, untolerated_taint_reason(taint))

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        column = nodes.table.taints
        tolerations = pod.spec.tolerations
        statuses: list[Status | None] = [None]
        by_reason: dict[str, int] = {}
        # Each distinct taint set once (there are few), then gathered to every node.
        lut = np.zeros(len(column.values), dtype=np.int32)
        for vid, taints in enumerate(column.values):
            taint = find_untolerated_taint(taints, tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS)
            if taint is None:
                continue
            reason = untolerated_taint_reason(taint)
            k = by_reason.get(reason)
            if k is None:
                k = by_reason[reason] = len(statuses)
                statuses.append(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason))
            lut[vid] = k
        if len(statuses) == 1:
            # No taint set on any node keeps the pod off.
            return NodeStatuses.passing(len(nodes))
        return NodeStatuses(lut.take(nodes.gather(column.ids)), statuses)

    # -- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        state.write(
            PRE_SCORE_STATE_KEY,
            _PreScoreState(prefer_no_schedule_tolerations(pod.spec.tolerations)),
        )
        return None

    def _tolerations(self, state: CycleState) -> tuple[Toleration, ...] | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return Status(
                Code.ERROR, f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState: not found'
            )
        return s.tolerations

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        tolerations = self._tolerations(state)
        if isinstance(tolerations, Status):
            return 0, tolerations
        return count_intolerable_prefer_no_schedule(node_for(node).spec.taints, tolerations), None

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        tolerations = self._tolerations(state)
        if isinstance(tolerations, Status):
            return np.zeros(len(nodes), dtype=np.int64), tolerations
        column = nodes.table.taints
        lut = np.fromiter(
            (count_intolerable_prefer_no_schedule(v, tolerations) for v in column.values),
            dtype=np.int64,
            count=len(column.values),
        )
        if not np.count_nonzero(lut):
            return np.zeros(len(nodes), dtype=np.int64), None
        return lut.take(nodes.gather(column.ids)), None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        # More untolerated PreferNoSchedule taints is worse: reverse.
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                self.is_schedulable_after_node_change,
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_TOLERATIONS),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the node went from having an untolerated taint (or not existing) to
        having none."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        tolerations = pod.spec.tolerations
        was_untolerated = original is None or (
            find_untolerated_taint(original.spec.taints, tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS)
            is not None
        )
        is_untolerated = (
            find_untolerated_taint(modified.spec.taints, tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS)
            is not None
        )
        if was_untolerated and not is_untolerated:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        """Queue when the pod itself got a new toleration (tolerations can only be added)."""
        try:
            _, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is not None and modified.metadata.uid == pod.metadata.uid:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP
