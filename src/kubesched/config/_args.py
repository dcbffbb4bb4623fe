"""Arguments of the in-tree plugins, with kube-scheduler v1.34's defaults and validation.

A plugin reads its arguments from the profile's ``pluginConfig`` entry with its name. For the
in-tree plugins that take arguments, kube-scheduler knows the type (``<PluginName>Args``),
decodes the entry strictly, fills in defaults, and rejects out-of-range values before any pod is
scheduled. This module holds those types and rules, and :func:`decode_args`, which applies the
same treatment to any ``msgspec.Struct`` so that plugins outside this package get identical
behaviour and error paths for their own args.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple, Protocol, TypeVar, runtime_checkable

import msgspec

from kubesched.config._decode import Duration, decode_struct
from kubesched.config._duration import Seconds
from kubesched.config._errors import ConfigError, FieldError, child, index
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._names import is_qualified_name, is_valid_label_value
from kubesched.config._types import API_VERSION, ConfigStruct, Int32, Int64

# --------------------------------------------------------------------------------------------
# Core Kubernetes types used inside plugin args
# --------------------------------------------------------------------------------------------


class NodeSelectorRequirement(ConfigStruct):
    """``key <operator> values`` on a node's labels (or, in ``matchFields``, on its fields).

    Operators: ``In`` / ``NotIn`` (values non-empty), ``Exists`` / ``DoesNotExist`` (no values),
    ``Gt`` / ``Lt`` (exactly one integer value).
    """

    key: str
    operator: str
    values: list[str] = msgspec.field(default_factory=list)


class NodeSelectorTerm(ConfigStruct):
    """Requirements that must all hold (AND). An empty term matches no node."""

    match_expressions: list[NodeSelectorRequirement] = msgspec.field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = msgspec.field(default_factory=list)


class NodeSelector(ConfigStruct):
    """Terms of which at least one must hold (OR)."""

    node_selector_terms: list[NodeSelectorTerm] = msgspec.field(default_factory=list)


class PreferredSchedulingTerm(ConfigStruct):
    """A term that adds ``weight`` (1..100) to the score of nodes that match it."""

    weight: Int32 = 0
    preference: NodeSelectorTerm = msgspec.field(default_factory=NodeSelectorTerm)


class NodeAffinity(ConfigStruct):
    """Node affinity as in a pod spec: a hard selector and weighted preferences."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = (
        msgspec.field(default_factory=list)
    )


class LabelSelectorRequirement(ConfigStruct):
    """``key <operator> values`` in a label selector (``In``, ``NotIn``, ``Exists``, ...)."""

    key: str
    operator: str
    values: list[str] = msgspec.field(default_factory=list)


class LabelSelector(ConfigStruct):
    """A label selector: ``matchLabels`` and ``matchExpressions``, all of which must hold."""

    match_labels: dict[str, str] = msgspec.field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = msgspec.field(default_factory=list)


class TopologySpreadConstraint(ConfigStruct):
    """How evenly to spread matching pods over the values of a node label (a *topology*).

    ``topology_key`` is the node label that defines the domains (``topology.kubernetes.io/zone``);
    ``max_skew`` is the largest allowed difference in matching pods between two domains;
    ``when_unsatisfiable`` is ``DoNotSchedule`` (a filter) or ``ScheduleAnyway`` (a score).
    In ``PodTopologySpreadArgs.defaultConstraints`` the ``label_selector`` must be empty: the
    plugin derives it from the pod's Service, ReplicaSet or StatefulSet.
    """

    max_skew: Int32 = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = msgspec.field(default_factory=list)


# --------------------------------------------------------------------------------------------
# Plugin args
# --------------------------------------------------------------------------------------------


class DefaultPreemptionArgs(ConfigStruct):
    """Args of ``DefaultPreemption``, the PostFilter plugin that evicts lower-priority pods.

    When no node fits a pod, preemption dry-runs evictions on a sample of nodes. The sample has
    ``max(nodes × min_candidate_nodes_percentage / 100, min_candidate_nodes_absolute)`` nodes.
    Defaults 10% and 100; the percentage must be in [0, 100], the absolute number at least 0,
    and they may not both be 0.
    """

    min_candidate_nodes_percentage: Int32 = 10
    min_candidate_nodes_absolute: Int32 = 100


class InterPodAffinityArgs(ConfigStruct):
    """Args of ``InterPodAffinity``.

    ``hard_pod_affinity_weight`` (default 1, range [0, 100]) is the score weight given to an
    existing pod's *required* affinity for the incoming pod. With
    ``ignore_preferred_terms_of_existing_pods`` the score ignores existing pods' preferred terms
    unless the incoming pod has affinity terms of its own.
    """

    hard_pod_affinity_weight: Int32 = 1
    ignore_preferred_terms_of_existing_pods: bool = False


class NodeAffinityArgs(ConfigStruct):
    """Args of ``NodeAffinity``: ``added_affinity`` is ANDed with every pod's own node affinity.

    Use it to keep a profile's pods on a set of nodes. Empty by default (all nodes match).
    """

    added_affinity: NodeAffinity | None = None


class ResourceSpec(ConfigStruct):
    """A resource name (``cpu``, ``memory``, ``example.com/gpu``) and its weight in a score."""

    name: str
    weight: Int64 = 0


class UtilizationShapePoint(ConfigStruct):
    """A point of a piecewise-linear scoring function: ``utilization`` (0..100) → ``score``.

    ``score`` is 0..10; kube-scheduler scales it to the 0..100 node score range.
    """

    utilization: Int32 = 0
    score: Int32 = 0


class RequestedToCapacityRatioParam(ConfigStruct):
    """The scoring function of the ``RequestedToCapacityRatio`` strategy, as points."""

    shape: list[UtilizationShapePoint] = msgspec.field(default_factory=list)


LEAST_ALLOCATED = "LeastAllocated"
"""Score nodes higher the more of the weighted resources stay free (spreads pods)."""
MOST_ALLOCATED = "MostAllocated"
"""Score nodes higher the more of the weighted resources are used (packs pods)."""
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
"""Score nodes by a user-given function of requested/allocatable."""
SCORING_STRATEGY_TYPES: tuple[str, ...] = (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
)


class ScoringStrategy(ConfigStruct):
    """How ``NodeResourcesFit`` scores nodes.

    ``type`` is one of :data:`SCORING_STRATEGY_TYPES`. ``resources`` lists the resources that count
    and their weights (1..100; an unset or zero weight becomes 1; an empty list becomes cpu and
    memory with weight 1). ``requested_to_capacity_ratio`` is required by, and only used by, the
    ``RequestedToCapacityRatio`` type.
    """

    type: str = ""
    resources: list[ResourceSpec] = msgspec.field(default_factory=list)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


class NodeResourcesFitArgs(ConfigStruct):
    """Args of ``NodeResourcesFit``, which filters nodes without room for a pod's requests and
    scores the others.

    ``ignored_resources`` are resource names the filter does not check;
    ``ignored_resource_groups`` are prefixes (``example.com``) whose resources it does not check.
    ``scoring_strategy`` defaults to ``LeastAllocated`` over cpu and memory, weight 1 each; it is
    always set after defaulting.
    """

    ignored_resources: list[str] = msgspec.field(default_factory=list)
    ignored_resource_groups: list[str] = msgspec.field(default_factory=list)
    scoring_strategy: ScoringStrategy | None = None


class NodeResourcesBalancedAllocationArgs(ConfigStruct):
    """Args of ``NodeResourcesBalancedAllocation``, which favours nodes whose resources would be
    used in even proportions after placing the pod.

    ``resources`` defaults to cpu and memory; each weight must be 1 (an unset or zero weight
    becomes 1) and names may not repeat.
    """

    resources: list[ResourceSpec] = msgspec.field(default_factory=list)


SYSTEM_DEFAULTING = "System"
"""``PodTopologySpreadArgs.defaultingType``: use Kubernetes' built-in default constraints."""
LIST_DEFAULTING = "List"
"""``PodTopologySpreadArgs.defaultingType``: use ``defaultConstraints``."""


class PodTopologySpreadArgs(ConfigStruct):
    """Args of ``PodTopologySpread``.

    Pods without their own ``topologySpreadConstraints`` get default ones. With
    ``defaulting_type`` ``System`` (the default) those are Kubernetes' built-in constraints
    (spread over hostnames and zones, ``ScheduleAnyway``) and ``default_constraints`` must be
    empty; with ``List`` they are ``default_constraints``.
    """

    default_constraints: list[TopologySpreadConstraint] = msgspec.field(default_factory=list)
    defaulting_type: str = SYSTEM_DEFAULTING


class VolumeBindingArgs(ConfigStruct):
    """Args of ``VolumeBinding``.

    ``bind_timeout_seconds`` (default 600, not negative; 0 means do not wait) bounds how long
    binding waits for volumes to be provisioned and bound. ``shape`` scores nodes by the
    utilization of their storage capacity; it needs the ``StorageCapacityScoring`` feature gate,
    which also gives it a default (prefer nodes with more free capacity).
    """

    bind_timeout_seconds: Int64 = 600
    shape: list[UtilizationShapePoint] | None = None


class DynamicResourcesArgs(ConfigStruct):
    """Args of ``DynamicResources``, the plugin that allocates devices claimed through
    ResourceClaims (dynamic resource allocation, DRA).

    ``filter_timeout`` (seconds; default 10 with the ``DRASchedulerFilterTimeout`` gate on, which
    it is in v1.34) bounds the time spent looking for devices on one node; 0 disables the limit.
    """

    filter_timeout: Duration | None = None


# --------------------------------------------------------------------------------------------
# Defaulting
# --------------------------------------------------------------------------------------------


def _default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]


def _default_nothing(_args: Any, _features: FeatureGates) -> None:
    return None


def _default_balanced(args: NodeResourcesBalancedAllocationArgs, _f: FeatureGates) -> None:
    if not args.resources:
        args.resources = _default_resources()
        return
    for r in args.resources:
        if r.weight == 0:
            r.weight = 1


def _default_fit(args: NodeResourcesFitArgs, _f: FeatureGates) -> None:
    if args.scoring_strategy is None:
        args.scoring_strategy = ScoringStrategy(type=LEAST_ALLOCATED)
    if not args.scoring_strategy.resources:
        args.scoring_strategy.resources = _default_resources()
    for r in args.scoring_strategy.resources:
        if r.weight == 0:
            r.weight = 1


def _default_topology_spread(args: PodTopologySpreadArgs, _f: FeatureGates) -> None:
    if not args.defaulting_type:
        args.defaulting_type = SYSTEM_DEFAULTING


MAX_CUSTOM_PRIORITY_SCORE = 10
"""The top of the 0..N score scale used by shape points."""


def _default_volume_binding(args: VolumeBindingArgs, features: FeatureGates) -> None:
    if not args.shape and features.storage_capacity_scoring:
        args.shape = [
            UtilizationShapePoint(utilization=0, score=MAX_CUSTOM_PRIORITY_SCORE),
            UtilizationShapePoint(utilization=100, score=0),
        ]


DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT = 10.0
"""Default ``DynamicResourcesArgs.filterTimeout``, in seconds."""


def _default_dynamic_resources(args: DynamicResourcesArgs, features: FeatureGates) -> None:
    if args.filter_timeout is None and features.dra_scheduler_filter_timeout:
        args.filter_timeout = DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _validate_default_preemption(
    args: DefaultPreemptionArgs, path: str, _f: FeatureGates
) -> list[FieldError]:
    errs: list[FieldError] = []
    pct_path = child(path, "minCandidateNodesPercentage")
    abs_path = child(path, "minCandidateNodesAbsolute")
    pct, absolute = args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute
    if pct < 0 or pct > 100:
        errs.append(FieldError.invalid(pct_path, pct, "not in valid range [0, 100]"))
    if absolute < 0:
        errs.append(FieldError.invalid(abs_path, absolute, "not in valid range [0, inf)"))
    if pct == 0 and absolute == 0:
        errs.append(
            FieldError.invalid(
                pct_path, pct, "cannot be zero at the same time as minCandidateNodesAbsolute"
            )
        )
        errs.append(
            FieldError.invalid(
                abs_path, absolute, "cannot be zero at the same time as minCandidateNodesPercentage"
            )
        )
    return errs


def _validate_inter_pod_affinity(
    args: InterPodAffinityArgs, path: str, _f: FeatureGates
) -> list[FieldError]:
    w = args.hard_pod_affinity_weight
    if w < 0 or w > 100:
        return [
            FieldError.invalid(
                child(path, "hardPodAffinityWeight"), w, "not in valid range [0, 100]"
            )
        ]
    return []


def _label_name_errors(path: str, name: str) -> list[FieldError]:
    """Kubernetes ``ValidateLabelName``: one error per problem with ``name``."""
    return [FieldError.invalid(path, name, msg) for msg in is_qualified_name(name)]


def _validate_topology_spread(
    args: PodTopologySpreadArgs, path: str, _f: FeatureGates
) -> list[FieldError]:
    errs: list[FieldError] = []
    dt_path = child(path, "defaultingType")
    if args.defaulting_type not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errs.append(
            FieldError.not_supported(
                dt_path, args.defaulting_type, [SYSTEM_DEFAULTING, LIST_DEFAULTING]
            )
        )
    elif args.defaulting_type == SYSTEM_DEFAULTING and args.default_constraints:
        errs.append(
            FieldError.invalid(
                dt_path, args.defaulting_type, "when .defaultConstraints are not empty"
            )
        )
    constraints_path = child(path, "defaultConstraints")
    for i, c in enumerate(args.default_constraints):
        p = index(constraints_path, i)
        if c.max_skew <= 0:
            errs.append(
                FieldError.invalid(child(p, "maxSkew"), c.max_skew, "not in valid range (0, inf)")
            )
        key_path = child(p, "topologyKey")
        if not c.topology_key:
            errs.append(FieldError.required(key_path, "can not be empty"))
        else:
            errs.extend(_label_name_errors(key_path, c.topology_key))
        wu_path = child(p, "whenUnsatisfiable")
        if not c.when_unsatisfiable:
            errs.append(FieldError.required(wu_path, "can not be empty"))
        elif c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
            errs.append(
                FieldError.not_supported(
                    wu_path, c.when_unsatisfiable, ["DoNotSchedule", "ScheduleAnyway"]
                )
            )
        if c.label_selector is not None:
            errs.append(
                FieldError.forbidden(
                    child(p, "labelSelector"),
                    "constraint must not define a selector, as they deduced for each pod",
                )
            )
        for other in args.default_constraints[:i]:
            if (other.topology_key, other.when_unsatisfiable) == (
                c.topology_key,
                c.when_unsatisfiable,
            ):
                errs.append(
                    FieldError.duplicate(p, f"{{{c.topology_key}, {c.when_unsatisfiable}}}")
                )
                break
    return errs


def _validate_shape(shape: list[UtilizationShapePoint], path: str) -> list[FieldError]:
    if not shape:
        return [FieldError.required(path, "at least one point must be specified")]
    errs: list[FieldError] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                FieldError.invalid(
                    child(index(path, i), "utilization"),
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errs.append(
                FieldError.invalid(
                    child(index(path, i), "utilization"),
                    point.utilization,
                    "not in valid range [0, 100]",
                )
            )
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                FieldError.invalid(
                    child(index(path, i), "score"),
                    point.score,
                    f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]",
                )
            )
    return errs


def _validate_balanced(
    args: NodeResourcesBalancedAllocationArgs, path: str, _f: FeatureGates
) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, r in enumerate(args.resources):
        p = index(child(path, "resources"), i)
        if r.name in seen:
            errs.append(FieldError.duplicate(child(p, "name"), r.name))
        else:
            seen.add(r.name)
        if r.weight != 1:
            errs.append(FieldError.invalid(child(p, "weight"), r.weight, "must be 1"))
    return errs


def _validate_fit(args: NodeResourcesFitArgs, path: str, _f: FeatureGates) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, res in enumerate(args.ignored_resources):
        errs.extend(_label_name_errors(index(child(path, "ignoredResources"), i), res))
    for i, group in enumerate(args.ignored_resource_groups):
        p = index(child(path, "ignoredResourceGroups"), i)
        if "/" in group:
            errs.append(FieldError.invalid(p, group, "resource group name can't contain '/'"))
        errs.extend(_label_name_errors(p, group))
    strategy = args.scoring_strategy
    if strategy is not None:
        sp = child(path, "scoringStrategy")
        if strategy.type not in SCORING_STRATEGY_TYPES:
            errs.append(
                FieldError.not_supported(child(sp, "type"), strategy.type, SCORING_STRATEGY_TYPES)
            )
        for i, r in enumerate(strategy.resources):
            if r.weight <= 0 or r.weight > 100:
                errs.append(
                    FieldError.invalid(
                        child(index(child(sp, "resources"), i), "weight"),
                        r.weight,
                        f"resource weight of {r.name} not in valid range (0, 100]",
                    )
                )
        rtcr_path = child(sp, "requestedToCapacityRatio")
        if strategy.requested_to_capacity_ratio is not None:
            errs.extend(
                _validate_shape(
                    strategy.requested_to_capacity_ratio.shape, child(rtcr_path, "shape")
                )
            )
        elif strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            errs.append(
                FieldError.required(
                    rtcr_path, "the RequestedToCapacityRatio strategy needs a shape"
                )
            )
    return errs


def _validate_volume_binding(
    args: VolumeBindingArgs, path: str, features: FeatureGates
) -> list[FieldError]:
    errs: list[FieldError] = []
    if args.bind_timeout_seconds < 0:
        errs.append(
            FieldError.invalid(
                child(path, "bindTimeoutSeconds"),
                args.bind_timeout_seconds,
                "invalid BindTimeoutSeconds, should not be a negative value",
            )
        )
    shape_path = child(path, "shape")
    if features.storage_capacity_scoring:
        errs.extend(_validate_shape(args.shape or [], shape_path))
    elif args.shape is not None:
        errs.append(
            FieldError.invalid(
                shape_path,
                [{"utilization": p.utilization, "score": p.score} for p in args.shape],
                "unexpected field `shape`, remove it or turn on the feature gate "
                "StorageCapacityScoring",
            )
        )
    return errs


def _validate_dynamic_resources(
    args: DynamicResourcesArgs, path: str, features: FeatureGates
) -> list[FieldError]:
    p = child(path, "filterTimeout")
    if features.dra_scheduler_filter_timeout:
        if args.filter_timeout is not None and args.filter_timeout < 0:
            return [FieldError.invalid(p, Seconds(args.filter_timeout), "must be zero or positive")]
    elif args.filter_timeout is not None:
        return [FieldError.forbidden(p, "DRASchedulerFilterTimeout feature gate is disabled")]
    return []


_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _validate_label_requirement(req: NodeSelectorRequirement, path: str) -> list[FieldError]:
    """Kubernetes ``labels.NewRequirement`` for a node selector requirement."""
    errs: list[FieldError] = []
    if req.operator not in _SELECTOR_OPERATORS:
        return [
            FieldError.not_supported(child(path, "operator"), req.operator, _SELECTOR_OPERATORS)
        ]
    key_errs = is_qualified_name(req.key)
    if key_errs:
        errs.append(FieldError.invalid(child(path, "key"), req.key, "; ".join(key_errs)))
    values_path = child(path, "values")
    values = req.values
    if req.operator in ("In", "NotIn") and not values:
        errs.append(
            FieldError.invalid(
                values_path, values, "for 'in', 'notin' operators, values set can't be empty"
            )
        )
    elif req.operator in ("Exists", "DoesNotExist") and values:
        errs.append(
            FieldError.invalid(
                values_path, values, "values set must be empty for exists and does not exist"
            )
        )
    elif req.operator in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                FieldError.invalid(
                    values_path, values, "for 'Gt', 'Lt' operators, exactly one value is required"
                )
            )
        for i, v in enumerate(values):
            try:
                int(v, 10)
            except ValueError:
                errs.append(
                    FieldError.invalid(
                        index(values_path, i),
                        v,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, v in enumerate(values):
        value_errs = is_valid_label_value(v)
        if value_errs:
            errs.append(FieldError.invalid(index(values_path, i), v, "; ".join(value_errs)))
    return errs


def _validate_node_selector_term(term: NodeSelectorTerm, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, req in enumerate(term.match_expressions):
        errs.extend(_validate_label_requirement(req, index(child(path, "matchExpressions"), i)))
    for i, req in enumerate(term.match_fields):
        p = index(child(path, "matchFields"), i)
        if req.operator in ("In", "NotIn"):
            if len(req.values) != 1:
                errs.append(
                    FieldError.invalid(child(p, "values"), req.values, "must have one element")
                )
        else:
            errs.append(
                FieldError.not_supported(child(p, "operator"), req.operator, ["In", "NotIn"])
            )
    return errs


def _validate_node_affinity(
    args: NodeAffinityArgs, path: str, _f: FeatureGates
) -> list[FieldError]:
    affinity = args.added_affinity
    if affinity is None:
        return []
    errs: list[FieldError] = []
    base = child(path, "addedAffinity")
    required = affinity.required_during_scheduling_ignored_during_execution
    if required is not None:
        terms_path = child(
            child(base, "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms"
        )
        for i, term in enumerate(required.node_selector_terms):
            if term.match_expressions or term.match_fields:
                errs.extend(_validate_node_selector_term(term, index(terms_path, i)))
    preferred_path = child(base, "preferredDuringSchedulingIgnoredDuringExecution")
    for i, pref in enumerate(affinity.preferred_during_scheduling_ignored_during_execution):
        term = pref.preference
        if pref.weight == 0 or not (term.match_expressions or term.match_fields):
            continue  # kube-scheduler ignores such terms
        errs.extend(
            _validate_node_selector_term(term, child(index(preferred_path, i), "preference"))
        )
    return errs


# --------------------------------------------------------------------------------------------
# Registry and decoding
# --------------------------------------------------------------------------------------------


class _InTreeArgs(NamedTuple):
    default: Callable[[Any, FeatureGates], None]
    validate: Callable[[Any, str, FeatureGates], list[FieldError]]


_IN_TREE_ARGS: dict[type[msgspec.Struct], _InTreeArgs] = {
    DefaultPreemptionArgs: _InTreeArgs(_default_nothing, _validate_default_preemption),
    DynamicResourcesArgs: _InTreeArgs(_default_dynamic_resources, _validate_dynamic_resources),
    InterPodAffinityArgs: _InTreeArgs(_default_nothing, _validate_inter_pod_affinity),
    NodeAffinityArgs: _InTreeArgs(_default_nothing, _validate_node_affinity),
    NodeResourcesBalancedAllocationArgs: _InTreeArgs(_default_balanced, _validate_balanced),
    NodeResourcesFitArgs: _InTreeArgs(_default_fit, _validate_fit),
    PodTopologySpreadArgs: _InTreeArgs(_default_topology_spread, _validate_topology_spread),
    VolumeBindingArgs: _InTreeArgs(_default_volume_binding, _validate_volume_binding),
}

PLUGIN_ARGS_TYPES: Mapping[str, type[msgspec.Struct]] = MappingProxyType(
    {
        "DefaultPreemption": DefaultPreemptionArgs,
        "DynamicResources": DynamicResourcesArgs,
        "InterPodAffinity": InterPodAffinityArgs,
        "NodeAffinity": NodeAffinityArgs,
        "NodeResourcesBalancedAllocation": NodeResourcesBalancedAllocationArgs,
        "NodeResourcesFit": NodeResourcesFitArgs,
        "PodTopologySpread": PodTopologySpreadArgs,
        "VolumeBinding": VolumeBindingArgs,
    }
)
"""In-tree plugin name → args type; kube-scheduler names each type ``<PluginName>Args``."""


@runtime_checkable
class ValidatingArgs(Protocol):
    """An args type that checks itself after decoding and defaulting.

    A plugin outside this package may give its args struct a ``validate`` method; it receives the
    path of the args object (``profiles[0].pluginConfig[3].args``) and returns the problems found,
    each a :class:`FieldError` (or a ``(path, message)`` pair) whose path extends that one.
    :func:`decode_args` calls it and raises them together with any decoding errors.
    """

    def validate(self, path: str) -> Iterable[FieldError | tuple[str, str]]:
        """Return the problems with these args (empty when they are fine)."""
        ...


A = TypeVar("A", bound=msgspec.Struct)


def _strip_type_meta(
    args_type: type[msgspec.Struct], raw: Mapping[str, Any], path: str, errors: list[FieldError]
) -> dict[str, Any]:
    """Accept and check ``apiVersion``/``kind`` inside in-tree args, as kube-scheduler does."""
    data = dict(raw)
    kind = data.pop("kind", None)
    api_version = data.pop("apiVersion", None)
    expected_kind = args_type.__name__
    if kind not in (None, "") and kind != expected_kind:
        errors.append(FieldError.invalid(child(path, "kind"), kind, f'must be "{expected_kind}"'))
    if api_version not in (None, "") and api_version != API_VERSION:
        errors.append(
            FieldError.invalid(child(path, "apiVersion"), api_version, f'must be "{API_VERSION}"')
        )
    return data


def default_args(args: A, features: FeatureGates | None = None) -> A:
    """A copy of ``args`` with kube-scheduler's defaults filled in (in-tree args types only;
    others are returned as a copy, their defaults being the struct's own)."""
    out = copy.deepcopy(args)
    spec = _IN_TREE_ARGS.get(type(args))
    if spec is not None:
        spec.default(out, features or DEFAULT_FEATURE_GATES)
    return out


def validate_args(
    args: msgspec.Struct, path: str = "args", features: FeatureGates | None = None
) -> list[FieldError]:
    """The problems with decoded, defaulted ``args``; ``path`` is where the args object sits.

    In-tree args get kube-scheduler's checks; any other type is checked by its own
    ``validate(path)`` method if it has one (see :class:`ValidatingArgs`).
    """
    spec = _IN_TREE_ARGS.get(type(args))
    if spec is not None:
        return spec.validate(args, path, features or DEFAULT_FEATURE_GATES)
    if isinstance(args, ValidatingArgs):
        return [e if isinstance(e, FieldError) else FieldError(*e) for e in args.validate(path)]
    return []


def decode_args(
    args_type: type[A],
    raw: Mapping[str, Any] | msgspec.Struct | None,
    path: str = "args",
    *,
    features: FeatureGates | None = None,
    validate: bool = True,
) -> A:
    """Decode a plugin's raw args into ``args_type``, apply defaults, and validate them.

    ``raw`` is the ``args`` mapping of a ``pluginConfig`` entry (``None`` when the entry has no
    args, which means all defaults), or an already typed value. ``path`` is where that mapping
    sits in the configuration, for example ``profiles[0].pluginConfig[1].args``; every error names
    a field below it, such as ``profiles[0].pluginConfig[1].args.scoringStrategy.resources[0]
    .weight``.

    Works for the in-tree args types (:data:`PLUGIN_ARGS_TYPES`), which get kube-scheduler's
    defaults and validation and may carry ``apiVersion``/``kind``, and for any other
    ``msgspec.Struct``: declare it with ``forbid_unknown_fields=True`` for strict decoding, give
    fields defaults, and add a ``validate(path)`` method (:class:`ValidatingArgs`) for range
    checks. All problems are raised at once as a :class:`ConfigError`.
    """
    features = features or DEFAULT_FEATURE_GATES
    errors: list[FieldError] = []
    value: A | None
    if isinstance(raw, args_type):
        value = copy.deepcopy(raw)
    elif isinstance(raw, msgspec.Struct):
        raise ConfigError(
            [
                FieldError.invalid(
                    path, type(raw).__name__, f"has to match plugin args {args_type.__name__}"
                )
            ]
        )
    else:
        data: Any = {} if raw is None else raw
        if args_type in _IN_TREE_ARGS and isinstance(data, Mapping):
            data = _strip_type_meta(args_type, data, path, errors)
        value, decode_errors = decode_struct(args_type, data, path)
        errors.extend(decode_errors)
    if value is None or errors:
        raise ConfigError(errors)
    spec = _IN_TREE_ARGS.get(args_type)
    if spec is not None:
        spec.default(value, features)
    if validate:
        errors.extend(validate_args(value, path, features))
    if errors:
        raise ConfigError(errors)
    return value
