"""InterPodAffinity on random clusters: the vectorized PreFilter/Filter/PreScore/Score equal a
straightforward per-node, per-pod port of kube-scheduler's loops (maps of topology pairs), also
after pods come and go (PodTable groups recycled), a node loses its Node object, and AddPod /
RemovePod."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from test_inter_pod_affinity_builders import Handle, all_nodes, snapshot

from builders import make_node, make_pod
from kubesched.api import Node, Pod, PodAffinityTerm, label_selector_matches
from kubesched.framework import Code, CycleState, PodInfo, Snapshot, Status
from kubesched.plugins.inter_pod_affinity import InterPodAffinity

Json = dict[str, Any]
KEYS = ["app", "tier", "team"]
VALUES = ["a", "b", "c"]
TOPOLOGY = ["zone", "rack", "kubernetes.io/hostname", "nowhere"]
NAMESPACES = {"default": {"team": "t1"}, "ns1": {"team": "t2"}, "ns2": {"team": "t1", "x": "y"}}

AFFINITY = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match pod affinity rules")
ANTI = Status(Code.UNSCHEDULABLE, "node(s) didn't match pod anti-affinity rules")
EXISTING = Status(Code.UNSCHEDULABLE, "node(s) didn't satisfy existing pods anti-affinity rules")


# --- random objects -------------------------------------------------------------------------------


def rand_labels(rng: random.Random) -> dict[str, str]:
    return {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.6}


def rand_selector(rng: random.Random, allow_none: bool = True) -> Json | None:
    r = rng.random()
    if allow_none and r < 0.05:
        return None
    if r < 0.12:
        return {}
    out: Json = {}
    if rng.random() < 0.5:
        out["matchLabels"] = {rng.choice(KEYS): rng.choice(VALUES)}
    exprs = []
    for _ in range(rng.randint(0 if out else 1, 2)):
        op = rng.choice(["In", "NotIn", "Exists", "DoesNotExist"])
        e: Json = {"key": rng.choice(KEYS), "operator": op}
        if op in ("In", "NotIn"):
            e["values"] = rng.sample(VALUES, rng.randint(1, 2))
        exprs.append(e)
    if exprs:
        out["matchExpressions"] = exprs
    return out


def rand_term(rng: random.Random) -> Json:
    t: Json = {"topologyKey": rng.choice(TOPOLOGY)}
    sel = rand_selector(rng)
    if sel is not None:
        t["labelSelector"] = sel
    r = rng.random()
    if r < 0.2:
        t["namespaces"] = rng.sample(sorted(NAMESPACES), rng.randint(1, 2))
    elif r < 0.35:
        t["namespaceSelector"] = rng.choice([{}, {"matchLabels": {"team": "t1"}}])
    elif r < 0.4:
        t["namespaces"] = ["ns1"]
        t["namespaceSelector"] = {"matchLabels": {"x": "y"}}
    return t


def rand_affinity(rng: random.Random, p: float) -> Json:
    a: Json = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() >= p:
            continue
        a[kind] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                rand_term(rng) for _ in range(rng.choice([0, 1, 1, 2]))
            ],
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.randint(1, 100), "podAffinityTerm": rand_term(rng)}
                for _ in range(rng.choice([0, 1, 2]))
            ],
        }
    return a


def rand_pod(rng: random.Random, name: str, node: str, p_affinity: float) -> Pod:
    spec: Json = {}
    a = rand_affinity(rng, p_affinity)
    if a:
        spec["affinity"] = a
    pod = make_pod(
        name,
        namespace=rng.choice(sorted(NAMESPACES)),
        labels=rand_labels(rng),
        node_name=node,
        spec=spec,
    )
    if rng.random() < 0.05:
        pod.metadata.deletion_timestamp = "2025-01-01T00:00:00Z"
    return pod


def rand_node(rng: random.Random, name: str) -> Node:
    labels = {}
    if rng.random() < 0.9:
        labels["zone"] = rng.choice(["z1", "z2", "z3"])
    if rng.random() < 0.7:
        labels["rack"] = rng.choice(["r1", "r2", "r3", "r4", ""])
    if rng.random() < 0.9:
        labels["kubernetes.io/hostname"] = name
    return make_node(name, labels=labels)


# --- the reference: kube-scheduler's loops, per node and per pod ---------------------------------


class Term:
    def __init__(self, owner_ns: str, t: PodAffinityTerm) -> None:
        self.selector = t.label_selector
        self.ns_selector = t.namespace_selector
        if not t.namespaces and t.namespace_selector is None:
            self.namespaces = {owner_ns}
        else:
            self.namespaces = set(t.namespaces)
        self.key = t.topology_key

    def merge(self, namespaces: Mapping[str, Mapping[str, str]]) -> Term:
        """An incoming pod's namespaceSelector becomes namespace names (unless empty)."""
        sel = self.ns_selector
        if sel is not None and (sel.match_labels or sel.match_expressions):
            self.namespaces |= {
                n for n, lab in namespaces.items() if label_selector_matches(sel, lab)
            }
            self.ns_selector = None
        return self

    def matches(self, pod: Pod, ns_labels: Mapping[str, str] | None) -> bool:
        if pod.metadata.namespace in self.namespaces or label_selector_matches(
            self.ns_selector, ns_labels or {}
        ):
            return label_selector_matches(self.selector, pod.metadata.labels)
        return False


def terms(pod: Pod, kind: str, required: bool) -> list[tuple[Term, int]]:
    a = pod.spec.affinity
    pa = None if a is None else (a.pod_affinity if kind == "affinity" else a.pod_anti_affinity)
    if pa is None:
        return []
    ns = pod.metadata.namespace
    if required:
        return [(Term(ns, t), 0) for t in pa.required_during_scheduling_ignored_during_execution]
    return [
        (Term(ns, w.pod_affinity_term), w.weight)
        for w in pa.preferred_during_scheduling_ignored_during_execution
    ]


def all_match(ts: list[Term], pod: Pod) -> bool:
    return bool(ts) and all(t.matches(pod, None) for t in ts)


def ref_filter(
    snap: Snapshot, pod: Pod, nominated: list[tuple[Pod, str]]
) -> Status | list[Status | None]:
    nodes = [(i.node, [p.pod for p in i.pods.values()]) for i in snap.node_infos()]
    by_name = {n.metadata.name: pods for n, pods in nodes if n is not None}
    for p, node_name in nominated:
        by_name[node_name] = [*by_name[node_name], p]
    ns_labels = snap.namespace_labels(pod.metadata.namespace)
    aff = [t.merge(snap.namespaces()) for t, _ in terms(pod, "affinity", True)]
    anti = [t.merge(snap.namespaces()) for t, _ in terms(pod, "anti", True)]
    existing: dict[tuple[str, str], int] = {}
    affinity: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    for n, _ in nodes:
        assert n is not None
        labels = n.metadata.labels
        for p in by_name[n.metadata.name]:
            for t, _ in terms(p, "anti", True):
                if t.matches(pod, ns_labels) and t.key in labels:
                    k = (t.key, labels[t.key])
                    existing[k] = existing.get(k, 0) + 1
            if all_match(aff, p):
                for t in aff:
                    if t.key in labels:
                        k = (t.key, labels[t.key])
                        affinity[k] = affinity.get(k, 0) + 1
            for t in anti:
                if t.matches(p, None) and t.key in labels:
                    k = (t.key, labels[t.key])
                    anti_counts[k] = anti_counts.get(k, 0) + 1
    if not existing and not aff and not anti:
        return Status(Code.SKIP)
    out: list[Status | None] = []
    for n, _ in nodes:
        assert n is not None
        labels = n.metadata.labels
        ok = True
        exist = True
        for t in aff:
            if t.key not in labels:
                ok = False
                break
            if affinity.get((t.key, labels[t.key]), 0) <= 0:
                exist = False
        if ok and not exist:
            ok = not affinity and all_match(aff, pod)
        if not ok:
            out.append(AFFINITY)
            continue
        if anti_counts and any(
            t.key in labels and anti_counts.get((t.key, labels[t.key]), 0) > 0 for t in anti
        ):
            out.append(ANTI)
            continue
        if existing and any(existing.get((k, v), 0) > 0 for k, v in labels.items()):
            out.append(EXISTING)
            continue
        out.append(None)
    return out


def ref_scores(
    snap: Snapshot, pod: Pod, hard_weight: int, ignore_preferred: bool
) -> Status | list[int]:
    pref = terms(pod, "affinity", False)
    pref_anti = terms(pod, "anti", False)
    if ignore_preferred and not pref and not pref_anti:
        return Status(Code.SKIP)
    ns_labels = snap.namespace_labels(pod.metadata.namespace)
    incoming = [(t.merge(snap.namespaces()), w, 1) for t, w in pref] + [
        (t.merge(snap.namespaces()), w, -1) for t, w in pref_anti
    ]
    topology: dict[str, dict[str, int]] = {}

    def add(t: Term, w: int, target: Pod, labels: Mapping[str, str], ns: Any) -> None:
        if t.matches(target, ns) and t.key in labels:
            topology.setdefault(t.key, {})
            topology[t.key][labels[t.key]] = topology[t.key].get(labels[t.key], 0) + w

    infos = list(snap.node_infos())
    for info in infos:
        assert info.node is not None
        labels = info.node.metadata.labels
        for p in (pi.pod for pi in info.pods.values()):
            for t, w, sign in incoming:
                add(t, sign * w, p, labels, None)
            if hard_weight > 0:
                for t, _ in terms(p, "affinity", True):
                    add(t, hard_weight, pod, labels, ns_labels)
            for t, w in terms(p, "affinity", False):
                add(t, w, pod, labels, ns_labels)
            for t, w in terms(p, "anti", False):
                add(t, -w, pod, labels, ns_labels)
    if not topology:
        return Status(Code.SKIP)
    raw = []
    for info in infos:
        assert info.node is not None
        labels = info.node.metadata.labels
        raw.append(sum(v.get(labels[k], 0) for k, v in topology.items() if k in labels))
    lo, hi = min(raw), max(raw)
    return [int(100.0 * (float(s - lo) / float(hi - lo))) if hi - lo > 0 else 0 for s in raw]


# --- the comparisons ----------------------------------------------------------------------------


def cluster(rng: random.Random) -> Snapshot:
    nodes = [rand_node(rng, f"n{i}") for i in range(rng.randint(1, 9))]
    pods = [
        rand_pod(rng, f"e{i}", rng.choice(nodes).metadata.name, 0.3)
        for i in range(rng.randint(0, 25))
    ]
    snap = snapshot(nodes, pods, NAMESPACES if rng.random() < 0.8 else {})
    # Churn: some pods leave (their groups may be recycled), some come back relabelled.
    for p in rng.sample(pods, len(pods) // 4):
        snap.remove_pod(p.metadata.uid)
        if rng.random() < 0.5:
            q = rand_pod(rng, p.metadata.name + "x", p.spec.node_name, 0.3)
            snap.add_pod(PodInfo.of(q), q.spec.node_name)
    if len(nodes) > 1 and rng.random() < 0.2:
        snap.remove_node(rng.choice(nodes).metadata.name)
    return snap


def plugin_statuses(
    plugin: InterPodAffinity, state: CycleState, pod: Pod, snap: Snapshot
) -> list[Status | None]:
    nodes = all_nodes(snap)
    verdict = plugin.filter_nodes(state, pod, nodes)
    got = [verdict.statuses[int(i)] for i in verdict.ids]
    assert got == [plugin.filter(state, pod, info) for info in nodes.infos()]
    return got


def check_against_reference(
    plugin: InterPodAffinity, snap: Snapshot, pod: Pod, hard: int, ignore: bool
) -> None:
    """PreFilter and Filter, then PreScore, Score and NormalizeScore of ``pod`` on every node:
    what the reference says."""
    state = CycleState()
    nodes = all_nodes(snap)
    _, status = plugin.pre_filter(state, pod, nodes)
    want = ref_filter(snap, pod, [])
    if isinstance(want, Status):
        assert status == want
    else:
        assert status is None
        assert plugin_statuses(plugin, state, pod, snap) == want
    state = CycleState()
    status = plugin.pre_score(state, pod, nodes)
    want_scores = ref_scores(snap, pod, hard, ignore)
    if isinstance(want_scores, Status):
        assert status == want_scores
        return
    assert status is None
    raw, s = plugin.score_nodes(state, pod, nodes)
    assert s is None
    plugin.normalize_score(state, pod, nodes, raw)
    assert raw.tolist() == want_scores


@pytest.mark.parametrize("seed", range(150))
def test_filter_equals_reference(seed: int) -> None:
    rng = random.Random(seed)
    snap = cluster(rng)
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    for k in range(3):
        incoming = rand_pod(rng, f"in{k}", "", 0.8)
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
        want = ref_filter(snap, incoming, [])
        if isinstance(want, Status):
            assert status == want
            continue
        assert status is None
        assert plugin_statuses(plugin, state, incoming, snap) == want
        # Nominated pods added through AddPod count as if they were there; removing them
        # restores the verdicts.
        names = [i.name for i in snap.node_infos()]
        nominated = [(rand_pod(rng, f"nom{j}", rng.choice(names), 0.5), "") for j in range(2)]
        nominated = [(p, p.spec.node_name) for p, _ in nominated]
        clone = state.clone()
        for p, node_name in nominated:
            info = snap.get(node_name)
            assert info is not None
            assert plugin.add_pod(clone, incoming, PodInfo.of(p), info) is None
        assert plugin_statuses(plugin, clone, incoming, snap) == ref_filter(
            snap, incoming, nominated
        )
        for p, node_name in nominated:
            info = snap.get(node_name)
            assert info is not None
            plugin.remove_pod(clone, incoming, PodInfo.of(p), info)
        assert plugin_statuses(plugin, clone, incoming, snap) == want


@pytest.mark.parametrize("seed", range(150))
def test_scores_equal_reference(seed: int) -> None:
    rng = random.Random(1000 + seed)
    snap = cluster(rng)
    hard = rng.choice([0, 1, 5])
    ignore = rng.random() < 0.3
    plugin = InterPodAffinity(  # type: ignore[arg-type]
        Handle(snap), {"hardPodAffinityWeight": hard, "ignorePreferredTermsOfExistingPods": ignore}
    )
    for k in range(3):
        incoming = rand_pod(rng, f"in{k}", "", 0.8)
        state = CycleState()
        nodes = all_nodes(snap)
        status = plugin.pre_score(state, incoming, nodes)
        want = ref_scores(snap, incoming, hard, ignore)
        if isinstance(want, Status):
            assert status == want
            continue
        assert status is None
        raw, s = plugin.score_nodes(state, incoming, nodes)
        assert s is None
        assert raw.tolist() == [plugin.score(state, incoming, i)[0] for i in nodes.infos()]
        plugin.normalize_score(state, incoming, nodes, raw)
        assert raw.tolist() == want


@pytest.mark.parametrize("seed", range(60))
def test_kept_counts_follow_the_cluster(seed: int) -> None:
    """One plugin asked the same questions again and again while pods come, go and change
    labels, nodes come, go and are relabelled, and namespaces are relabelled: its kept counts
    (brought up to date from the pod table's changes) and kept matches give what the reference
    gives on the cluster as it is each time."""
    rng = random.Random(5000 + seed)
    nodes = [rand_node(rng, f"n{i}") for i in range(rng.randint(2, 8))]
    snap = snapshot(nodes, [], NAMESPACES)
    templates = [rand_pod(rng, f"t{i}", "", 0.5) for i in range(4)]
    incoming = [rand_pod(rng, f"in{k}", "", 0.9) for k in range(5)]
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    live: list[Pod] = []
    for step in range(12):
        for _ in range(rng.randint(1, 6)):
            r = rng.random()
            names = [i.name for i in snap.node_infos() if i.node is not None]
            if r < 0.45 or not live:
                t = rng.choice(templates) if rng.random() < 0.7 else rand_pod(rng, "x", "", 0.5)
                name = f"p{step}-{len(live)}-{rng.random()}"
                p = msgspec.structs.replace(
                    t,
                    metadata=msgspec.structs.replace(t.metadata, name=name, uid=name),
                    spec=msgspec.structs.replace(t.spec, node_name=rng.choice(names)),
                )
                snap.add_pod(PodInfo.of(p), p.spec.node_name)
                live.append(p)
            elif r < 0.7:
                p = live.pop(rng.randrange(len(live)))
                snap.remove_pod(p.metadata.uid)
            elif r < 0.8:
                snap.set_node(rand_node(rng, rng.choice(names)))
            elif r < 0.9:
                labels = rng.choice([{}, {"team": "t1"}, {"team": "t2", "x": "y"}])
                snap.set_namespace(rng.choice(sorted(NAMESPACES)), labels)
            elif len(names) > 1:
                gone = rng.choice(names)
                snap.remove_node(gone)
                for p in [q for q in live if q.spec.node_name == gone]:
                    live.remove(p)
                    snap.remove_pod(p.metadata.uid)
                snap.set_node(rand_node(rng, f"n{step}x"))
        for pod in incoming:
            check_against_reference(plugin, snap, pod, 1, False)


def test_many_pods_few_groups() -> None:
    """10,000 pods of a few workloads form a few groups; the counts are those of the loops."""
    rng = random.Random(7)
    nodes = [rand_node(rng, f"n{i}") for i in range(50)]
    snap = snapshot(nodes)
    templates = [rand_pod(rng, f"t{i}", "", 0.5) for i in range(8)]
    for i in range(10_000):
        t = templates[i % len(templates)]
        p = msgspec.structs.replace(
            t,
            metadata=msgspec.structs.replace(t.metadata, name=f"p{i}", uid=f"u{i}"),
            spec=msgspec.structs.replace(t.spec, node_name=nodes[i % 50].metadata.name),
        )
        snap.add_pod(PodInfo.of(p), p.spec.node_name)
    assert len(list(snap.pods.live_groups())) <= len(templates)
    plugin = InterPodAffinity(Handle(snap))  # type: ignore[arg-type]
    for k in range(5):
        incoming = rand_pod(rng, f"in{k}", "", 1.0)
        state = CycleState()
        _, status = plugin.pre_filter(state, incoming, all_nodes(snap))
        want = ref_filter(snap, incoming, [])
        if isinstance(want, Status):
            assert status == want
        else:
            assert plugin_statuses(plugin, state, incoming, snap) == want


def test_reference_sanity() -> None:
    """The reference itself rejects and scores (so the comparisons above compare something)."""
    seen = {"reject": 0, "score": 0}
    for seed in range(150):
        rng = random.Random(seed)
        snap = cluster(rng)
        incoming = rand_pod(rng, "in0", "", 0.8)
        f = ref_filter(snap, incoming, [])
        if isinstance(f, list) and any(s is not None for s in f):
            seen["reject"] += 1
        s = ref_scores(snap, incoming, 1, False)
        if isinstance(s, list) and len(set(s)) > 1:
            seen["score"] += 1
    assert seen["reject"] > 20
    assert seen["score"] > 20


#: ``spec.affinity`` of pods with no pod affinity or anti-affinity term of their own.
NO_TERMS_AFFINITY: list[Json | None] = [
    None,
    {},
    {"podAffinity": {}},
    {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}},
    {
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
        "podAntiAffinity": {},
    },
]


def rand_pod_without_terms(rng: random.Random, name: str) -> Pod:
    affinity = rng.choice(NO_TERMS_AFFINITY)
    return make_pod(
        name,
        namespace=rng.choice(sorted(NAMESPACES)),
        labels=rand_labels(rng),
        spec={} if affinity is None else {"affinity": affinity},
    )


@pytest.mark.parametrize("seed", range(100))
def test_pods_without_terms_equal_reference(seed: int) -> None:
    """Pods without terms of their own take a shorter path; existing pods' required
    anti-affinity still filters them, and existing pods' required (hardPodAffinityWeight) and
    preferred terms still score them unless ignorePreferredTermsOfExistingPods."""
    rng = random.Random(5000 + seed)
    snap = cluster(rng)
    hard = rng.choice([0, 1, 5])
    ignore = rng.random() < 0.3
    plugin = InterPodAffinity(  # type: ignore[arg-type]
        Handle(snap), {"hardPodAffinityWeight": hard, "ignorePreferredTermsOfExistingPods": ignore}
    )
    for k in range(3):
        check_against_reference(plugin, snap, rand_pod_without_terms(rng, f"in{k}"), hard, ignore)


def test_pods_without_terms_reference_sanity() -> None:
    """Existing pods' terms reject and score pods without terms in the clusters above."""
    seen = {"reject": 0, "score": 0}
    for seed in range(100):
        rng = random.Random(5000 + seed)
        snap = cluster(rng)
        incoming = rand_pod_without_terms(rng, "in0")
        f = ref_filter(snap, incoming, [])
        if isinstance(f, list) and any(s is not None for s in f):
            seen["reject"] += 1
        s = ref_scores(snap, incoming, 1, False)
        if isinstance(s, list) and len(set(s)) > 1:
            seen["score"] += 1
    assert seen["reject"] > 10
    assert seen["score"] > 10
