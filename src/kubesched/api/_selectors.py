"""Label selectors, node selectors and tolerations, with kube-scheduler's matching rules."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kubesched.api._objects import (
    LabelSelector,
    LabelSelectorRequirement,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

TAINT_EFFECT_NO_SCHEDULE = "NoSchedule"
TAINT_EFFECT_PREFER_NO_SCHEDULE = "PreferNoSchedule"
TAINT_EFFECT_NO_EXECUTE = "NoExecute"


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """``metav1.LabelSelector`` semantics: ``None`` matches nothing, an empty selector everything.

    An invalid requirement (unknown operator, In without values) matches nothing, as the API's
    conversion to a ``labels.Selector`` would fail.
    """
    if selector is None:
        return False
    for key, value in selector.match_labels.items():
        if labels.get(key) != value:
            return False
    return all(_label_requirement(r, labels) for r in selector.match_expressions)


def _label_requirement(req: LabelSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    if op == "In":
        return bool(req.values) and labels.get(req.key) in req.values
    if op == "NotIn":
        return bool(req.values) and labels.get(req.key) not in req.values
    if op == "Exists":
        return not req.values and req.key in labels
    if op == "DoesNotExist":
        return not req.values and req.key not in labels
    return False


def node_selector_requirement_matches(
    req: NodeSelectorRequirement, labels: Mapping[str, str]
) -> bool:
    """One ``matchExpressions`` entry of a node selector term against node labels."""
    op = req.operator
    value = labels.get(req.key)
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        if value is None or len(req.values) != 1:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def _field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    # Only metadata.name is a supported field, and only with In / NotIn of a single value.
    if req.key != "metadata.name" or len(req.values) != 1:
        return False
    if req.operator == "In":
        return node_name == req.values[0]
    if req.operator == "NotIn":
        return node_name != req.values[0]
    return False


def node_selector_term_matches(
    term: NodeSelectorTerm, labels: Mapping[str, str], node_name: str
) -> bool:
    """All requirements of the term hold; an empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(
        node_selector_requirement_matches(r, labels) for r in term.match_expressions
    ) and all(_field_requirement_matches(r, node_name) for r in term.match_fields)


def node_selector_matches(
    selector: NodeSelector, labels: Mapping[str, str], node_name: str
) -> bool:
    """Terms are ORed; a selector without terms matches no node."""
    return any(
        node_selector_term_matches(t, labels, node_name) for t in selector.node_selector_terms
    )


def toleration_tolerates_taint(toleration: Toleration, taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: empty effect and key act as wildcards."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def find_untolerated_taint(
    taints: Sequence[Taint], tolerations: Sequence[Toleration], effects: frozenset[str]
) -> Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates, if any."""
    for taint in taints:
        if taint.effect not in effects:
            continue
        if not any(toleration_tolerates_taint(t, taint) for t in tolerations):
            return taint
    return None
