"""PodTopologySpread PreFilter/Filter: kube-scheduler's filtering_test.go tables (state, single
and multiple constraints, AddPod/RemovePod), default constraints, and the queueing hints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import pytest
from test_inter_pod_affinity_builders import Handle, all_nodes, exists, node_statuses, sel, snapshot

from builders import PodWrapper, make_node, make_pod, next_uid
from kubesched.api import LabelSelector, Node, Pod
from kubesched.config import ConfigError
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    PodInfo,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins import in_tree_registry
from kubesched.plugins.pod_topology_spread import PRE_FILTER_STATE_KEY, PodTopologySpread

Json = dict[str, Any]

SKEW = Status(Code.UNSCHEDULABLE, "node(s) didn't match pod topology spread constraints")
MISSING = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    "node(s) didn't match pod topology spread constraints (missing required label)",
)
SKIP = Status(Code.SKIP)
FOO = sel(exists("foo"))
BAR = sel(exists("bar"))
LIST_ARGS = {"defaultingType": "List"}
TAINTS = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]


def tsc(
    max_skew: int,
    key: str,
    when: str = "DoNotSchedule",
    selector: Json | None = None,
    *,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] = (),
) -> Json:
    c: Json = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        c["labelSelector"] = selector
    if min_domains is not None:
        c["minDomains"] = min_domains
    if affinity_policy is not None:
        c["nodeAffinityPolicy"] = affinity_policy
    if taints_policy is not None:
        c["nodeTaintsPolicy"] = taints_policy
    if match_label_keys:
        c["matchLabelKeys"] = list(match_label_keys)
    return c


def spod(
    name: str = "p",
    *constraints: Json,
    labels: Mapping[str, str] | None = None,
    node: str = "",
    namespace: str = "default",
    node_selector: Mapping[str, str] | None = None,
    node_affinity: Json | None = None,
    terminating: bool = False,
    owner: tuple[str, str, str] | None = None,
    tolerations: Sequence[Json] = (),
) -> Pod:
    built = (
        PodWrapper(name)
        .namespace(namespace)
        .uid(next_uid())
        .labels(labels or {})
        .pause()
        .node(node)
        .tolerations(tolerations)
    )
    if constraints:
        built.spec({"topologySpreadConstraints": list(constraints)})
    if node_selector is not None:
        built.node_selector(node_selector)
    if node_affinity is not None:
        built.affinity({"nodeAffinity": node_affinity})
    if terminating:
        built.terminating()
    if owner is not None:
        built.owner(*owner)
    return built.obj()


def node_in(key: str, *values: str) -> Json:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
            ]
        }
    }


def node_not_in(key: str, *values: str) -> Json:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": key, "operator": "NotIn", "values": list(values)}]}
            ]
        }
    }


def n(name: str, *, taints: Sequence[Json] = (), **labels: str) -> Node:
    return make_node(name, labels=labels, taints=taints)


def zn(name: str, zone: str, **extra: str) -> Node:
    return n(name, zone=zone, node=name, **extra)


FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


def pods_on(spec: str, labels: Mapping[str, str] | None = None, **kw: Any) -> list[Pod]:
    """``"a:2 b:1"`` -> two pods on node-a and one on node-b, labelled foo="" by default."""
    out = []
    for part in spec.split():
        name, count = part.split(":")
        for i in range(int(count)):
            out.append(
                spod(
                    f"p-{name}{i}",
                    labels={"foo": ""} if labels is None else labels,
                    node=f"node-{name}",
                    **kw,
                )
            )
    return out


def plugin_for(snap: Snapshot, args: Json | None = None) -> PodTopologySpread:
    return PodTopologySpread(Handle(snap), LIST_ARGS if args is None else args)  # type: ignore[arg-type]


def run(
    incoming: Pod, existing: Sequence[Pod], nodes: Sequence[Node], args: Json | None = None
) -> tuple[Status | None, list[Status | None]]:
    snap = snapshot(nodes, existing)
    plugin = plugin_for(snap, args)
    state = CycleState()
    _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
    if status is not None:
        return status, []
    return None, node_statuses(plugin, state, incoming, snap)


def domains(state: CycleState, snap: Snapshot) -> list[tuple[dict[str, int], int, int]]:
    """Per constraint: ``({value: matching pods}, domains, global minimum)``."""
    out = []
    for d in state.get(PRE_FILTER_STATE_KEY).domains:
        col = snap.table.labels[d.constraint.topology_key]
        counts = {col.values[i]: int(d.counts[i]) for i in range(len(d.counts)) if d.present[i]}
        out.append((counts, int(d.present.sum()), d.min_match()))
    return out


# --- TestPreFilterState --------------------------------------------------------------------------

PRE_FILTER_STATE = [
    (
        "clean cluster with one constraint",
        spod("p", tsc(5, "zone", selector=sel(labels={"foo": "bar"})), labels={"foo": ""}),
        FOUR,
        [],
        [({"zone1": 0, "zone2": 0}, 2, 0)],
    ),
    (
        "normal case with one constraint",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:2"),
        [({"zone1": 3, "zone2": 2}, 2, 2)],
    ),
    (
        "null label selector counts nothing",
        spod("p", tsc(1, "zone"), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:2"),
        [({"zone1": 0, "zone2": 0}, 2, 0)],
    ),
    (
        "a 3-zone cluster",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        [*FOUR, zn("node-o", "zone3"), zn("node-p", "zone3")],
        pods_on("a:2 b:1 y:2"),
        [({"zone1": 3, "zone2": 2, "zone3": 0}, 3, 0)],
    ),
    (
        "pods of other namespaces do not count",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        FOUR,
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-a2", labels={"foo": ""}, node="node-a", namespace="ns1"),
            spod("p-b1", labels={"foo": ""}, node="node-b"),
            spod("p-y1", labels={"foo": ""}, node="node-y", namespace="ns2"),
            spod("p-y2", labels={"foo": ""}, node="node-y"),
        ],
        [({"zone1": 2, "zone2": 1}, 2, 1)],
    ),
    (
        "two constraints",
        spod("p", tsc(1, "zone", selector=FOO), tsc(1, "node", selector=FOO), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:4"),
        [
            ({"zone1": 3, "zone2": 4}, 2, 3),
            ({"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}, 4, 0),
        ],
    ),
    (
        "soft constraints are left to scoring",
        spod(
            "p",
            tsc(1, "zone", "ScheduleAnyway", FOO),
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", "ScheduleAnyway", FOO),
            tsc(1, "node", selector=FOO),
            labels={"foo": ""},
        ),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        pods_on("a:2 b:1 y:4"),
        [({"zone1": 3, "zone2": 4}, 2, 3), ({"node-a": 2, "node-b": 1, "node-y": 4}, 3, 1)],
    ),
    (
        "different label selectors",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=BAR),
            labels={"foo": "", "bar": ""},
        ),
        [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-y", "zone2")],
        [
            spod("p-a", labels={"foo": ""}, node="node-a"),
            spod("p-b", labels={"bar": ""}, node="node-b"),
        ],
        [({"zone1": 1, "zone2": 0}, 2, 0), ({"node-a": 0, "node-b": 1, "node-y": 0}, 3, 0)],
    ),
    (
        "node affinity keeps nodes out of the counts",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=FOO),
            labels={"foo": ""},
            node_affinity=node_not_in("node", "node-x"),
        ),
        FOUR,
        pods_on("a:2 b:1 y:4"),
        [({"zone1": 3, "zone2": 4}, 2, 3), ({"node-a": 2, "node-b": 1, "node-y": 4}, 3, 1)],
    ),
    (
        "nodeAffinityPolicy Ignore counts every node",
        spod(
            "p",
            tsc(1, "node", selector=BAR, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_selector={"foo": ""},
        ),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-c", node="node-c", bar=""),
        ],
        [
            spod("p-a", labels={"bar": ""}, node="node-a"),
            spod("p-b", labels={"bar": ""}, node="node-b"),
            spod("p-c", labels={"bar": ""}, node="node-b"),
            spod("p-d", node="node-c"),
        ],
        [({"node-a": 1, "node-b": 2, "node-c": 0}, 3, 0)],
    ),
    (
        "nodeTaintsPolicy Honor leaves untolerated nodes out",
        spod("p", tsc(1, "node", selector=BAR, taints_policy="Honor"), labels={"foo": ""}),
        [
            n("node-a", node="node-a"),
            n("node-b", node="node-b"),
            n("node-c", taints=TAINTS, node="node-c"),
        ],
        [
            spod("p-a", labels={"bar": ""}, node="node-a"),
            spod("p-b", labels={"bar": ""}, node="node-b"),
            spod("p-c", labels={"bar": ""}, node="node-b"),
        ],
        [({"node-a": 1, "node-b": 2}, 2, 1)],
    ),
    (
        "matchLabelKeys narrows the selector with the pod's own value",
        spod(
            "p",
            tsc(1, "zone", selector=FOO, match_label_keys=["rev"]),
            labels={"foo": "", "rev": "2"},
        ),
        FOUR,
        [
            spod("p-a", labels={"foo": "", "rev": "1"}, node="node-a"),
            spod("p-x", labels={"foo": "", "rev": "2"}, node="node-x"),
        ],
        [({"zone1": 0, "zone2": 1}, 2, 0)],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "want"),
    [c[1:] for c in PRE_FILTER_STATE],
    ids=[c[0] for c in PRE_FILTER_STATE],
)
def test_pre_filter_state(
    incoming: Pod, nodes: list[Node], existing: list[Pod], want: list[Any]
) -> None:
    snap = snapshot(nodes, existing)
    state = CycleState()
    _, status = plugin_for(snap).pre_filter(state, incoming, all_nodes(snap))
    assert status is None
    assert domains(state, snap) == want


def test_pre_filter_skips_a_pod_without_hard_constraints() -> None:
    snap = snapshot(FOUR)
    incoming = spod("p", tsc(1, "zone", "ScheduleAnyway", FOO), labels={"foo": ""})
    assert plugin_for(snap).pre_filter(CycleState(), incoming, all_nodes(snap))[1] == SKIP
    assert plugin_for(snap).pre_filter(CycleState(), spod("q"), all_nodes(snap))[1] == SKIP


def test_filter_without_pre_filter_is_an_error() -> None:
    snap = snapshot(FOUR)
    info = snap.get("node-a")
    assert info is not None
    status = plugin_for(snap).filter(CycleState(), spod(), info)
    assert status == Status(
        Code.ERROR, 'reading "PreFilterPodTopologySpread" from cycleState: not found'
    )


# --- TestSingleConstraint / TestMultipleConstraints -----------------------------------------------

OK = None
SINGLE = [
    (
        "no existing pods",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        FOUR,
        [],
        [OK] * 4,
    ),
    (
        "no existing pods, the pod does not match itself",
        spod("p", tsc(1, "zone", selector=BAR), labels={"foo": ""}),
        FOUR,
        [],
        [OK] * 4,
    ),
    (
        "pods of other namespaces do not count",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        FOUR,
        [
            spod("p-a1", labels={"foo": ""}, node="node-a", namespace="ns1"),
            spod("p-b1", labels={"foo": ""}, node="node-a", namespace="ns2"),
            spod("p-x1", labels={"foo": ""}, node="node-x"),
            spod("p-y1", labels={"foo": ""}, node="node-y"),
        ],
        [OK, OK, SKEW, SKEW],
    ),
    (
        "existing pods do not match a null selector",
        spod("p", tsc(1, "zone"), labels={"foo": ""}),
        FOUR,
        pods_on("x:1 y:1"),
        [OK] * 4,
    ),
    (
        "pods spread 3/3 over zones: all fit",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [OK] * 4,
    ),
    (
        "spread 1/2: node-b lacks the zone label",
        spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""}),
        [
            zn("node-a", "zone1"),
            n("node-b", zon="zone1", node="node-b"),
            zn("node-x", "zone2"),
            zn("node-y", "zone2"),
        ],
        pods_on("a:1 b:1 x:1 y:1"),
        [OK, MISSING, SKEW, SKEW],
    ),
    (
        "no node has the rack label",
        spod("p", tsc(1, "rack", selector=FOO), labels={"foo": ""}),
        [zn("node-a", "zone1"), zn("node-x", "zone2")],
        [],
        [MISSING, MISSING],
    ),
    (
        "spread 2/1/0/3 over nodes: only node-x fits",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "spread 2/1/0/3, maxSkew 2: node-b and node-x fit",
        spod("p", tsc(2, "node", selector=FOO), labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [SKEW, OK, OK, SKEW],
    ),
    (
        "spread 2/1/0/3, the pod does not match itself",
        spod("p", tsc(1, "node", selector=FOO), labels={"bar": ""}),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [SKEW, OK, OK, SKEW],
    ),
    (
        "node affinity: spread 2/~1~/~0~/3, node-a fits",
        spod(
            "p",
            tsc(1, "node", selector=FOO),
            labels={"foo": ""},
            node_affinity=node_in("node", "node-a", "node-y"),
        ),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [OK, OK, OK, SKEW],
    ),
    (
        "terminating pods are excluded",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        [n("node-a", node="node-a"), n("node-b", node="node-b")],
        [*pods_on("a:1", terminating=True), *pods_on("b:1")],
        [OK, SKEW],
    ),
    (
        "node affinity: spread 0/~2~/0/1, node-a fits",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            labels={"foo": ""},
            node_affinity=node_not_in("node", "node-b"),
        ),
        FOUR,
        pods_on("b:2 y:1"),
        [OK, OK, SKEW, SKEW],
    ),
    (
        "2/2/1, maxSkew 2, fewer domains than minDomains: the third node fits",
        spod("p", tsc(2, "node", selector=FOO, min_domains=4), labels={"foo": ""}),
        [n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c")],
        pods_on("a:2 b:2 c:1"),
        [SKEW, SKEW, OK],
    ),
    (
        "2/2/1, maxSkew 2, more domains than minDomains: all fit",
        spod("p", tsc(2, "node", selector=FOO, min_domains=2), labels={"foo": ""}),
        [n("node-a", node="node-a"), n("node-b", node="node-b"), n("node-c", node="node-c")],
        pods_on("a:2 b:2 c:1"),
        [OK, OK, OK],
    ),
    (
        "zones 2/1, maxSkew 2, fewer domains than minDomains",
        spod("p", tsc(2, "zone", selector=FOO, min_domains=3), labels={"foo": ""}),
        FOUR,
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, OK],
    ),
    (
        "zones 2/1, maxSkew 2, more domains than minDomains",
        spod("p", tsc(2, "zone", selector=FOO, min_domains=1), labels={"foo": ""}),
        FOUR,
        pods_on("a:1 b:1 y:1"),
        [OK] * 4,
    ),
    (
        "nodeAffinityPolicy Honor with nodeSelector: 1/1/0/~1~",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}, node_selector={"foo": ""}),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, OK],
    ),
    (
        "nodeAffinityPolicy Ignore with nodeSelector: 1/1/0/1",
        spod(
            "p",
            tsc(1, "node", selector=FOO, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_selector={"foo": ""},
        ),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "nodeAffinityPolicy Honor with node affinity",
        spod(
            "p", tsc(1, "node", selector=FOO), labels={"foo": ""}, node_affinity=node_in("foo", "")
        ),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, OK],
    ),
    (
        "nodeAffinityPolicy Ignore with node affinity",
        spod(
            "p",
            tsc(1, "node", selector=FOO, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_affinity=node_in("foo", ""),
        ),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "nodeTaintsPolicy Honor",
        spod("p", tsc(1, "node", selector=FOO, taints_policy="Honor"), labels={"foo": ""}),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", taints=TAINTS, node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, OK],
    ),
    (
        "nodeTaintsPolicy Ignore (default)",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        [
            n("node-a", node="node-a", foo=""),
            n("node-b", node="node-b", foo=""),
            n("node-x", node="node-x", foo=""),
            n("node-y", taints=TAINTS, node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, SKEW],
    ),
]

ZONE_NODE = (tsc(1, "zone", selector=FOO), tsc(1, "node", selector=FOO))
MULTIPLE = [
    (
        "zone and node, spreads [3/3, 2/1/0/3]",
        spod("p", *ZONE_NODE, labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:3"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "zone and node, spreads [3/4, 2/1/0/4]: nothing fits",
        spod("p", *ZONE_NODE, labels={"foo": ""}),
        FOUR,
        pods_on("a:2 b:1 y:4"),
        [SKEW, SKEW, SKEW, SKEW],
    ),
    (
        "different selectors, spreads [1/0, 1/0/0/1]",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=BAR),
            labels={"foo": "", "bar": ""},
        ),
        FOUR,
        [*pods_on("a:1"), *pods_on("y:1", labels={"bar": ""})],
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "different selectors, spreads [1/0, 0/0/1/1]: nothing fits",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=BAR),
            labels={"foo": "", "bar": ""},
        ),
        FOUR,
        [*pods_on("a:1"), *pods_on("x:1 y:1", labels={"bar": ""})],
        [SKEW, SKEW, SKEW, SKEW],
    ),
    (
        "different selectors, spreads [2/3, 1/0/0/1]",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=BAR),
            labels={"foo": "", "bar": ""},
        ),
        FOUR,
        [
            spod("p-a1", labels={"foo": ""}, node="node-a"),
            spod("p-a2", labels={"foo": "", "bar": ""}, node="node-a"),
            spod("p-y1", labels={"foo": ""}, node="node-y"),
            spod("p-y2", labels={"foo": "", "bar": ""}, node="node-y"),
            spod("p-y3", labels={"foo": ""}, node="node-y"),
        ],
        [SKEW, OK, SKEW, SKEW],
    ),
    (
        "different selectors, the pod does not match itself on zone",
        spod("p", tsc(1, "zone", selector=FOO), tsc(1, "node", selector=BAR), labels={"bar": ""}),
        FOUR,
        [*pods_on("a:1"), *pods_on("x:1 y:1", labels={"bar": ""})],
        [OK, OK, SKEW, SKEW],
    ),
    (
        "node-x lacks the node label, spreads [1/1, 1/0/0/1]",
        spod("p", *ZONE_NODE, labels={"foo": ""}),
        [
            zn("node-a", "zone1"),
            zn("node-b", "zone1"),
            n("node-x", zone="zone2"),
            zn("node-y", "zone2"),
        ],
        pods_on("a:1 y:1"),
        [SKEW, OK, MISSING, SKEW],
    ),
    (
        "inclusion: zone honor/ignore, node ignore/ignore",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            tsc(1, "node", selector=FOO, affinity_policy="Ignore"),
            labels={"foo": ""},
            node_selector={"foo": ""},
        ),
        [
            zn("node-a", "zone1", foo=""),
            zn("node-b", "zone1", foo=""),
            zn("node-x", "zone2", foo=""),
            zn("node-y", "zone2"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "inclusion: zone honor/honor, node honor/ignore",
        spod(
            "p",
            tsc(1, "zone", selector=FOO, taints_policy="Honor"),
            tsc(1, "node", selector=FOO),
            labels={"foo": ""},
        ),
        [
            zn("node-a", "zone1", foo=""),
            zn("node-b", "zone1", foo=""),
            zn("node-x", "zone2", foo=""),
            n("node-y", taints=TAINTS, zone="zone2", node="node-y"),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, SKEW, OK, SKEW],
    ),
    (
        "inclusion: zone honor/ignore, node honor/ignore",
        spod("p", *ZONE_NODE, labels={"foo": ""}, node_selector={"foo": ""}),
        [
            zn("node-a", "zone1", foo=""),
            zn("node-b", "zone1"),
            zn("node-x", "zone2", foo=""),
            n("node-y", taints=TAINTS, zone="zone2", node="node-y", foo=""),
        ],
        pods_on("a:1 b:1 y:1"),
        [SKEW, OK, OK, SKEW],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "nodes", "existing", "want"),
    [c[1:] for c in SINGLE + MULTIPLE],
    ids=[c[0] for c in SINGLE + MULTIPLE],
)
def test_filter(incoming: Pod, nodes: list[Node], existing: list[Pod], want: list[Any]) -> None:
    pre, statuses = run(incoming, existing, nodes)
    assert pre is None
    assert statuses == want


# --- AddPod / RemovePod ---------------------------------------------------------------------------

TWO = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


ADD_REMOVE = [
    (
        "node a and b both impact current min match",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        [],
        "node-a",
        spod("new", labels={"foo": ""}, node="node-a"),
        [({"node-a": 1, "node-b": 0, "node-x": 0, "node-y": 0}, 4, 0)],
    ),
    (
        "only node a impacts current min match",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        pods_on("b:1 x:1 y:1"),
        "node-a",
        spod("new", labels={"foo": ""}, node="node-a"),
        [({"node-a": 1, "node-b": 1, "node-x": 1, "node-y": 1}, 4, 1)],
    ),
    (
        "a pod of another namespace is not added",
        spod("p", tsc(1, "node", selector=FOO), labels={"foo": ""}),
        pods_on("a:1"),
        "node-b",
        spod("new", labels={"foo": ""}, node="node-b", namespace="ns1"),
        [({"node-a": 1, "node-b": 0, "node-x": 0, "node-y": 0}, 4, 0)],
    ),
    (
        "zone and node constraints",
        spod("p", *ZONE_NODE, labels={"foo": ""}),
        pods_on("a:1 y:1"),
        "node-x",
        spod("new", labels={"foo": ""}, node="node-x"),
        [
            ({"zone1": 1, "zone2": 2}, 2, 1),
            ({"node-a": 1, "node-b": 0, "node-x": 1, "node-y": 1}, 4, 0),
        ],
    ),
    (
        "a pod on a node the pod's node affinity excludes is not added",
        spod(
            "p",
            tsc(1, "zone", selector=FOO),
            labels={"foo": ""},
            node_selector={"node": "node-a"},
        ),
        pods_on("a:1"),
        "node-x",
        spod("new", labels={"foo": ""}, node="node-x"),
        [({"zone1": 1}, 1, 1)],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "existing", "added_on", "added", "want"),
    [c[1:] for c in ADD_REMOVE],
    ids=[c[0] for c in ADD_REMOVE],
)
def test_add_and_remove_pod(
    incoming: Pod,
    existing: list[Pod],
    added_on: str,
    added: Pod,
    want: list[Any],
) -> None:
    snap = snapshot(TWO, existing)
    plugin = plugin_for(snap)
    state = CycleState()
    assert plugin.pre_filter(state, incoming, all_nodes(snap))[1] is None
    before = domains(state, snap)
    info = snap.get(added_on)
    assert info is not None
    clone = state.clone()
    assert plugin.add_pod(clone, incoming, PodInfo.of(added), info) is None
    assert domains(clone, snap) == want
    assert domains(state, snap) == before
    assert plugin.remove_pod(clone, incoming, PodInfo.of(added), info) is None
    assert domains(clone, snap) == before
    # Removing an existing pod (preemption) lowers the counts as a fresh PreFilter would see.
    if existing:
        victim = existing[0]
        victim_info = snap.get(victim.spec.node_name)
        assert victim_info is not None
        plugin.remove_pod(state, incoming, PodInfo.of(victim), victim_info)
        fresh = snapshot(TWO, existing[1:])
        fresh_state = CycleState()
        plugin_for(fresh).pre_filter(fresh_state, incoming, all_nodes(fresh))
        assert [d[0] for d in domains(state, snap)] == [d[0] for d in domains(fresh_state, fresh)]


def test_add_pod_changes_the_filter() -> None:
    incoming = spod("p", tsc(1, "zone", selector=FOO), labels={"foo": ""})
    snap = snapshot(TWO, pods_on("x:1"))
    plugin = plugin_for(snap)
    state = CycleState()
    plugin.pre_filter(state, incoming, all_nodes(snap))
    assert node_statuses(plugin, state, incoming, snap) == [OK, OK, SKEW, SKEW]
    info = snap.get("node-a")
    assert info is not None
    plugin.add_pod(state, incoming, PodInfo.of(spod("n", labels={"foo": ""}, node="node-a")), info)
    assert node_statuses(plugin, state, incoming, snap) == [OK, OK, OK, OK]


# --- default constraints --------------------------------------------------------------------------


def selector_of(raw: Json) -> LabelSelector:
    return msgspec.convert(raw, LabelSelector)


def test_default_constraints_and_a_service() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 3, "topologyKey": "node", "whenUnsatisfiable": "DoNotSchedule"},
            {"maxSkew": 2, "topologyKey": "node", "whenUnsatisfiable": "ScheduleAnyway"},
            {"maxSkew": 5, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule"},
        ],
    }
    snap = snapshot([n("n1", node="n1", rack="r1"), n("n2", node="n2", rack="r1")], pods_on("1:0"))
    snap.set_workload_selector(
        "Service", "default", "svc", selector_of({"matchLabels": {"foo": "bar"}})
    )
    plugin = plugin_for(snap, args)
    incoming = spod("p", labels={"foo": "bar", "baz": "kar"})
    hard = plugin.constraints(incoming, "DoNotSchedule")
    assert [(c.max_skew, c.topology_key) for c in hard] == [(3, "node"), (5, "rack")]
    assert all(
        c.selector.matches({"foo": "bar"}) and not c.selector.matches({"foo": "x"}) for c in hard
    )
    # A pod with constraints of its own gets no defaults.
    own = spod("q", tsc(1, "zone", selector=sel(labels={"baz": "tar"})), labels={"foo": "bar"})
    assert [c.topology_key for c in plugin.constraints(own, "DoNotSchedule")] == ["zone"]
    # A service that does not select the pod: no defaults, PreFilter skips.
    other = spod("r", labels={"baz": "kep"})
    assert plugin.constraints(other, "DoNotSchedule") == []
    assert plugin.pre_filter(CycleState(), other, all_nodes(snap))[1] == SKIP


def test_default_selector_from_owners() -> None:
    snap = snapshot([n("n1", node="n1")])
    plugin = PodTopologySpread(Handle(snap))  # type: ignore[arg-type]
    assert plugin.system_defaulted
    rs_pod = spod("p", labels={"foo": "tar", "baz": "sup"}, owner=("apps/v1", "ReplicaSet", "rs1"))
    # Nothing fed: no selector, no default constraints.
    assert plugin.default_selector(rs_pod).empty
    assert plugin.constraints(rs_pod, "ScheduleAnyway") == []
    snap.set_workload_selector("ReplicaSet", "default", "rs1", selector_of(FOO))
    snap.set_workload_selector(
        "Service", "default", "svc", selector_of({"matchLabels": {"baz": "sup"}})
    )
    s = plugin.default_selector(rs_pod)
    assert s.matches({"foo": "", "baz": "sup"})
    assert not s.matches({"foo": ""})
    assert not s.matches({"baz": "sup"})
    soft = plugin.constraints(rs_pod, "ScheduleAnyway")
    assert [(c.topology_key, c.max_skew) for c in soft] == [
        ("kubernetes.io/hostname", 3),
        ("topology.kubernetes.io/zone", 5),
    ]
    assert plugin.constraints(rs_pod, "DoNotSchedule") == []
    # The owner must be the controller, of the right apiVersion, and known.
    wrong_version = spod("p", labels={"foo": "tar"}, owner=("apps/v1beta2", "ReplicaSet", "rs1"))
    assert plugin.default_selector(wrong_version).empty
    unknown = spod("p", labels={"foo": "tar"}, owner=("apps/v1", "ReplicaSet", "rs2"))
    assert plugin.default_selector(unknown).empty
    snap.set_workload_selector("StatefulSet", "default", "ss", selector_of(BAR))
    ss_pod = spod("p", labels={"bar": "1"}, owner=("apps/v1", "StatefulSet", "ss"))
    assert plugin.default_selector(ss_pod).matches({"bar": "2"})
    snap.set_workload_selector(
        "ReplicationController", "default", "rc", selector_of({"matchLabels": {"app": "db"}})
    )
    rc_pod = spod("p", labels={"app": "db"}, owner=("v1", "ReplicationController", "rc"))
    rc_sel = plugin.default_selector(rc_pod)
    assert rc_sel.matches({"app": "db"})
    assert not rc_sel.matches({"app": "web"})
    snap.remove_workload_selector("ReplicationController", "default", "rc")
    assert plugin.default_selector(rc_pod).empty


def test_default_selector_from_services() -> None:
    """A Service selects the pod when the pod has every label of its selector; the selectors
    of those selecting it are merged, the others left out."""
    snap = snapshot([n("n1", node="n1")])
    plugin = PodTopologySpread(Handle(snap))  # type: ignore[arg-type]
    incoming = spod("p", labels={"app": "web", "tier": "fe"})
    assert plugin.default_selector(incoming).empty
    for name, labels in [
        ("app", {"app": "web"}),
        ("both", {"app": "web", "tier": "fe"}),
        ("other-value", {"app": "db"}),
        ("missing-key", {"app": "web", "zone": "a"}),
    ]:
        snap.set_workload_selector("Service", "default", name, selector_of({"matchLabels": labels}))
    snap.set_workload_selector(
        "Service", "other", "elsewhere", selector_of({"matchLabels": {"app": "web", "x": "y"}})
    )
    s = plugin.default_selector(incoming)
    assert s.matches({"app": "web", "tier": "fe"})
    assert not s.matches({"app": "web"})
    assert not s.matches({"app": "db", "tier": "fe"})
    assert [c.topology_key for c in plugin.constraints(incoming, "ScheduleAnyway")] == [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    ]
    # A pod no Service selects gets no default constraints.
    assert plugin.constraints(spod("q", labels={"app": "api"}), "ScheduleAnyway") == []


def test_args() -> None:
    assert in_tree_registry().get("PodTopologySpread") is PodTopologySpread
    snap = Snapshot()
    with pytest.raises(ConfigError, match="defaultingType"):
        PodTopologySpread(
            Handle(snap),  # type: ignore[arg-type]
            {
                "defaultingType": "System",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
        )
    plugin = plugin_for(snap, LIST_ARGS)
    assert not plugin.system_defaulted
    assert plugin.default_constraints == ()


def test_invalid_selector_is_an_error() -> None:
    snap = snapshot(FOUR)
    bad = spod("p", tsc(1, "zone", selector=sel({"key": "foo", "operator": "Bad"})))
    _, status = plugin_for(snap).pre_filter(CycleState(), bad, all_nodes(snap))
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == (
        "get constraints from pod: obtaining pod's hard topology spread constraints: "
        '"Bad" is not a valid label selector operator'
    )


def test_empty_selector_counts_no_pod() -> None:
    """``labelSelector: {}`` is an empty selector: kube-scheduler counts no pod with it (but
    the pod matches itself)."""
    incoming = spod("p", tsc(1, "zone", selector={}), labels={"foo": ""})
    assert run(incoming, pods_on("a:3"), FOUR)[1] == [OK] * 4
    with_key = spod("p", tsc(1, "zone", selector={}, match_label_keys=["foo"]), labels={"foo": ""})
    assert run(with_key, pods_on("a:3"), FOUR)[1] == [SKEW, SKEW, OK, OK]


# --- queueing hints -------------------------------------------------------------------------------


def hint_plugin(args: Json | None = None) -> PodTopologySpread:
    return plugin_for(snapshot([]), args)


def target(*constraints: Json, **kw: Any) -> Pod:
    p = spod("p", *constraints, **kw)
    p.metadata.uid = "p"
    return p


def other(labels: Mapping[str, str] | None, node: str = "node-a", uid: str = "o", **kw: Any) -> Pod:
    p = spod("o", labels=labels, node=node, **kw)
    p.metadata.uid = uid
    return p


Q, S = QueueingHint.QUEUE, QueueingHint.SKIP
ZONE = tsc(1, "zone", selector=FOO)
NODE_BAR = tsc(1, "node", selector=BAR)
HONOR_TAINTS = tsc(1, "node", selector=FOO, taints_policy="Honor")
TOLERATION = {"key": "example.com/taint", "operator": "Exists"}

POD_HINTS = [
    ("add a pod with matching labels", target(ZONE), None, other({"foo": ""}), Q),
    ("add an unscheduled pod", target(ZONE), None, other({"foo": ""}, node=""), S),
    ("add a pod of another namespace", target(ZONE), None, other({"foo": ""}, namespace="ns1"), S),
    ("add a pod without matching labels", target(ZONE), None, other({"bar": ""}), S),
    (
        "update a pod's unrelated labels",
        target(ZONE),
        other({"foo": "", "x": "1"}),
        other({"foo": "", "x": "2"}),
        S,
    ),
    (
        "update a pod's labels into the selector",
        target(ZONE),
        other({"bar": ""}),
        other({"foo": ""}),
        Q,
    ),
    (
        "update a pod's labels out of the selector",
        target(ZONE),
        other({"foo": ""}),
        other({"bar": ""}),
        Q,
    ),
    ("update without a label change", target(ZONE), other({"foo": ""}), other({"foo": ""}), S),
    (
        "update matching a second constraint",
        target(ZONE, NODE_BAR),
        other({"foo": ""}),
        other({"foo": "", "bar": ""}),
        Q,
    ),
    ("delete a matching pod", target(ZONE), other({"foo": ""}), None, Q),
    ("delete an unrelated pod", target(ZONE), other({"bar": ""}), None, S),
    (
        "the pod gets a toleration and honors taints",
        target(HONOR_TAINTS),
        target(HONOR_TAINTS),
        target(HONOR_TAINTS, tolerations=[TOLERATION]),
        Q,
    ),
    (
        "the pod gets a toleration and ignores taints",
        target(ZONE),
        target(ZONE),
        target(ZONE, tolerations=[TOLERATION]),
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


ZONE_AND_NODE = (tsc(1, "zone", selector=FOO), tsc(1, "node", selector=FOO))
NODE_HINTS = [
    ("add a node with the keys", None, n("a", zone="z1", node="a"), Q),
    ("add a node without a key", None, n("a", zone="z1"), S),
    ("delete a node with the keys", n("a", zone="z1", node="a"), None, Q),
    ("delete a node without a key", n("a", node="a"), None, S),
    ("a key value changes", n("a", zone="z1", node="a"), n("a", zone="z2", node="a"), Q),
    ("a key is added", n("a", zone="z1"), n("a", zone="z1", node="a"), Q),
    ("a key is removed", n("a", zone="z1", node="a"), n("a", zone="z1"), Q),
    (
        "an unrelated label changes",
        n("a", zone="z1", node="a"),
        n("a", zone="z1", node="a", x="y"),
        S,
    ),
    (
        "taints change on a node with the keys",
        n("a", zone="z1", node="a"),
        n("a", taints=TAINTS, zone="z1", node="a"),
        Q,
    ),
    (
        "taints change on a node without a key",
        n("a", zone="z1"),
        n("a", taints=TAINTS, zone="z1"),
        S,
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "want"), [c[1:] for c in NODE_HINTS], ids=[c[0] for c in NODE_HINTS]
)
def test_is_schedulable_after_node_change(
    old: Node | None, new: Node | None, want: QueueingHint
) -> None:
    pending = target(*ZONE_AND_NODE, labels={"foo": ""})
    assert hint_plugin().is_schedulable_after_node_change(pending, old, new) == want


def test_hints_queue_on_unexpected_objects() -> None:
    plugin = hint_plugin()
    assert plugin.is_schedulable_after_pod_change(target(ZONE), n("x"), None) == Q
    assert plugin.is_schedulable_after_node_change(target(ZONE), spod(), None) == Q


def test_events_to_register() -> None:
    events = {e.event for e in hint_plugin().events_to_register()}
    assert events == {
        ClusterEvent(
            "Pod",
            ActionType.ADD
            | ActionType.UPDATE_POD_LABEL
            | ActionType.UPDATE_POD_TOLERATIONS
            | ActionType.DELETE,
        ),
        ClusterEvent(
            "Node",
            ActionType.ADD
            | ActionType.DELETE
            | ActionType.UPDATE_NODE_LABEL
            | ActionType.UPDATE_NODE_TAINT,
        ),
    }


def test_in_a_framework_with_inter_pod_affinity() -> None:
    """Both plugins in one profile, as kube-scheduler runs them: the FitError message counts
    each node under the first plugin that rejects it."""
    from kubesched.framework import FitError, Framework

    nodes = [n(f"node-{i}", zone=f"z{i % 2}", node=f"node-{i}") for i in range(4)]
    snap = snapshot(nodes, pods_on("0:1 1:1", labels={"app": "db"}))
    fwk = Framework(
        profile_name="p",
        registry=in_tree_registry(),
        plugins={
            "queueSort": [("PrioritySort", 0)],
            "preFilter": [("PodTopologySpread", 0), ("InterPodAffinity", 0)],
            "filter": [("PodTopologySpread", 0), ("InterPodAffinity", 0)],
            "preScore": [("PodTopologySpread", 0), ("InterPodAffinity", 0)],
            "score": [("PodTopologySpread", 2), ("InterPodAffinity", 2)],
            "bind": [("DefaultBinder", 0)],
        },
        snapshot=snap,
    )
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "node"}
            ]
        }
    }
    incoming = make_pod(
        "db",
        labels={"app": "db"},
        spec={
            "affinity": anti,
            "topologySpreadConstraints": [tsc(1, "zone", selector=sel(labels={"app": "db"}))],
        },
    )
    # node-0 (z0) and node-1 (z1) hold a db pod: anti-affinity keeps the new one off them.
    result = fwk.schedule_pod(CycleState(), incoming)
    assert result.suggested_host in {"node-2", "node-3"}
    snap.add_pod(PodInfo.of(make_pod("db2", labels={"app": "db"}, node_name="node-2")), "node-2")
    # Now zone z0 has 2, z1 has 1: node-3 (z1) is the only place; fill it, nothing is left.
    assert fwk.schedule_pod(CycleState(), incoming).suggested_host == "node-3"
    snap.add_pod(PodInfo.of(make_pod("db3", labels={"app": "db"}, node_name="node-3")), "node-3")
    with pytest.raises(FitError) as e:
        fwk.schedule_pod(CycleState(), incoming)
    assert str(e.value) == (
        "0/4 nodes are available: 4 node(s) didn't match pod anti-affinity rules."
    )
    # The per-node verdicts name the plugin.
    statuses = e.value.diagnosis.node_statuses(snap)
    assert {s.plugin for s in statuses.values()} == {"InterPodAffinity"}
