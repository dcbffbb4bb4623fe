"""PodGroup: schedule a group of pods all together or not at all (gang scheduling).

Members carry ``pod-group.kubesched.io/name`` and ``pod-group.kubesched.io/min-available``. Each
waits at Permit, holding its node, until ``min-available`` members are placed; one that times out
sends every waiting member of its group back to the queue. kubesched's own plugin, registered
through the ``kubesched.plugins`` entry point: docs/plugins/pod-group.md. Workloads that
create scheduler-plugins' ``PodGroup`` objects use :mod:`kubesched.plugins.coscheduling`.
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec
import numpy as np

from kubesched.api import Pod
from kubesched.config import FieldError, decode_args
from kubesched.framework import (
    SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    Nodes,
    PermitPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    ReservePlugin,
    Status,
    WaitingPod,
)

NAME = "PodGroup"

#: The group a pod belongs to (within its namespace).
GROUP_LABEL = "pod-group.kubesched.io/name"
#: How many members must be placed together.
MIN_AVAILABLE_LABEL = "pod-group.kubesched.io/min-available"

DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60

log = logging.getLogger(__name__)


class PodGroupArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``PodGroup``.

    ``permitWaitingTimeSeconds``: how long a placed member waits at Permit for the rest of its
    group before the whole group is rejected (seconds, > 0).
    """

    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS

    def validate(self, path: str) -> list[FieldError]:
        if self.permit_waiting_time_seconds <= 0:
            return [
                FieldError.invalid(
                    f"{path}.permitWaitingTimeSeconds",
                    self.permit_waiting_time_seconds,
                    "must be greater than 0",
                )
            ]
        return []


def group_of(pod: Pod) -> str | None:
    """The pod's group name, or ``None`` if it is in no group."""
    return pod.metadata.labels.get(GROUP_LABEL) or None


def min_available(pod: Pod) -> int | None:
    """The pod's ``min-available`` label as a positive integer, else ``None``."""
    raw = pod.metadata.labels.get(MIN_AVAILABLE_LABEL, "")
    if not (raw.isascii() and raw.isdigit()):
        return None
    n = int(raw)
    return n if n > 0 else None


class PodGroup(PreFilterPlugin, ReservePlugin, PermitPlugin, EnqueueExtensions):
    """All-or-nothing placement of the pods labelled as one group, held at Permit."""

    name = NAME
    args_type = PodGroupArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(PodGroupArgs, args)
        super().__init__(handle, decoded)
        self.timeout = float(decoded.permit_waiting_time_seconds)

    # -- PreFilter: a group needs a valid quorum -------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        if group_of(pod) is None:
            return None, SKIP
        if min_available(pod) is None:
            raw = pod.metadata.labels.get(MIN_AVAILABLE_LABEL)
            label = f"pod group label {MIN_AVAILABLE_LABEL}"
            reason = (
                f"{label} is missing"
                if raw is None
                else f'{label} must be a positive integer, not "{raw}"'
            )
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)
        return None, None

    # -- Permit: wait for the quorum, or complete it ---------------------------------------------

    def placed(self, namespace: str, group: str) -> int:
        """Members of the group counted on nodes: bound, or assumed (waiting at Permit, or this
        very pod); terminating ones excluded."""
        pods = self.handle.snapshot.pods
        mask = pods.label_mask(GROUP_LABEL, lambda v: v == group) & pods.namespace_mask(
            (namespace,)
        )
        return int(np.count_nonzero(pods.rows_where(mask, skip_terminating=True)))

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        group = group_of(pod)
        quorum = min_available(pod)
        if group is None or quorum is None:
            return None, 0.0
        namespace = pod.metadata.namespace
        placed = self.placed(namespace, group)
        if placed < quorum:
            log.debug(
                "pod %s waits for its group %s: %d of %d placed", pod.key, group, placed, quorum
            )
            return Status(Code.WAIT, f"waiting for pod group {group}: {placed}/{quorum}"), (
                self.timeout
            )
        for waiting in self._waiting_members(namespace, group):
            waiting.allow(self.name)
        log.info("pod group %s/%s: %d of %d placed, released", namespace, group, placed, quorum)
        return None, 0.0

    def _waiting_members(self, namespace: str, group: str) -> list[WaitingPod]:
        return [
            w
            for w in self.handle.waiting_pods()
            if w.pod.metadata.namespace == namespace and group_of(w.pod) == group
        ]

    # -- Reserve/Unreserve: one member given up gives up the group -------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        group = group_of(pod)
        if group is None:
            return
        namespace = pod.metadata.namespace
        message = f"pod group {group} rejected: {pod.metadata.name} was not scheduled"
        for waiting in self._waiting_members(namespace, group):
            if waiting.pod.metadata.uid != pod.metadata.uid:
                waiting.reject(self.name, message)

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new member may complete the group; a fixed label may make a pod valid.
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.ADD | ActionType.UPDATE_POD_LABEL),
                self.is_schedulable_after_pod_change,
            ),
            # Room freed or added may let the whole group fit.
            ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE)),
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for a pod of the same group (added, or this pod with its labels changed)."""
        if not isinstance(new, Pod):
            return QueueingHint.QUEUE
        if new.metadata.uid == pod.metadata.uid:
            return QueueingHint.QUEUE
        same = (
            new.metadata.namespace == pod.metadata.namespace
            and group_of(new) is not None
            and group_of(new) == group_of(pod)
        )
        return QueueingHint.QUEUE if same else QueueingHint.SKIP


__all__ = [
    "DEFAULT_PERMIT_WAITING_TIME_SECONDS",
    "GROUP_LABEL",
    "MIN_AVAILABLE_LABEL",
    "NAME",
    "PodGroup",
    "PodGroupArgs",
    "group_of",
    "min_available",
]
