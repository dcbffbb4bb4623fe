"""Was the outcome correct, and how good is it: from the nodes and the bound pods alone.

The check never asks the scheduler: it recomputes each node's requests from the pods bound to
it, so a scheduler whose cache went wrong is caught. Pod constraints are checked on the final
placement: no pod shares a topology domain with a pod its required anti-affinity terms match
(in the term's ``namespaces`` and those its ``namespaceSelector`` selects, or else the pod's own
namespace), every pod shares one with a pod each of its required affinity terms matches (or is
the first its own term matches), and every DoNotSchedule topology spread constraint ends within
its maxSkew over the nodes it counts: those with the topology key that pass its node inclusion
policies (the pod's node affinity unless ``nodeAffinityPolicy`` is Ignore, the nodes' taints if
``nodeTaintsPolicy`` is Honor). The skew bound holds at the end when it held at every
placement, since the minimum only grows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from kubesched.api import (
    DO_NOT_SCHEDULE,
    NODE_INCLUSION_POLICY_HONOR,
    NODE_INCLUSION_POLICY_IGNORE,
    TAINT_EFFECT_NO_EXECUTE,
    TAINT_EFFECT_NO_SCHEDULE,
    ClaimNameError,
    Namespace,
    Node,
    Pod,
    PodAffinityTerm,
    ResourceClaim,
    TopologySpreadConstraint,
    claim_reserved_for_pod,
    find_untolerated_taint,
    label_selector_matches,
    node_allocatable,
    node_selector_matches,
    pod_requests,
    resource_claim_name,
)
from kubesched.bench._stats import NodeUsage, cpu_fraction_spread, overcommitted_nodes

_HARD_EFFECTS = frozenset({TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE})
#: Namespace name -> its labels.
NamespaceLabels = Mapping[str, Mapping[str, str]]


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
    return _taint_violation(pod, node) or _node_affinity_violation(pod, node)


def _taint_violation(pod: Pod, node: Node) -> str | None:
    taint = find_untolerated_taint(node.spec.taints, pod.spec.tolerations, _HARD_EFFECTS)
    if taint is not None:
        return f"untolerated taint {taint.key}={taint.value}:{taint.effect}"
    return None


def _node_affinity_violation(pod: Pod, node: Node) -> str | None:
    """kube-scheduler's ``RequiredNodeAffinity``: the node selector and required node
    affinity."""
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


class _Domains:
    """The bound pods by topology key and value, built per key on first use."""

    def __init__(self, nodes: dict[str, Node], pods: Sequence[Pod]) -> None:
        self._nodes = nodes
        self._pods = pods
        self._by_key: dict[str, dict[str, list[Pod]]] = {}

    def value(self, pod: Pod, key: str) -> str | None:
        return self._nodes[pod.spec.node_name].metadata.labels.get(key)

    def pods(self, key: str, value: str) -> list[Pod]:
        by_value = self._by_key.get(key)
        if by_value is None:
            by_value = self._by_key[key] = {}
            for pod in self._pods:
                v = self.value(pod, key)
                if v is not None:
                    by_value.setdefault(v, []).append(pod)
        return by_value.get(value, [])


def _matches(term: PodAffinityTerm, owner: Pod, other: Pod, namespaces: NamespaceLabels) -> bool:
    """Whether ``term`` of ``owner`` selects ``other``: in the term's ``namespaces`` or one its
    ``namespaceSelector`` selects by the labels in ``namespaces``, or with neither set, in the
    owner's own."""
    namespace = other.metadata.namespace
    if not term.namespaces and term.namespace_selector is None:
        in_scope = namespace == owner.metadata.namespace
    else:
        in_scope = namespace in term.namespaces or label_selector_matches(
            term.namespace_selector, namespaces.get(namespace, {})
        )
    return in_scope and label_selector_matches(term.label_selector, other.metadata.labels)


def anti_affinity_violations(
    nodes: dict[str, Node], pods: Sequence[Pod], namespaces: NamespaceLabels | None = None
) -> list[str]:
    """Bound pods sharing a domain with a pod that their required anti-affinity terms match
    (``namespaces``: each namespace's labels, for the terms' namespace selectors)."""
    labels = namespaces or {}
    domains = _Domains(nodes, pods)
    out: list[str] = []
    for pod, term, value in _required_terms(domains, pods, anti=True):
        if value is None:
            continue
        for other in domains.pods(term.topology_key, value):
            if other is not pod and _matches(term, pod, other, labels):
                out.append(f"{pod.key} on {pod.spec.node_name}: anti-affinity to {other.key}")
    return out


def _required_terms(
    domains: _Domains, pods: Sequence[Pod], *, anti: bool
) -> Iterator[tuple[Pod, PodAffinityTerm, str | None]]:
    """Each pod's required anti-affinity (``anti``) or affinity terms, with the value of the
    term's topology key on the pod's node (``None`` where the node lacks it)."""
    for pod in pods:
        affinity = pod.spec.affinity
        if affinity is None:
            continue
        kind = affinity.pod_anti_affinity if anti else affinity.pod_affinity
        if kind is None:
            continue
        for term in kind.required_during_scheduling_ignored_during_execution:
            yield pod, term, domains.value(pod, term.topology_key)


def affinity_violations(
    nodes: dict[str, Node], pods: Sequence[Pod], namespaces: NamespaceLabels | None = None
) -> list[str]:
    """Bound pods with a required affinity term no other pod of their domain matches; the one
    exception is kube-scheduler's: a pod its own term matches, when no other pod anywhere does
    (the first of a group). ``namespaces`` as for :func:`anti_affinity_violations`."""
    labels = namespaces or {}
    domains = _Domains(nodes, pods)
    out: list[str] = []
    for pod, term, value in _required_terms(domains, pods, anti=False):
        if value is None:
            out.append(f"{pod.key} on {pod.spec.node_name}: no {term.topology_key} label")
            continue
        if any(
            other is not pod and _matches(term, pod, other, labels)
            for other in domains.pods(term.topology_key, value)
        ):
            continue
        alone = _matches(term, pod, pod, labels) and not any(
            other is not pod and _matches(term, pod, other, labels) for other in pods
        )
        if not alone:
            out.append(
                f"{pod.key} on {pod.spec.node_name}: no pod its affinity matches "
                f"in {term.topology_key}={value}"
            )
    return out


def _counts(c: TopologySpreadConstraint, pod: Pod, node: Node) -> bool:
    """Whether ``pod``'s constraint ``c`` counts ``node``: it has the topology key and passes the
    node inclusion policies (kube-scheduler's ``matchNodeInclusionPolicies``)."""
    if c.topology_key not in node.metadata.labels:
        return False
    # nodeAffinityPolicy defaults to Honor, nodeTaintsPolicy to Ignore.
    honor = NODE_INCLUSION_POLICY_HONOR
    if (c.node_affinity_policy or honor) == honor and _node_affinity_violation(pod, node):
        return False
    taints = c.node_taints_policy or NODE_INCLUSION_POLICY_IGNORE
    return not (taints == honor and _taint_violation(pod, node))


def spread_violations(nodes: dict[str, Node], pods: Sequence[Pod]) -> list[str]:
    """DoNotSchedule topology spread constraints whose final skew exceeds their maxSkew."""
    out: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for pod in pods:
        for c in pod.spec.topology_spread_constraints:
            if c.when_unsatisfiable != DO_NOT_SCHEDULE:
                continue
            ns = pod.metadata.namespace
            # The pods of one constraint count the same nodes when what the policies look at
            # is the same.
            affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
            scope = (repr(pod.spec.node_selector), repr(affinity), repr(pod.spec.tolerations))
            key = (ns, repr(c), *scope)
            if key in seen:
                continue
            seen.add(key)
            counted = [n for n in nodes.values() if _counts(c, pod, n)]
            counts = Counter({n.metadata.labels[c.topology_key]: 0 for n in counted})
            names = {n.metadata.name for n in counted}
            for other in pods:
                if (
                    other.spec.node_name in names
                    and other.metadata.namespace == ns
                    and label_selector_matches(c.label_selector, other.metadata.labels)
                ):
                    counts[nodes[other.spec.node_name].metadata.labels[c.topology_key]] += 1
            skew = max(counts.values(), default=0) - min(counts.values(), default=0)
            if skew > c.max_skew:
                out.append(
                    f"{pod.key}'s spread by {c.topology_key}: skew {skew} > maxSkew {c.max_skew}"
                )
    return out


def claim_violations(
    nodes: Mapping[str, Node], pods: Sequence[Pod], claims: Iterable[ResourceClaim]
) -> list[str]:
    """Bound pods whose ResourceClaims are missing, unallocated, allocated on a node selector
    their node does not pass or not reserved for them; devices allocated to two claims."""
    by_key = {f"{c.metadata.namespace}/{c.metadata.name}": c for c in claims}
    out: list[str] = []
    holders: dict[tuple[str, str, str], str] = {}
    for key, held in by_key.items():
        allocation = held.status.allocation
        for result in allocation.devices.results if allocation is not None else ():
            device = (result.driver, result.pool, result.device)
            other = holders.setdefault(device, key)
            if other != key:
                out.append(f"device {'/'.join(device)} allocated to {other} and {key}")
    for pod in pods:
        node = nodes[pod.spec.node_name]
        where = f"{pod.key} on {node.metadata.name}"
        for index in range(len(pod.spec.resource_claims)):
            try:
                name, _ = resource_claim_name(pod, index)
            except ClaimNameError as err:
                out.append(f"{where}: {err}")
                continue
            claim = by_key.get(f"{pod.metadata.namespace}/{name}")
            allocation = None if claim is None else claim.status.allocation
            if claim is None or allocation is None:
                out.append(f"{where}: claim {name} not allocated")
                continue
            selector = allocation.node_selector
            if selector is not None and not node_selector_matches(
                selector, node.metadata.labels, node.metadata.name
            ):
                out.append(f"{where}: claim {name} allocated for other nodes")
            if not claim_reserved_for_pod(pod, claim):
                out.append(f"{where}: claim {name} not reserved for it")
    return out


def check_placement(
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    namespaces: Iterable[Namespace] = (),
    claims: Iterable[ResourceClaim] = (),
) -> Placement:
    """Usage per node from the pods bound to it (``spec.nodeName`` set), then the checks;
    ``namespaces`` give the labels that pod affinity terms' namespace selectors select by,
    ``claims`` the ResourceClaims the pods' claims name."""
    by_name = {n.metadata.name: n for n in nodes}
    labels = {n.metadata.name: n.metadata.labels for n in namespaces}
    usages = {name: NodeUsage(name, dict(node_allocatable(node))) for name, node in by_name.items()}
    violations: list[str] = []
    placed: list[Pod] = []
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
        placed.append(pod)
        usages[node_name].add(pod_requests(pod))
        why = constraint_violation(pod, node)
        if why is not None:
            violations.append(f"{pod.key} on {node_name}: {why}")
    violations += anti_affinity_violations(by_name, placed, labels)
    violations += affinity_violations(by_name, placed, labels)
    violations += spread_violations(by_name, placed)
    violations += claim_violations(by_name, placed, claims)
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


__all__ = [
    "Placement",
    "affinity_violations",
    "anti_affinity_violations",
    "check_placement",
    "claim_violations",
    "constraint_violation",
    "spread_violations",
]
