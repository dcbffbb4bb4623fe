"""DynamicResources: kube-scheduler's dynamic resource allocation plugin, for pods without claims.

In kube-scheduler v1.34 this plugin (on by default with the ``DynamicResourceAllocation`` gate)
allocates the devices a pod asks for through ``spec.resourceClaims``: it reads ResourceClaims,
DeviceClasses and ResourceSlices, evaluates CEL device selectors in Filter, allocates in Reserve
and writes the allocation in PreBind. kubesched does not allocate devices. What it ports is
everything the plugin does for a pod that claims nothing, which is what decides every such
pod's FailedScheduling message:

- PreFilter records that the pod has no claims and returns Skip, so Filter never runs for it;
- PostFilter, which runs before DefaultPreemption, answers Unschedulable
  ``no new claims to deallocate``; the framework joins it with the preemption part, as in
  ``0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, preemption: ...``.

A pod with resource claims is rejected at PreFilter, UnschedulableAndUnresolvable, with a message
that says kubesched does not allocate them: placing it while ignoring its claims would start it
where its devices may not be, and leave the claims unallocated.
"""

from __future__ import annotations

from kubesched.api import Pod
from kubesched.config import DynamicResourcesArgs
from kubesched.framework import (
    SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Nodes,
    PostFilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    Status,
)

NAME = "DynamicResources"

#: PostFilter for a pod without claims: there is no allocation to undo to make room.
MSG_NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
#: PostFilter for a pod with claims, none of which was found unavailable on a node (kubesched
#: rejects such pods before Filter, so none ever is).
MSG_STILL_NOT_SCHEDULABLE = "still not schedulable"
#: PostFilter when PreFilter did not run (CycleState's ``ErrNotFound``).
ERR_STATE_NOT_FOUND = "not found"
#: PreFilter for a pod with claims.
ERR_CLAIMS_NOT_SUPPORTED = (
    "pod has resource claims ({claims}): kubesched does not allocate dynamic resources"
)

_STATE_KEY = f"PreFilter{NAME}"


class DynamicResources(PreFilterPlugin, PostFilterPlugin, EnqueueExtensions):
    """Skips pods without resource claims and gives them kube-scheduler's PostFilter message;
    rejects pods with claims (see the module docstring)."""

    name = NAME
    args_type = DynamicResourcesArgs

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        claims = [c.name for c in pod.spec.resource_claims]
        state.write(_STATE_KEY, bool(claims))
        if not claims:
            return None, SKIP
        return None, Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            ERR_CLAIMS_NOT_SUPPORTED.format(claims=", ".join(claims)),
        )

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        try:
            has_claims = state.read(_STATE_KEY, bool)
        except KeyError:
            # PreFilter did not run: an earlier PreFilter plugin rejected the pod. kube-scheduler's
            # plugin then fails reading its state, and its error ends the FailedScheduling
            # message as it is (recorded from v1.34.4: "... PersistentVolumeClaims. not found").
            return None, Status(Code.ERROR, ERR_STATE_NOT_FOUND)
        message = MSG_STILL_NOT_SCHEDULABLE if has_claims else MSG_NO_CLAIMS_TO_DEALLOCATE
        return None, Status(Code.UNSCHEDULABLE, message)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # kube-scheduler's node events (with queueing hints on, as in v1.34); its ResourceClaim,
        # DeviceClass and ResourceSlice events concern allocation, which kubesched does not do.
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    "Node",
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_ALLOCATABLE,
                )
            )
        ]


__all__ = [
    "ERR_CLAIMS_NOT_SUPPORTED",
    "ERR_STATE_NOT_FOUND",
    "MSG_NO_CLAIMS_TO_DEALLOCATE",
    "MSG_STILL_NOT_SCHEDULABLE",
    "NAME",
    "DynamicResources",
]
