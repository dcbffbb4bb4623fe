"""Cluster events as the queue hears them (kube-scheduler's ``framework/events.go``).

An informer update is turned into one event per scheduling property it changed, each with a
single action, because a plugin's registration matches an incoming event only if the event is
as specific as what it registered (:func:`event_matches`): an update that changed a node's
allocatable and its conditions is two events, not one event with both actions.
"""

from __future__ import annotations

from kubesched.api import Node, Pod, pod_requests
from kubesched.framework import ActionType, ClusterEvent

# Event resources. ``Pod`` is what plugins register; incoming pod events are about an
# ``AssignedPod`` (bound) or an ``UnschedulablePod`` (pending), and ``Pod`` matches both.
POD = "Pod"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULABLE_POD = "UnschedulablePod"
NODE = "Node"
WILDCARD = "*"

EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ActionType.ADD)
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(ASSIGNED_POD, ActionType.UPDATE)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, ActionType.DELETE)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(UNSCHEDULABLE_POD, ActionType.ADD)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(UNSCHEDULABLE_POD, ActionType.UPDATE)
EVENT_NODE_ADD = ClusterEvent(NODE, ActionType.ADD)
EVENT_NODE_DELETE = ClusterEvent(NODE, ActionType.DELETE)
#: The wildcard event: every pod it is applied to moves, except pods a PreEnqueue plugin gates.
EVENT_WILDCARD = ClusterEvent(WILDCARD, ActionType.ALL)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.ALL, "UnschedulableTimeout")
EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.ALL, "ForceActivate")

#: Labels of the moves that no cluster event causes (``scheduler_queue_incoming_pods_total``).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"

_ACTION_NAMES = {
    ActionType.ADD: "Add",
    ActionType.DELETE: "Delete",
    ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel",
    ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition",
    ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel",
    ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_TOLERATIONS: "UpdatePodToleration",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
    # An update narrowed to nothing more specific: kube-scheduler's general ``Update``.
    ActionType.UPDATE_OTHER: "Update",
    ActionType.UPDATE: "Update",
    ActionType.ALL: "All",
}


def event_label(event: ClusterEvent) -> str:
    """``ClusterEvent.Label``: ``NodeAdd``, ``AssignedPodDelete``, ``UnschedulableTimeout`` ..."""
    if event.label:
        return event.label
    return f"{event.resource}{_ACTION_NAMES.get(event.action, str(int(event.action)))}"


def is_wildcard(event: ClusterEvent) -> bool:
    return event.resource == WILDCARD and event.action == ActionType.ALL


def event_matches(registered: ClusterEvent, incoming: ClusterEvent) -> bool:
    """``ClusterEvent.Match``: whether an event a plugin registered covers an incoming one.

    A registered ``Pod`` event covers ``AssignedPod`` and ``UnschedulablePod`` events; a registered
    ``*`` resource covers every resource. Actions must overlap, and the incoming action must not be
    broader than the registered one: a plugin registering ``UPDATE_NODE_LABEL`` is not woken by an
    incoming ``UPDATE`` (an update the scheduler could not narrow down), one registering ``UPDATE``
    is woken by ``UPDATE_NODE_LABEL``. An incoming wildcard event matches only a registered
    wildcard.
    """
    if is_wildcard(registered):
        return True
    r = registered.resource
    if not (
        r in (WILDCARD, incoming.resource)
        or (r == POD and incoming.resource in (ASSIGNED_POD, UNSCHEDULABLE_POD))
    ):
        return False
    return bool(registered.action & incoming.action) and incoming.action <= registered.action


def node_scheduling_properties_change(new: Node, old: Node) -> list[ClusterEvent]:
    """``NodeSchedulingPropertiesChange``: one event per scheduling property the update changed,
    in kube-scheduler's order. A node made schedulable again counts as a taint change; one
    cordoned does not count at all (it can make no pod fit)."""
    events: list[ClusterEvent] = []
    if new.spec.unschedulable != old.spec.unschedulable and not new.spec.unschedulable:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT))
    if new.status.allocatable != old.status.allocatable:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_ALLOCATABLE))
    if new.metadata.labels != old.metadata.labels:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL))
    if new.spec.taints != old.spec.taints:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT))
    if {c.type: c.status for c in new.status.conditions} != {
        c.type: c.status for c in old.status.conditions
    }:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_CONDITION))
    if new.metadata.annotations != old.metadata.annotations:
        events.append(ClusterEvent(NODE, ActionType.UPDATE_NODE_ANNOTATION))
    return events


def pod_scheduling_properties_change(new: Pod, old: Pod) -> list[ClusterEvent]:
    """``PodSchedulingPropertiesChange``: the events an update of a pod amounts to.

    The resource is ``AssignedPod`` if ``new`` is bound, else ``UnschedulablePod``. An update that
    changes none of labels, requests (downwards), scheduling gates (all removed), tolerations or
    generated resource claims is ``UPDATE_OTHER``, which only plugins registering a general
    ``UPDATE`` hear.
    """
    resource = ASSIGNED_POD if new.spec.node_name else UNSCHEDULABLE_POD
    actions: list[ActionType] = []
    if new.metadata.labels != old.metadata.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _scaled_down(new, old):
        actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
    if not new.spec.scheduling_gates and old.spec.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    # Tolerations can only be added, so a change of length is a change.
    if len(new.spec.tolerations) != len(old.spec.tolerations):
        actions.append(ActionType.UPDATE_POD_TOLERATIONS)
    # The resourceclaim controller names the claims it made from the pod's templates.
    if new.status.resource_claim_statuses != old.status.resource_claim_statuses:
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    if not actions:
        actions.append(ActionType.UPDATE_OTHER)
    return [ClusterEvent(resource, a) for a in actions]


def _scaled_down(new: Pod, old: Pod) -> bool:
    new_req = pod_requests(new)
    for name, value in pod_requests(old).items():
        if name not in new_req or new_req[name] < value:
            return True
    return False
