"""NodeName: a pod that names its node runs only there.

kube-scheduler queues only pods whose ``spec.nodeName`` is empty (a pod that names a node is
already assigned and the kubelet simply runs it), so in the scheduling loop this filter rarely
rejects anything. It matters wherever the framework is asked about a pod that does name a
node: a simulation fed with such manifests, or a tool that checks whether a pod fits. kube-scheduler
1.34 has no PreFilter here: the check is a plain Filter.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from kubesched.api import Pod
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
    Status,
)

NAME = "NodeName"

#: The pod's ``spec.nodeName`` names another node.
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node: NodeInfo) -> bool:
    """The pod names no node, or names this one."""
    return not pod.spec.node_name or pod.spec.node_name == node.name


class NodeName(FilterPlugin, EnqueueExtensions):
    """Filters out every node but the one in ``spec.nodeName`` (when set)."""

    name = NAME
    node_local = True
    node_local_reads_pods = False

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        return pod.spec.node_name

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if fits(pod, node):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        want = pod.spec.node_name
        if not want:
            return NodeStatuses.passing(len(nodes))
        slot = nodes.snapshot.slot_of(want)
        fails = np.ones(len(nodes), dtype=np.bool_) if slot is None else nodes.slots != slot
        return NodeStatuses.from_mask(
            fails, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only the named node appearing can help; no hint, the pod is simply retried.
        return [ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD))]
