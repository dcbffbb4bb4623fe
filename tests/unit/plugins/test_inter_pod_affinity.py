"""InterPodAffinity PreFilter/Filter: kube-scheduler's filtering_test.go tables with their exact
statuses, the PreFilterExtensions (AddPod/RemovePod), selectors and matchLabelKeys."""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pytest
from test_inter_pod_affinity_builders import (
    Handle,
    all_nodes,
    exists,
    in_,
    node,
    node_statuses,
    not_exists,
    not_in,
    pod,
    sel,
    snapshot,
    term,
    weighted,
)

from kubesched.api import Affinity, LabelSelector, Pod
from kubesched.config import ConfigError
from kubesched.framework import Code, CycleState, PodInfo, Snapshot, Status
from kubesched.plugins import in_tree_registry
from kubesched.plugins.inter_pod_affinity import (
    NO_TERMS,
    PRE_FILTER_STATE_KEY,
    InterPodAffinity,
    PodAffinityTerms,
    Selector,
    SelectorError,
    apply_match_label_keys,
)

AFFINITY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match pod affinity rules")
ANTI = Status(Code.UNSCHEDULABLE, "node(s) didn't match pod anti-affinity rules")
EXISTING = Status(Code.UNSCHEDULABLE, "node(s) didn't satisfy existing pods anti-affinity rules")
SKIP = Status(Code.SKIP)

NAMESPACES = {
    "subteam1.team1": {"team": "team1"},
    "subteam2.team1": {"team": "team1"},
    "subteam1.team2": {"team": "team2"},
    "subteam2.team2": {"team": "team2"},
}

POD_LABEL = {"service": "securityscan"}
POD_LABEL2 = {"security": "S1"}
LABELS1 = {"region": "r1", "zone": "z11"}


def run_filter(
    incoming: Pod,
    pods: list[Pod],
    nodes: list[Any],
    namespaces: dict[str, dict[str, str]] | None = None,
) -> tuple[Status | None, list[Status | None]]:
    snap = snapshot(nodes, pods, NAMESPACES if namespaces is None else namespaces)
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
    if status is not None:
        return status, []
    return None, node_statuses(plugin, state, incoming, snap)


def req_in(key: str, topology: str, *values: str, **kw: Any) -> dict[str, Any]:
    return term(sel(in_(key, *values)), topology, **kw)


# --- TestRequiredAffinitySingleNode ------------------------------------------------------------

EXISTING_POD = pod("existing", labels=POD_LABEL, node="node1")

SINGLE_NODE = [
    (
        "no required pod affinity, no existing pods: Skip",
        pod("in"),
        [],
        SKIP,
        None,
    ),
    (
        "In operator matches the existing pod",
        pod(labels=POD_LABEL2, affinity=[req_in("service", "region", "securityscan", "value2")]),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "NotIn operator in labelSelector matches the existing pod",
        pod(
            labels=POD_LABEL2,
            affinity=[term(sel(not_in("service", "securityscan3", "value3")), "region")],
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "does not satisfy the affinity because of a different namespace",
        pod(
            labels=POD_LABEL2,
            affinity=[
                term(
                    sel(in_("service", "securityscan", "value2")),
                    "",
                    namespaces=["DiffNameSpace"],
                )
            ],
        ),
        [pod("e", namespace="ns", labels=POD_LABEL, node="node1")],
        None,
        AFFINITY,
    ),
    (
        "labelSelector does not match the existing pod",
        pod(labels=POD_LABEL, affinity=[req_in("service", "", "antivirusscan", "value2")]),
        [EXISTING_POD],
        None,
        AFFINITY,
    ),
    (
        "different operators in several terms, all satisfied",
        pod(
            labels=POD_LABEL2,
            affinity=[
                term(sel(exists("service"), not_exists("wrongkey")), "region"),
                term(
                    sel(in_("service", "securityscan"), not_in("service", "WrongValue")), "region"
                ),
            ],
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "matchExpressions are ANDed: one of them does not match",
        pod(
            labels=POD_LABEL2,
            affinity=[
                term(sel(exists("service"), not_exists("wrongkey")), "region"),
                term(
                    sel(in_("service", "securityscan2"), not_in("service", "WrongValue")), "region"
                ),
            ],
        ),
        [EXISTING_POD],
        None,
        AFFINITY,
    ),
    (
        "affinity and anti-affinity both satisfied",
        pod(
            labels=POD_LABEL2,
            affinity=[req_in("service", "region", "securityscan", "value2")],
            anti=[req_in("service", "node", "antivirusscan", "value2")],
        ),
        [EXISTING_POD],
        None,
        None,
    ),
    (
        "affinity, anti-affinity and the existing pod's anti-affinity all satisfied",
        pod(
            labels=POD_LABEL2,
            affinity=[req_in("service", "region", "securityscan", "value2")],
            anti=[req_in("service", "node", "antivirusscan", "value2")],
        ),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[req_in("service", "node", "antivirusscan", "value2")],
            )
        ],
        None,
        None,
    ),
    (
        "affinity satisfied, anti-affinity not",
        pod(
            labels=POD_LABEL2,
            affinity=[req_in("service", "region", "securityscan", "value2")],
            anti=[req_in("service", "zone", "securityscan", "value2")],
        ),
        [EXISTING_POD],
        None,
        ANTI,
    ),
    (
        "the existing pod's anti-affinity is not satisfied",
        pod(
            labels=POD_LABEL,
            affinity=[req_in("service", "region", "securityscan", "value2")],
            anti=[req_in("service", "node", "antivirusscan", "value2")],
        ),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[req_in("service", "zone", "securityscan", "value2")],
            )
        ],
        None,
        EXISTING,
    ),
    (
        "pod matches its own affinity but an existing pod elsewhere matches too",
        pod(
            labels=POD_LABEL,
            affinity=[term(sel(not_in("service", "securityscan", "value2")), "region")],
        ),
        [pod("e", labels={"service": "securityscan"}, node="node2")],
        None,
        AFFINITY,
    ),
    (
        "existing pod's anti-affinity applies to a pod without terms",
        pod(labels=POD_LABEL),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[req_in("service", "zone", "securityscan", "value2")],
            )
        ],
        None,
        EXISTING,
    ),
    (
        "existing pod's anti-affinity does not match a pod without terms: Skip",
        pod(labels=POD_LABEL),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[term(sel(not_in("service", "securityscan", "value2")), "zone")],
            )
        ],
        SKIP,
        None,
    ),
    (
        "anti-affinity with the existing pod satisfied, symmetry not",
        pod(
            labels=POD_LABEL,
            anti=[term(sel(exists("service")), "region"), term(sel(exists("security")), "region")],
        ),
        [pod("e", labels=POD_LABEL2, node="node1", anti=[term(sel(exists("security")), "zone")])],
        None,
        ANTI,
    ),
    (
        "symmetry a1: terms partially match each other",
        pod(
            labels=POD_LABEL,
            anti=[term(sel(exists("service")), "zone"), term(sel(exists("security")), "zone")],
        ),
        [pod("e", labels=POD_LABEL2, node="node1", anti=[term(sel(exists("security")), "zone")])],
        None,
        ANTI,
    ),
    (
        "symmetry a2: terms partially match each other",
        pod(labels=POD_LABEL2, anti=[term(sel(exists("security")), "zone")]),
        [
            pod(
                "e",
                labels=POD_LABEL,
                node="node1",
                anti=[term(sel(exists("service")), "zone"), term(sel(exists("security")), "zone")],
            )
        ],
        None,
        EXISTING,
    ),
    (
        "symmetry b1",
        pod(
            labels={"abc": "", "xyz": ""},
            anti=[term(sel(exists("abc")), "zone"), term(sel(exists("def")), "zone")],
        ),
        [
            pod(
                "e",
                labels={"def": "", "xyz": ""},
                node="node1",
                anti=[term(sel(exists("abc")), "zone"), term(sel(exists("def")), "zone")],
            )
        ],
        None,
        ANTI,
    ),
    (
        "symmetry b2",
        pod(
            labels={"def": "", "xyz": ""},
            anti=[term(sel(exists("abc")), "zone"), term(sel(exists("def")), "zone")],
        ),
        [
            pod(
                "e",
                labels={"abc": "", "xyz": ""},
                node="node1",
                anti=[term(sel(exists("abc")), "zone"), term(sel(exists("def")), "zone")],
            )
        ],
        None,
        ANTI,
    ),
    (
        "invalid affinity label value fails PreFilter",
        pod(
            labels=POD_LABEL,
            affinity=[
                req_in("service", "region", "{{.bad-value.}}"),
                req_in("service", "node", "antivirusscan", "value2"),
            ],
        ),
        [],
        Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "parsing pod: requiredAffinityTerms: values[0][service]: Invalid value: "
            '"{{.bad-value.}}": a valid label must be an empty string or consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        None,
    ),
    (
        "invalid anti-affinity label value fails PreFilter",
        pod(
            labels=POD_LABEL,
            affinity=[req_in("service", "region", "foo")],
            anti=[req_in("service", "node", "{{.bad-value.}}")],
        ),
        [],
        Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "parsing pod: requiredAntiAffinityTerms: values[0][service]: Invalid value: "
            '"{{.bad-value.}}": a valid label must be an empty string or consist of alphanumeric '
            "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
        ),
        None,
    ),
    (
        "affinity with a matching namespaceSelector",
        pod(
            labels=POD_LABEL2,
            affinity=[
                req_in(
                    "service",
                    "region",
                    "securityscan",
                    "value2",
                    namespace_selector=sel(in_("team", "team1")),
                )
            ],
        ),
        [pod("e", namespace="subteam1.team1", labels=POD_LABEL, node="node1")],
        None,
        None,
    ),
    (
        "affinity with a non-matching namespaceSelector",
        pod(
            labels=POD_LABEL2,
            affinity=[
                req_in(
                    "service",
                    "region",
                    "securityscan",
                    "value2",
                    namespace_selector=sel(in_("team", "team1")),
                )
            ],
        ),
        [pod("e", namespace="subteam1.team2", labels=POD_LABEL, node="node1")],
        None,
        AFFINITY,
    ),
    (
        "anti-affinity with a matching namespaceSelector",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[
                req_in(
                    "service",
                    "zone",
                    "securityscan",
                    "value2",
                    namespace_selector=sel(in_("team", "team1")),
                )
            ],
        ),
        [pod("e", namespace="subteam2.team1", labels=POD_LABEL, node="node1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity with an empty namespaceSelector matches all namespaces",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[req_in("service", "zone", "securityscan", "value2", namespace_selector={})],
        ),
        [pod("e", namespace="subteam2.team1", labels=POD_LABEL, node="node1")],
        None,
        ANTI,
    ),
    (
        "anti-affinity with a non-matching namespaceSelector",
        pod(
            namespace="subteam1.team1",
            labels=POD_LABEL2,
            anti=[
                req_in(
                    "service",
                    "zone",
                    "securityscan",
                    "value2",
                    namespace_selector=sel(in_("team", "team1")),
                )
            ],
        ),
        [pod("e", namespace="subteam1.team2", labels=POD_LABEL, node="node1")],
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "want_pre", "want"),
    [c[1:] for c in SINGLE_NODE],
    ids=[c[0] for c in SINGLE_NODE],
)
def test_required_affinity_single_node(
    incoming: Pod, pods: list[Pod], want_pre: Status | None, want: Status | None
) -> None:
    pre, statuses = run_filter(incoming, pods, [node("node1", LABELS1)])
    assert pre == want_pre
    if pre is None:
        assert statuses == [want]


# --- TestRequiredAffinityMultipleNodes ---------------------------------------------------------

RG_CHINA = {"region": "China"}
RG_CHINA_AZ1 = {"region": "China", "az": "az1"}
RG_INDIA = {"region": "India"}


def zone_nodes(*zones: str, region: str = "r1") -> list[Any]:
    names = ["nodeA", "nodeB", "nodeC"]
    return [
        node(names[i], {"region": region, "zone": z, "hostname": names[i]})
        for i, z in enumerate(zones)
    ]


MULTIPLE_NODES = [
    (
        "nodes sharing the topology value of a node with a matching pod fit",
        pod(affinity=[req_in("foo", "region", "bar")]),
        [pod("p1", node="node1", labels={"foo": "bar"})],
        [node("node1", RG_CHINA), node("node2", RG_CHINA_AZ1), node("node3", RG_INDIA)],
        None,
        [None, None, AFFINITY],
    ),
    (
        "the first pod of a collection with affinity to itself is not blocked",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[req_in("foo", "zone", "bar"), req_in("service", "zone", "securityscan")],
        ),
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        [
            node("nodeA", {"zone": "az1", "hostname": "h1"}),
            node("nodeB", {"zone": "az2", "hostname": "h2"}),
        ],
        None,
        [None, None],
    ),
    (
        "the first pod of a collection needs nodes with the topology keys",
        pod(
            labels={"foo": "bar", "service": "securityscan"},
            affinity=[req_in("foo", "zone", "bar"), req_in("service", "zone", "securityscan")],
        ),
        [pod("p1", node="nodeA", labels={"foo": "bar"})],
        [
            node("nodeA", {"zoneLabel": "az1", "hostname": "h1"}),
            node("nodeB", {"zoneLabel": "az2", "hostname": "h2"}),
        ],
        None,
        [AFFINITY, AFFINITY],
    ),
    (
        "anti-affinity rules out every node sharing the topology value",
        pod(anti=[req_in("foo", "region", "abc")]),
        [pod("e", node="nodeA", labels={"foo": "abc"})],
        [
            node("nodeA", {"region": "r1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "hostname": "nodeB"}),
        ],
        None,
        [ANTI, ANTI],
    ),
    (
        "anti-affinity matches when any term matches",
        pod(anti=[req_in("foo", "region", "abc"), req_in("service", "zone", "securityscan")]),
        [pod("e", node="nodeA", labels={"foo": "abc", "service": "securityscan"})],
        zone_nodes("z1", "z2")[:2],
        None,
        [ANTI, ANTI],
    ),
    (
        "anti-affinity spares the node in another region",
        pod(anti=[req_in("foo", "region", "abc")]),
        [pod("e", node="nodeA", labels={"foo": "abc"})],
        [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
        None,
        [ANTI, ANTI, None],
    ),
    (
        "an existing pod's anti-affinity in another namespace does not count",
        pod(namespace="NS1", labels={"foo": "123"}, anti=[req_in("foo", "region", "bar")]),
        [
            pod("e1", node="nodeA", namespace="NS1", labels={"foo": "bar"}),
            pod("e2", node="nodeC", namespace="NS2", anti=[req_in("foo", "region", "123")]),
        ],
        [node("nodeA", RG_CHINA), node("nodeB", RG_CHINA_AZ1), node("nodeC", RG_INDIA)],
        None,
        [ANTI, ANTI, None],
    ),
    (
        "existing pod's term with a topology key no node has: Skip",
        pod(labels={"foo": ""}),
        [pod("e", node="nodeA", anti=[term(sel(exists("foo")), "invalid-node-label")])],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
        ],
        SKIP,
        [],
    ),
    (
        "incoming anti-affinity: the topology key must exist too",
        pod(node="nodeA", anti=[term(sel(exists("foo")), "invalid-node-label")]),
        [pod("e", node="nodeA", labels={"foo": ""})],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
        ],
        None,
        [None, None],
    ),
    (
        "existing pods' terms each rule out a domain",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod("e1", node="nodeA", anti=[term(sel(exists("foo")), "zone")]),
            pod("e2", node="nodeA", anti=[term(sel(exists("bar")), "region")]),
        ],
        zone_nodes("z1", "z2")[:2],
        None,
        [EXISTING, EXISTING],
    ),
    (
        "incoming anti-affinity violated by some term on each node",
        pod(anti=[term(sel(exists("foo")), "zone"), term(sel(exists("bar")), "region")]),
        [pod("e1", node="nodeA", labels={"foo": ""}), pod("e2", node="nodeB", labels={"bar": ""})],
        zone_nodes("z1", "z2")[:2],
        None,
        [ANTI, ANTI],
    ),
    (
        "existing pod: a term with an unknown topology key counts for nothing",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(
                "e",
                node="nodeA",
                anti=[
                    term(sel(exists("foo")), "invalid-node-label"),
                    term(sel(exists("bar")), "zone"),
                ],
            )
        ],
        zone_nodes("z1", "z2")[:2],
        None,
        [EXISTING, None],
    ),
    (
        "incoming pod: a term with an unknown topology key counts for nothing",
        pod(
            anti=[
                term(sel(exists("foo")), "invalid-node-label"),
                term(sel(exists("bar")), "zone"),
            ]
        ),
        [pod("podA", node="nodeA", labels={"foo": "", "bar": ""})],
        zone_nodes("z1", "z2")[:2],
        None,
        [ANTI, None],
    ),
    (
        "existing pod: every term with a valid topology key counts",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(
                "e",
                node="nodeA",
                anti=[term(sel(exists("foo")), "region"), term(sel(exists("bar")), "zone")],
            )
        ],
        zone_nodes("z1", "z2")[:2],
        None,
        [EXISTING, EXISTING],
    ),
    (
        "incoming pod: every term with a valid topology key counts",
        pod(anti=[term(sel(exists("foo")), "region"), term(sel(exists("bar")), "zone")]),
        [pod("e", node="nodeA", labels={"foo": "", "bar": ""})],
        zone_nodes("z1", "z2")[:2],
        None,
        [ANTI, ANTI],
    ),
    (
        "existing pods on nodeA and nodeB each match: only nodeC fits",
        pod(labels={"foo": "", "bar": ""}),
        [
            pod(
                "e1",
                node="nodeA",
                anti=[term(sel(exists("foo")), "zone"), term(sel(exists("labelA")), "zone")],
            ),
            pod(
                "e2",
                node="nodeB",
                anti=[term(sel(exists("bar")), "zone"), term(sel(exists("labelB")), "zone")],
            ),
        ],
        zone_nodes("z1", "z2", "z3"),
        None,
        [EXISTING, EXISTING, None],
    ),
    (
        "incoming affinity: all terms matched by one pod, then the topology keys",
        pod(affinity=[term(sel(exists("foo")), "region"), term(sel(exists("bar")), "zone")]),
        [pod("pod1", node="nodeA", labels={"foo": "", "bar": ""})],
        [
            node("nodeA", {"region": "r1", "zone": "z1", "hostname": "nodeA"}),
            node("nodeB", {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
        ],
        None,
        [None, None],
    ),
    (
        "incoming affinity: the terms must be matched by the same pod",
        pod(affinity=[term(sel(exists("foo")), "region"), term(sel(exists("bar")), "zone")]),
        [
            pod("pod1", node="nodeA", labels={"foo": ""}),
            pod("pod2", node="nodeB", labels={"bar": ""}),
        ],
        zone_nodes("z1", "z2")[:2],
        None,
        [AFFINITY, AFFINITY],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "pods", "nodes", "want_pre", "want"),
    [c[1:] for c in MULTIPLE_NODES],
    ids=[c[0] for c in MULTIPLE_NODES],
)
def test_required_affinity_multiple_nodes(
    incoming: Pod,
    pods: list[Pod],
    nodes: list[Any],
    want_pre: Status | None,
    want: list[Status | None],
) -> None:
    pre, statuses = run_filter(incoming, pods, nodes, {"NS1": {}})
    assert pre == want_pre
    if pre is None:
        assert statuses == want


def test_filter_without_pre_filter_is_an_error() -> None:
    snap = snapshot([node("n")])
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    want = Status(
        Code.ERROR, 'error reading "PreFilterInterPodAffinity" from cycleState: not found'
    )
    info = snap.get("n")
    assert info is not None
    assert plugin.filter(CycleState(), pod(), info) == want


# --- PreFilterExtensions: AddPod / RemovePod ------------------------------------------------------


def counts(snap: Snapshot, domain_counts: dict[str, Any]) -> dict[tuple[str, str], int]:
    """``{(key, value): n}`` of the non-zero counts, as upstream's topologyToMatchedTermCount."""
    out = {}
    for key, arr in domain_counts.items():
        col = snap.table.labels[key]
        for vid, n in enumerate(arr.tolist()):
            if n:
                value = col.values[vid]
                assert value is not None
                out[(key, value)] = n
    return out


ANTI_FOO_BAR = [req_in("foo", "region", "bar")]
ANTI_COMPLEX = [
    req_in("foo", "region", "bar", "buzz"),
    term(sel(not_in("service", "bar", "security", "test")), "zone"),
]
AFF_COMPLEX = ANTI_COMPLEX
ADD_REMOVE_NODES = [
    node("nodeA", {"region": "r1", "zone": "z11"}),
    node("nodeB", {"region": "r1", "zone": "z12"}),
    node("nodeC", {"region": "r2", "zone": "z21"}),
]

ADD_REMOVE = [
    (
        "anti-affinity counts follow an added and removed pod",
        pod("pending", labels={"foo": "bar"}, anti=ANTI_FOO_BAR),
        [
            pod("p1", labels={"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", anti=ANTI_FOO_BAR),
        ],
        pod("added", labels={"foo": "bar"}, node="nodeB", anti=ANTI_FOO_BAR),
        {("region", "r1"): 2},
        {},
    ),
    (
        "anti-affinity counts with several terms",
        pod("pending", labels={"foo": "bar"}, anti=ANTI_COMPLEX),
        [
            pod("p1", labels={"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", anti=ANTI_FOO_BAR),
        ],
        pod("added", labels={"foo": "bar"}, node="nodeA", anti=ANTI_COMPLEX),
        {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
        {},
    ),
    (
        "affinity and anti-affinity counts",
        pod("pending", labels={"foo": "bar"}, affinity=AFF_COMPLEX),
        [
            pod("p1", labels={"foo": "bar"}, node="nodeA"),
            pod("p2", node="nodeC", anti=ANTI_FOO_BAR, affinity=AFF_COMPLEX),
        ],
        pod("added", labels={"foo": "bar"}, node="nodeA", anti=ANTI_COMPLEX),
        {},
        {("region", "r1"): 2, ("zone", "z11"): 2},
    ),
]


def _state(pending: Pod, pods: list[Pod]) -> tuple[InterPodAffinity, CycleState, Snapshot]:
    snap = snapshot(ADD_REMOVE_NODES, pods)
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    _, status = plugin.pre_filter(state, pending, all_nodes(snap))
    assert status is None
    return plugin, state, snap


def _all_counts(state: CycleState, snap: Snapshot) -> tuple[Any, Any, Any]:
    s = state.get(PRE_FILTER_STATE_KEY)
    return (
        counts(snap, s.existing_anti_affinity),
        counts(snap, s.affinity),
        counts(snap, s.anti_affinity),
    )


@pytest.mark.parametrize(
    ("pending", "existing", "added", "want_anti", "want_affinity"),
    [c[1:] for c in ADD_REMOVE],
    ids=[c[0] for c in ADD_REMOVE],
)
def test_pre_filter_state_add_remove_pod(
    pending: Pod,
    existing: list[Pod],
    added: Pod,
    want_anti: dict[tuple[str, str], int],
    want_affinity: dict[tuple[str, str], int],
) -> None:
    _, all_state, all_snap = _state(pending, [*existing, added])
    plugin, state, snap = _state(pending, existing)
    before = _all_counts(state.clone(), snap)
    info = snap.get(added.spec.node_name)
    assert info is not None
    assert plugin.add_pod(state, pending, PodInfo.of(added), info) is None
    after = _all_counts(state, snap)
    assert after[2] == want_anti
    assert after[1] == want_affinity
    assert after == _all_counts(all_state, all_snap)
    assert plugin.remove_pod(state, pending, PodInfo.of(added), info) is None
    assert _all_counts(state, snap) == before


def test_add_pod_changes_the_filter_and_clones_are_independent() -> None:
    """A nominated pod added on nodeB keeps the pending pod off region r1, in that state only."""
    pending = pod("pending", labels={"app": "x"}, anti=[req_in("app", "region", "x")])
    plugin, state, snap = _state(pending, [])
    assert node_statuses(plugin, state, pending, snap) == [None, None, None]
    clone = state.clone()
    info = snap.get("nodeB")
    assert info is not None
    plugin.add_pod(clone, pending, PodInfo.of(pod("nom", labels={"app": "x"}, node="nodeB")), info)
    assert node_statuses(plugin, clone, pending, snap) == [ANTI, ANTI, None]
    assert node_statuses(plugin, state, pending, snap) == [None, None, None]


def test_add_pod_without_pre_filter_is_an_error() -> None:
    snap = snapshot([node("n")])
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    info = snap.get("n")
    assert info is not None
    status = plugin.add_pod(CycleState(), pod(), PodInfo.of(pod("o", node="n")), info)
    assert status is not None
    assert status.code == Code.ERROR


# --- getIncomingAffinityAntiAffinityCounts -------------------------------------------------------

NODE_A = node("nodeA", {"hostname": "nodeA"})
POD_A = pod("normal", node="nodeA", labels={"aaa": ""})
POD_B = pod("normal", node="nodeA", labels={"bbb": ""})
POD_AB = pod("normal", node="nodeA", labels={"aaa": "", "bbb": ""})


def host(*keys: str, anti: tuple[str, ...] = ()) -> Pod:
    return pod(
        "in",
        affinity=[term(sel(exists(k)), "hostname") for k in keys],
        anti=[term(sel(exists(k)), "hostname") for k in anti],
    )


INCOMING_COUNTS = [
    ("no pod matches", [POD_B], host("aaa", anti=("aaa",)), {}, {}),
    (
        "single term",
        [POD_A],
        host("aaa", anti=("aaa",)),
        {("hostname", "nodeA"): 1},
        {("hostname", "nodeA"): 1},
    ),
    (
        "multiple terms: one count per term",
        [POD_AB],
        host("aaa", "bbb", anti=("aaa",)),
        {("hostname", "nodeA"): 2},
        {("hostname", "nodeA"): 1},
    ),
    (
        "affinity not matched, anti-affinity matched",
        [POD_A],
        host("aaa", "bbb", anti=("aaa", "bbb")),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "anti-affinity partly violated 1",
        [POD_AB],
        host("aaa", "ccc", anti=("aaa", "ccc")),
        {},
        {("hostname", "nodeA"): 1},
    ),
    (
        "anti-affinity partly violated 2",
        [POD_B],
        host("aaa", "bbb", anti=("aaa", "bbb")),
        {},
        {("hostname", "nodeA"): 1},
    ),
]


@pytest.mark.parametrize(
    ("existing", "incoming", "want_affinity", "want_anti"),
    [c[1:] for c in INCOMING_COUNTS],
    ids=[c[0] for c in INCOMING_COUNTS],
)
def test_incoming_affinity_anti_affinity_counts(
    existing: list[Pod],
    incoming: Pod,
    want_affinity: dict[tuple[str, str], int],
    want_anti: dict[tuple[str, str], int],
) -> None:
    snap = snapshot([NODE_A], existing)
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
    assert status is None
    _, affinity, anti = _all_counts(state, snap)
    assert affinity == want_affinity
    assert anti == want_anti


# --- more behaviour ------------------------------------------------------------------------------


def test_terminating_and_nodeless_pods() -> None:
    """Terminating pods still count (as upstream); pods on a node without Node object do not."""
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"}), node("gone", {"zone": "z3"})]
    pods = [
        pod("t", labels={"app": "x"}, node="a", terminating=True),
        pod("g", labels={"app": "x"}, node="gone"),
    ]
    snap = snapshot(nodes, pods)
    snap.remove_node("gone")
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    incoming = pod(anti=[req_in("app", "zone", "x")])
    state = CycleState()
    plugin.pre_filter(state, incoming, all_nodes(snap))
    assert node_statuses(plugin, state, incoming, snap) == [ANTI, None]


def test_self_affinity_only_when_nothing_matches_anywhere() -> None:
    """A matching pod on a node without the topology label keeps the special case away."""
    incoming = pod(labels={"app": "x"}, affinity=[req_in("app", "zone", "x")])
    nodes = [node("a", {"zone": "z1"}), node("nolabel")]
    # The matching pod sits on a node without zone: no domain counts it, so the first-pod case
    # applies and node "a" fits; "nolabel" lacks the key.
    pre, statuses = run_filter(incoming, [pod("e", labels={"app": "x"}, node="nolabel")], nodes)
    assert pre is None
    assert statuses == [None, AFFINITY]
    # A pod that does not match itself never gets the special case.
    stranger = pod(labels={"app": "y"}, affinity=[req_in("app", "zone", "x")])
    _, statuses = run_filter(stranger, [], nodes)
    assert statuses == [AFFINITY, AFFINITY]


def test_namespace_selector_without_namespace_data() -> None:
    """Without Namespace objects fed, a selecting namespaceSelector selects nothing."""
    incoming = pod(
        labels={"app": "x"},
        anti=[req_in("app", "zone", "x", namespace_selector=sel(in_("team", "a")))],
    )
    existing = [pod("e", namespace="other", labels={"app": "x"}, node="a")]
    nodes = [node("a", {"zone": "z1"})]
    assert run_filter(incoming, existing, nodes, {})[1] == [None]
    assert run_filter(incoming, existing, nodes, {"other": {"team": "a"}})[1] == [ANTI]


def test_existing_pod_namespace_selector_reads_incoming_namespace_labels() -> None:
    existing = [
        pod(
            "e",
            namespace="other",
            node="a",
            anti=[req_in("app", "zone", "x", namespace_selector=sel(in_("team", "a")))],
        )
    ]
    incoming = pod(namespace="mine", labels={"app": "x"})
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    assert run_filter(incoming, existing, nodes, {"mine": {"team": "b"}})[0] == SKIP
    assert run_filter(incoming, existing, nodes, {"mine": {"team": "a"}})[1] == [EXISTING, None]


def test_registered_in_tree_with_args() -> None:
    assert in_tree_registry().get("InterPodAffinity") is InterPodAffinity
    plugin = InterPodAffinity(
        Handle(Snapshot()),  # type: ignore[arg-type]
        {"hardPodAffinityWeight": 7, "ignorePreferredTermsOfExistingPods": True},
    )
    assert plugin.hard_pod_affinity_weight == 7
    assert plugin.ignore_preferred_terms_of_existing_pods
    assert InterPodAffinity(Handle(Snapshot())).hard_pod_affinity_weight == 1  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"hardPodAffinityWeight: Invalid value: 101"):
        InterPodAffinity(Handle(Snapshot()), {"hardPodAffinityWeight": 101})  # type: ignore[arg-type]


# --- selectors and matchLabelKeys -----------------------------------------------------------------


def selector(raw: dict[str, Any] | None) -> Selector:
    return Selector.parse(None if raw is None else msgspec.convert(raw, LabelSelector))


@pytest.mark.parametrize(
    ("raw", "labels", "want"),
    [
        (None, {}, False),
        ({}, {"a": "1"}, True),
        (sel(labels={"a": "1"}), {"a": "1"}, True),
        (sel(labels={"a": "1"}), {"a": "2"}, False),
        (sel(in_("a", "1", "2")), {"a": "2"}, True),
        (sel(in_("a", "1")), {}, False),
        (sel(not_in("a", "1")), {}, True),
        (sel(not_in("a", "1")), {"a": "1"}, False),
        (sel(exists("a")), {"a": ""}, True),
        (sel(not_exists("a")), {"a": ""}, False),
        (sel(exists("a"), labels={"b": "x"}), {"a": "", "b": "x"}, True),
    ],
)
def test_selector_matches(raw: dict[str, Any] | None, labels: dict[str, str], want: bool) -> None:
    assert selector(raw).matches(labels) is want


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            sel({"key": "a", "operator": "Gt", "values": ["1"]}),
            '"Gt" is not a valid label selector operator',
        ),
        (
            sel({"key": "a", "operator": "In", "values": []}),
            "values: Invalid value: []string(nil): for 'in', 'notin' operators, values set "
            "can't be empty",
        ),
        (
            sel({"key": "a", "operator": "Exists", "values": ["x"]}),
            'values: Invalid value: []string{"x"}: values set must be empty for exists and '
            "does not exist",
        ),
        (sel(in_("bad key", "x")), 'key: Invalid value: "bad key": name part must consist of'),
    ],
)
def test_selector_errors(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError) as e:
        selector(raw)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize(
    "affinity",
    [
        {},
        {"podAffinity": {}, "podAntiAffinity": {}},
        {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
        {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}},
    ],
)
def test_pods_without_terms_have_none(affinity: dict[str, Any]) -> None:
    assert PodAffinityTerms.of(pod()) is NO_TERMS
    p = pod()
    p.spec.affinity = msgspec.convert(affinity, Affinity)
    assert PodAffinityTerms.of(p) is NO_TERMS


@pytest.mark.parametrize(
    ("kind", "what"),
    [("pref_affinity", "preferredAffinityTerms"), ("pref_anti", "preferredAntiAffinityTerms")],
)
def test_preferred_terms_alone_are_parsed(kind: str, what: str) -> None:
    """A pod whose only term is a preferred one is parsed like any other (``NewPodInfo`` parses
    all four lists): a bad selector fails PreFilter and PreScore."""
    bad = weighted(1, req_in("service", "node", "{{.bad-value.}}"))
    incoming = pod(labels=POD_LABEL, **{kind: [bad]})
    error = f'{what}: values[0][service]: Invalid value: "{{{{.bad-value.}}}}"'
    assert PodAffinityTerms.of(incoming).error.startswith(error)
    snap = snapshot([node("n1")])
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    _, status = plugin.pre_filter(CycleState(), incoming, all_nodes(snap))
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith("parsing pod: " + error)
    status = plugin.pre_score(CycleState(), incoming, all_nodes(snap))
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message.startswith("failed to parse pod: " + error)


def test_apply_match_label_keys_as_the_api_server() -> None:
    p = pod(
        labels={"app": "web", "rev": "2", "tenant": "t1"},
        affinity=[term(sel(in_("app", "web")), "zone", match_label_keys=["rev", "absent"])],
        anti=[term(sel(exists("app")), "zone", mismatch_label_keys=["tenant"])],
        pref_affinity=[
            {"weight": 3, "podAffinityTerm": term(None, "zone", match_label_keys=["rev"])}
        ],
    )
    merged = apply_match_label_keys(p)
    a = merged.spec.affinity
    assert a is not None
    assert a.pod_affinity is not None
    assert a.pod_anti_affinity is not None
    req = a.pod_affinity.required_during_scheduling_ignored_during_execution[0].label_selector
    assert req is not None
    assert [(e.key, e.operator, e.values) for e in req.match_expressions] == [
        ("app", "In", ["web"]),
        ("rev", "In", ["2"]),
    ]
    anti = a.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert anti.label_selector is not None
    assert [(e.key, e.operator, e.values) for e in anti.label_selector.match_expressions] == [
        ("app", "Exists", []),
        ("tenant", "NotIn", ["t1"]),
    ]
    # Without a labelSelector the term selects nothing and is left alone.
    pref = a.pod_affinity.preferred_during_scheduling_ignored_during_execution[0]
    assert pref.pod_affinity_term.label_selector is None
    # The original is untouched, and a pod without affinity is returned as is.
    orig = p.spec.affinity
    assert orig is not None
    assert orig.pod_affinity is not None
    first = orig.pod_affinity.required_during_scheduling_ignored_during_execution[0]
    assert first.label_selector is not None
    assert len(first.label_selector.match_expressions) == 1
    plain = pod()
    assert apply_match_label_keys(plain) is plain


def test_match_label_keys_are_not_applied_by_the_scheduler() -> None:
    """kube-scheduler reads the selector the API server merged; matchLabelKeys alone does not
    narrow it."""
    incoming = pod(
        labels={"app": "web", "rev": "2"},
        anti=[term(sel(in_("app", "web")), "zone", match_label_keys=["rev"])],
    )
    existing = [pod("old", labels={"app": "web", "rev": "1"}, node="a")]
    nodes = [node("a", {"zone": "z1"}), node("b", {"zone": "z2"})]
    assert run_filter(incoming, existing, nodes)[1] == [ANTI, None]
    assert run_filter(apply_match_label_keys(incoming), existing, nodes)[1] == [None, None]


def test_pod_groups_are_shared_and_released() -> None:
    snap = snapshot(
        [node("a", {"zone": "z1"})],
        [pod(f"r{i}", labels={"app": "x"}, node="a") for i in range(5)]
        + [pod("s", labels={"app": "y"}, node="a")],
    )
    live = list(snap.pods.live_groups())
    assert len(live) == 2
    uids = [p.uid for p in snap.get("a").pods.values()]  # type: ignore[union-attr]
    for uid in uids:
        snap.remove_pod(uid)
    assert not list(snap.pods.live_groups())
    assert len(snap.pods) == 0
    assert not np.any(snap.pods.group_ids[: snap.pods.size])


def test_affinity_classes_are_shared_across_labels() -> None:
    """StatefulSet-like pods (unique labels, same anti-affinity) share one affinity class."""
    anti = [req_in("app", "zone", "db")]
    pods = [
        pod(f"db-{i}", labels={"app": "db", "name": f"db-{i}"}, node="a", anti=anti)
        for i in range(4)
    ]
    snap = snapshot([node("a", {"zone": "z1"})], pods)
    table = snap.pods
    assert len(list(table.live_groups())) == 4
    classes = list(table.affinity_classes())
    assert len(classes) == 1
    assert {int(table.group_class[g.gid]) for g in table.live_groups()} == {classes[0].cid}
    for p in pods[:3]:
        snap.remove_pod(p.metadata.uid)
    assert len(list(table.affinity_classes())) == 1
    snap.remove_pod(pods[3].metadata.uid)
    assert not list(table.affinity_classes())


def test_label_columns_drop_values_of_gone_pods() -> None:
    """Unique label values of pods long gone do not pile up in the group label columns."""
    snap = snapshot([node("a", {"zone": "z1"})])
    for i in range(10_000):
        p = pod(f"job-{i}", labels={"run": str(i)}, node="a")
        snap.add_pod(PodInfo.of(p), "a")
        snap.remove_pod(p.metadata.uid)
    col = snap.pods.label("run")
    assert col is not None
    assert len(col.values) < 5_000
    survivor = pod("last", labels={"run": "x", "app": "keep"}, node="a")
    snap.add_pod(PodInfo.of(survivor), "a")
    mask = Selector.from_set({"run": "x"}).group_mask(snap.pods)
    group = snap.pods.group_of(survivor.metadata.uid)
    assert group is not None
    assert mask[group.gid]
    assert int(mask.sum()) == 1


def test_the_same_question_after_the_cluster_changed() -> None:
    """One plugin asked the same again sees what changed in between: a namespace relabelled
    into a term's namespaceSelector, a pod with anti-affinity come and gone (a new affinity
    class and its departure)."""
    incoming = pod(
        labels={"app": "web"},
        affinity=[
            term(
                sel(labels={"app": "db"}),
                "zone",
                namespace_selector=sel(in_("team", "team1")),
            )
        ],
    )
    snap = snapshot(
        [node("n1", {"zone": "a"}), node("n2", {"zone": "b"})],
        [pod("db", namespace="other", labels={"app": "db"}, node="n1")],
        {"default": {"team": "team1"}, "other": {"team": "team2"}},
    )
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]

    def verdicts() -> list[Status | None]:
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
        assert status is None
        return node_statuses(plugin, state, incoming, snap)

    assert verdicts() == [AFFINITY, AFFINITY]
    snap.set_namespace("other", {"team": "team1"})
    assert verdicts() == [None, AFFINITY]
    guard = pod(
        "guard", labels={"x": "y"}, node="n1", anti=[term(sel(labels={"app": "web"}), "zone")]
    )
    snap.add_pod(PodInfo.of(guard), "n1")
    assert verdicts() == [EXISTING, AFFINITY]
    snap.remove_pod(guard.metadata.uid)
    assert verdicts() == [None, AFFINITY]
