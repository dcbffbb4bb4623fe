"""NodeAffinity: kube-scheduler's PreFilter/Filter, Score and queueing-hint cases; the
vectorized Filter and Score equal the per-node ones on random clusters."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Node, NodeSelectorRequirement, Pod, node_selector_requirement_matches
from kubesched.config import ConfigError, NodeAffinityArgs
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Nodes,
    PreFilterResult,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins.node_affinity import NodeAffinity

Json = dict[str, Any]
NO_HANDLE = cast(Handle, None)

POD_REASON = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match Pod's node affinity/selector"
)
ENFORCED_REASON = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match scheduler-enforced node affinity"
)
CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "pod affinity terms conflict")
SKIP = Status(Code.SKIP)


def expr(key: str, op: str, *values: str) -> Json:
    return {"key": key, "operator": op, "values": list(values)}


def name_in(*names: str) -> Json:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def term(*exprs: Json, fields: tuple[Json, ...] = ()) -> Json:
    t: Json = {}
    if exprs:
        t["matchExpressions"] = list(exprs)
    if fields:
        t["matchFields"] = list(fields)
    return t


def pod(
    *required: Json,
    node_selector: dict[str, str] | None = None,
    preferred: list[tuple[int, Json]] | None = None,
    required_set: bool | None = None,
) -> Pod:
    """A pod; ``required`` terms go to requiredDuringScheduling (set even if empty when
    ``required_set``), ``preferred`` are (weight, term)."""
    node_affinity: Json = {}
    if required or required_set:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": list(required)
        }
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": t} for w, t in preferred
        ]
    spec: Json = {}
    if node_affinity or required_set is not None:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return make_pod("p", spec=spec)


def added(*required: Json, preferred: list[tuple[int, Json]] | None = None) -> Json:
    a: Json = {}
    if required:
        a["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": list(required)}
    if preferred:
        a["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": t} for w, t in preferred
        ]
    return {"addedAffinity": a}


# (name, pod, node labels, node name, want filter, want prefilter status, want prefilter result,
#  args, run prefilter)
CASES: list[Any] = [
    (
        "missing labels",
        pod(node_selector={"foo": "bar"}),
        {},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "same labels",
        pod(node_selector={"foo": "bar"}),
        {"foo": "bar"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "node labels are superset",
        pod(node_selector={"foo": "bar"}),
        {"foo": "bar", "baz": "blah"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "node labels are subset",
        pod(node_selector={"foo": "bar", "baz": "blah"}),
        {"foo": "bar"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "matchExpressions with In that matches",
        pod(term(expr("foo", "In", "bar", "value2"))),
        {"foo": "bar"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "matchExpressions with Gt that matches",
        pod(term(expr("kernel-version", "Gt", "0204"))),
        {"kernel-version": "0206"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "matchExpressions with NotIn that matches",
        pod(term(expr("mem-type", "NotIn", "DDR", "DDR2"))),
        {"mem-type": "DDR3"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "matchExpressions with Exists that matches",
        pod(term(expr("GPU", "Exists"))),
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "affinity that doesn't match the node's labels",
        pod(term(expr("foo", "In", "value1", "value2"))),
        {"foo": "bar"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "empty matchExpressions matches no objects",
        pod(term(), required_set=True),
        {"foo": "bar"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    ("no affinity", pod(), {"foo": "bar"}, "", None, SKIP, None, None, True),
    (
        "affinity but nil required node selector",
        pod(required_set=False),
        {"foo": "bar"},
        "",
        None,
        SKIP,
        None,
        None,
        True,
    ),
    (
        "multiple matchExpressions ANDed that match",
        pod(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "multiple matchExpressions ANDed that don't match",
        pod(term(expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER"))),
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "multiple terms ORed, one matches",
        pod(
            term(expr("foo", "In", "bar", "value2")), term(expr("diffkey", "In", "wrong", "value2"))
        ),
        {"foo": "bar"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "affinity and nodeSelector both satisfied",
        pod(term(expr("foo", "Exists")), node_selector={"foo": "bar"}),
        {"foo": "bar"},
        "",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "affinity matches but nodeSelector does not",
        pod(term(expr("foo", "Exists")), node_selector={"foo": "bar"}),
        {"foo": "barrrrrr"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "an invalid value in an affinity term",
        pod(term(expr("foo", "NotIn", "invalid value: ___@#$%^"))),
        {"foo": "bar"},
        "",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "matchFields In that matches",
        pod(term(fields=(name_in("node1"),))),
        {},
        "node1",
        None,
        None,
        PreFilterResult({"node1"}),
        None,
        True,
    ),
    (
        "matchFields In that does not match",
        pod(term(fields=(name_in("node1"),))),
        {},
        "node2",
        POD_REASON,
        None,
        PreFilterResult({"node1"}),
        None,
        True,
    ),
    (
        "two terms: matchFields does not match, matchExpressions does",
        pod(term(fields=(name_in("node1"), name_in("node2"))), term(expr("foo", "In", "bar"))),
        {"foo": "bar"},
        "node2",
        None,
        None,
        None,
        None,
        True,
    ),
    (
        "one term: matchFields does not match, matchExpressions does",
        pod(term(expr("foo", "In", "bar"), fields=(name_in("node1"),))),
        {"foo": "bar"},
        "node2",
        POD_REASON,
        None,
        PreFilterResult({"node1"}),
        None,
        True,
    ),
    (
        "one term: both matchFields and matchExpressions match",
        pod(term(expr("foo", "In", "bar"), fields=(name_in("node1"),))),
        {"foo": "bar"},
        "node1",
        None,
        None,
        PreFilterResult({"node1"}),
        None,
        True,
    ),
    (
        "two terms: neither matches",
        pod(term(fields=(name_in("node1"),)), term(expr("foo", "In", "not-match-to-bar"))),
        {"foo": "bar"},
        "node2",
        POD_REASON,
        None,
        None,
        None,
        True,
    ),
    (
        "two terms of node name affinity",
        pod(term(fields=(name_in("node1"),)), term(fields=(name_in("node2"),))),
        {},
        "node2",
        None,
        None,
        PreFilterResult({"node1", "node2"}),
        None,
        True,
    ),
    (
        "two conflicting match field requirements",
        pod(term(fields=(name_in("node1"), name_in("node2")))),
        {"foo": "bar"},
        "node2",
        POD_REASON,
        CONFLICT,
        None,
        None,
        True,
    ),
    (
        "matches added affinity and the pod's node affinity",
        pod(term(expr("zone", "In", "foo"))),
        {"zone": "foo"},
        "node2",
        None,
        None,
        None,
        added(term(fields=(name_in("node2"),))),
        True,
    ),
    (
        "matches added affinity but not the pod's node affinity",
        pod(term(expr("zone", "In", "bar"))),
        {"zone": "foo"},
        "node2",
        POD_REASON,
        None,
        None,
        added(term(fields=(name_in("node2"),))),
        True,
    ),
    (
        "doesn't match added affinity",
        pod(),
        {"zone": "foo"},
        "node2",
        ENFORCED_REASON,
        None,
        None,
        added(term(expr("zone", "In", "bar"))),
        True,
    ),
    (
        "added affinity is checked before the pod's",
        pod(term(expr("zone", "In", "bar"))),
        {"zone": "foo"},
        "node2",
        ENFORCED_REASON,
        None,
        None,
        added(term(expr("zone", "In", "bar"))),
        True,
    ),
    (
        "matches nodeSelector even if PreFilter is not called",
        pod(node_selector={"foo": "bar"}),
        {"foo": "bar", "baz": "blah"},
        "",
        None,
        None,
        None,
        None,
        False,
    ),
    (
        "matches node affinity even if PreFilter is not called",
        pod(term(expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER"))),
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        None,
        None,
        None,
        None,
        False,
    ),
    (
        "rejects by node affinity even if PreFilter is not called",
        pod(term(expr("GPU", "In", "AMD"))),
        {"GPU": "NVIDIA-GRID-K1"},
        "",
        POD_REASON,
        None,
        None,
        None,
        False,
    ),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in CASES])
def test_filter(case: tuple[Any, ...]) -> None:
    pod_, labels, node_name, want, want_pf_status, want_pf_result, args, run_pf = case
    p = NodeAffinity(NO_HANDLE, args)
    s = Snapshot()
    info = s.set_node(make_node(node_name or "node", labels=labels))
    nodes = Nodes(s, s.present_slots())
    state = CycleState()
    if run_pf:
        result, status = p.pre_filter(state, pod_, nodes)
        assert status == want_pf_status
        assert result == want_pf_result
    assert p.filter(state, pod_, info) == want
    verdict = p.filter_nodes(state, pod_, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want


LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}

AFFINITY1 = [(2, term(expr("foo", "In", "bar")))]
AFFINITY2 = [
    (2, term(expr("foo", "In", "bar"))),
    (4, term(expr("key", "In", "value"))),
    (5, term(expr("foo", "In", "bar"), expr("key", "In", "value"), expr("az", "In", "az1"))),
]


def score_all(
    plugin: NodeAffinity, pod_: Pod, nodes: list[Node], run_pre_score: bool = True
) -> tuple[dict[str, int], Status | None]:
    s = Snapshot()
    for n in nodes:
        s.set_node(n)
    all_nodes = Nodes(s, s.present_slots())
    state = CycleState()
    pre = plugin.pre_score(state, pod_, all_nodes) if run_pre_score else None
    if pre is not None and pre.code == Code.SKIP:
        # The runtime skips Score for this plugin: every node scores 0 from it.
        return dict.fromkeys(all_nodes.names(), 0), pre
    raw, status = plugin.score_nodes(state, pod_, all_nodes)
    assert status is None
    assert [(int(v), None) for v in raw] == [
        plugin.score(state, pod_, i) for i in all_nodes.infos()
    ]
    assert plugin.normalize_score(state, pod_, all_nodes, raw) is None
    return dict(zip(all_nodes.names(), raw.tolist(), strict=True)), pre


@pytest.mark.parametrize(
    ("pod_", "nodes", "want", "args", "run_pre_score"),
    [
        pytest.param(
            pod(),
            [
                make_node("node1", labels=LABEL1),
                make_node("node2", labels=LABEL2),
                make_node("node3", labels=LABEL3),
            ],
            {"node1": 0, "node2": 0, "node3": 0},
            None,
            True,
            id="all nodes are same priority as NodeAffinity is nil",
        ),
        pytest.param(
            pod(preferred=AFFINITY1),
            [
                make_node("node1", labels=LABEL4),
                make_node("node2", labels=LABEL2),
                make_node("node3", labels=LABEL3),
            ],
            {"node1": 0, "node2": 0, "node3": 0},
            None,
            True,
            id="no node matches the preferred terms",
        ),
        pytest.param(
            pod(preferred=AFFINITY1),
            [
                make_node("node1", labels=LABEL1),
                make_node("node2", labels=LABEL2),
                make_node("node3", labels=LABEL3),
            ],
            {"node1": 100, "node2": 0, "node3": 0},
            None,
            True,
            id="only node1 matches the preferred terms",
        ),
        pytest.param(
            pod(preferred=AFFINITY2),
            [
                make_node("node1", labels=LABEL1),
                make_node("node5", labels=LABEL5),
                make_node("node2", labels=LABEL2),
            ],
            {"node1": 18, "node5": 100, "node2": 36},
            None,
            True,
            id="all nodes match with different priorities",
        ),
        pytest.param(
            pod(),
            [make_node("node1", labels=LABEL1), make_node("node2", labels=LABEL2)],
            {"node1": 100, "node2": 0},
            added(preferred=AFFINITY1),
            True,
            id="added affinity",
        ),
        pytest.param(
            pod(preferred=AFFINITY1),
            [
                make_node("node1", labels=LABEL1),
                make_node("node2", labels=LABEL2),
                make_node("node3", labels=LABEL5),
            ],
            {"node1": 40, "node2": 60, "node3": 100},
            added(preferred=[(3, term(expr("key", "In", "value")))]),
            True,
            id="added affinity and pod has default affinity",
        ),
        pytest.param(
            pod(preferred=AFFINITY2),
            [
                make_node("node1", labels=LABEL1),
                make_node("node5", labels=LABEL5),
                make_node("node2", labels=LABEL2),
            ],
            {"node1": 18, "node5": 100, "node2": 36},
            None,
            False,
            id="scores correctly even if PreScore is not called",
        ),
        pytest.param(
            pod(preferred=[(0, term(expr("foo", "Exists"))), (7, term())]),
            [make_node("node1", labels=LABEL1), make_node("node2")],
            {"node1": 0, "node2": 0},
            None,
            True,
            id="terms with weight 0 or no requirements are ignored",
        ),
    ],
)
def test_score(
    pod_: Pod, nodes: list[Node], want: dict[str, int], args: Json | None, run_pre_score: bool
) -> None:
    got, _ = score_all(NodeAffinity(NO_HANDLE, args), pod_, nodes, run_pre_score)
    assert got == want


def test_pre_score_skips_pods_without_preferences() -> None:
    p = NodeAffinity(NO_HANDLE)
    assert p.pre_score(CycleState(), pod(), Nodes(Snapshot(), np.zeros(0, np.int64))) == SKIP
    with_added = NodeAffinity(NO_HANDLE, added(preferred=AFFINITY1))
    assert (
        with_added.pre_score(CycleState(), pod(), Nodes(Snapshot(), np.zeros(0, np.int64))) is None
    )


def test_invalid_preferred_term_is_an_error_at_pre_score() -> None:
    p = NodeAffinity(NO_HANDLE)
    bad = pod(preferred=[(1, term(expr("foo", "Foo", "bar")))])
    status = p.pre_score(CycleState(), bad, Nodes(Snapshot(), np.zeros(0, np.int64)))
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == '[0].matchExpressions[0].operator: Unsupported value: "Foo"'


def test_args_are_decoded_and_validated() -> None:
    p = NodeAffinity(NO_HANDLE, NodeAffinityArgs())
    assert p.added_node_selector is None
    assert p.added_preferred is None
    with pytest.raises(ConfigError, match="Unsupported value"):
        NodeAffinity(NO_HANDLE, added(term(expr("a", "Foo"))))
    with pytest.raises(ConfigError):
        NodeAffinity(NO_HANDLE, {"addedAffinty": {}})


# --- random clusters: vectorized == per node -----------------------------------------------------

KEYS = ["zone", "gpu", "num", "example.com/tier"]
VALUES = ["a", "b", "c", "1", "5", "10", "-3", "x y"]
OPS = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Bogus"]


def random_requirement(rng: random.Random) -> Json:
    op = rng.choice(OPS)
    if op in ("Exists", "DoesNotExist"):
        values = [] if rng.random() < 0.9 else ["a"]
    elif op in ("Gt", "Lt"):
        values = [rng.choice(["1", "5", "0010", "+2", "z", "1_0"])] if rng.random() < 0.9 else []
    else:
        values = rng.sample(VALUES, k=rng.randint(0 if rng.random() < 0.1 else 1, 3))
    return expr(rng.choice([*KEYS, "bad key!"] if rng.random() < 0.05 else KEYS), op, *values)


def random_field(rng: random.Random, n: int) -> Json:
    return {
        "key": rng.choice(["metadata.name"] * 5 + ["spec.other"]),
        "operator": rng.choice(["In", "NotIn", "In", "Exists"]),
        "values": [f"n{rng.randrange(n + 2)}" for _ in range(rng.choice([1, 1, 1, 2]))],
    }


def random_term(rng: random.Random, n: int) -> Json:
    exprs = tuple(random_requirement(rng) for _ in range(rng.randint(0, 3)))
    fields = tuple(random_field(rng, n) for _ in range(rng.choice([0, 0, 0, 1])))
    return term(*exprs, fields=fields)


def random_labels(rng: random.Random) -> dict[str, str]:
    return {k: rng.choice(VALUES[:7]) for k in KEYS if rng.random() < 0.6}


def test_vectorized_matches_per_node_on_random_clusters() -> None:
    rng = random.Random(5)
    for _ in range(150):
        s = Snapshot()
        n = rng.randint(1, 30)
        for i in range(n):
            s.set_node(make_node(f"n{i}", labels=random_labels(rng)))
        for i in rng.sample(range(n), k=n // 4):  # relabel some, remove others
            if rng.random() < 0.5:
                s.set_node(make_node(f"n{i}", labels=random_labels(rng)))
            else:
                s.remove_node(f"n{i}")
        required = [random_term(rng, n) for _ in range(rng.randint(0, 3))]
        preferred = [(rng.randint(0, 10), random_term(rng, n)) for _ in range(rng.randint(0, 3))]
        selector = random_labels(rng) if rng.random() < 0.3 else None
        the_pod = pod(
            *required, node_selector=selector, preferred=preferred, required_set=bool(required)
        )
        args = added(random_term(rng, n)) if rng.random() < 0.2 else None
        try:
            plugin = NodeAffinity(NO_HANDLE, args)
        except (ConfigError, ValueError):  # invalid addedAffinity: the profile would not build
            continue
        nodes = Nodes(s, s.present_slots())
        state = CycleState()
        plugin.pre_filter(state, the_pod, nodes)
        verdict = plugin.filter_nodes(state, the_pod, nodes)
        per_node = [plugin.filter(state, the_pod, info) for info in nodes.infos()]
        assert [verdict.statuses[int(k)] for k in verdict.ids] == per_node
        # The per-node filter agrees with the API-level matching helpers.
        for info, st in zip(nodes.infos(), per_node, strict=True):
            assert (st is None) == reference_match(plugin, the_pod, info.node)
        pre = plugin.pre_score(state, the_pod, nodes)
        if pre is not None:
            continue
        raw, status = plugin.score_nodes(state, the_pod, nodes)
        assert status is None
        assert raw.tolist() == [plugin.score(state, the_pod, i)[0] for i in nodes.infos()]


def reference_match(plugin: NodeAffinity, p: Pod, node: Node | None) -> bool:
    """Straightforward matching with the kubesched.api helpers."""
    from kubesched.api import node_selector_matches
    from kubesched.plugins.node_affinity import _spec_affinity

    assert node is not None
    labels, name = node.metadata.labels, node.metadata.name
    args = plugin.args
    if args.added_affinity is not None:
        req = _spec_affinity(
            args.added_affinity
        ).required_during_scheduling_ignored_during_execution
        if req is not None and not node_selector_matches(req, labels, name):
            return False
    if any(labels.get(k) != v for k, v in p.spec.node_selector.items()):
        return False
    a = p.spec.affinity
    if a is None or a.node_affinity is None:
        return True
    req = a.node_affinity.required_during_scheduling_ignored_during_execution
    return req is None or node_selector_matches(req, labels, name)


# --- the requirement rules themselves ---------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "values", "labels", "want"),
    [
        ("In", ["a"], {"k": "a"}, True),
        ("In", [], {"k": "a"}, False),
        ("NotIn", [], {}, False),
        ("NotIn", ["a"], {}, True),
        ("NotIn", ["a b"], {"k": "c"}, False),
        ("Exists", [], {"k": ""}, True),
        ("Exists", ["a"], {"k": "a"}, False),
        ("DoesNotExist", ["a"], {}, False),
        ("DoesNotExist", [], {}, True),
        ("Gt", ["0204"], {"k": "0206"}, True),
        ("Gt", ["1_0"], {"k": "20"}, False),
        ("Lt", ["10"], {"k": " 5"}, False),
        ("Lt", ["10"], {"k": "+5"}, True),
        ("Gt", ["1", "2"], {"k": "5"}, False),
        ("Lt", ["10"], {}, False),
        ("Foo", ["a"], {"k": "a"}, False),
    ],
)
def test_node_selector_requirement_rules(
    op: str, values: list[str], labels: dict[str, str], want: bool
) -> None:
    req = NodeSelectorRequirement(key="k", operator=op, values=values)
    assert node_selector_requirement_matches(req, labels) is want


# --- queueing hints ---------------------------------------------------------------------------


def test_events_to_register() -> None:
    [registered] = NodeAffinity(NO_HANDLE).events_to_register()
    assert registered.event == ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
    assert registered.hint is not None


POD_FOO_BAR = pod(term(expr("foo", "In", "bar")))


def node(**labels: str) -> Node:
    return make_node("n", labels=labels)


@pytest.mark.parametrize(
    ("args", "old", "new", "want"),
    [
        pytest.param(None, None, "not-a-node", QueueingHint.QUEUE, id="backoff-wrong-new-object"),
        pytest.param(None, "not-a-node", node(), QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(None, None, node(), QueueingHint.SKIP, id="skip-queue-on-add"),
        pytest.param(None, None, node(foo="bar"), QueueingHint.QUEUE, id="queue-on-add"),
        pytest.param(None, node(), node(), QueueingHint.SKIP, id="skip-unrelated-changes"),
        pytest.param(
            None, node(), node(k="v"), QueueingHint.SKIP, id="skip-unrelated-changes-on-labels"
        ),
        pytest.param(
            None,
            node(foo="bar"),
            node(foo="bar", k="v"),
            QueueingHint.SKIP,
            id="skip-labels-changes-on-suitable-node",
        ),
        pytest.param(
            None,
            node(foo="bar"),
            node(k="v"),
            QueueingHint.SKIP,
            id="skip-labels-changes-on-node-from-suitable-to-unsuitable",
        ),
        pytest.param(
            None,
            node(),
            node(foo="bar"),
            QueueingHint.QUEUE,
            id="queue-on-labels-change-makes-pod-schedulable",
        ),
        pytest.param(
            added(term(expr("foo", "In", "bar"))),
            None,
            node(),
            QueueingHint.SKIP,
            id="skip-queue-on-add-scheduler-enforced-node-affinity",
        ),
        pytest.param(
            added(term(expr("foo", "In", "bar"))),
            None,
            node(foo="bar"),
            QueueingHint.QUEUE,
            id="queue-on-add-scheduler-enforced-node-affinity",
        ),
    ],
)
def test_node_change_hint(args: Json | None, old: Any, new: Any, want: QueueingHint) -> None:
    plugin = NodeAffinity(NO_HANDLE, args)
    assert plugin.is_schedulable_after_node_change(POD_FOO_BAR, old, new) is want


def test_node_change_hint_queues_when_matching_errs() -> None:
    # An invalid term makes upstream's Match return an error with false: the hint queues.
    p = pod(term(expr("foo", "In")))
    plugin = NodeAffinity(NO_HANDLE)
    assert plugin.is_schedulable_after_node_change(p, None, node(foo="bar")) is QueueingHint.QUEUE
    # With the nodeSelector failing first there is no error, hence no queueing.
    p2 = pod(term(expr("foo", "In")), node_selector={"a": "b"})
    assert plugin.is_schedulable_after_node_change(p2, None, node(foo="bar")) is QueueingHint.SKIP
