"""MyPreFilter: the PreFilter tutorial's plugin, written against kubesched's public API.

It rejects, at PreFilter, every pod that carries the annotation ``mycompany.com/environment``
(whatever its value), before any node is looked at. The rejection is
UnschedulableAndUnresolvable: no node and no preemption can change it, so the pod stays Pending
with this plugin's message until the annotation is removed. Every other pod is left to the rest
of the profile.

kubesched's own AnnotationGate does the same with the annotation keys configurable; this one is
the tutorial's, kept as small as a plugin can be.
"""

from __future__ import annotations

from typing import Any

from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Nodes,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
)

ANNOTATION = "mycompany.com/environment"

#: What the pod's FailedScheduling event and PodScheduled condition say.
ERR_REASON = f'pod has the annotation "{ANNOTATION}", which MyPreFilter rejects'


class MyPreFilter(PreFilterPlugin, EnqueueExtensions):
    """Rejects pods annotated with :data:`ANNOTATION` at PreFilter."""

    name = "MyPreFilter"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        if ANNOTATION in pod.metadata.annotations:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)
        return None, None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only an update of the pod itself can remove the annotation; nothing else is worth
        # trying the pod again for.
        return [ClusterEventWithHint(ClusterEvent("Pod", ActionType.UPDATE), self._pod_updated)]

    def _pod_updated(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, Pod):  # not a pod update after all: try again, to be safe
            return QueueingHint.QUEUE
        if new.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        return QueueingHint.SKIP if ANNOTATION in new.metadata.annotations else QueueingHint.QUEUE
