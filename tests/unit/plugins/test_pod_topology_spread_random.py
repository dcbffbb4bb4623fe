"""PodTopologySpread on random clusters: the vectorized Filter and Score equal a straightforward
per-node, per-pod port of kube-scheduler's loops (maps keyed by topology value), with node
inclusion policies, minDomains, matchLabelKeys, system defaulting and AddPod/RemovePod."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np
import pytest
from test_inter_pod_affinity_builders import Handle, all_nodes, snapshot
from test_inter_pod_affinity_random import rand_labels, rand_selector

from builders import make_node, make_pod
from kubesched.api import (
    LabelSelector,
    Node,
    OwnerReference,
    Pod,
    TopologySpreadConstraint,
    find_untolerated_taint,
    label_selector_matches,
)
from kubesched.framework import Code, CycleState, Nodes, PodInfo, Snapshot, Status
from kubesched.plugins.helper import DO_NOT_SCHEDULE_TAINT_EFFECTS
from kubesched.plugins.node_affinity import RequiredNodeAffinity
from kubesched.plugins.pod_topology_spread import PodTopologySpread

Json = dict[str, Any]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
KEYS = [ZONE, "rack", HOST]
SKEW = Status(Code.UNSCHEDULABLE, "node(s) didn't match pod topology spread constraints")
MISSING = Status(
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
    "node(s) didn't match pod topology spread constraints (missing required label)",
)
TAINT = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
TOLERATION = {"key": "dedicated", "operator": "Exists"}


def rand_node(rng: random.Random, name: str) -> Node:
    labels: dict[str, str] = {}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(["z1", "z2", "z3", ""])
    if rng.random() < 0.7:
        labels["rack"] = rng.choice(["r1", "r2", "r3", "r4"])
    if rng.random() < 0.9:
        labels[HOST] = name
    if rng.random() < 0.5:
        labels["pool"] = rng.choice(["a", "b"])
    taints = [TAINT] if rng.random() < 0.2 else []
    return make_node(name, labels=labels, taints=taints)


def rand_constraints(rng: random.Random, when: Sequence[str]) -> list[Json]:
    out = []
    # The API allows one constraint per (topologyKey, whenUnsatisfiable).
    for key in rng.sample(KEYS, rng.randint(1, 3)):
        c: Json = {
            "maxSkew": rng.randint(1, 3),
            "topologyKey": key,
            "whenUnsatisfiable": rng.choice(list(when)),
        }
        sel = rand_selector(rng)
        if sel is not None:
            c["labelSelector"] = sel
        if rng.random() < 0.3:
            c["minDomains"] = rng.randint(1, 5)
        if rng.random() < 0.3:
            c["nodeAffinityPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.3:
            c["nodeTaintsPolicy"] = rng.choice(["Honor", "Ignore"])
        if rng.random() < 0.2:
            c["matchLabelKeys"] = [rng.choice(["app", "tier"])]
        out.append(c)
    return out


def rand_pod(
    rng: random.Random, name: str, node: str, constraints: Sequence[Json] = (), owner: bool = False
) -> Pod:
    spec: Json = {}
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"pool": rng.choice(["a", "b"])}
    if rng.random() < 0.3:
        spec["tolerations"] = [TOLERATION]
    pod = make_pod(
        name,
        namespace=rng.choice(["default", "default", "other"]),
        labels=rand_labels(rng),
        node_name=node,
        spec=spec,
    )
    if rng.random() < 0.05:
        pod.metadata.deletion_timestamp = "2025-01-01T00:00:00Z"
    if owner:
        pod = make_pod(
            name,
            namespace="default",
            labels=pod.metadata.labels,
            node_name=node,
            spec=spec,
        )
        pod.metadata.owner_references = [
            _owner_ref("apps/v1", "ReplicaSet", "rs")
            if rng.random() < 0.7
            else _owner_ref("v1", "Pod", "x")
        ]
    return pod


def _owner_ref(api_version: str, kind: str, name: str) -> Any:
    return OwnerReference(api_version=api_version, kind=kind, name=name, controller=True)


# --- the reference ----------------------------------------------------------------------------


class C:
    def __init__(self, c: TopologySpreadConstraint, pod_labels: Mapping[str, str]) -> None:
        self.max_skew = c.max_skew
        self.key = c.topology_key
        self.selector: LabelSelector | None = c.label_selector
        self.extra = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
        if self.selector is None:
            self.extra = {}
        self.min_domains = c.min_domains or 1
        self.affinity = c.node_affinity_policy or "Honor"
        self.taints = c.node_taints_policy or "Ignore"

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(k) != v for k, v in self.extra.items()):
            return False
        return label_selector_matches(self.selector, labels)

    def empty(self) -> bool:
        s = self.selector
        return s is not None and not s.match_labels and not s.match_expressions and not self.extra

    def include(self, pod: Pod, node: Node) -> bool:
        if self.affinity == "Honor" and not RequiredNodeAffinity.of(pod).matches(node):
            return False
        if self.taints == "Honor":
            t = find_untolerated_taint(
                node.spec.taints, pod.spec.tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS
            )
            if t is not None:
                return False
        return True

    def count(self, pods: Sequence[Pod], ns: str) -> int:
        if self.empty():
            return 0
        return sum(
            1
            for p in pods
            if p.metadata.deletion_timestamp is None
            and p.metadata.namespace == ns
            and self.matches(p.metadata.labels)
        )


def ref_constraints(snap: Snapshot, pod: Pod, when: str, defaults: Sequence[Any]) -> list[C]:
    own = pod.spec.topology_spread_constraints
    if own:
        return [C(c, pod.metadata.labels) for c in own if c.when_unsatisfiable == when]
    cs = [c for c in defaults if c.when_unsatisfiable == when]
    if not cs:
        return []
    rs = snap.workload_selectors("ReplicaSet", pod.metadata.namespace).get("rs")
    owner = next((o for o in pod.metadata.owner_references if o.controller), None)
    if (
        rs is None
        or owner is None
        or (owner.api_version, owner.kind, owner.name) != ("apps/v1", "ReplicaSet", "rs")
    ):
        return []
    if not rs.match_labels and not rs.match_expressions:
        return []
    out = []
    for c in cs:
        x = C(c, {})
        x.selector = rs
        x.extra = {}
        out.append(x)
    return out


def ref_filter(
    snap: Snapshot, pod: Pod, defaults: Sequence[Any], extra: Sequence[tuple[Pod, str]] = ()
) -> Status | list[Status | None]:
    cs = ref_constraints(snap, pod, "DoNotSchedule", defaults)
    if not cs:
        return Status(Code.SKIP)
    infos = list(snap.node_infos())
    pods_by_node = {i.name: [p.pod for p in i.pods.values()] for i in infos}
    ns = pod.metadata.namespace
    counts: list[dict[str, int]] = [{} for _ in cs]
    for info in infos:
        node = info.node
        assert node is not None
        if not all(c.key in node.metadata.labels for c in cs):
            continue
        for i, c in enumerate(cs):
            if not c.include(pod, node):
                continue
            v = node.metadata.labels[c.key]
            counts[i][v] = counts[i].get(v, 0) + c.count(pods_by_node[info.name], ns)
    # AddPod, as upstream's updateWithPod (no terminating or empty-selector check).
    for p, node_name in extra:
        info = snap.get(node_name)
        assert info is not None
        assert info.node is not None
        node = info.node
        if p.metadata.namespace != ns or not all(c.key in node.metadata.labels for c in cs):
            continue
        for i, c in enumerate(cs):
            if c.matches(p.metadata.labels) and c.include(pod, node):
                v = node.metadata.labels[c.key]
                counts[i][v] = counts[i].get(v, 0) + 1
    out: list[Status | None] = []
    for info in infos:
        node = info.node
        assert node is not None
        verdict: Status | None = None
        for i, c in enumerate(cs):
            if c.key not in node.metadata.labels:
                verdict = MISSING
                break
            mn = min(counts[i].values()) if counts[i] else 2**31 - 1
            if len(counts[i]) < c.min_domains:
                mn = 0
            self_match = 1 if c.matches(pod.metadata.labels) else 0
            skew = counts[i].get(node.metadata.labels[c.key], 0) + self_match - mn
            if skew > c.max_skew:
                verdict = SKEW
                break
        out.append(verdict)
    return out


def ref_scores(
    snap: Snapshot, pod: Pod, defaults: Sequence[Any], system: bool, candidates: Sequence[str]
) -> Status | list[int]:
    if len(snap) == 0:
        return Status(Code.SKIP)
    cs = ref_constraints(snap, pod, "ScheduleAnyway", defaults)
    if not cs:
        return Status(Code.SKIP)
    require_all = bool(pod.spec.topology_spread_constraints) or not system
    infos = {i.name: i for i in snap.node_infos()}
    ignored = set()
    pair_counts: list[dict[str, int]] = [{} for _ in cs]
    sizes = [0] * len(cs)
    for name in candidates:
        labels = infos[name].node.metadata.labels  # type: ignore[union-attr]
        if require_all and not all(c.key in labels for c in cs):
            ignored.add(name)
            continue
        for i, c in enumerate(cs):
            if c.key == HOST:
                continue
            v = labels.get(c.key, "")
            if v not in pair_counts[i]:
                pair_counts[i][v] = 0
                sizes[i] += 1
    weights = [
        math.log((len(candidates) - len(ignored) if c.key == HOST else sizes[i]) + 2)
        for i, c in enumerate(cs)
    ]
    ns = pod.metadata.namespace
    for info in infos.values():
        node = info.node
        assert node is not None
        if require_all and not all(c.key in node.metadata.labels for c in cs):
            continue
        for i, c in enumerate(cs):
            if not c.include(pod, node):
                continue
            v = node.metadata.labels.get(c.key, "")
            if c.key == HOST or v not in pair_counts[i]:
                continue
            pair_counts[i][v] += c.count([p.pod for p in info.pods.values()], ns)
    raw = []
    for name in candidates:
        if name in ignored:
            raw.append(0)
            continue
        node = infos[name].node
        assert node is not None
        score = 0.0
        for i, c in enumerate(cs):
            if c.key in node.metadata.labels:
                if c.key == HOST:
                    cnt = c.count([p.pod for p in infos[name].pods.values()], ns)
                else:
                    cnt = pair_counts[i][node.metadata.labels[c.key]]
                score += float(cnt) * weights[i] + float(c.max_skew - 1)
        raw.append(_go_round(score))
    valid = [s for n, s in zip(candidates, raw, strict=True) if n not in ignored]
    lo = min(valid) if valid else 2**63 - 1
    hi = max([0, *valid])
    out = []
    for n, s in zip(candidates, raw, strict=True):
        if n in ignored:
            out.append(0)
        elif hi == 0:
            out.append(100)
        else:
            out.append(100 * (hi + lo - s) // hi)
    return out


# --- comparisons ----------------------------------------------------------------------------------


def cluster(rng: random.Random) -> Snapshot:
    nodes = [rand_node(rng, f"n{i}") for i in range(rng.randint(1, 10))]
    pods = [
        rand_pod(rng, f"e{i}", rng.choice(nodes).metadata.name) for i in range(rng.randint(0, 30))
    ]
    snap = snapshot(nodes, pods)
    for p in rng.sample(pods, len(pods) // 5):
        snap.remove_pod(p.metadata.uid)
    if len(nodes) > 1 and rng.random() < 0.2:
        snap.remove_node(rng.choice(nodes).metadata.name)
    if rng.random() < 0.6:
        sel = rand_selector(rng, allow_none=False) or {}
        snap.set_workload_selector(
            "ReplicaSet", "default", "rs", msgspec.convert(sel, LabelSelector)
        )
    return snap


def statuses(
    plugin: PodTopologySpread, state: CycleState, pod: Pod, snap: Snapshot
) -> list[Status | None]:
    nodes = all_nodes(snap)
    verdict = plugin.filter_nodes(state, pod, nodes)
    got = [verdict.statuses[int(i)] for i in verdict.ids]
    assert got == [plugin.filter(state, pod, info) for info in nodes.infos()]
    return got


ARGS = [
    ({"defaultingType": "System"}, True),
    ({"defaultingType": "List"}, False),
    (
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
                {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway"},
            ],
        },
        False,
    ),
]


@pytest.mark.parametrize("seed", range(200))
def test_filter_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    snap = cluster(rng)
    args, _ = ARGS[seed % len(ARGS)]
    plugin = PodTopologySpread(Handle(snap), args)  # type: ignore[arg-type]
    for k in range(3):
        own = (
            rand_constraints(rng, ["DoNotSchedule", "ScheduleAnyway"]) if rng.random() < 0.8 else []
        )
        incoming = rand_pod(rng, f"in{k}", "", own, owner=not own)
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
        want = ref_filter(snap, incoming, plugin.default_constraints)
        if isinstance(want, Status):
            assert status == want
            continue
        assert status is None
        assert statuses(plugin, state, incoming, snap) == want
        names = [i.name for i in snap.node_infos()]
        added = [rand_pod(rng, f"nom{j}", rng.choice(names)) for j in range(2)]
        clone = state.clone()
        for p in added:
            info = snap.get(p.spec.node_name)
            assert info is not None
            assert plugin.add_pod(clone, incoming, PodInfo.of(p), info) is None
        extra = [(p, p.spec.node_name) for p in added]
        assert statuses(plugin, clone, incoming, snap) == ref_filter(
            snap, incoming, plugin.default_constraints, extra
        )
        assert statuses(plugin, state, incoming, snap) == want


@pytest.mark.parametrize("seed", range(200))
def test_scores_equal_reference(seed: int) -> None:
    rng = random.Random(5000 + seed)
    snap = cluster(rng)
    args, system = ARGS[seed % len(ARGS)]
    plugin = PodTopologySpread(Handle(snap), args)  # type: ignore[arg-type]
    names = [i.name for i in snap.node_infos()]
    for k in range(3):
        own = (
            rand_constraints(rng, ["ScheduleAnyway", "DoNotSchedule"]) if rng.random() < 0.7 else []
        )
        incoming = rand_pod(rng, f"in{k}", "", own, owner=not own)
        candidates = sorted(rng.sample(names, rng.randint(1, len(names))), key=names.index)
        nodes = Nodes(snap, _slots(snap, candidates))
        state = CycleState()
        status = plugin.pre_score(state, incoming, nodes)
        want = ref_scores(snap, incoming, plugin.default_constraints, system, candidates)
        if isinstance(want, Status):
            assert status == want
            continue
        assert status is None
        raw, s = plugin.score_nodes(state, incoming, nodes)
        assert s is None
        assert raw.tolist() == [plugin.score(state, incoming, i)[0] for i in nodes.infos()]
        plugin.normalize_score(state, incoming, nodes, raw)
        assert raw.tolist() == want


def _go_round(x: float) -> int:
    """Go's math.Round for non-negative values."""
    floor = math.floor(x)
    return floor + 1 if x - floor >= 0.5 else floor


def _slots(snap: Snapshot, names: Sequence[str]) -> Any:
    return np.array([snap.slot_of(n) for n in names], dtype=np.int64)


def test_reference_sanity() -> None:
    rejects = spreads = 0
    for seed in range(200):
        rng = random.Random(seed)
        snap = cluster(rng)
        args, system = ARGS[seed % len(ARGS)]
        plugin = PodTopologySpread(Handle(snap), args)  # type: ignore[arg-type]
        own = rand_constraints(rng, ["DoNotSchedule", "ScheduleAnyway"])
        incoming = rand_pod(rng, "in", "", own)
        f = ref_filter(snap, incoming, plugin.default_constraints)
        if isinstance(f, list) and any(v is not None for v in f):
            rejects += 1
        names = [i.name for i in snap.node_infos()]
        s = ref_scores(snap, incoming, plugin.default_constraints, system, names)
        if isinstance(s, list) and len(set(s)) > 1:
            spreads += 1
    assert rejects > 30
    assert spreads > 30
