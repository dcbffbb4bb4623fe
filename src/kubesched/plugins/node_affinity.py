"""NodeAffinity: pods choose nodes by their labels.

``spec.nodeSelector``, required and preferred node affinity, and the profile's own
``addedAffinity``, as kube-scheduler v1.34: docs/plugins/node-affinity.md.

PreFilter narrows the nodes when every required term pins ``metadata.name`` with ``In``. Filter
and Score are vectorized: each label requirement is evaluated once per distinct value of that
label across nodes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from kubesched.api import (
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    is_label_key,
    is_label_value,
    label_requirement_holds,
    node_field_value,
    parse_int64,
)
from kubesched.api import NodeAffinity as NodeAffinitySpec
from kubesched.config import NodeAffinityArgs, decode_args
from kubesched.framework import (
    MAX_NODE_SCORE,
    SKIP,
    ActionType,
    BoolArray,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScorePlugin,
    Status,
    node_for,
)
from kubesched.plugins.helper import as_objects, default_normalize_score

NAME = "NodeAffinity"

#: The node does not match the pod's nodeSelector or required node affinity.
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
#: The node does not match the required part of the plugin's ``addedAffinity``.
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
#: PreFilter: every required term pins node names, and no name satisfies them all.
ERR_REASON_CONFLICT = "pod affinity terms conflict"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

#: The only node field ``matchFields`` can refer to.
OBJECT_NAME_FIELD = "metadata.name"

_LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


# --- parsed selectors ---------------------------------------------------------------------------


def _label_mask(nodes: Nodes, key: str, values: Sequence[str], op: str) -> BoolArray:
    """Whether each node's value of label ``key`` satisfies ``op values``, one evaluation per
    distinct value of the label across all nodes."""

    def holds(value: str | None) -> bool:
        return label_requirement_holds(op, values, value)

    column = nodes.table.labels.get(key)
    if column is None:  # no node has ever had this label
        return np.full(len(nodes), holds(None), dtype=np.bool_)
    lut = np.fromiter(map(holds, column.values), dtype=np.bool_, count=len(column.values))
    return lut.take(nodes.gather(column.ids))


@dataclass(frozen=True, slots=True)
class _Requirement:
    """A validated ``matchExpressions`` (``field=False``) or ``matchFields`` entry."""

    key: str
    op: str
    values: tuple[str, ...]
    field: bool = False

    def holds(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.field:
            equal = node_field_value(self.key, node_name) == self.values[0]
            return equal if self.op == "In" else not equal
        return label_requirement_holds(self.op, self.values, labels.get(self.key))

    def mask(self, nodes: Nodes) -> BoolArray:
        if not self.field:
            return _label_mask(nodes, self.key, self.values, self.op)
        want = self.values[0]
        if self.key == OBJECT_NAME_FIELD:
            slot = nodes.snapshot.slot_of(want)
            equal = np.zeros(len(nodes), dtype=np.bool_) if slot is None else nodes.slots == slot
        else:
            equal = np.full(len(nodes), want == "", dtype=np.bool_)
        return equal if self.op == "In" else ~equal


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """A parsed node selector term: all requirements must hold."""

    requirements: tuple[_Requirement, ...]

    def matches(self, node: Node) -> bool:
        labels, name = node.metadata.labels, node.metadata.name
        return all(r.holds(labels, name) for r in self.requirements)

    def mask(self, nodes: Nodes) -> BoolArray:
        out = self.requirements[0].mask(nodes)
        for r in self.requirements[1:]:
            out &= r.mask(nodes)
        return out


def _requirement_errors(req: NodeSelectorRequirement, path: str, field: bool) -> list[str]:
    """Why the API would refuse the requirement, as Kubernetes field errors (empty: valid)."""
    op, values = req.operator, req.values
    if field:
        if len(values) != 1:
            return [f"{path}.values: Invalid value: {values!r}: must have one element"]
        if op not in ("In", "NotIn"):
            return [f'{path}.operator: Invalid value: "{op}": not a valid selector operator']
        return []
    if op not in _LABEL_OPERATORS:
        return [f'{path}.operator: Unsupported value: "{op}"']
    errs = []
    if not is_label_key(req.key):
        errs.append(f'{path}.key: Invalid value: "{req.key}": must be a valid label key')
    if op in ("In", "NotIn") and not values:
        errs.append(
            f"{path}.values: Invalid value: []: for 'in', 'notin' operators, "
            "values set can't be empty"
        )
    elif op in ("Exists", "DoesNotExist") and values:
        errs.append(
            f"{path}.values: Invalid value: {values!r}: values set must be empty for exists "
            "and does not exist"
        )
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                f"{path}.values: Invalid value: {values!r}: for 'Gt', 'Lt' operators, "
                "exactly one value is required"
            )
        elif parse_int64(values[0]) is None:
            errs.append(
                f"{path}.values[0]: Invalid value: {values!r}: for 'Gt', 'Lt' operators, "
                "the value must be an integer"
            )
    errs.extend(
        f'{path}.values[{i}]: Invalid value: "{v}": must be a valid label value'
        for i, v in enumerate(values)
        if not is_label_value(v)
    )
    return errs


def parse_term(term: NodeSelectorTerm, path: str = "") -> tuple[SelectorTerm | None, list[str]]:
    """A term as :class:`SelectorTerm`, or ``None`` and the errors that make it invalid."""
    reqs: list[_Requirement] = []
    errs: list[str] = []
    for kind, entries, field in (
        ("matchExpressions", term.match_expressions, False),
        ("matchFields", term.match_fields, True),
    ):
        for i, r in enumerate(entries):
            e = _requirement_errors(r, f"{path}.{kind}[{i}]" if path else f"{kind}[{i}]", field)
            errs.extend(e)
            if not e:
                reqs.append(_Requirement(r.key, r.operator, tuple(r.values), field))
    if errs:
        return None, errs
    return SelectorTerm(tuple(reqs)), []


def _is_empty(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


@dataclass(frozen=True, slots=True)
class NodeSelectorMatcher:
    """A parsed ``NodeSelector``: terms ORed. Empty and invalid terms match nothing; ``errors``
    lists why invalid ones were dropped (kube-scheduler's ``LazyErrorNodeSelector``)."""

    terms: tuple[SelectorTerm, ...]
    errors: tuple[str, ...] = ()

    @classmethod
    def parse(cls, selector: NodeSelector, path: str = "nodeSelectorTerms") -> NodeSelectorMatcher:
        terms: list[SelectorTerm] = []
        errors: list[str] = []
        for i, term in enumerate(selector.node_selector_terms):
            if _is_empty(term):
                continue
            parsed, errs = parse_term(term, f"{path}[{i}]")
            if parsed is None:
                errors.extend(errs)
            else:
                terms.append(parsed)
        return cls(tuple(terms), tuple(errors))

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)

    def mask(self, nodes: Nodes) -> BoolArray:
        out = np.zeros(len(nodes), dtype=np.bool_)
        for t in self.terms:
            out |= t.mask(nodes)
        return out


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """What a node must satisfy for a pod: ``spec.nodeSelector`` (every label equal) and, if
    set, the required node affinity. ``GetRequiredNodeAffinity`` upstream."""

    node_selector: tuple[tuple[str, str], ...]
    affinity: NodeSelectorMatcher | None

    @classmethod
    def of(cls, pod: Pod) -> RequiredNodeAffinity:
        a = pod.spec.affinity
        required = (
            a.node_affinity.required_during_scheduling_ignored_during_execution
            if (a is not None and a.node_affinity is not None)
            else None
        )
        return cls(
            tuple(pod.spec.node_selector.items()),
            None if required is None else NodeSelectorMatcher.parse(required),
        )

    def matches(self, node: Node) -> bool:
        labels = node.metadata.labels
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return self.affinity is None or self.affinity.matches(node)

    def match_error(self, node: Node) -> bool:
        """Whether matching ``node`` fails with an error: the nodeSelector holds, the affinity
        does not, and some of its terms were dropped as invalid. kube-scheduler then returns
        the parse errors along with ``false``; queueing hints answer Queue to that."""
        if self.affinity is None or not self.affinity.errors:
            return False
        labels = node.metadata.labels
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return not self.affinity.matches(node)

    def mask(self, nodes: Nodes) -> BoolArray:
        out = np.ones(len(nodes), dtype=np.bool_)
        for key, value in self.node_selector:
            out &= _label_mask(nodes, key, (value,), "In")
        if self.affinity is not None:
            out &= self.affinity.mask(nodes)
        return out


@dataclass(frozen=True, slots=True)
class PreferredTerms:
    """Weighted preferred terms; a node's score is the sum of the weights of those it matches.
    Terms with weight 0 or no requirements are ignored."""

    terms: tuple[tuple[int, SelectorTerm], ...]

    @classmethod
    def parse(cls, terms: Sequence[PreferredSchedulingTerm], path: str = "") -> PreferredTerms:
        """Raises ``ValueError`` naming every invalid term (kube-scheduler refuses them all)."""
        parsed: list[tuple[int, SelectorTerm]] = []
        errors: list[str] = []
        for i, t in enumerate(terms):
            if t.weight == 0 or _is_empty(t.preference):
                continue
            term, errs = parse_term(t.preference, f"{path}[{i}]")
            if term is None:
                errors.extend(errs)
            else:
                parsed.append((t.weight, term))
        if errors:
            raise ValueError(
                ", ".join(errors) if len(errors) == 1 else "[" + ", ".join(errors) + "]"
            )
        return cls(tuple(parsed))

    def score(self, node: Node) -> int:
        return sum(w for w, t in self.terms if t.matches(node))

    def scores(self, nodes: Nodes) -> IntArray:
        out = np.zeros(len(nodes), dtype=np.int64)
        for w, t in self.terms:
            out += t.mask(nodes) * np.int64(w)
        return out


def _spec_affinity(value: Any) -> NodeAffinitySpec:
    """The args' ``addedAffinity`` (config types) as the API's node affinity type."""
    converted: NodeAffinitySpec = msgspec.convert(msgspec.to_builtins(value), NodeAffinitySpec)
    return converted


# --- the plugin ---------------------------------------------------------------------------------


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    """Required node affinity and nodeSelector as a filter; preferred node affinity as a score."""

    name = NAME
    node_local = True
    node_local_reads_pods = False
    args_type = NodeAffinityArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(NodeAffinityArgs, args)
        super().__init__(handle, decoded)
        #: The required part of ``addedAffinity``, checked for every pod before its own.
        self.added_node_selector: NodeSelectorMatcher | None = None
        #: The preferred part of ``addedAffinity``, added to every pod's score.
        self.added_preferred: PreferredTerms | None = None
        if decoded.added_affinity is None:
            return
        added = _spec_affinity(decoded.added_affinity)
        base = "addedAffinity"
        required = added.required_during_scheduling_ignored_during_execution
        if required is not None:
            path = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            matcher = NodeSelectorMatcher.parse(required, path)
            if matcher.errors:
                raise ValueError("parsing " + "; ".join(matcher.errors))
            self.added_node_selector = matcher
        preferred = added.preferred_during_scheduling_ignored_during_execution
        if preferred:
            path = f"{base}.preferredDuringSchedulingIgnoredDuringExecution"
            self.added_preferred = PreferredTerms.parse(preferred, path)

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        a = pod.spec.affinity
        return msgspec.json.encode((pod.spec.node_selector, a and a.node_affinity))

    # -- PreFilter / Filter --------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        a = pod.spec.affinity
        required = (
            a.node_affinity.required_during_scheduling_ignored_during_execution
            if a is not None and a.node_affinity is not None
            else None
        )
        if required is None and self.added_node_selector is None and not pod.spec.node_selector:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, RequiredNodeAffinity.of(pod))
        if required is None or not required.node_selector_terms:
            return None, None
        # Terms are ORed, the requirements in a term ANDed: the candidates are the union over
        # terms of the names each term pins. One term pinning no name leaves every node open.
        names: set[str] | None = None
        for term in required.node_selector_terms:
            term_names: set[str] | None = None
            for r in term.match_fields:
                if r.key == OBJECT_NAME_FIELD and r.operator == "In":
                    term_names = set(r.values) if term_names is None else term_names & set(r.values)
            if term_names is None:
                return None, None
            names = term_names if names is None else names | term_names
        if names is not None and not names:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return (PreFilterResult(names), None) if names else (None, None)

    def _required(self, state: CycleState, pod: Pod) -> RequiredNodeAffinity:
        s = state.get(PRE_FILTER_STATE_KEY)
        # Without PreFilter (not enabled, or called directly) compute it here.
        return s if isinstance(s, RequiredNodeAffinity) else RequiredNodeAffinity.of(pod)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        n = node_for(node)
        if self.added_node_selector is not None and not self.added_node_selector.matches(n):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
        if not self._required(state, pod).matches(n):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        # 0: passes, 1: fails the added affinity (checked first), 2: fails the pod's own.
        ids = np.where(self._required(state, pod).mask(nodes), 0, 2).astype(np.int32)
        if self.added_node_selector is not None:
            ids[~self.added_node_selector.mask(nodes)] = 1
        return NodeStatuses(
            ids,
            [
                None,
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED),
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD),
            ],
        )

    # -- PreScore / Score ----------------------------------------------------------------------

    @staticmethod
    def _pod_preferred(pod: Pod) -> PreferredTerms | None:
        a = pod.spec.affinity
        if a is None or a.node_affinity is None:
            return None
        terms = a.node_affinity.preferred_during_scheduling_ignored_during_execution
        return PreferredTerms.parse(terms) if terms else None

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        try:
            preferred = self._pod_preferred(pod)
        except ValueError as e:
            return Status.as_error(e)
        if preferred is None and self.added_preferred is None:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(preferred))
        return None

    def _preferred(self, state: CycleState, pod: Pod) -> list[PreferredTerms] | Status:
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, _PreScoreState):
            pod_terms = s.preferred
        else:  # PreScore not run: compute here
            try:
                pod_terms = self._pod_preferred(pod)
            except ValueError as e:
                return Status.as_error(e)
        return [t for t in (self.added_preferred, pod_terms) if t is not None]

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        preferred = self._preferred(state, pod)
        if isinstance(preferred, Status):
            return 0, preferred
        n = node_for(node)
        return sum(t.score(n) for t in preferred), None

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        out = np.zeros(len(nodes), dtype=np.int64)
        preferred = self._preferred(state, pod)
        if isinstance(preferred, Status):
            return out, preferred
        for t in preferred:
            out += t.scores(nodes)
        return out, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only a new node or a label change can make a node match.
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self.is_schedulable_after_node_change,
            )
        ]

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node is added that matches, or an update makes a node match."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        if self.added_node_selector is not None and not self.added_node_selector.matches(modified):
            return QueueingHint.SKIP
        required = RequiredNodeAffinity.of(pod)
        if required.match_error(modified):
            return QueueingHint.QUEUE
        if not required.matches(modified):
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        if required.match_error(original):
            return QueueingHint.QUEUE
        # An update: only a change from not matching to matching helps.
        return QueueingHint.SKIP if required.matches(original) else QueueingHint.QUEUE


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredTerms | None
