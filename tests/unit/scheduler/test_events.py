"""Informer updates as cluster events: one event per changed property, kube-scheduler's order."""

from __future__ import annotations

import msgspec

from builders import make_node, make_pod
from kubesched.api import Node, Pod
from kubesched.framework import ActionType, ClusterEvent
from kubesched.scheduler._events import (
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_WILDCARD,
    event_label,
    event_matches,
    node_scheduling_properties_change,
    pod_scheduling_properties_change,
)


def _actions(new: Node, old: Node) -> list[ActionType]:
    events = node_scheduling_properties_change(new, old)
    assert all(e.resource == "Node" for e in events)
    return [e.action for e in events]


def test_a_status_update_is_one_event_per_property() -> None:
    bare = msgspec.convert({"metadata": {"name": "n"}}, Node)
    assert _actions(make_node("n"), bare) == [
        ActionType.UPDATE_NODE_ALLOCATABLE,
        ActionType.UPDATE_NODE_CONDITION,
    ]


def test_each_property_in_kube_schedulers_order() -> None:
    old = make_node("n", unschedulable=True)
    new = make_node(
        "n",
        cpu="8",
        labels={"zone": "a"},
        taints=[{"key": "k", "effect": "NoSchedule"}],
    )
    assert _actions(new, old) == [
        ActionType.UPDATE_NODE_TAINT,  # made schedulable
        ActionType.UPDATE_NODE_ALLOCATABLE,
        ActionType.UPDATE_NODE_LABEL,
        ActionType.UPDATE_NODE_TAINT,
    ]


def test_a_cordon_is_no_event_and_an_unchanged_node_none() -> None:
    node = make_node("n")
    assert _actions(make_node("n", unschedulable=True), node) == []
    assert _actions(node, node) == []


def test_a_combined_incoming_action_matches_no_single_registration() -> None:
    registered = ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)
    allocatable = ClusterEvent("Node", ActionType.UPDATE_NODE_ALLOCATABLE)
    both = ClusterEvent(
        "Node", ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_CONDITION
    )
    assert event_matches(registered, allocatable)
    # Why updates are split: an event broader than the registration does not match it.
    assert not event_matches(registered, both)


def test_labels_as_kube_scheduler_names_them() -> None:
    assert event_label(ClusterEvent("Node", ActionType.UPDATE_NODE_ALLOCATABLE)) == (
        "NodeUpdateNodeAllocatable"
    )
    assert event_label(ClusterEvent("AssignedPod", ActionType.DELETE)) == "AssignedPodDelete"
    assert event_label(ClusterEvent("UnschedulablePod", ActionType.UPDATE_OTHER)) == (
        "UnschedulablePodUpdate"
    )
    assert event_label(EVENT_UNSCHEDULABLE_TIMEOUT) == "UnschedulableTimeout"
    assert event_label(EVENT_FORCE_ACTIVATE) == "ForceActivate"
    # The label does not take part in matching.
    assert EVENT_FORCE_ACTIVATE == EVENT_WILDCARD


def test_a_claim_named_in_a_pods_status_is_its_own_event() -> None:
    pod = make_pod("p")
    raw = msgspec.to_builtins(pod)
    raw["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]
    claimed = msgspec.convert(raw, Pod)
    events = pod_scheduling_properties_change(claimed, pod)
    assert events == [
        ClusterEvent("UnschedulablePod", ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    ]
