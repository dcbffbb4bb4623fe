"""SchedulingGates: keep pods with ``spec.schedulingGates`` out of the active queue.

A scheduling gate is a name in the pod's ``spec.schedulingGates`` list. As long as the list is
not empty the pod is not even tried: some controller outside the scheduler (a quota system, a
batch admission controller) holds it back and removes its gate when the pod may go. This
plugin runs at PreEnqueue, before the pod enters the active queue, so a gated pod costs no
scheduling cycles; when the last gate is removed the pod update brings it in.
"""

from __future__ import annotations

from typing import Any

from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    EnqueueExtensions,
    PreEnqueuePlugin,
    QueueingHint,
    Status,
)
from kubesched.plugins.helper import as_objects

NAME = "SchedulingGates"

#: The pod still has gates; the gate names follow as Go prints a string list (``[a b]``).
ERR_REASON_WAITING_FOR_GATES = "waiting for scheduling gates: {gates}"


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    """Rejects a pod at PreEnqueue while ``spec.schedulingGates`` is not empty."""

    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status | None:
        gates = pod.spec.scheduling_gates
        if not gates:
            return None
        names = " ".join(g.name for g in gates)
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ERR_REASON_WAITING_FOR_GATES.format(gates=f"[{names}]"),
        )

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only the pod's own update that removes its last gate can let it in.
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                self.is_schedulable_after_gates_eliminated,
            )
        ]

    def is_schedulable_after_gates_eliminated(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue the pod only when the update is to this very pod."""
        try:
            _, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE
