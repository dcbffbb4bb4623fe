"""Label selectors, node selectors and tolerations, with kube-scheduler's matching rules."""

from __future__ import annotations

import functools
import re
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
    """One ``matchExpressions`` entry of a node selector term against node labels.

    A requirement the API would refuse to turn into a selector matches no node: an unknown
    operator, ``In``/``NotIn`` without values, ``Exists``/``DoesNotExist`` with values,
    ``Gt``/``Lt`` without exactly one integer, or a key or value that is not a valid label key
    or value.
    kube-scheduler drops the whole term in that case, which for ANDed requirements is the same.
    """
    if not node_selector_requirement_is_valid(req):
        return False
    return label_requirement_holds(req.operator, req.values, labels.get(req.key))


def node_selector_requirement_is_valid(req: NodeSelectorRequirement) -> bool:
    """Whether ``labels.NewRequirement`` accepts the requirement (see
    :func:`node_selector_requirement_matches`)."""
    op, values = req.operator, req.values
    if op in ("In", "NotIn"):
        ok = bool(values)
    elif op in ("Exists", "DoesNotExist"):
        ok = not values
    elif op in ("Gt", "Lt"):
        ok = len(values) == 1 and parse_int64(values[0]) is not None
    else:
        return False
    return ok and is_label_key(req.key) and all(is_label_value(v) for v in values)


def label_requirement_holds(op: str, values: Sequence[str], value: str | None) -> bool:
    """``labels.Requirement.Matches`` for a valid requirement, given the node's value of the key
    (``None`` when the node lacks the label)."""
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    have, want = parse_int64(value), parse_int64(values[0])
    if have is None or want is None:
        return False
    return have > want if op == "Gt" else have < want


_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(s: str) -> int | None:
    """Go's ``strconv.ParseInt(s, 10, 64)``: optional sign, decimal digits only, in range."""
    if _INT64_RE.fullmatch(s) is None:
        return None
    n = int(s)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")


@functools.lru_cache(maxsize=4096)
def is_label_key(key: str) -> bool:
    """A qualified name: ``[prefix/]name``, the prefix a DNS subdomain of at most 253 characters,
    the name at most 63 characters of ``[A-Za-z0-9-_.]`` starting and ending alphanumeric."""
    prefix, slash, name = key.partition("/") if "/" in key else ("", "", key)
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix)):
        return False
    return 0 < len(name) <= 63 and _NAME_RE.fullmatch(name) is not None


@functools.lru_cache(maxsize=4096)
def is_label_value(value: str) -> bool:
    """Empty, or at most 63 characters of ``[A-Za-z0-9-_.]`` starting and ending alphanumeric."""
    return value == "" or (len(value) <= 63 and _NAME_RE.fullmatch(value) is not None)


def node_field_value(key: str, node_name: str) -> str:
    """A node's value of a ``matchFields`` key: only ``metadata.name`` is a field; any other
    reads as empty, as in a ``fields.Set``."""
    return node_name if key == "metadata.name" else ""


def node_selector_field_requirement_is_valid(req: NodeSelectorRequirement) -> bool:
    """``matchFields`` entries take ``In`` or ``NotIn`` with exactly one value."""
    return req.operator in ("In", "NotIn") and len(req.values) == 1


def _field_requirement_matches(req: NodeSelectorRequirement, node_name: str) -> bool:
    if not node_selector_field_requirement_is_valid(req):
        return False
    equal = node_field_value(req.key, node_name) == req.values[0]
    return equal if req.operator == "In" else not equal


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
