"""Was the outcome correct, and how good is it: from the nodes and the bound pods alone.

The check never asks the scheduler: it recomputes each node's requests from the pods bound to
it, so a scheduler whose cache went wrong is caught.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kubesched.api import (
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    Node,
    Pod,
    find_untolerated_taint,
    node_allocatable,
    node_selector_matches,
    pod_requests,
)
from kubesched.bench._stats import NodeUsage, cpu_fraction_spread, overcommitted_nodes

_HARD_EFFECTS = frozenset({TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE})


@dataclass(frozen=True, slots=True)
class Placement:
    """The placement of the bound pods over the nodes."""

    nodes: int
    bound_pods: int
    #: Node name -> resources requested beyond allocatable.
    overcommitted: dict[str, list[str]]
    #: ``namespace/name on node: why`` for pods placed against a hard constraint.
    violations: list[str]
    #: Standard deviation of the allocated CPU fraction across nodes.
    cpu_fraction_std: float
    #: Mean allocated CPU fraction.
    cpu_fraction_mean: float


def constraint_violation(pod: Pod, node: Node) -> str | None:
    """Why ``pod`` must not run on ``node`` (untolerated NoSchedule/NoExecute taint, node
    selector, required node affinity), or ``None``."""
    taint = find_untolerated_taint(node.spec.taints, pod.spec.tolerations, _HARD_EFFECTS)
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    labels = node.metadata.labels
    for key, value in pod.spec.node_selector.items():
        if labels.get(key) != value:
            return f"node selector {key}={value} not matched"
    affinity = pod.spec.affinity
    if affinity is not None and affinity.node_affinity is not None:
        required = affinity.node_affinity.required_during_scheduling_ignored_during_execution
        if required is not None and not node_selector_matches(required, labels, node.metadata.name):
            return "required node affinity not matched"
    return None


def check_placement(nodes: Iterable[Node], pods: Iterable[Pod]) -> Placement:
    """Usage per node from the pods bound to it (``spec.nodeName`` set), then the checks."""
    by_name = {n.metadata.name: n for n in nodes}
    usages = {name: NodeUsage(name, dict(node_allocatable(node))) for name, node in by_name.items()}
    violations: list[str] = []
    bound = 0
    for pod in pods:
        node_name = pod.spec.node_name
        if not node_name:
            continue
        bound += 1
        node = by_name.get(node_name)
        if node is None:
            violations.append(f"{pod.key} on {node_name}: no such node")
            continue
        usages[node_name].add(pod_requests(pod))
        why = constraint_violation(pod, node)
        if why is not None:
            violations.append(f"{pod.key} on {node_name}: {why}")
    values = list(usages.values())
    fractions = [u.cpu_fraction() for u in values]
    return Placement(
        nodes=len(values),
        bound_pods=bound,
        overcommitted=overcommitted_nodes(values),
        violations=violations,
        cpu_fraction_std=cpu_fraction_spread(values),
        cpu_fraction_mean=sum(fractions) / len(fractions) if fractions else 0.0,
    )


__all__ = ["Placement", "check_placement", "constraint_violation"]
