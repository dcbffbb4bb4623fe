"""TaintToleration: kube-scheduler's Filter, Score and queueing-hint cases; vectorized forms
equal the per-node ones on random clusters."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Node, Pod
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
from kubesched.plugins.taint_toleration import TaintToleration

PLUGIN = TaintToleration(cast(Handle, None))

Taint = dict[str, str]


def pod_with(*tolerations: dict[str, str], uid: str = "") -> Pod:
    pod = make_pod("pod1", spec={"tolerations": list(tolerations)})
    if uid:
        pod.metadata.uid = uid
    return pod


def node_with(name: str, *taints: Taint) -> Node:
    return make_node(name, taints=taints)


def untolerated(key: str, value: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)")


FILTER_CASES = [
    pytest.param(
        pod_with(),
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        untolerated("dedicated", "user1"),
        id="a pod having no tolerations can't be scheduled onto a node with nonempty taints",
    ),
    pytest.param(
        pod_with({"key": "dedicated", "value": "user1", "effect": "NoSchedule"}),
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        None,
        id="a pod which can be scheduled on a dedicated node assigned to user1",
    ),
    pytest.param(
        pod_with(
            {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}
        ),
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        untolerated("dedicated", "user1"),
        id="a pod which can't be scheduled on a dedicated node assigned to user2",
    ),
    pytest.param(
        pod_with({"key": "foo", "operator": "Exists", "effect": "NoSchedule"}),
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        None,
        id="toleration with operator Exists tolerates the taint",
    ),
    pytest.param(
        pod_with(
            {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "operator": "Exists", "effect": "NoSchedule"},
        ),
        [
            {"key": "dedicated", "value": "user2", "effect": "NoSchedule"},
            {"key": "foo", "value": "bar", "effect": "NoSchedule"},
        ],
        None,
        id="multiple tolerations, all taints tolerated",
    ),
    pytest.param(
        pod_with({"key": "foo", "operator": "Equal", "value": "bar", "effect": "PreferNoSchedule"}),
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        untolerated("foo", "bar"),
        id="key and value match but the (non-empty) effect doesn't",
    ),
    pytest.param(
        pod_with({"key": "foo", "operator": "Equal", "value": "bar"}),
        [{"key": "foo", "value": "bar", "effect": "NoSchedule"}],
        None,
        id="toleration with empty effect matches NoSchedule",
    ),
    pytest.param(
        pod_with(
            {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}
        ),
        [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
        None,
        id="untolerated PreferNoSchedule taint does not filter",
    ),
    pytest.param(
        pod_with(),
        [{"key": "dedicated", "value": "user1", "effect": "PreferNoSchedule"}],
        None,
        id="no toleration, PreferNoSchedule taint only",
    ),
    pytest.param(
        pod_with(),
        [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoExecute"}],
        untolerated("node-role.kubernetes.io/control-plane", ""),
        id="NoExecute filters too, empty value prints empty",
    ),
    pytest.param(
        pod_with({"key": "a", "operator": "Exists"}),
        [
            {"key": "a", "value": "1", "effect": "NoSchedule"},
            {"key": "b", "value": "2", "effect": "PreferNoSchedule"},
            {"key": "c", "value": "3", "effect": "NoExecute"},
            {"key": "d", "value": "4", "effect": "NoSchedule"},
        ],
        untolerated("c", "3"),
        id="the first untolerated NoSchedule/NoExecute taint is named",
    ),
]


@pytest.mark.parametrize(("pod", "taints", "want"), FILTER_CASES)
def test_filter(pod: Pod, taints: list[Taint], want: Status | None) -> None:
    s = Snapshot()
    info = s.set_node(node_with("nodeA", *taints))
    assert PLUGIN.filter(CycleState(), pod, info) == want
    verdict = PLUGIN.filter_nodes(CycleState(), pod, Nodes(s, s.present_slots()))
    assert verdict.statuses[int(verdict.ids[0])] == want


def scores(pod: Pod, nodes: list[Node]) -> dict[str, int]:
    s = Snapshot()
    for n in nodes:
        s.set_node(n)
    all_nodes = Nodes(s, s.present_slots())
    state = CycleState()
    assert PLUGIN.pre_score(state, pod, all_nodes) is None
    raw, status = PLUGIN.score_nodes(state, pod, all_nodes)
    assert status is None
    per_node = [PLUGIN.score(state, pod, info) for info in all_nodes.infos()]
    assert [(int(v), None) for v in raw] == per_node
    assert PLUGIN.normalize_score(state, pod, all_nodes, raw) is None
    return dict(zip(all_nodes.names(), raw.tolist(), strict=True))


PREFER = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("pod", "nodes", "want"),
    [
        pytest.param(
            pod_with({"key": "foo", "operator": "Equal", "value": "bar", "effect": PREFER}),
            [
                node_with("nodeA", {"key": "foo", "value": "bar", "effect": PREFER}),
                node_with("nodeB", {"key": "foo", "value": "blah", "effect": PREFER}),
            ],
            {"nodeA": 100, "nodeB": 0},
            id="node with taints tolerated by the pod scores higher",
        ),
        pytest.param(
            pod_with(
                {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": PREFER},
                {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": PREFER},
            ),
            [
                node_with("nodeA"),
                node_with("nodeB", {"key": "cpu-type", "value": "arm64", "effect": PREFER}),
                node_with(
                    "nodeC",
                    {"key": "cpu-type", "value": "arm64", "effect": PREFER},
                    {"key": "disk-type", "value": "ssd", "effect": PREFER},
                ),
            ],
            {"nodeA": 100, "nodeB": 100, "nodeC": 100},
            id="the number of tolerated taints does not matter",
        ),
        pytest.param(
            pod_with({"key": "foo", "operator": "Equal", "value": "bar", "effect": PREFER}),
            [
                node_with("nodeA"),
                node_with("nodeB", {"key": "cpu-type", "value": "arm64", "effect": PREFER}),
                node_with(
                    "nodeC",
                    {"key": "cpu-type", "value": "arm64", "effect": PREFER},
                    {"key": "disk-type", "value": "ssd", "effect": PREFER},
                ),
            ],
            {"nodeA": 100, "nodeB": 50, "nodeC": 0},
            id="the more intolerable taints a node has, the lower its score",
        ),
        pytest.param(
            pod_with(
                {"key": "cpu-type", "operator": "Equal", "value": "arm64", "effect": "NoSchedule"},
                {"key": "disk-type", "operator": "Equal", "value": "ssd", "effect": "NoSchedule"},
            ),
            [
                node_with("nodeA"),
                node_with("nodeB", {"key": "cpu-type", "value": "arm64", "effect": "NoSchedule"}),
                node_with(
                    "nodeC",
                    {"key": "cpu-type", "value": "arm64", "effect": PREFER},
                    {"key": "disk-type", "value": "ssd", "effect": PREFER},
                ),
            ],
            {"nodeA": 100, "nodeB": 100, "nodeC": 0},
            id="only PreferNoSchedule taints and tolerations count",
        ),
        pytest.param(
            pod_with(),
            [
                node_with("nodeA"),
                node_with("nodeB", {"key": "cpu-type", "value": "arm64", "effect": PREFER}),
            ],
            {"nodeA": 100, "nodeB": 0},
            id="default: no taints and tolerations, lands on the node with no taints",
        ),
        pytest.param(
            pod_with({"key": "cpu-type", "operator": "Exists"}),
            [
                node_with("nodeA"),
                node_with("nodeB", {"key": "cpu-type", "value": "x", "effect": PREFER}),
            ],
            {"nodeA": 100, "nodeB": 100},
            id="a toleration without effect tolerates PreferNoSchedule",
        ),
    ],
)
def test_score(pod: Pod, nodes: list[Node], want: dict[str, int]) -> None:
    assert scores(pod, nodes) == want


def test_score_without_pre_score_is_an_error() -> None:
    s = Snapshot()
    info = s.set_node(node_with("n"))
    _, status = PLUGIN.score(CycleState(), make_pod("p"), info)
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == 'failed to read "PreScoreTaintToleration" from cycleState: not found'
    _, status = PLUGIN.score_nodes(CycleState(), make_pod("p"), Nodes(s, s.present_slots()))
    assert status is not None
    assert status.code == Code.ERROR


KEYS = ["a", "b", "c"]
VALUES = ["", "x", "y"]
EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]


def random_taints(rng: random.Random) -> list[Taint]:
    return [
        {"key": rng.choice(KEYS), "value": rng.choice(VALUES), "effect": rng.choice(EFFECTS)}
        for _ in range(rng.randint(0, 3))
    ]


def random_toleration(rng: random.Random) -> dict[str, str]:
    t: dict[str, str] = {}
    if rng.random() < 0.8:
        t["key"] = rng.choice(KEYS)
    if rng.random() < 0.5:
        t["operator"] = "Exists"
    else:
        t["operator"] = rng.choice(["Equal", ""])
        t["value"] = rng.choice(VALUES)
    if rng.random() < 0.7:
        t["effect"] = rng.choice(EFFECTS)
    return t


def test_vectorized_matches_per_node_on_random_clusters() -> None:
    rng = random.Random(11)
    for _ in range(60):
        s = Snapshot()
        n = rng.randint(1, 40)
        for i in range(n):
            s.set_node(node_with(f"n{i}", *random_taints(rng)))
        for i in rng.sample(range(n), k=n // 4):
            s.remove_node(f"n{i}")
        pod = pod_with(*(random_toleration(rng) for _ in range(rng.randint(0, 3))))
        nodes = Nodes(s, s.present_slots())
        # Also a subset of nodes, in another order, as after earlier filters.
        sub = Nodes(
            s, np.array(rng.sample(nodes.slots.tolist(), k=len(nodes) // 2), dtype=np.int64)
        )
        for group in (nodes, sub):
            verdict = PLUGIN.filter_nodes(CycleState(), pod, group)
            per_node = [PLUGIN.filter(CycleState(), pod, info) for info in group.infos()]
            assert [verdict.statuses[int(k)] for k in verdict.ids] == per_node
            state = CycleState()
            PLUGIN.pre_score(state, pod, group)
            raw, _ = PLUGIN.score_nodes(state, pod, group)
            assert raw.tolist() == [PLUGIN.score(state, pod, i)[0] for i in group.infos()]


def test_events_to_register() -> None:
    events = PLUGIN.events_to_register()
    assert [e.event for e in events] == [
        ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent("Pod", ActionType.UPDATE_POD_TOLERATIONS),
    ]
    assert all(e.hint is not None for e in events)


USER2 = {"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}
TAINT_USER1 = {"key": "dedicated", "value": "user1", "effect": "NoSchedule"}
TAINT_USER2 = {"key": "dedicated", "value": "user2", "effect": "NoSchedule"}
TAINT_USER3 = {"key": "dedicated", "value": "user3", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(
            "not-a-node",
            node_with("nodeA", TAINT_USER1),
            QueueingHint.QUEUE,
            id="backoff-wrong-old-object",
        ),
        pytest.param(
            None,
            node_with("nodeA", TAINT_USER1),
            QueueingHint.SKIP,
            id="skip-queue-on-untoleratedtaint-node-added",
        ),
        pytest.param(
            None,
            node_with("nodeA", TAINT_USER2),
            QueueingHint.QUEUE,
            id="queue-on-toleratedtaint-node-added",
        ),
        pytest.param(
            node_with("nodeA", TAINT_USER1),
            node_with("nodeA", TAINT_USER1, TAINT_USER3),
            QueueingHint.SKIP,
            id="skip-unrelated-change",
        ),
        pytest.param(
            node_with("nodeA", TAINT_USER1),
            node_with("nodeA", TAINT_USER2),
            QueueingHint.QUEUE,
            id="queue-on-taint-change",
        ),
        pytest.param(
            node_with("nodeA", TAINT_USER2),
            node_with("nodeA"),
            QueueingHint.SKIP,
            id="skip-when-it-was-already-tolerated",
        ),
    ],
)
def test_node_change_hint(old: Any, new: Any, want: QueueingHint) -> None:
    assert PLUGIN.is_schedulable_after_node_change(pod_with(USER2), old, new) is want


@pytest.mark.parametrize(
    ("new", "want"),
    [
        pytest.param("not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(pod_with(USER2, uid="uid1"), QueueingHint.SKIP, id="skip-updates-other-pod"),
        pytest.param(
            pod_with(USER2, uid="uid0"), QueueingHint.QUEUE, id="queue-on-toleration-added"
        ),
    ],
)
def test_pod_toleration_hint(new: Any, want: QueueingHint) -> None:
    target = pod_with(uid="uid0")
    assert PLUGIN.is_schedulable_after_pod_toleration_change(target, target, new) is want
