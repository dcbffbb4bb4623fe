"""InterPodAffinity PreScore/Score/NormalizeScore: kube-scheduler's scoring_test.go tables with
their exact scores, and the queueing hints of plugin_test.go."""

from __future__ import annotations

from typing import Any

import pytest
from test_inter_pod_affinity_builders import (
    Handle,
    all_nodes,
    exists,
    in_,
    node,
    not_exists,
    not_in,
    pod,
    scores,
    sel,
    snapshot,
    term,
    weighted,
)

from kubesched.api import Node, Pod
from kubesched.framework import ActionType, ClusterEvent, Code, CycleState, QueueingHint, Status
from kubesched.plugins.inter_pod_affinity import InterPodAffinity

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}

RG_CHINA = {"region": "China"}
RG_INDIA = {"region": "India"}
AZ1 = {"az": "az1"}
AZ2 = {"az": "az2"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
S1 = {"security": "S1"}
S2 = {"security": "S2"}

STAY_WITH_S1_IN_REGION: dict[str, Any] = {
    "pref_affinity": [weighted(5, term(sel(in_("security", "S1")), "region"))]
}
STAY_WITH_S2_IN_REGION: dict[str, Any] = {
    "pref_affinity": [weighted(6, term(sel(in_("security", "S2")), "region"))]
}
AFFINITY3: dict[str, Any] = {
    "pref_affinity": [
        weighted(8, term(sel(not_in("security", "S1"), in_("security", "S2")), "region")),
        weighted(2, term(sel(exists("security"), not_exists("wrongkey")), "region")),
    ]
}
HARD_AFFINITY: dict[str, Any] = {
    "affinity": [
        term(sel(in_("security", "S1", "value2")), "region"),
        term(sel(exists("security"), not_exists("wrongkey")), "region"),
    ]
}
AWAY_FROM_S1_IN_AZ: dict[str, Any] = {
    "pref_anti": [weighted(5, term(sel(in_("security", "S1")), "az"))]
}
AWAY_FROM_S2_IN_AZ: dict[str, Any] = {
    "pref_anti": [weighted(5, term(sel(in_("security", "S2")), "az"))]
}
STAY_WITH_S1_AWAY_FROM_S2: dict[str, Any] = {
    "pref_affinity": [weighted(8, term(sel(in_("security", "S1")), "region"))],
    "pref_anti": [weighted(5, term(sel(in_("security", "S2")), "az"))],
}
NS_SELECTOR_TERM = term(
    sel(in_("security", "S1")),
    "region",
    namespaces=["subteam2.team2"],
    namespace_selector=sel(in_("team", "team1")),
)
AFFINITY_NS_SELECTOR: dict[str, Any] = {"pref_affinity": [weighted(5, NS_SELECTOR_TERM)]}
ANTI_AFFINITY_NS_SELECTOR: dict[str, Any] = {"pref_anti": [weighted(5, NS_SELECTOR_TERM)]}
INVALID_AFFINITY: dict[str, Any] = {
    "pref_affinity": [weighted(8, term(sel(in_("security", "{{.bad-value.}}")), "region"))]
}
INVALID_ANTI: dict[str, Any] = {
    "pref_anti": [weighted(5, term(sel(in_("security", "{{.bad-value.}}")), "az"))]
}


def p(
    labels: dict[str, str] | None = None, node_name: str = "", ns: str = "default", **kw: Any
) -> Pod:
    return pod("p", namespace=ns, labels=labels, node=node_name, **kw)


def nodes(*labels: dict[str, str]) -> list[Node]:
    return [node(f"node{i + 1}", lab) for i, lab in enumerate(labels)]


SKIP = "skip"

PREFERRED = [
    ("no affinity anywhere: Skip", p(S1), [], nodes(RG_CHINA, RG_INDIA, AZ1), SKIP),
    (
        "affinity: matching topology and pods score high",
        p(S1, **STAY_WITH_S1_IN_REGION),
        [p(S1, "node1"), p(S2, "node2"), p(S1, "node3")],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [100, 0, 0],
    ),
    (
        "nodes sharing the topology value score the same",
        p(**STAY_WITH_S1_IN_REGION),
        [p(S1, "node1")],
        nodes(RG_CHINA, RG_CHINA_AZ1, RG_INDIA),
        [100, 100, 0],
    ),
    (
        "the region with more matching pods scores high",
        p(S1, **STAY_WITH_S2_IN_REGION),
        [
            p(S2, "node1"),
            p(S2, "node1"),
            p(S2, "node2"),
            p(S2, "node3"),
            p(S2, "node4"),
            p(S2, "node5"),
        ],
        nodes(RG_CHINA, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA),
        [100, 0, 100, 100, 0],
    ),
    (
        "different operators and values, some not matching",
        p(S1, **AFFINITY3),
        [p(S1, "node1"), p(S2, "node2"), p(S1, "node3")],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [20, 100, 0],
    ),
    (
        "symmetry: existing pods' preferred affinity",
        p(S2),
        [p(S1, "node1", **STAY_WITH_S1_IN_REGION), p(S2, "node2", **STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [0, 100, 0],
    ),
    (
        "symmetry with a namespace selector",
        p(S1, ns="subteam1.team1"),
        [p(S1, "node1", **AFFINITY_NS_SELECTOR), p(S2, "node2", **STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [100, 0, 0],
    ),
    (
        "anti-affinity symmetry with a namespace selector",
        p(S1, ns="subteam1.team1"),
        [p(S1, "node1", **ANTI_AFFINITY_NS_SELECTOR), p(S2, "node2", **STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [0, 100, 100],
    ),
    (
        "symmetry: existing pods' required affinity",
        p(S1),
        [p(S1, "node1", **HARD_AFFINITY), p(S2, "node2", **HARD_AFFINITY)],
        nodes(RG_CHINA, RG_INDIA, AZ1),
        [100, 100, 0],
    ),
    (
        "anti-affinity: nodes without matching pods score high",
        p(S1, **AWAY_FROM_S1_IN_AZ),
        [p(S1, "node1"), p(S2, "node2")],
        nodes(AZ1, RG_CHINA),
        [0, 100],
    ),
    (
        "anti-affinity: nodes without the topology key score high",
        p(S1, **AWAY_FROM_S1_IN_AZ),
        [p(S1, "node1"), p(S1, "node2")],
        nodes(AZ1, RG_CHINA),
        [0, 100],
    ),
    (
        "anti-affinity: the node with more matching pods scores low",
        p(S1, **AWAY_FROM_S1_IN_AZ),
        [p(S1, "node1"), p(S1, "node1"), p(S2, "node2")],
        nodes(AZ1, RG_INDIA),
        [0, 100],
    ),
    (
        "anti-affinity symmetry",
        p(S2),
        [p(S1, "node1", **AWAY_FROM_S2_IN_AZ), p(S2, "node2", **AWAY_FROM_S1_IN_AZ)],
        nodes(AZ1, AZ2),
        [0, 100],
    ),
    (
        "affinity and anti-affinity",
        p(S1, **STAY_WITH_S1_AWAY_FROM_S2),
        [p(S1, "node1"), p(S1, "node2")],
        nodes(RG_CHINA, AZ1),
        [100, 0],
    ),
    (
        "affinity and anti-affinity, pods with the same labels",
        p(S1, **STAY_WITH_S1_AWAY_FROM_S2),
        [
            p(S1, "node1"),
            p(S1, "node1"),
            p(S1, "node2"),
            p(S1, "node3"),
            p(S1, "node3"),
            p(S1, "node4"),
            p(S1, "node5"),
        ],
        nodes(RG_CHINA_AZ1, RG_INDIA, RG_CHINA, RG_CHINA, RG_INDIA),
        [100, 0, 100, 100, 0],
    ),
    (
        "affinity, anti-affinity and symmetry",
        p(S1, **STAY_WITH_S1_AWAY_FROM_S2),
        [
            p(S1, "node1"),
            p(S2, "node2"),
            p(None, "node3", **STAY_WITH_S1_AWAY_FROM_S2),
            p(None, "node4", **AWAY_FROM_S1_IN_AZ),
        ],
        nodes(RG_CHINA, AZ1, RG_INDIA, AZ2),
        [100, 0, 100, 0],
    ),
    (
        "partial nodes in a topology without pods with affinity",
        p(S1),
        [p(S1, "node1"), p(None, "node2", **STAY_WITH_S1_AWAY_FROM_S2)],
        nodes(RG_CHINA, RG_CHINA),
        [0, 0],
    ),
    (
        "affinity with pods matching the namespace selector",
        p(S1, ns="subteam1.team1", **AFFINITY_NS_SELECTOR),
        [
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team2"),
            p(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [100, 0],
    ),
    (
        "affinity with pods matching the namespace selector and namespaces",
        p(S1, ns="subteam1.team1", **AFFINITY_NS_SELECTOR),
        [
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam2.team2"),
            p(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [100, 0],
    ),
    (
        "anti-affinity with pods matching the namespace selector",
        p(S1, ns="subteam1.team1", **ANTI_AFFINITY_NS_SELECTOR),
        [
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team2"),
            p(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, 100],
    ),
    (
        "anti-affinity with pods matching the namespace selector and namespaces",
        p(S1, ns="subteam1.team1", **ANTI_AFFINITY_NS_SELECTOR),
        [
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam1.team1"),
            p(S1, "node1", ns="subteam2.team2"),
            p(S1, "node2", ns="subteam2.team1"),
        ],
        nodes(RG_CHINA, RG_INDIA),
        [0, 100],
    ),
    (
        "existing pods' preferred terms not ignored by default",
        p(S2),
        [p(S1, "node1", **STAY_WITH_S1_AWAY_FROM_S2), p(S2, "node2", **STAY_WITH_S2_IN_REGION)],
        nodes(RG_CHINA, RG_INDIA),
        [0, 100],
    ),
    ("no nodes to score", p(S2), [], [], SKIP),
]


def pre_score(
    incoming: Pod, existing: list[Pod], node_list: list[Node], args: dict[str, Any] | None = None
) -> tuple[InterPodAffinity, CycleState, Any, Status | None]:
    snap = snapshot(node_list, existing, NAMESPACES)
    plugin = InterPodAffinity(Handle(snap), args)  # type: ignore[arg-type]
    state = CycleState()
    status = plugin.pre_score(state, incoming, all_nodes(snap))
    return plugin, state, snap, status


@pytest.mark.parametrize(
    ("incoming", "existing", "node_list", "want"),
    [c[1:] for c in PREFERRED],
    ids=[c[0] for c in PREFERRED],
)
def test_preferred_affinity(
    incoming: Pod, existing: list[Pod], node_list: list[Node], want: Any
) -> None:
    plugin, state, snap, status = pre_score(
        incoming, existing, node_list, {"hardPodAffinityWeight": 1}
    )
    if want == SKIP:
        assert status == Status(Code.SKIP)
        return
    assert status is None
    assert scores(plugin, state, incoming, snap, [n.metadata.name for n in node_list]) == want


def test_ignore_preferred_terms_of_existing_pods() -> None:
    existing = [
        p(S1, "node1", **STAY_WITH_S1_AWAY_FROM_S2),
        p(S2, "node2", **STAY_WITH_S2_IN_REGION),
    ]
    args = {"ignorePreferredTermsOfExistingPods": True}
    _, _, _, status = pre_score(p(S2), existing, nodes(RG_CHINA, RG_INDIA), args)
    assert status == Status(Code.SKIP)
    # A pod with preferred terms of its own still sees the existing pods' terms.
    incoming = p(S2, **AWAY_FROM_S1_IN_AZ)
    plugin, state, snap, status = pre_score(incoming, existing, nodes(RG_CHINA, RG_INDIA), args)
    assert status is None
    assert scores(plugin, state, incoming, snap, ["node1", "node2"]) == [0, 100]


@pytest.mark.parametrize(
    ("affinity", "where"),
    [(INVALID_AFFINITY, "preferredAffinityTerms"), (INVALID_ANTI, "preferredAntiAffinityTerms")],
)
def test_invalid_terms_fail_pre_score(affinity: dict[str, Any], where: str) -> None:
    _, _, _, status = pre_score(p(**affinity), [], nodes(RG_CHINA, RG_CHINA))
    assert status is not None
    assert status.code == Code.ERROR
    assert f'{where}: values[0][security]: Invalid value: "{{{{.bad-value.}}}}"' in status.message


HARD_POD_AFFINITY: dict[str, Any] = {
    "affinity": [
        term(
            sel(in_("service", "S1")),
            "region",
            namespaces=["", "subteam2.team2"],
            namespace_selector=sel(in_("team", "team1")),
        )
    ]
}
SERVICE_S1 = {"service": "S1"}


@pytest.mark.parametrize(
    ("namespace", "weight", "want"),
    [
        ("", 1, [100, 100, 0]),
        ("", 0, SKIP),
        ("subteam1.team2", 1, SKIP),
        ("subteam1.team1", 1, [100, 100, 0]),
        ("subteam2.team2", 1, [100, 100, 0]),
    ],
    ids=[
        "default weight",
        "zero weight",
        "no matching namespace",
        "matching namespace selector",
        "matching namespaces",
    ],
)
def test_hard_pod_affinity_symmetric_weight(namespace: str, weight: int, want: Any) -> None:
    existing = [p(None, "node1", **HARD_POD_AFFINITY), p(None, "node2", **HARD_POD_AFFINITY)]
    incoming = p(SERVICE_S1, ns=namespace)
    plugin, state, snap, status = pre_score(
        incoming, existing, nodes(RG_CHINA, RG_INDIA, AZ1), {"hardPodAffinityWeight": weight}
    )
    if want == SKIP:
        assert status == Status(Code.SKIP)
        return
    assert status is None
    assert scores(plugin, state, incoming, snap, ["node1", "node2", "node3"]) == want


def test_hard_weight_scales_raw_scores() -> None:
    existing = [p(None, "node1", **HARD_POD_AFFINITY)]
    incoming = p(SERVICE_S1, ns="")
    plugin, state, snap, _ = pre_score(
        incoming, existing, nodes(RG_CHINA, RG_INDIA), {"hardPodAffinityWeight": 7}
    )
    nodes_ = all_nodes(snap)
    raw, _ = plugin.score_nodes(state, incoming, nodes_)
    assert raw.tolist() == [7, 0]


def test_normalize_min_max_as_go() -> None:
    """Scores are rescaled from [min, max] to [0, 100] with float64 and truncation: a negative
    (anti-affinity) minimum maps to 0."""
    existing = [
        p(S1, "node1"),
        p(S1, "node1"),
        p(S1, "node1"),
        p(S2, "node2"),
    ]
    incoming = p(
        pref_affinity=[weighted(3, term(sel(in_("security", "S2")), "zone"))],
        pref_anti=[weighted(1, term(sel(in_("security", "S1")), "zone"))],
    )
    node_list = [
        node("node1", {"zone": "a"}),
        node("node2", {"zone": "b"}),
        node("node3", {"zone": "c"}),
    ]
    plugin, state, snap, status = pre_score(incoming, existing, node_list)
    assert status is None
    # raw: node1 = -3, node2 = 3, node3 = 0 -> (s + 3) / 6 * 100
    assert scores(plugin, state, incoming, snap, ["node1", "node2", "node3"]) == [0, 100, 50]


# --- queueing hints --------------------------------------------------------------------------


def hint_plugin(namespaces: dict[str, dict[str, str]] | None = None) -> InterPodAffinity:
    return InterPodAffinity(Handle(snapshot([], [], namespaces or NAMESPACES)))  # type: ignore[arg-type]


def target(uid: str = "p", labels: dict[str, str] | None = None, **kw: Any) -> Pod:
    out = pod("p", labels=labels, **kw)
    out.metadata.uid = uid
    return out


def other(
    labels: dict[str, str] | None = None,
    node_name: str = "fake-node",
    uid: str = "other",
    **kw: Any,
) -> Pod:
    out = pod("o", labels=labels, node=node_name, **kw)
    out.metadata.uid = uid
    return out


AFF_IN = {"affinity": [term(sel(in_("service", "securityscan", "value2")), "region")]}
AFF_MULTI = {
    "affinity": [term(sel(exists("aaa")), "hostname"), term(sel(exists("bbb")), "hostname")]
}
ANTI_IN = {"anti": [term(sel(in_("service", "securityscan", "value2")), "region")]}
Q, S = QueueingHint.QUEUE, QueueingHint.SKIP

POD_HINTS = [
    (
        "add a pod matching the affinity",
        target(**AFF_IN),
        None,
        other({"service": "securityscan"}),
        Q,
    ),
    ("add an unscheduled pod", target(**AFF_IN), None, other({"service": "securityscan"}, ""), S),
    ("add a pod not matching the affinity", target(**AFF_IN), None, other({"aaa": "a"}), S),
    (
        "update a pod from non-match to match",
        target(**AFF_IN),
        other({"aaa": "a"}),
        other({"service": "securityscan"}),
        Q,
    ),
    (
        "update a pod matching before and after",
        target(**AFF_IN),
        other({"service": "value2"}),
        other({"service": "securityscan"}),
        S,
    ),
    (
        "update an unscheduled pod",
        target(**AFF_IN),
        other({"aaa": "a"}, ""),
        other({"service": "securityscan"}, ""),
        S,
    ),
    (
        "update a pod from match to non-match",
        target(**AFF_IN),
        other({"service": "securityscan"}),
        other({"aaa": "a"}),
        S,
    ),
    (
        "update from match to non-match, multiple terms",
        target(**AFF_MULTI),
        other({"aaa": "a"}),
        other({"service": "securityscan"}),
        S,
    ),
    (
        "update from non-match to match, multiple terms",
        target(**AFF_MULTI),
        other({"aaa": "a"}),
        other({"aaa": "", "bbb": ""}),
        Q,
    ),
    (
        "the target pod's own labels change",
        target(labels={"foo": "baz"}),
        target(labels={"foo": "bar"}),
        target(labels={"foo": "baz"}),
        Q,
    ),
    (
        "a pod stops matching the anti-affinity",
        target(**ANTI_IN),
        other({"service": "securityscan"}),
        other({"service": "aaaa"}),
        Q,
    ),
    (
        "a pod starts matching the anti-affinity",
        target(**ANTI_IN),
        other({"service": "bbb"}),
        other({"service": "securityscan"}),
        S,
    ),
    (
        "delete a pod not matching the anti-affinity",
        target(**ANTI_IN),
        other({"aaa": "a"}),
        None,
        S,
    ),
    (
        "delete a pod matching the anti-affinity",
        target(**ANTI_IN),
        other({"service": "securityscan"}),
        None,
        Q,
    ),
    (
        "delete a pod whose anti-affinity matches the pending pod",
        target(labels={"service": "securityscan"}),
        other(**ANTI_IN),
        None,
        Q,
    ),
    (
        "delete a pod whose anti-affinity does not match the pending pod",
        target(labels={"service": "foo"}),
        other(**ANTI_IN),
        None,
        S,
    ),
    (
        "delete a pod unrelated both ways",
        target(labels={"service": "foo"}, **ANTI_IN),
        other({"service": "foo"}, **ANTI_IN),
        None,
        S,
    ),
]


@pytest.mark.parametrize(
    ("pending", "old", "new", "want"), [c[1:] for c in POD_HINTS], ids=[c[0] for c in POD_HINTS]
)
def test_is_schedulable_after_pod_change(
    pending: Pod, old: Pod | None, new: Pod | None, want: QueueingHint
) -> None:
    assert hint_plugin().is_schedulable_after_pod_change(pending, old, new) == want


AFF_ZONE = {"affinity": [term(sel(in_("service", "securityscan", "value2")), "zone")]}
AFF_REGION = {"affinity": [term(sel(in_("service", "securityscan", "value2")), "region")]}
ANTI_ZONE = {"anti": [term(sel(labels={"another": "label"}), "zone")]}

NODE_HINTS = [
    ("new node with the affinity key", AFF_ZONE, None, {"zone": "zone1"}, Q),
    ("new node without the affinity key", AFF_REGION, None, {"zone": "zone1"}, S),
    ("label change unrelated to the key", AFF_ZONE, {"aaa": "a"}, {"aaa": "b"}, S),
    ("unrelated label added", AFF_ZONE, {"zone": "zone1"}, {"zone": "zone1", "x": "y"}, S),
    ("affinity key value changed", AFF_ZONE, {"zone": "zone1"}, {"zone": "zone2"}, Q),
    ("affinity key added", AFF_ZONE, {"aaa": "a"}, {"zone": "zone1"}, Q),
    ("new node with the anti-affinity key", ANTI_ZONE, None, {"zone": "zone1"}, Q),
    ("new node without the anti-affinity key", ANTI_ZONE, None, {}, Q),
    ("unrelated label added (anti)", ANTI_ZONE, {"zone": "zone1"}, {"zone": "zone1", "x": "y"}, S),
    ("anti-affinity key value changed", ANTI_ZONE, {"zone": "zone1"}, {"zone": "zone2"}, Q),
    ("anti-affinity key added", ANTI_ZONE, {"aaa": "a"}, {"zone": "zone1"}, S),
    ("anti-affinity key removed", ANTI_ZONE, {"zone": "zone1"}, {"aaa": "a"}, Q),
]


@pytest.mark.parametrize(
    ("terms", "old", "new", "want"), [c[1:] for c in NODE_HINTS], ids=[c[0] for c in NODE_HINTS]
)
def test_is_schedulable_after_node_change(
    terms: dict[str, Any], old: dict[str, str] | None, new: dict[str, str], want: QueueingHint
) -> None:
    old_node = None if old is None else node("node-a", old)
    assert (
        hint_plugin().is_schedulable_after_node_change(
            target(**terms), old_node, node("node-a", new)
        )
        == want
    )


def test_hints_queue_on_unexpected_objects() -> None:
    plugin = hint_plugin()
    assert plugin.is_schedulable_after_pod_change(target(), node("n"), None) == Q
    assert plugin.is_schedulable_after_node_change(target(), pod(), None) == Q


def test_events_to_register() -> None:
    events = {e.event for e in hint_plugin().events_to_register()}
    assert events == {
        ClusterEvent("Pod", ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE),
        ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
    }
