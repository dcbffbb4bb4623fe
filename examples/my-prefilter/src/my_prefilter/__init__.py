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

from kubesched.api import Pod
from kubesched.framework import Code, CycleState, Nodes, PreFilterPlugin, PreFilterResult, Status

ANNOTATION = "mycompany.com/environment"

#: What the pod's FailedScheduling event and PodScheduled condition say.
ERR_REASON = f'pod has the annotation "{ANNOTATION}", which MyPreFilter rejects'


class MyPreFilter(PreFilterPlugin):
    """Rejects pods annotated with :data:`ANNOTATION` at PreFilter."""

    name = "MyPreFilter"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        if ANNOTATION in pod.metadata.annotations:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)
        return None, None
