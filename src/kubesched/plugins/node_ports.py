"""NodePorts: a host port can be taken by one pod per node.

A container port with ``hostPort`` set is reachable on the node's own address, so two pods
asking for the same ``hostPort`` and protocol cannot share a node, unless they bind different
host IPs (``hostIP``; empty means ``0.0.0.0``, every address, which conflicts with any IP).
Ports of the regular containers count, and since kube-scheduler 1.34 those of sidecars too
(init containers with ``restartPolicy: Always``, which keep running beside the others).

PreFilter collects the pod's host ports once and Skips pods without any, which is nearly all of
them. Filter then only looks at the nodes where some pod already uses a host port: the node
table keeps that as a column, so the rest are passed over without a lookup. A conflict is
Unschedulable (not Unresolvable): evicting the pod holding the port would free it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from kubesched.api import Pod
from kubesched.framework import (
    SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    HostPort,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
    host_ports,
    ports_conflict,
)
from kubesched.plugins.helper import as_objects

NAME = "NodePorts"

#: Some host port the pod wants is already used on the node.
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME


def fits_ports(wanted: tuple[HostPort, ...], node: NodeInfo) -> bool:
    """No wanted port conflicts with one already used on ``node``."""
    return not node.used_ports or not ports_conflict(node.used_ports, wanted)


class _PreFilterState:
    __slots__ = ("ports",)

    def __init__(self, ports: tuple[HostPort, ...]) -> None:
        self.ports = ports


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Filters out nodes where a host port the pod asks for is taken."""

    name = NAME
    node_local = True

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        return host_ports(pod)

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        ports = host_ports(pod)
        if not ports:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(ports))
        return None, None

    def _wanted(self, state: CycleState) -> tuple[HostPort, ...] | Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status(
                Code.ERROR, f'reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'
            )
        return s.ports

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        wanted = self._wanted(state)
        if isinstance(wanted, Status):
            return wanted
        return None if fits_ports(wanted, node) else Status(Code.UNSCHEDULABLE, ERR_REASON)

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        wanted = self._wanted(state)
        if isinstance(wanted, Status):
            return NodeStatuses(np.ones(len(nodes), dtype=np.int32), [None, wanted])
        fails = np.zeros(len(nodes), dtype=np.bool_)
        at = nodes.snapshot.at
        # Only nodes where some pod already holds a host port can conflict.
        for i in np.flatnonzero(nodes.gather(nodes.table.has_host_ports)).tolist():
            fails[i] = not fits_ports(wanted, at(int(nodes.slots[i])))
        return NodeStatuses.from_mask(fails, Status(Code.UNSCHEDULABLE, ERR_REASON))

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A pod using one of the ports goes away. (Ports of a pod cannot change.)
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE), self.is_schedulable_after_pod_deleted
            ),
            # A new node has every port free; no hint needed.
            ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD)),
        ]

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the deleted pod was on (or nominated to) a node and held a port this pod
        wants."""
        try:
            deleted, _ = as_objects(old, None, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None:
            return QueueingHint.SKIP
        if not deleted.spec.node_name and not deleted.status.nominated_node_name:
            return QueueingHint.SKIP
        used = set(host_ports(deleted))
        if not used or not ports_conflict(used, host_ports(pod)):
            return QueueingHint.SKIP
        return QueueingHint.QUEUE
