"""What the page shows, computed from the simulator: the nodes after the simulation, each pod's
outcome, one pod's explain table and ``why`` report, and what-if runs on changed inputs.

Everything is in memory: a what-if builds new inputs and a new configuration beside the loaded
ones and simulates them; nothing is kept from it and nothing goes to a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import yaml

from kubesched import KubeschedError
from kubesched.api import CPU, MEMORY, Pod, node_allocatable, pod_requests
from kubesched.config import (
    ConfigError,
    KubeSchedulerConfiguration,
    config_to_dict,
    load_config_from_dict,
)
from kubesched.framework import FrameworkError, Registry, plugin_args_types
from kubesched.plugins.volume_zone import LABEL_TOPOLOGY_ZONE
from kubesched.simulate import (
    FILTER_OK,
    PRE_FILTER_RESULT,
    Inputs,
    PodResult,
    SimulationResult,
    load_text,
    only_pod,
    simulate,
    why,
    why_json,
)

#: Nodes without the zone label are grouped under this name.
NO_ZONE = "(no zone)"
#: Explain tables of the loaded run kept for pods selected again (each is a row per node).
EXPLAINED_KEPT = 16


class WhatIfError(KubeschedError):
    """A what-if request that cannot run; the message names the field."""


@dataclass
class Loaded:
    """The inputs the page was started on, their configuration, and their simulation."""

    inputs: Inputs
    config: KubeSchedulerConfiguration
    registry: Registry
    source: str
    seed: int | None
    result: SimulationResult
    #: Pod key -> its explain table in this run, the latest :data:`EXPLAINED_KEPT`.
    explained: dict[str, dict[str, Any]] = field(default_factory=dict)


async def load(
    inputs: Inputs,
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    source: str,
    seed: int | None = None,
) -> Loaded:
    result = await simulate(inputs, config, registry, seed=seed)
    return Loaded(inputs, config, registry, source, seed, result)


def cluster_view(loaded: Loaded) -> dict[str, Any]:
    """The node grid: per zone, each node's allocation after the simulation, taints, cordon,
    and the pods on it (running ones, less those preempted, and those the simulation placed)."""
    placed: dict[str, list[tuple[Pod, bool]]] = {}
    evicted = {v for r in loaded.result.pods for v in r.victims}
    for pod in loaded.inputs.running:
        if pod.key not in evicted:
            placed.setdefault(pod.spec.node_name, []).append((pod, False))
    by_key = {p.key: p for p in loaded.inputs.pending}
    for r in loaded.result.pods:
        if r.node is not None:
            placed.setdefault(r.node, []).append((by_key[r.key], True))
    zones: dict[str, list[dict[str, Any]]] = {}
    for node in loaded.inputs.nodes:
        name = node.metadata.name
        alloc = {CPU: 0, MEMORY: 0}
        pods = []
        for pod, simulated in placed.get(name, []):
            reqs = pod_requests(pod)
            alloc[CPU] += reqs.get(CPU, 0)
            alloc[MEMORY] += reqs.get(MEMORY, 0)
            pods.append({"key": pod.key, "simulated": simulated})
        capacity = node_allocatable(node)
        zone = node.metadata.labels.get(LABEL_TOPOLOGY_ZONE, NO_ZONE)
        zones.setdefault(zone, []).append(
            {
                "name": name,
                "cpu": [alloc[CPU], capacity.get(CPU, 0)],
                "memory": [alloc[MEMORY], capacity.get(MEMORY, 0)],
                "taints": [
                    f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                    for t in node.spec.taints
                ],
                "cordoned": node.spec.unschedulable,
                "pods": pods,
            }
        )
    return {
        "source": loaded.source,
        "zones": [{"name": z, "nodes": zones[z]} for z in sorted(zones)],
        "summary": loaded.result.counts(),
        "nodes": len(loaded.inputs.nodes),
        "running": len(loaded.inputs.running),
        "seconds": round(loaded.result.seconds, 3),
    }


def pods_view(result: SimulationResult) -> list[dict[str, Any]]:
    return [
        {
            "key": p.key,
            "node": p.node,
            "reason": p.reason,
            "message": p.message,
            "nominatedNode": p.nominated_node,
            "victims": p.victims,
        }
        for p in result.pods
    ]


async def explain_view(
    loaded: Loaded,
    key: str,
    *,
    inputs: Inputs | None = None,
    config: KubeSchedulerConfiguration | None = None,
    result: SimulationResult | None = None,
) -> dict[str, Any] | None:
    """One pod's explain table: a row per node (first failing plugin and reason, or each
    plugin's weighted score and the total), and the score plugins as columns. ``inputs``,
    ``config`` and ``result`` default to the loaded ones (a what-if passes its own).

    The pod is tried again, alone, on the cluster it met in the simulation (see
    :func:`_as_met_by`): keeping every node's verdict for every pod of a run would hold
    pods x nodes explanations in memory.
    """
    own = inputs is None and config is None and result is None
    if own and key in loaded.explained:
        return loaded.explained[key]
    inputs = inputs or loaded.inputs
    result = result or loaded.result
    decided = next((p for p in result.pods if p.key == key), None)
    if decided is None:
        return None
    namespace, _, name = key.partition("/")
    alone = only_pod(_as_met_by(inputs, result, key), namespace, name)
    again = await simulate(
        alone, config or loaded.config, loaded.registry, seed=loaded.seed, detail="explain"
    )
    (pod,) = again.pods
    # The run's decision: trying again breaks ties between top scores anew.
    view = {"pod": _pod_entry(decided), **_rows(pod)}
    if own:
        if len(loaded.explained) >= EXPLAINED_KEPT:
            del loaded.explained[next(iter(loaded.explained))]
        loaded.explained[key] = view
    return view


def _decision(result: SimulationResult, key: str) -> dict[str, Any] | None:
    return next((_pod_entry(p) for p in result.pods if p.key == key), None)


def _pod_entry(p: PodResult) -> dict[str, Any]:
    return {
        "key": p.key,
        "node": p.node,
        "reason": p.reason,
        "message": p.message,
        "nominatedNode": p.nominated_node,
        "victims": p.victims,
    }


def _rows(p: PodResult) -> dict[str, Any]:
    plugins: list[str] = []
    rows = []
    for name, n in (p.nodes or {}).items():
        for k in n.scores:
            if k not in plugins:
                plugins.append(k)
        plugin, reason = "", ""
        if n.pre_filter:
            plugin, reason = next(iter(n.pre_filter.items()))
            plugin = "PreFilter" if plugin == PRE_FILTER_RESULT else f"PreFilter {plugin}"
        else:
            for k, v in n.filter.items():
                if v != FILTER_OK:
                    plugin, reason = k, v
                    break
        rows.append(
            {
                "node": name,
                "feasible": n.feasible,
                "plugin": plugin,
                "reason": reason,
                "scores": n.scores,
                "total": n.total,
            }
        )
    return {"plugins": plugins, "rows": rows}


async def why_view(loaded: Loaded, key: str) -> dict[str, Any]:
    """``kubesched why`` on the cluster the pod met in the simulation."""
    namespace, _, name = key.partition("/")
    inputs = only_pod(_as_met_by(loaded.inputs, loaded.result, key), namespace, name)
    return why_json(await why(inputs, loaded.config, loaded.registry, seed=loaded.seed))


def _as_met_by(inputs: Inputs, result: SimulationResult, key: str) -> Inputs:
    """``inputs`` as the pod ``key`` found the cluster at its attempt: the pods placed before
    it are running where they went, the pods preempted before it are gone."""
    mine = next((r for r in result.pods if r.key == key), None)
    at = mine.attempt if mine is not None and mine.attempt is not None else 0
    earlier = [r for r in result.pods if r.attempt is not None and r.attempt < at]
    placed = {r.key: r.node for r in earlier if r.node is not None}
    gone = {v for r in earlier for v in r.victims}
    pods = [
        msgspec.structs.replace(p, spec=msgspec.structs.replace(p.spec, node_name=placed[p.key]))
        if not p.spec.node_name and p.key in placed
        else p
        for p in inputs.pods
        if p.key not in gone
    ]
    return Inputs(inputs.nodes, pods, inputs.objects, inputs.issues)


def pod_yaml(loaded: Loaded, key: str) -> str | None:
    """The pending pod as the simulation read it, as YAML to edit."""
    pod = next((p for p in loaded.inputs.pending if p.key == key), None)
    if pod is None:
        return None
    doc = msgspec.to_builtins(pod)
    doc["metadata"] = {
        k: v for k, v in doc["metadata"].items() if k in ("name", "namespace", "labels")
    }
    doc.pop("status", None)
    return yaml.safe_dump(doc, sort_keys=False)


def profile_view(loaded: Loaded) -> dict[str, Any]:
    """The configuration as YAML, and each profile's score weights and enabled plugins."""
    data = config_to_dict(loaded.config)
    profiles = []
    for profile in data.get("profiles", []):
        enabled = profile.get("plugins", {}).get("multiPoint", {}).get("enabled", [])
        profiles.append(
            {
                "schedulerName": profile.get("schedulerName", ""),
                "plugins": [{"name": p["name"], "weight": p.get("weight")} for p in enabled],
            }
        )
    return {"yaml": yaml.safe_dump(data, sort_keys=False), "profiles": profiles}


async def what_if(loaded: Loaded, request: dict[str, Any]) -> dict[str, Any]:
    """Simulate again with the request's changes; returns the pods and, for ``target`` (the pod
    edited or looked at), the loaded run's decision and the new explain table.

    ``request``: ``target`` (``namespace/name``), ``pod`` (YAML of a pod replacing the target, or
    a new pod), ``config`` (YAML of a whole configuration), ``weights`` (plugin -> weight, in
    every profile) and ``disabled`` (plugins taken out of every profile).
    """
    target = request.get("target")
    if target is not None and not isinstance(target, str):
        raise WhatIfError("target: must be a string namespace/name")
    inputs = loaded.inputs
    warnings: list[str] = []
    pod_text = request.get("pod")
    if pod_text:
        if not isinstance(pod_text, str):
            raise WhatIfError("pod: must be a YAML string")
        inputs, target, warnings = _with_pod(inputs, pod_text, target)
    config = _config(loaded, request)
    try:
        result = await simulate(inputs, config, loaded.registry, seed=loaded.seed)
        after = (
            await explain_view(loaded, target, inputs=inputs, config=config, result=result)
            if target
            else None
        )
    except (ConfigError, FrameworkError) as e:
        raise WhatIfError(f"config: {e}") from e
    return {
        "pods": pods_view(result),
        "target": target,
        "before": _decision(loaded.result, target) if target else None,
        "after": after,
        "issues": warnings,
    }


def _with_pod(inputs: Inputs, text: str, target: str | None) -> tuple[Inputs, str, list[str]]:
    """``inputs`` with the pod of ``text`` in place of ``target``; the pod's key, and the
    warnings reading it gave."""
    parsed = load_text(text, "pod")
    if parsed.errors:
        raise WhatIfError("pod: " + "; ".join(i.message for i in parsed.errors))
    if len(parsed.pods) != 1 or parsed.nodes:
        raise WhatIfError("pod: must be exactly one Pod")
    (pod,) = parsed.pods
    if pod.spec.node_name:
        raise WhatIfError("pod: spec.nodeName: must be empty (the pod is to be scheduled)")
    replaced = target or pod.key
    pods = [p for p in inputs.pods if p.key not in (replaced, pod.key) or p.spec.node_name]
    # The edited pod keeps its place in the order when it replaces one.
    at = next((i for i, p in enumerate(inputs.pods) if p.key == replaced), len(pods))
    pods.insert(min(at, len(pods)), pod)
    warnings = [str(i) for i in parsed.warnings]
    return Inputs(inputs.nodes, pods, inputs.objects, inputs.issues), pod.key, warnings


def _config(loaded: Loaded, request: dict[str, Any]) -> KubeSchedulerConfiguration:
    text = request.get("config")
    weights = request.get("weights") or {}
    disabled = request.get("disabled") or []
    if not text and not weights and not disabled:
        return loaded.config
    if text:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise WhatIfError(f"config: not YAML: {e}") from e
    else:
        data = config_to_dict(loaded.config)
    if not isinstance(weights, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
        for k, v in weights.items()
    ):
        raise WhatIfError("weights: must map plugin names to integers")
    if not isinstance(disabled, list) or not all(isinstance(d, str) for d in disabled):
        raise WhatIfError("disabled: must be a list of plugin names")
    if isinstance(data, dict):
        for profile in data.get("profiles") or []:
            _apply(profile, weights, set(disabled))
    try:
        return load_config_from_dict(
            data, plugin_args_types=plugin_args_types(loaded.registry), source="config"
        )
    except ConfigError as e:
        raise WhatIfError(f"config: {e}") from e


def _apply(profile: dict[str, Any], weights: dict[str, int], disabled: set[str]) -> None:
    for point in (profile.get("plugins") or {}).values():
        if not isinstance(point, dict):
            continue
        enabled = [p for p in point.get("enabled") or [] if p.get("name") not in disabled]
        for p in enabled:
            if p.get("name") in weights:
                p["weight"] = weights[p["name"]]
        point["enabled"] = enabled
        # Loading defaults the profile again: a default plugin left out must be disabled.
        point["disabled"] = [
            *(point.get("disabled") or []),
            *({"name": name} for name in sorted(disabled)),
        ]
