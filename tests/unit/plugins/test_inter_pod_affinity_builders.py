"""Builders shared by the InterPodAffinity and PodTopologySpread tests (no tests here)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from builders import PodWrapper, make_node, next_uid
from kubesched.api import Node, Pod
from kubesched.framework import CycleState, Nodes, PodInfo, Snapshot, Status

Json = dict[str, Any]


class Handle:
    """What the plugins use of a framework handle: the snapshot."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


def sel(*exprs: Json, labels: Mapping[str, str] | None = None) -> Json:
    out: Json = {}
    if labels:
        out["matchLabels"] = dict(labels)
    if exprs:
        out["matchExpressions"] = list(exprs)
    return out


def in_(key: str, *values: str) -> Json:
    return {"key": key, "operator": "In", "values": list(values)}


def not_in(key: str, *values: str) -> Json:
    return {"key": key, "operator": "NotIn", "values": list(values)}


def exists(key: str) -> Json:
    return {"key": key, "operator": "Exists"}


def not_exists(key: str) -> Json:
    return {"key": key, "operator": "DoesNotExist"}


def term(
    selector: Json | None,
    topology_key: str,
    *,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Json | None = None,
    match_label_keys: Sequence[str] = (),
    mismatch_label_keys: Sequence[str] = (),
) -> Json:
    t: Json = {"topologyKey": topology_key}
    if selector is not None:
        t["labelSelector"] = selector
    if namespaces is not None:
        t["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        t["namespaceSelector"] = namespace_selector
    if match_label_keys:
        t["matchLabelKeys"] = list(match_label_keys)
    if mismatch_label_keys:
        t["mismatchLabelKeys"] = list(mismatch_label_keys)
    return t


def weighted(weight: int, t: Json) -> Json:
    return {"weight": weight, "podAffinityTerm": t}


def pod(
    name: str = "p",
    *,
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    node: str = "",
    affinity: Sequence[Json] = (),
    anti: Sequence[Json] = (),
    pref_affinity: Sequence[Json] = (),
    pref_anti: Sequence[Json] = (),
    terminating: bool = False,
) -> Pod:
    spec: Json = {}
    a: Json = {}
    if affinity or pref_affinity:
        a["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(affinity),
            "preferredDuringSchedulingIgnoredDuringExecution": list(pref_affinity),
        }
    if anti or pref_anti:
        a["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti),
            "preferredDuringSchedulingIgnoredDuringExecution": list(pref_anti),
        }
    if a:
        spec["affinity"] = a
    built = PodWrapper(name).namespace(namespace).uid(next_uid()).labels(labels or {}).pause()
    built.node(node).spec(spec)
    if terminating:
        built.terminating()
    return built.obj()


def node(name: str, labels: Mapping[str, str] | None = None, **kw: Any) -> Node:
    return make_node(name, labels=labels, **kw)


def snapshot(
    nodes: Sequence[Node],
    pods: Sequence[Pod] = (),
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Snapshot:
    snap = Snapshot()
    for n in nodes:
        snap.set_node(n)
    for p in pods:
        snap.add_pod(PodInfo.of(p), p.spec.node_name)
    for name, labels in (namespaces or {}).items():
        snap.set_namespace(name, labels)
    return snap


def all_nodes(snap: Snapshot) -> Nodes:
    return Nodes(snap, snap.present_slots())


def node_statuses(plugin: Any, state: CycleState, p: Pod, snap: Snapshot) -> list[Status | None]:
    """Filter verdicts in node order; the vectorized and per-node forms must agree."""
    nodes = all_nodes(snap)
    verdict = plugin.filter_nodes(state, p, nodes)
    vec = [verdict.statuses[int(i)] for i in verdict.ids]
    per_node = [plugin.filter(state, p, info) for info in nodes.infos()]
    assert vec == per_node
    return vec


def scores(plugin: Any, state: CycleState, p: Pod, snap: Snapshot, names: Sequence[str]) -> Any:
    """Score + NormalizeScore over the named nodes; vectorized and per-node scores agree."""
    slots = np.array([snap.slot_of(n) for n in names], dtype=np.int64)
    nodes = Nodes(snap, slots)
    raw, status = plugin.score_nodes(state, p, nodes)
    assert status is None
    per_node = [plugin.score(state, p, info)[0] for info in nodes.infos()]
    assert raw.tolist() == per_node
    status = plugin.normalize_score(state, p, nodes, raw)
    assert status is None
    return raw.tolist()
