"""NodeUnschedulable: keep pods off cordoned nodes.

``kubectl cordon`` sets a node's ``spec.unschedulable``; from then on no new pod should land
there, unless the pod says it does not mind. A pod says so with a toleration for the
``node.kubernetes.io/unschedulable:NoSchedule`` taint (the node lifecycle controller also puts
that taint on cordoned nodes, and DaemonSet pods carry the toleration).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from kubesched.api import TAINT_EFFECT_NO_SCHEDULE, Node, Pod, Taint, toleration_tolerates_taint
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeInfo,
    Nodes,
    NodeStatuses,
    QueueingHint,
    Status,
    node_for,
)
from kubesched.plugins.helper import as_objects

NAME = "NodeUnschedulable"

#: The node is cordoned (``spec.unschedulable``) and the pod does not tolerate that.
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
#: Kept for parity with kube-scheduler, which defines it but no longer returns it.
ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"

#: The taint a pod tolerates to be allowed onto cordoned nodes.
TAINT_NODE_UNSCHEDULABLE = Taint(
    key="node.kubernetes.io/unschedulable", effect=TAINT_EFFECT_NO_SCHEDULE
)


def tolerates_unschedulable(pod: Pod) -> bool:
    """Whether some toleration of ``pod`` tolerates :data:`TAINT_NODE_UNSCHEDULABLE`."""
    return any(
        toleration_tolerates_taint(t, TAINT_NODE_UNSCHEDULABLE) for t in pod.spec.tolerations
    )


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    """Filters out nodes with ``spec.unschedulable`` unless the pod tolerates it."""

    name = NAME
    node_local = True
    node_local_reads_pods = False

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        return tolerates_unschedulable(pod)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not node_for(node).spec.unschedulable or tolerates_unschedulable(pod):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE)

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        unschedulable = nodes.table.unschedulable
        # No node cordoned (the usual case) is one cheap look at the column.
        if not np.count_nonzero(unschedulable) or tolerates_unschedulable(pod):
            return NodeStatuses.passing(len(nodes))
        cordoned = nodes.gather(unschedulable)
        return NodeStatuses.from_mask(
            np.asarray(cordoned, dtype=np.bool_),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE),
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A node added schedulable, or uncordoned.
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                self.is_schedulable_after_node_change,
            ),
            # The pod itself gains the toleration.
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_TOLERATIONS),
                self.is_schedulable_after_pod_toleration_change,
            ),
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node is added schedulable or goes from unschedulable to schedulable."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.spec.unschedulable:
            return QueueingHint.SKIP
        if original is None or original.spec.unschedulable:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_toleration_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        """Queue when this pod's update makes it tolerate the unschedulable taint.

        Tolerations can only be added to a pod, never changed or removed, and a pod that
        already tolerated the taint was not rejected here: so looking at the new pod suffices.
        """
        try:
            _, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE if tolerates_unschedulable(modified) else QueueingHint.SKIP
