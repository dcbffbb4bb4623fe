"""PodTopologySpread PreScore/Score/NormalizeScore: kube-scheduler's scoring_test.go table with
its exact scores (log weights, rounding and integer normalization as Go)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from test_inter_pod_affinity_builders import Handle, scores, snapshot
from test_pod_topology_spread import BAR, FOO, TAINTS, n, node_in, pods_on, selector_of, spod, tsc

from kubesched.api import Node, Pod
from kubesched.framework import Code, CycleState, Nodes, Status
from kubesched.plugins.pod_topology_spread import (
    PRE_SCORE_STATE_KEY,
    PodTopologySpread,
    _round_half_away,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SOFT = "ScheduleAnyway"


def h(name: str, **labels: str) -> Node:
    return n(name, **{HOST: name}, **labels)


def hz(name: str, zone: str) -> Node:
    return n(name, **{HOST: name, "zone": zone})


def hn(name: str, **labels: str) -> Node:
    return n(name, node=name, **labels)


ABCD = [h("node-a"), h("node-b"), h("node-c"), h("node-d")]

# (name, pod, existing pods, candidate nodes, failed nodes, services, want)
SCORE: list[tuple[Any, ...]] = [
    (
        "one constraint on node, no existing pods",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        [],
        [h("node-a"), h("node-b")],
        [],
        {},
        [100, 100],
    ),
    (
        "one constraint on node, only one candidate",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:2 b:1"),
        [h("node-a")],
        [h("node-b")],
        {},
        [100],
    ),
    (
        "one constraint on node, same number of matching pods",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:1 b:1"),
        [h("node-a"), h("node-b")],
        [],
        {},
        [100, 100],
    ),
    (
        "one constraint on node, 4 candidates, spread 2/1/0/3",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:2 b:1 d:3"),
        ABCD,
        [],
        {},
        [20, 60, 100, 0],
    ),
    (
        "one constraint on node, null selector",
        spod("p", tsc(1, HOST, SOFT), labels={"foo": ""}),
        pods_on("a:2 b:1 d:3"),
        ABCD,
        [],
        {},
        [100, 100, 100, 100],
    ),
    (
        "maxSkew 2",
        spod("p", tsc(2, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:2 b:1 d:3"),
        ABCD,
        [],
        {},
        [33, 66, 100, 16],
    ),
    (
        "maxSkew 3, spread 4/3/2/1",
        spod("p", tsc(3, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:4 b:3 c:2 d:1"),
        ABCD,
        [],
        {},
        [44, 66, 77, 100],
    ),
    (
        "system defaulting, nodes without zone, pods match a service",
        spod("p", labels={"foo": ""}),
        pods_on("a:4 b:3 c:2 d:1"),
        ABCD,
        [],
        {"svc": {"foo": ""}},
        [44, 66, 77, 100],
    ),
    (
        "one constraint on node, 3 of 4 nodes candidates",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:4 b:2 x:1 y:3"),
        [h("node-a"), h("node-b"), h("node-x")],
        [h("node-y")],
        {},
        [33, 83, 100],
    ),
    (
        "one candidate lacks the topology key",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:4 b:2 x:1 y:3"),
        [h("node-a"), n("node-b", n="node-b"), h("node-x")],
        [h("node-y")],
        {},
        [16, 0, 100],
    ),
    (
        "one constraint on zone, 3 of 4 nodes candidates",
        spod("p", tsc(1, "zone", SOFT, FOO), labels={"foo": ""}),
        pods_on("a:4 b:2 x:1 y:3"),
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")],
        [hz("node-y", "zone2")],
        {},
        [75, 75, 100],
    ),
    (
        "zone and node, 2 of 4 nodes candidates",
        spod("p", tsc(1, "zone", SOFT, FOO), tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        pods_on("a:2 b:1 x:2 y:4"),
        [hz("node-a", "zone1"), hz("node-x", "zone2")],
        [hz("node-b", "zone1"), hz("node-y", "zone2")],
        {},
        [100, 63],
    ),
    (
        "zone and node with different selectors",
        spod(
            "p", tsc(1, "zone", SOFT, FOO), tsc(1, HOST, SOFT, BAR), labels={"foo": "", "bar": ""}
        ),
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-b1", labels={"foo": "", "bar": ""}, node="node-b"),
            spod("p-y1", labels={"foo": ""}, node="node-y"),
            spod("p-y2", labels={"bar": ""}, node="node-y"),
        ],
        [
            hz("node-a", "zone1"),
            hz("node-b", "zone1"),
            hz("node-x", "zone2"),
            hz("node-y", "zone2"),
        ],
        [],
        {},
        [60, 20, 100, 60],
    ),
    (
        "different selectors, some nodes have 0 pods",
        spod(
            "p", tsc(1, "zone", SOFT, FOO), tsc(1, HOST, SOFT, BAR), labels={"foo": "", "bar": ""}
        ),
        [
            spod("p-b1", labels={"bar": ""}, node="node-b"),
            spod("p-x1", labels={"foo": ""}, node="node-x"),
            spod("p-y1", labels={"foo": "", "bar": ""}, node="node-y"),
        ],
        [
            hz("node-a", "zone1"),
            hz("node-b", "zone1"),
            hz("node-x", "zone2"),
            hz("node-y", "zone2"),
        ],
        [],
        {},
        [100, 60, 40, 0],
    ),
    (
        "different selectors, 3 of 4 nodes candidates",
        spod(
            "p", tsc(1, "zone", SOFT, FOO), tsc(1, HOST, SOFT, BAR), labels={"foo": "", "bar": ""}
        ),
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-b1", labels={"foo": "", "bar": ""}, node="node-b"),
            spod("p-y1", labels={"foo": ""}, node="node-y"),
            spod("p-y2", labels={"bar": ""}, node="node-y"),
        ],
        [hz("node-a", "zone1"), hz("node-b", "zone1"), hz("node-x", "zone2")],
        [hz("node-y", "zone2")],
        {},
        [50, 25, 100],
    ),
    (
        "pods of other namespaces do not count",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        [
            spod("p-a1", labels={"foo": ""}, node="node-a", namespace="ns1"),
            *pods_on("a:1 b:2"),
        ],
        [h("node-a"), h("node-b")],
        [],
        {},
        [100, 33],
    ),
    (
        "terminating pods are excluded",
        spod("p", tsc(1, HOST, SOFT, FOO), labels={"foo": ""}),
        [*pods_on("a:1", terminating=True), *pods_on("b:1")],
        [h("node-a"), h("node-b")],
        [],
        {},
        [100, 0],
    ),
    (
        "minDomains has no effect on ScheduleAnyway",
        spod("p", tsc(2, "node", SOFT, FOO, min_domains=10), labels={"foo": ""}),
        pods_on("a:2 b:2 c:1"),
        [hn("node-a"), hn("node-b"), hn("node-c")],
        [],
        {},
        [75, 75, 100],
    ),
    (
        "nodeAffinityPolicy Honor with nodeSelector",
        spod("p", tsc(1, "node", SOFT, FOO), labels={"foo": ""}, node_selector={"foo": ""}),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a", foo=""), hn("node-b", foo=""), hn("node-c")],
        [],
        {},
        [0, 33, 100],
    ),
    (
        "nodeAffinityPolicy Ignore with nodeSelector",
        spod(
            "p",
            tsc(1, "node", SOFT, FOO, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_selector={"foo": ""},
        ),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a", foo=""), hn("node-b", foo=""), hn("node-c")],
        [],
        {},
        [66, 100, 100],
    ),
    (
        "nodeAffinityPolicy Honor with node affinity",
        spod("p", tsc(1, "node", SOFT, FOO), labels={"foo": ""}, node_affinity=node_in("foo", "")),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a", foo=""), hn("node-b", foo=""), hn("node-c")],
        [],
        {},
        [0, 33, 100],
    ),
    (
        "nodeAffinityPolicy Ignore with node affinity",
        spod(
            "p",
            tsc(1, "node", SOFT, FOO, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_affinity=node_in("foo", ""),
        ),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a", foo=""), hn("node-b", foo=""), hn("node-c")],
        [],
        {},
        [66, 100, 100],
    ),
    (
        "nodeTaintsPolicy Honor",
        spod("p", tsc(1, "node", SOFT, FOO, taints_policy="Honor"), labels={"foo": ""}),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a"), hn("node-b"), n("node-c", taints=TAINTS, node="node-c")],
        [],
        {},
        [0, 33, 100],
    ),
    (
        "nodeTaintsPolicy Ignore",
        spod("p", tsc(1, "node", SOFT, FOO), labels={"foo": ""}),
        pods_on("a:2 b:1 c:1"),
        [hn("node-a"), hn("node-b"), n("node-c", taints=TAINTS, node="node-c")],
        [],
        {},
        [66, 100, 100],
    ),
    (
        "matchLabelKeys ANDed with an empty labelSelector",
        spod(
            "p",
            tsc(1, "zone", SOFT, {}, match_label_keys=["foo"]),
            tsc(1, HOST, SOFT, {}, match_label_keys=["bar"]),
            labels={"foo": "", "bar": ""},
        ),
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-b1", labels={"foo": "", "bar": ""}, node="node-b"),
            spod("p-y1", labels={"foo": ""}, node="node-c"),
            spod("p-y2", labels={"bar": ""}, node="node-c"),
        ],
        [
            hz("node-a", "zone1"),
            hz("node-b", "zone1"),
            hz("node-c", "zone2"),
            hz("node-d", "zone2"),
        ],
        [],
        {},
        [60, 20, 60, 100],
    ),
    (
        "matchLabelKeys ANDed with a labelSelector",
        spod(
            "p",
            tsc(1, "zone", SOFT, FOO),
            tsc(1, HOST, SOFT, BAR, match_label_keys=["baz"]),
            labels={"foo": "", "bar": "", "baz": ""},
        ),
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-b1", labels={"foo": "", "bar": "", "baz": ""}, node="node-b"),
            spod("p-c1", labels={"foo": ""}, node="node-c"),
            spod("p-c2", labels={"bar": ""}, node="node-c"),
            spod("p-d3", labels={"bar": "", "baz": ""}, node="node-c"),
        ],
        [
            hz("node-a", "zone1"),
            hz("node-b", "zone1"),
            hz("node-c", "zone2"),
            hz("node-d", "zone2"),
        ],
        [],
        {},
        [60, 20, 60, 100],
    ),
]


def pre_scored(
    incoming: Pod,
    existing: list[Pod],
    candidates: list[Node],
    failed: list[Node],
    services: dict[str, dict[str, str]],
    args: dict[str, Any] | None = None,
) -> tuple[PodTopologySpread, CycleState, Any, Status | None]:
    snap = snapshot([*candidates, *failed], existing)
    for name, selector in services.items():
        snap.set_workload_selector(
            "Service", "default", name, selector_of({"matchLabels": selector})
        )
    plugin = PodTopologySpread(Handle(snap), args or {"defaultingType": "System"})  # type: ignore[arg-type]
    state = CycleState()
    slots = [snap.slot_of(c.metadata.name) for c in candidates]
    status = plugin.pre_score(state, incoming, Nodes(snap, _slots(slots)))
    return plugin, state, snap, status


def _slots(slots: list[int | None]) -> Any:
    return np.array(slots, dtype=np.int64)


@pytest.mark.parametrize(
    ("incoming", "existing", "candidates", "failed", "services", "want"),
    [c[1:] for c in SCORE],
    ids=[c[0] for c in SCORE],
)
def test_score(
    incoming: Pod,
    existing: list[Pod],
    candidates: list[Node],
    failed: list[Node],
    services: dict[str, dict[str, str]],
    want: list[int],
) -> None:
    plugin, state, snap, status = pre_scored(incoming, existing, candidates, failed, services)
    assert status is None
    got = scores(plugin, state, incoming, snap, [c.metadata.name for c in candidates])
    assert got == want


def test_pre_score_skips() -> None:
    nodes = [h("node-a"), h("node-b")]
    list_args = {"defaultingType": "List"}
    # No soft constraints.
    assert pre_scored(spod("p"), [], nodes, [], {}, list_args)[3] == Status(Code.SKIP)
    # Default constraints, but the replica set is not the pod's.
    args = {
        "defaultingType": "List",
        "defaultConstraints": [{"maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": SOFT}],
    }
    owned = spod("p", labels={"foo": "bar"}, owner=("apps/v1", "ReplicaSet", "rs2"))
    plugin, _, snap, _ = pre_scored(owned, [], [n("node-a", planet="mars")], [], {}, args)
    snap.set_workload_selector(
        "ReplicaSet",
        "default",
        "rs1",
        selector_of({"matchExpressions": [{"key": "tar", "operator": "Exists"}]}),
    )
    state = CycleState()
    assert plugin.pre_score(state, owned, Nodes(snap, snap.present_slots())) == Status(Code.SKIP)
    # No nodes at all.
    empty = PodTopologySpread(Handle(snapshot([])), list_args)  # type: ignore[arg-type]
    incoming = spod("p", tsc(1, HOST, SOFT, FOO))
    assert empty.pre_score(CycleState(), incoming, Nodes(snapshot([]), _slots([]))) == Status(
        Code.SKIP
    )


def test_pre_score_state_weights_and_ignored_nodes() -> None:
    """``topologyNormalizingWeight`` is log(domains + 2) over the candidates; with the pod's
    own constraints a candidate missing a key is ignored (and scores 0)."""
    incoming = spod("p", tsc(1, "zone", SOFT, FOO), tsc(1, HOST, SOFT, BAR), labels={"foo": ""})
    nodes = [hz("node-a", "zone1"), hz("node-b", "zone1"), h("node-x")]
    _plugin, state, snap, status = pre_scored(
        incoming, [], nodes, [], {}, {"defaultingType": "List"}
    )
    assert status is None
    s = state.get(PRE_SCORE_STATE_KEY)
    assert [c.weight for c in s.constraints] == [math.log(1 + 2), math.log(2 + 2)]
    assert s.ignored[snap.slot_of("node-x")]
    assert not s.ignored[snap.slot_of("node-a")]


def test_system_defaults_count_nodes_without_zone_as_one_zone() -> None:
    """System defaulting does not require every key: nodes without a zone form the zone ""."""
    incoming = spod("p", labels={"foo": "tar"}, owner=("apps/v1", "ReplicaSet", "rs1"))
    nodes = [
        n("node-a", **{HOST: "node-a", ZONE: "mars"}),
        n("node-b", **{HOST: "node-b", ZONE: "mars"}),
        h("node-c"),
        h("node-d"),
    ]
    existing = [
        spod("e1", labels={"foo": "x"}, node="node-c"),
        spod("e2", labels={"foo": "x"}, node="node-d"),
        spod("e3", labels={"foo": "x"}, node="node-d"),
    ]
    snap = snapshot(nodes, existing)
    snap.set_workload_selector("ReplicaSet", "default", "rs1", selector_of(FOO))
    plugin = PodTopologySpread(Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    assert plugin.pre_score(state, incoming, Nodes(snap, snap.present_slots())) is None
    s = state.get(PRE_SCORE_STATE_KEY)
    assert [c.constraint.topology_key for c in s.constraints] == [HOST, ZONE]
    assert [c.weight for c in s.constraints] == [math.log(4 + 2), math.log(2 + 2)]
    assert not s.ignored.any()
    # Zone "" holds the 3 matching pods, but a node without the label gets no zone term at all
    # (not even maxSkew - 1): node-a/b: (0 * log 6 + 2) + (0 * log 4 + 4) = 6;
    # node-c: 1 * log 6 + 2 = 3.79 -> 4; node-d: 2 * log 6 + 2 = 5.58 -> 6.
    raw, _ = plugin.score_nodes(state, incoming, Nodes(snap, snap.present_slots()))
    assert raw.tolist() == [6, 6, 4, 6]
    got = scores(plugin, state, incoming, snap, ["node-a", "node-b", "node-c", "node-d"])
    assert got == [66, 66, 100, 66]


def test_system_defaults_zone_without_label_shares_the_empty_zone() -> None:
    """A node labelled zone="" reads the pods of nodes without a zone label as its own zone's,
    as upstream keys domains by the label's value ("" when absent)."""
    incoming = spod("p", labels={"foo": "1"}, owner=("apps/v1", "ReplicaSet", "rs1"))
    nodes = [
        n("empty", **{HOST: "empty", ZONE: ""}),
        n("none", **{HOST: "none"}),
        n("z1", **{HOST: "z1", ZONE: "z1"}),
    ]
    existing = [spod(f"e{i}", labels={"foo": "1"}, node="none") for i in range(3)]
    snap = snapshot(nodes, existing)
    snap.set_workload_selector("ReplicaSet", "default", "rs1", selector_of(FOO))
    plugin = PodTopologySpread(Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    everywhere = Nodes(snap, snap.present_slots())
    assert plugin.pre_score(state, incoming, everywhere) is None
    raw, _ = plugin.score_nodes(state, incoming, everywhere)
    # hostname weight log(5), zone weight log(4) over the zones "" and "z1":
    # empty: 0 + 2 + 3 * log 4 + 4 = 10.16; none: 3 * log 5 + 2 = 6.83; z1: 2 + 4 = 6.
    assert raw.tolist() == [10, 7, 6]


def test_round_half_away_from_zero() -> None:
    """Scores are rounded as Go's math.Round: 2.5 -> 3 (numpy's round would give 2)."""
    assert _round_half_away(np.array([0.5, 1.5, 2.5, 2.4999, 0.0])).tolist() == [1, 2, 3, 2, 0]
