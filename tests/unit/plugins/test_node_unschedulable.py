"""NodeUnschedulable: kube-scheduler's Filter and queueing-hint cases; vectorized == per node."""

from __future__ import annotations

import random
from typing import Any, cast

import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Nodes,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins.node_unschedulable import ERR_REASON_UNSCHEDULABLE, NodeUnschedulable

PLUGIN = NodeUnschedulable(cast(Handle, None))
REJECTED = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were unschedulable")


def tolerating(*tolerations: dict[str, str], uid: str = "") -> Pod:
    pod = make_pod("p", spec={"tolerations": list(tolerations)})
    if uid:
        pod.metadata.uid = uid
    return pod


UNSCHEDULABLE_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("pod", "unschedulable", "want"),
    [
        pytest.param(make_pod("p"), False, None, id="schedulable node"),
        pytest.param(make_pod("p"), True, REJECTED, id="cordoned node, no toleration"),
        pytest.param(
            tolerating(UNSCHEDULABLE_TOLERATION), True, None, id="cordoned node, pod tolerates"
        ),
        pytest.param(
            tolerating({"operator": "Exists"}), True, None, id="cordoned node, tolerate-all"
        ),
        pytest.param(
            tolerating({"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute"}),
            True,
            REJECTED,
            id="toleration with another effect does not count",
        ),
        pytest.param(
            tolerating({"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}),
            True,
            None,
            id="toleration without effect counts",
        ),
    ],
)
def test_filter(pod: Pod, unschedulable: bool, want: Status | None) -> None:
    s = Snapshot()
    info = s.set_node(make_node("n", unschedulable=unschedulable))
    assert PLUGIN.filter(CycleState(), pod, info) == want
    verdict = PLUGIN.filter_nodes(CycleState(), pod, Nodes(s, s.present_slots()))
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_vectorized_matches_per_node_on_random_clusters() -> None:
    rng = random.Random(7)
    for _ in range(30):
        s = Snapshot()
        for i in range(rng.randint(1, 40)):
            s.set_node(make_node(f"n{i}", unschedulable=rng.random() < 0.4))
        for i in rng.sample(range(len(s)), k=len(s) // 4):
            s.remove_node(f"n{i}")
        pod = rng.choice([make_pod("p"), tolerating(UNSCHEDULABLE_TOLERATION)])
        nodes = Nodes(s, s.present_slots())
        verdict = PLUGIN.filter_nodes(CycleState(), pod, nodes)
        per_node = [PLUGIN.filter(CycleState(), pod, info) for info in nodes.infos()]
        assert [verdict.statuses[int(k)] for k in verdict.ids] == per_node


def test_events_to_register() -> None:
    events = [e.event for e in PLUGIN.events_to_register()]
    assert events == [
        ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent("Pod", ActionType.UPDATE_POD_TOLERATIONS),
    ]
    assert all(e.hint is not None for e in PLUGIN.events_to_register())


CORDONED = make_node("n", unschedulable=True)
SCHEDULABLE = make_node("n")


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param("not-a-node", SCHEDULABLE, QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(
            None, CORDONED, QueueingHint.SKIP, id="skip-queue-on-unschedulable-node-added"
        ),
        pytest.param(None, SCHEDULABLE, QueueingHint.QUEUE, id="queue-on-schedulable-node-added"),
        pytest.param(CORDONED, SCHEDULABLE, QueueingHint.QUEUE, id="queue-on-node-uncordoned"),
        pytest.param(SCHEDULABLE, SCHEDULABLE, QueueingHint.SKIP, id="skip-unrelated-change"),
        pytest.param(SCHEDULABLE, CORDONED, QueueingHint.SKIP, id="skip-node-cordoned"),
    ],
)
def test_node_change_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_node_change(make_pod("p"), old, new) is want


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param("not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            tolerating(UNSCHEDULABLE_TOLERATION, uid="other"),
            QueueingHint.SKIP,
            id="skip-updates-other-pod",
        ),
        pytest.param(
            tolerating({"key": "foo", "operator": "Exists"}, uid="target"),
            QueueingHint.SKIP,
            id="skip-unrelated-toleration-added",
        ),
        pytest.param(
            tolerating(UNSCHEDULABLE_TOLERATION, uid="target"),
            QueueingHint.QUEUE,
            id="queue-when-the-unschedulable-toleration-is-added",
        ),
    ],
)
def test_pod_toleration_hint(new: Any, want: QueueingHint) -> None:
    target = tolerating(uid="target")
    assert PLUGIN.is_schedulable_after_pod_toleration_change(target, target, new) is want


def test_reason_constant() -> None:
    assert ERR_REASON_UNSCHEDULABLE == "node(s) were unschedulable"
