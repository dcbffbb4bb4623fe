"""InterPodAffinity: pods choose nodes by the pods already running near them.

Required affinity and anti-affinity, the existing pods' anti-affinity (Filter) and preferred
terms (Score), as kube-scheduler v1.34: docs/plugins/inter-pod-affinity.md. A front end that
takes pods from elsewhere than the API server applies :func:`apply_match_label_keys` first.

The counting is vectorized: existing pods are rows of the snapshot's :class:`PodTable`, grouped by
namespace, labels and affinity; a term is evaluated once per group, and the matches of each
domain come from ``np.bincount`` over the rows' node label ids.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np

from kubesched import KubeschedError
from kubesched.api import (
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    WeightedPodAffinityTerm,
)
from kubesched.config import (
    InterPodAffinityArgs,
    decode_args,
    is_qualified_name,
    is_valid_label_value,
)
from kubesched.framework import (
    MAX_NODE_SCORE,
    SKIP,
    ActionType,
    AffinityClass,
    BoolArray,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    DomainTally,
    EnqueueExtensions,
    FilterPlugin,
    GroupMasks,
    GroupWeight,
    Handle,
    IntArray,
    KeptDomainCounts,
    NodeInfo,
    Nodes,
    NodeStatuses,
    NodeTable,
    PodGroup,
    PodInfo,
    PodTable,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScorePlugin,
    Snapshot,
    Status,
)
from kubesched.plugins.helper import as_objects

NAME = "InterPodAffinity"

#: Filter: the node's domain holds no pod matching the incoming pod's required affinity.
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
#: Filter: the node's domain holds a pod the incoming pod's required anti-affinity matches.
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
#: Filter: a pod in the node's domain has required anti-affinity matching the incoming pod.
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME


# --- label selectors ----------------------------------------------------------------------------


class SelectorError(KubeschedError, ValueError):
    """A label selector the API would not turn into a ``labels.Selector``."""


_IN, _NOT_IN, _EXISTS, _DOES_NOT_EXIST = 0, 1, 2, 3
_OPERATORS = {"In": _IN, "NotIn": _NOT_IN, "Exists": _EXISTS, "DoesNotExist": _DOES_NOT_EXIST}

#: (key, operator, values)
Requirement = tuple[str, int, frozenset[str]]


@dataclass(frozen=True, slots=True)
class Selector:
    """A parsed label selector (``labels.Selector``): requirements ANDed.

    ``nothing`` is the selector of a ``nil`` labelSelector: it matches no pod. An empty selector
    (``{}``) has no requirements and matches every pod; it is :attr:`empty`.
    """

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        """``labels.Selector.Empty()``: no requirements (and not the ``nil`` selector)."""
        return not self.nothing and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for key, op, values in self.requirements:
            value = labels.get(key)
            if op == _IN:
                if value is None or value not in values:
                    return False
            elif op == _NOT_IN:
                if value is not None and value in values:
                    return False
            elif op == _EXISTS:
                if value is None:
                    return False
            elif value is not None:
                return False
        return True

    def group_mask(self, pods: PodTable) -> BoolArray:
        """:meth:`matches` for the labels of every group of ``pods`` (by group id), evaluated
        once per distinct label value."""
        if self.nothing:
            return np.zeros(len(pods.groups), dtype=np.bool_)
        out = pods.live_mask()
        for key, op, values in self.requirements:
            out &= pods.label_mask(key, _requirement_holds(op, values))
        return out

    def and_labels(self, labels: Mapping[str, str]) -> Selector:
        """``mergeLabelSetWithSelector``: ``labels`` as equality requirements ANDed with this
        selector; the ``nil`` selector stays ``nil``."""
        if self.nothing:
            return self
        extra = tuple((k, _IN, frozenset((v,))) for k, v in sorted(labels.items()))
        return Selector(extra + self.requirements)

    @classmethod
    def from_set(cls, labels: Mapping[str, str]) -> Selector:
        """``labels.Set(...).AsSelector()``: every label equal."""
        return cls(tuple((k, _IN, frozenset((v,))) for k, v in sorted(labels.items())))

    @classmethod
    def parse(cls, selector: LabelSelector | None) -> Selector:
        """``metav1.LabelSelectorAsSelector``; raises :class:`SelectorError` as it would fail."""
        if selector is None:
            return NOTHING
        reqs: list[Requirement] = []
        for key in sorted(selector.match_labels):
            value = selector.match_labels[key]
            _check_requirement(key, "In", [value], exact=True)
            reqs.append((key, _IN, frozenset((value,))))
        for expr in selector.match_expressions:
            op = _OPERATORS.get(expr.operator)
            if op is None:
                raise SelectorError(f'"{expr.operator}" is not a valid label selector operator')
            _check_requirement(expr.key, expr.operator, expr.values)
            reqs.append((expr.key, op, frozenset(expr.values)))
        return cls(tuple(reqs))


def _requirement_holds(op: int, values: frozenset[str]) -> Callable[[str | None], bool]:
    def holds(value: str | None) -> bool:
        if op == _IN:
            return value is not None and value in values
        if op == _NOT_IN:
            return value is None or value not in values
        if op == _EXISTS:
            return value is not None
        return value is None

    return holds


NOTHING = Selector(nothing=True)
EVERYTHING = Selector()


def _go_strings(values: Sequence[str]) -> str:
    if not values:
        return "[]string(nil)"
    return "[]string{" + ", ".join(f'"{v}"' for v in values) + "}"


def _check_requirement(key: str, op: str, values: Sequence[str], *, exact: bool = False) -> None:
    """``labels.NewRequirement``'s validation, with its field errors."""
    error = _requirement_error(key, op, tuple(values), exact)
    if error is not None:
        raise SelectorError(error)


@functools.lru_cache(maxsize=4096)
def _requirement_error(key: str, op: str, values: tuple[str, ...], exact: bool) -> str | None:
    """What :func:`_check_requirement` raises, or ``None``. Memoized: the pods of a workload
    repeat a few requirements, and checking names against the label syntax is most of the cost
    of parsing a pod's selectors, which happens several times per scheduling cycle."""
    errs: list[str] = []
    key_errs = is_qualified_name(key)
    if key_errs:
        errs.append(f'key: Invalid value: "{key}": ' + "; ".join(key_errs))
    if exact:
        if len(values) != 1:
            errs.append(
                f"values: Invalid value: {_go_strings(values)}: "
                "exact-match compatibility requires one single value"
            )
    elif op in ("In", "NotIn") and not values:
        errs.append(
            f"values: Invalid value: {_go_strings(values)}: "
            "for 'in', 'notin' operators, values set can't be empty"
        )
    elif op in ("Exists", "DoesNotExist") and values:
        errs.append(
            f"values: Invalid value: {_go_strings(values)}: "
            "values set must be empty for exists and does not exist"
        )
    for i, v in enumerate(values):
        value_errs = is_valid_label_value(v)
        if value_errs:
            errs.append(f'values[{i}][{key}]: Invalid value: "{v}": ' + "; ".join(value_errs))
    if not errs:
        return None
    return errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"


# --- affinity terms -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A parsed ``PodAffinityTerm`` (``framework.AffinityTerm``)."""

    namespaces: frozenset[str]
    selector: Selector
    topology_key: str
    namespace_selector: Selector

    def matches(
        self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether a pod in ``namespace`` with ``labels`` matches; ``ns_labels`` are the labels
        of that namespace (``None``: unknown, read as none)."""
        if namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(labels)
        return False

    def group_mask(self, pods: PodTable) -> BoolArray:
        """:meth:`matches` for every group of ``pods``, with no namespace labels (the term of an
        incoming pod, whose namespaceSelector is merged into its namespaces)."""
        if self.namespace_selector.matches({}):
            in_namespaces = pods.live_mask()
        else:
            in_namespaces = pods.namespace_mask(self.namespaces)
        return in_namespaces & self.selector.group_mask(pods)


@dataclass(frozen=True, slots=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


def _affinity_term(namespace: str, term: PodAffinityTerm) -> AffinityTerm:
    selector = Selector.parse(term.label_selector)
    if not term.namespaces and term.namespace_selector is None:
        namespaces = frozenset((namespace,))
    else:
        namespaces = frozenset(term.namespaces)
    ns_selector = Selector.parse(term.namespace_selector)
    return AffinityTerm(namespaces, selector, term.topology_key, ns_selector)


@dataclass(frozen=True, slots=True)
class PodAffinityTerms:
    """A pod's four lists of terms, parsed (``PodInfo``'s affinity fields). A list that fails
    to parse is empty and its error is in ``errors``."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedAffinityTerm, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def error(self) -> str:
        """The errors as one message (an aggregate: ``[a, b]`` when several)."""
        if len(self.errors) <= 1:
            return "".join(self.errors)
        return "[" + ", ".join(self.errors) + "]"

    @classmethod
    def of(cls, pod: Pod) -> PodAffinityTerms:
        a = pod.spec.affinity
        if a is None or not (_has_terms(a.pod_affinity) or _has_terms(a.pod_anti_affinity)):
            # Most pods: nothing to parse (asked once or more per pod and cycle).
            return NO_TERMS
        pa, paa = a.pod_affinity, a.pod_anti_affinity
        ns = pod.metadata.namespace
        errors: list[str] = []

        def required(what: str, terms: Sequence[PodAffinityTerm]) -> tuple[AffinityTerm, ...]:
            try:
                return tuple(_affinity_term(ns, t) for t in terms)
            except SelectorError as e:
                errors.append(f"{what}: {e}")
                return ()

        def preferred(
            what: str, terms: Sequence[WeightedPodAffinityTerm]
        ) -> tuple[WeightedAffinityTerm, ...]:
            try:
                return tuple(
                    WeightedAffinityTerm(_affinity_term(ns, t.pod_affinity_term), t.weight)
                    for t in terms
                )
            except SelectorError as e:
                errors.append(f"{what}: {e}")
                return ()

        out = cls(
            required(
                "requiredAffinityTerms",
                pa.required_during_scheduling_ignored_during_execution if pa else [],
            ),
            required(
                "requiredAntiAffinityTerms",
                paa.required_during_scheduling_ignored_during_execution if paa else [],
            ),
            preferred(
                "preferredAffinityTerms",
                pa.preferred_during_scheduling_ignored_during_execution if pa else [],
            ),
            preferred(
                "preferredAntiAffinityTerms",
                paa.preferred_during_scheduling_ignored_during_execution if paa else [],
            ),
        )
        return replace(out, errors=tuple(errors)) if errors else out


#: The terms of a pod without pod affinity or anti-affinity terms.
NO_TERMS = PodAffinityTerms()


def _has_terms(p: PodAffinity | None) -> bool:
    return p is not None and bool(
        p.required_during_scheduling_ignored_during_execution
        or p.preferred_during_scheduling_ignored_during_execution
    )


def class_terms(cls: AffinityClass) -> PodAffinityTerms:
    """The parsed terms of the pods of an affinity class, kept on the class."""
    terms = cls.memo.get(NAME)
    if not isinstance(terms, PodAffinityTerms):
        terms = cls.memo[NAME] = PodAffinityTerms.of(cls.pod)
    return terms


def pod_matches_all_terms(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """``podMatchesAllAffinityTerms``: there are terms and ``pod`` matches every one (namespace
    labels not consulted: incoming terms have their namespaceSelector merged)."""
    if not terms:
        return False
    ns, labels = pod.metadata.namespace, pod.metadata.labels
    return all(t.matches(ns, labels, None) for t in terms)


def apply_match_label_keys(pod: Pod) -> Pod:
    """What the API server does to a new pod's affinity terms: each ``matchLabelKeys`` key the
    pod has a label for becomes ``key In (value)`` in the term's labelSelector, each
    ``mismatchLabelKeys`` key ``key NotIn (value)``. Terms without a labelSelector are left
    alone. For front ends that take pods not created through an API server."""
    a = pod.spec.affinity
    if a is None or (a.pod_affinity is None and a.pod_anti_affinity is None):
        return pod
    labels = pod.metadata.labels

    def term(t: PodAffinityTerm) -> PodAffinityTerm:
        if (not t.match_label_keys and not t.mismatch_label_keys) or t.label_selector is None:
            return t
        extra = [
            LabelSelectorRequirement(key=k, operator="In", values=[labels[k]])
            for k in t.match_label_keys
            if k in labels
        ] + [
            LabelSelectorRequirement(key=k, operator="NotIn", values=[labels[k]])
            for k in t.mismatch_label_keys
            if k in labels
        ]
        if not extra:
            return t
        sel = msgspec.structs.replace(
            t.label_selector, match_expressions=[*t.label_selector.match_expressions, *extra]
        )
        return msgspec.structs.replace(t, label_selector=sel)

    def terms(p: Any) -> Any:
        if p is None:
            return None
        return msgspec.structs.replace(
            p,
            required_during_scheduling_ignored_during_execution=[
                term(t) for t in p.required_during_scheduling_ignored_during_execution
            ],
            preferred_during_scheduling_ignored_during_execution=[
                msgspec.structs.replace(t, pod_affinity_term=term(t.pod_affinity_term))
                for t in p.preferred_during_scheduling_ignored_during_execution
            ],
        )

    affinity = msgspec.structs.replace(
        a, pod_affinity=terms(a.pod_affinity), pod_anti_affinity=terms(a.pod_anti_affinity)
    )
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, affinity=affinity))


# --- counting per topology domain ---------------------------------------------------------------

#: What :meth:`InterPodAffinity._matching_classes` matches: existing pods' required
#: anti-affinity terms (PreFilter), or their terms that weigh in the score (PreScore).
_REQUIRED_ANTI = "required anti-affinity"
_SCORING = "scoring"
#: Pod namespaces and labels whose matching classes are kept, and terms with their
#: namespaceSelector merged.
_MATCHED_KEPT = 1024

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Topology key -> count (or score) per value id of the node table's column for that key.
DomainCounts = dict[str, IntArray]


def _value_ids(table: NodeTable, key: str, slots: IntArray) -> IntArray:
    """The label value id of ``key`` at each of ``slots``; 0 where the node lacks the label."""
    col = table.labels.get(key)
    if col is None:
        return np.zeros(len(slots), dtype=np.int64)
    return col.ids.take(slots).astype(np.int64)


def _gather(counts: IntArray | None, ids: IntArray) -> IntArray:
    """``counts[ids]``, 0 for ids past its end (values interned after it was computed)."""
    if counts is None:
        return np.zeros(len(ids), dtype=np.int64)
    if len(ids) and int(ids.max()) >= len(counts):
        padded = np.zeros(int(ids.max()) + 1, dtype=np.int64)
        padded[: len(counts)] = counts
        counts = padded
    return counts.take(ids)


class _Memo(Generic[K, V]):
    """Values kept while the versions they were made under stay the same, at most
    :data:`_MATCHED_KEPT` of them (all dropped at once beyond)."""

    __slots__ = ("_at", "_values")

    def __init__(self) -> None:
        self._at: Hashable = None
        self._values: dict[K, V] = {}

    def get(self, versions: Hashable, key: K) -> V | None:
        """The value kept for ``key``; ``None`` if there is none under ``versions``."""
        if versions != self._at:
            self._values.clear()
            self._at = versions
        return self._values.get(key)

    def put(self, key: K, value: V) -> None:
        if len(self._values) >= _MATCHED_KEPT:
            self._values.clear()
        self._values[key] = value


def _add_tally(counts: DomainCounts, key: str, tally: DomainTally | None, factor: int = 1) -> bool:
    """Add the tally's weighted pods (times ``factor``) to ``counts[key]``, pods on nodes
    without the label left out. Returns whether some selected pod was on a node with it."""
    if tally is None or not tally.selected:
        return False
    added = tally.weighted * factor if factor != 1 else tally.weighted.copy()
    added[0] = 0
    have = counts.get(key)
    if have is None:
        counts[key] = added
    else:
        if len(have) < len(added):
            have = np.concatenate([have, np.zeros(len(added) - len(have), dtype=np.int64)])
        have[: len(added)] += added
        counts[key] = have
    return tally.hit


def _class_weights(pods: PodTable, weights: Mapping[int, int]) -> tuple[GroupWeight, GroupMasks]:
    """Pods weighted by their affinity class (``weights``: class id -> weight; classes not in
    it not selected), group by group and for every group id at once."""

    def weigh(group: PodGroup) -> tuple[bool, int]:
        w = weights.get(group.affinity_class)
        return (False, 0) if w is None else (True, w)

    def masks() -> tuple[BoolArray, IntArray | None]:
        by_class = np.zeros(len(pods.classes), dtype=np.int64)
        selected = np.zeros(len(pods.classes), dtype=np.bool_)
        for cid, w in weights.items():
            by_class[cid] = w
            selected[cid] = True
        group_class = pods.group_class[: len(pods.groups)]
        return selected.take(group_class), by_class.take(group_class)

    return weigh, masks


def _term_selects(terms: Sequence[AffinityTerm], pods: PodTable) -> tuple[GroupWeight, GroupMasks]:
    """The pods every one of ``terms`` (an incoming pod's, namespaces merged) selects, one each,
    group by group and for every group id at once."""

    def weigh(group: PodGroup) -> tuple[bool, int]:
        return all(t.matches(group.namespace, group.labels, None) for t in terms), 1

    def masks() -> tuple[BoolArray, IntArray | None]:
        lut = terms[0].group_mask(pods)
        for t in terms[1:]:
            lut &= t.group_mask(pods)
        return lut, None

    return weigh, masks


def _bump(counts: DomainCounts, table: NodeTable, node: Node, key: str, delta: int) -> None:
    """Add ``delta`` to the count of ``node``'s domain for ``key`` (no-op without the label)."""
    value = node.metadata.labels.get(key)
    col = table.labels.get(key)
    if value is None or col is None:
        return
    vid = col.id_of(value)
    if vid is None:
        return
    arr = counts.get(key)
    if arr is None or len(arr) <= vid:
        grown = np.zeros(len(col.values), dtype=np.int64)
        if arr is not None:
            grown[: len(arr)] = arr
        arr = counts[key] = grown
    arr[vid] += delta


def _any_nonzero(counts: DomainCounts) -> bool:
    """Whether some domain has a count (``len(topologyToMatchedTermCount) > 0``)."""
    # Most pods ask with no counts at all: no generator for them.
    return bool(counts) and any(np.count_nonzero(a) for a in counts.values())


def _clone(counts: DomainCounts) -> DomainCounts:
    return {k: v.copy() for k, v in counts.items()}


# --- state --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _PreFilterState:
    #: Existing pods' required anti-affinity terms matching the incoming pod, per domain.
    existing_anti_affinity: DomainCounts
    #: Pods matching all the incoming pod's required affinity terms, per domain (once per term).
    affinity: DomainCounts
    #: Pods matching the incoming pod's required anti-affinity terms, per domain and term.
    anti_affinity: DomainCounts
    affinity_terms: tuple[AffinityTerm, ...]
    anti_affinity_terms: tuple[AffinityTerm, ...]
    namespace_labels: Mapping[str, str] | None

    def clone(self) -> _PreFilterState:
        return _PreFilterState(
            _clone(self.existing_anti_affinity),
            _clone(self.affinity),
            _clone(self.anti_affinity),
            self.affinity_terms,
            self.anti_affinity_terms,
            self.namespace_labels,
        )


@dataclass(slots=True)
class _PreScoreState:
    #: Topology key -> summed weight per value id.
    topology_score: DomainCounts = field(default_factory=dict)


def _filter_statuses() -> list[Status | None]:
    """Filter verdicts by id (fresh each time: the runtime stamps its plugin name on them)."""
    return [
        None,
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH),
        Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
        Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
    ]


def _not_found(key: str) -> Status:
    return Status(Code.ERROR, f'error reading "{key}" from cycleState: not found')


# --- the plugin ---------------------------------------------------------------------------------


class InterPodAffinity(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    """Required pod (anti-)affinity as a filter, preferred (and symmetric) terms as a score."""

    name = NAME
    args_type = InterPodAffinityArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(InterPodAffinityArgs, args)
        super().__init__(handle, decoded)
        self.hard_pod_affinity_weight = int(decoded.hard_pod_affinity_weight)
        self.ignore_preferred_terms_of_existing_pods = bool(
            decoded.ignore_preferred_terms_of_existing_pods
        )
        self._kept = KeptDomainCounts()
        self._matched: _Memo[Hashable, dict[str, dict[int, int]]] = _Memo()
        self._merged: _Memo[AffinityTerm, AffinityTerm] = _Memo()

    @property
    def _snapshot(self) -> Snapshot:
        return self.handle.snapshot

    def _merge_namespaces(self, term: AffinityTerm) -> AffinityTerm:
        """``mergeAffinityTermNamespacesIfNotEmpty``: an incoming pod's namespaceSelector is
        turned into the names of the namespaces it selects now; an empty one (all namespaces)
        is kept."""
        if term.namespace_selector.empty:
            return term
        snap = self._snapshot
        # Every pod of a workload asks the same while the Namespaces stay as they are.
        merged = self._merged.get((snap, snap.namespaces_version), term)
        if merged is None:
            names = set(term.namespaces)
            for name, labels in snap.namespaces().items():
                if term.namespace_selector.matches(labels):
                    names.add(name)
            merged = replace(term, namespaces=frozenset(names), namespace_selector=NOTHING)
            self._merged.put(term, merged)
        return merged

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        terms = PodAffinityTerms.of(pod)
        if terms.errors:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {terms.error}")
        ns_labels = self._snapshot.namespace_labels(pod.metadata.namespace)
        existing = self._existing_anti_affinity_counts(pod, ns_labels)
        if (
            not terms.required_affinity
            and not terms.required_anti_affinity
            and not _any_nonzero(existing)
        ):
            return None, SKIP
        affinity = tuple(map(self._merge_namespaces, terms.required_affinity))
        anti = tuple(map(self._merge_namespaces, terms.required_anti_affinity))
        aff_counts, anti_counts = self._incoming_counts(affinity, anti)
        state.write(
            PRE_FILTER_STATE_KEY,
            _PreFilterState(existing, aff_counts, anti_counts, affinity, anti, ns_labels),
        )
        return None, None

    def _existing_anti_affinity_counts(
        self, pod: Pod, ns_labels: Mapping[str, str] | None
    ) -> DomainCounts:
        """For each existing pod with required anti-affinity, each of its terms matching
        ``pod`` counts once in the pod's domain for that term."""
        counts: DomainCounts = {}
        for key, per_class in self._matching_classes(_REQUIRED_ANTI, pod, ns_labels).items():
            self._add_by_class(counts, key, per_class)
        return counts

    def _matching_classes(
        self, kind: str, pod: Pod, ns_labels: Mapping[str, str] | None
    ) -> dict[str, dict[int, int]]:
        """Topology key -> affinity class id -> the summed weight of the class's terms of
        ``kind`` that select ``pod``: required anti-affinity terms 1 each; for scoring,
        required affinity terms ``hardPodAffinityWeight`` (when above 0), preferred ones their
        weight, preferred anti-affinity ones minus their weight. A class whose weights cancel
        out is in it with 0.

        Kept per kind and pod namespace and labels while the classes and the Namespaces stay
        as they are: pods of a workload ask the same, and every class's terms are matched."""
        snap = self._snapshot
        pods = snap.pods
        versions = (pods, pods.classes_version, snap.namespaces_version)
        ns, labels = pod.metadata.namespace, pod.metadata.labels
        memo_key = (kind, ns, tuple(labels.items()))
        hit = self._matched.get(versions, memo_key)
        if hit is not None:
            return hit
        found: list[tuple[int, str, int]] = []
        hard = self.hard_pod_affinity_weight
        for cls in pods.affinity_classes():
            terms = class_terms(cls)
            if kind == _REQUIRED_ANTI:
                for t in terms.required_anti_affinity:
                    if t.matches(ns, labels, ns_labels):
                        found.append((cls.cid, t.topology_key, 1))
                continue
            if hard > 0:
                for t in terms.required_affinity:
                    if t.matches(ns, labels, ns_labels):
                        found.append((cls.cid, t.topology_key, hard))
            for wt in terms.preferred_affinity:
                if wt.term.matches(ns, labels, ns_labels):
                    found.append((cls.cid, wt.term.topology_key, wt.weight))
            for wt in terms.preferred_anti_affinity:
                if wt.term.matches(ns, labels, ns_labels):
                    found.append((cls.cid, wt.term.topology_key, -wt.weight))
        weights: dict[str, dict[int, int]] = {}
        for cid, key, weight in found:
            per_class = weights.setdefault(key, {})
            per_class[cid] = per_class.get(cid, 0) + weight
        self._matched.put(memo_key, weights)
        return weights

    def _incoming_counts(
        self, affinity: Sequence[AffinityTerm], anti: Sequence[AffinityTerm]
    ) -> tuple[DomainCounts, DomainCounts]:
        pods = self._snapshot.pods
        aff_counts: DomainCounts = {}
        anti_counts: DomainCounts = {}
        if affinity:
            weigh, masks = _term_selects(affinity, pods)
            for t in affinity:
                tally = self._tally(affinity, t.topology_key, weigh, masks)
                _add_tally(aff_counts, t.topology_key, tally)
        for t in anti:
            weigh, masks = _term_selects((t,), pods)
            _add_tally(anti_counts, t.topology_key, self._tally((t,), t.topology_key, weigh, masks))
        return aff_counts, anti_counts

    def _tally(
        self, question: Hashable, key: str, weigh: GroupWeight, masks: GroupMasks
    ) -> DomainTally | None:
        """The pods ``question`` selects per domain of ``key`` (:class:`KeptDomainCounts`)."""
        snap = self._snapshot
        return self._kept.get(snap.table, snap.pods, question, key, weigh, masks)

    def _add_by_class(self, counts: DomainCounts, key: str, weights: Mapping[int, int]) -> bool:
        """Add the pods of the affinity classes in ``weights``, each with its class's weight,
        to ``counts[key]``; whether some was on a node with the label."""
        weigh, masks = _class_weights(self._snapshot.pods, weights)
        question = ("classes", tuple(sorted(weights.items())))
        return _add_tally(counts, key, self._tally(question, key, weigh, masks))

    def add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._update_with_pod(state, pod, to_add.pod, node, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._update_with_pod(state, pod, to_remove.pod, node, -1)

    def _update_with_pod(
        self, state: CycleState, pod: Pod, other: Pod, node: NodeInfo, delta: int
    ) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return _not_found(PRE_FILTER_STATE_KEY)
        n = node.node
        if n is None:
            return None
        table = self._snapshot.table
        ns, labels = pod.metadata.namespace, pod.metadata.labels
        for t in PodAffinityTerms.of(other).required_anti_affinity:
            if t.matches(ns, labels, s.namespace_labels):
                _bump(s.existing_anti_affinity, table, n, t.topology_key, delta)
        if pod_matches_all_terms(s.affinity_terms, other):
            for t in s.affinity_terms:
                _bump(s.affinity, table, n, t.topology_key, delta)
        o_ns, o_labels = other.metadata.namespace, other.metadata.labels
        for t in s.anti_affinity_terms:
            if t.matches(o_ns, o_labels, None):
                _bump(s.anti_affinity, table, n, t.topology_key, delta)
        return None

    # -- Filter --------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        verdict = self.filter_nodes(
            state, pod, Nodes(self._snapshot, np.array([node.slot], dtype=np.int64))
        )
        return verdict.statuses[int(verdict.ids[0])]

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return NodeStatuses.from_mask(
                np.ones(len(nodes), dtype=np.bool_), _not_found(PRE_FILTER_STATE_KEY)
            )
        table, slots = nodes.table, nodes.slots
        n = len(slots)
        ids = np.zeros(n, dtype=np.int32)
        if s.affinity_terms:
            fails = np.zeros(n, dtype=np.bool_)
            pods_exist = np.ones(n, dtype=np.bool_)
            for t in s.affinity_terms:
                vids = _value_ids(table, t.topology_key, slots)
                fails |= vids == 0
                pods_exist &= _gather(s.affinity.get(t.topology_key), vids) > 0
            if not pods_exist.all():
                # The first pod of a group whose affinity selects the group itself may go
                # wherever the topology labels are, as long as no pod matches anywhere.
                first_of_group = not _any_nonzero(s.affinity) and pod_matches_all_terms(
                    s.affinity_terms, pod
                )
                if not first_of_group:
                    fails |= ~pods_exist
            ids[fails] = 1
        if s.anti_affinity_terms and _any_nonzero(s.anti_affinity):
            bad = np.zeros(n, dtype=np.bool_)
            for t in s.anti_affinity_terms:
                vids = _value_ids(table, t.topology_key, slots)
                bad |= (vids != 0) & (_gather(s.anti_affinity.get(t.topology_key), vids) > 0)
            ids[(ids == 0) & bad] = 2
        if _any_nonzero(s.existing_anti_affinity):
            bad = np.zeros(n, dtype=np.bool_)
            for key, counts in s.existing_anti_affinity.items():
                vids = _value_ids(table, key, slots)
                bad |= (vids != 0) & (_gather(counts, vids) > 0)
            ids[(ids == 0) & bad] = 3
        return NodeStatuses(ids, _filter_statuses())

    # -- PreScore / Score ----------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        a = pod.spec.affinity
        has_preferred = a is not None and (
            (
                a.pod_affinity is not None
                and bool(a.pod_affinity.preferred_during_scheduling_ignored_during_execution)
            )
            or (
                a.pod_anti_affinity is not None
                and bool(a.pod_anti_affinity.preferred_during_scheduling_ignored_during_execution)
            )
        )
        if self.ignore_preferred_terms_of_existing_pods and not has_preferred:
            return SKIP
        terms = PodAffinityTerms.of(pod)
        if terms.errors:
            return Status(Code.ERROR, f"failed to parse pod: {terms.error}")
        topology: DomainCounts = {}
        matched = False
        if has_preferred:
            preferred = [
                (replace(w, term=self._merge_namespaces(w.term)), 1)
                for w in terms.preferred_affinity
            ] + [
                (replace(w, term=self._merge_namespaces(w.term)), -1)
                for w in terms.preferred_anti_affinity
            ]
            matched = self._score_incoming_terms(topology, preferred)
        ns_labels = self._snapshot.namespace_labels(pod.metadata.namespace)
        matched |= self._score_existing_terms(topology, pod, ns_labels)
        if not matched:
            return SKIP
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(topology))
        return None

    def _score_incoming_terms(
        self, topology: DomainCounts, preferred: Iterable[tuple[WeightedAffinityTerm, int]]
    ) -> bool:
        """The incoming pod's preferred terms: each existing pod a term matches adds (affinity)
        or takes (anti-affinity) the term's weight in the pod's domain."""
        pods = self._snapshot.pods
        matched = False
        for w, sign in preferred:
            t = w.term
            weigh, masks = _term_selects((t,), pods)
            tally = self._tally((t,), t.topology_key, weigh, masks)
            matched |= _add_tally(topology, t.topology_key, tally, sign * w.weight)
        return matched

    def _score_existing_terms(
        self, topology: DomainCounts, pod: Pod, ns_labels: Mapping[str, str] | None
    ) -> bool:
        """Existing pods' terms matching the incoming pod: their required affinity terms add
        ``hardPodAffinityWeight``, their preferred ones add or take their weight, in the
        existing pod's domain."""
        matched = False
        for key, per_class in self._matching_classes(_SCORING, pod, ns_labels).items():
            matched |= self._add_by_class(topology, key, per_class)
        return matched

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(
            state, pod, Nodes(self._snapshot, np.array([node.slot], dtype=np.int64))
        )
        return int(scores[0]), status

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        out = np.zeros(len(nodes), dtype=np.int64)
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return out, _not_found(PRE_SCORE_STATE_KEY)
        for key, scores in s.topology_score.items():
            out += _gather(scores, _value_ids(nodes.table, key, nodes.slots))
        return out, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return _not_found(PRE_SCORE_STATE_KEY)
        if not s.topology_score or not len(scores):
            return None
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff <= 0:
            scores[:] = 0
            return None
        # As Go: float64(MaxNodeScore) * (float64(s-min) / float64(max-min)), truncated.
        scaled = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))
        scores[:] = scaled.astype(np.int64)
        return None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A pod added, relabelled or deleted may be the one the rejected pod needs (or
            # was kept away by).
            ClusterEventWithHint(
                ClusterEvent(
                    "Pod", ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
                ),
                self.is_schedulable_after_pod_change,
            ),
            # A node added or relabelled may bring a topology domain.
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a scheduled pod appears (or is relabelled) matching the pod's affinity,
        stops matching its anti-affinity, is deleted while matching its anti-affinity or while
        its own anti-affinity matched the pod, or when the pod's own labels change."""
        try:
            original, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if (
            original is not None
            and modified is not None
            and modified.metadata.uid == pod.metadata.uid
            and original.metadata.labels != modified.metadata.labels
        ):
            # Existing pods' anti-affinity may no longer match the pod.
            return QueueingHint.QUEUE
        if (modified is not None and not modified.spec.node_name) or (
            original is not None and not original.spec.node_name
        ):
            return QueueingHint.SKIP
        terms = PodAffinityTerms.of(pod)
        if terms.errors:
            return QueueingHint.QUEUE
        affinity, anti = terms.required_affinity, terms.required_anti_affinity
        if modified is not None and original is not None:
            if not pod_matches_all_terms(affinity, original) and pod_matches_all_terms(
                affinity, modified
            ):
                return QueueingHint.QUEUE
            if pod_matches_all_terms(anti, original) and not pod_matches_all_terms(anti, modified):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return (
                QueueingHint.QUEUE
                if pod_matches_all_terms(affinity, modified)
                else QueueingHint.SKIP
            )
        if original is None:
            return QueueingHint.SKIP
        if pod_matches_all_terms(anti, original):
            return QueueingHint.QUEUE
        deleted = PodAffinityTerms.of(original)
        if deleted.errors:
            return QueueingHint.QUEUE
        ns_labels = self._snapshot.namespace_labels(pod.metadata.namespace)
        ns, labels = pod.metadata.namespace, pod.metadata.labels
        if any(t.matches(ns, labels, ns_labels) for t in deleted.required_anti_affinity):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node brings a topology value for the pod's affinity (new node with the
        key, key added, value changed), or may free one for its anti-affinity (any new node,
        key removed, value changed)."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.SKIP
        terms = PodAffinityTerms.of(pod)
        if terms.errors:
            return QueueingHint.QUEUE
        new_labels = modified.metadata.labels
        for t in terms.required_affinity:
            key = t.topology_key
            if original is None:
                if key in new_labels:
                    return QueueingHint.QUEUE
                continue
            old_labels = original.metadata.labels
            if key in new_labels and (key not in old_labels or old_labels[key] != new_labels[key]):
                return QueueingHint.QUEUE
        for t in terms.required_anti_affinity:
            if original is None:
                # A node without the key takes pods with anti-affinity; one with it may.
                return QueueingHint.QUEUE
            key = t.topology_key
            old_labels = original.metadata.labels
            if key in old_labels and (key not in new_labels or old_labels[key] != new_labels[key]):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP
