"""PodTopologySpread: keep the pods of a workload evenly spread over topology domains.

Hard constraints (Filter), soft ones (Score) and the default constraints of pods without their
own, as kube-scheduler v1.34: docs/plugins/pod-topology-spread.md.

Counting is vectorized: matching pods are counted per node with ``np.bincount`` over the
snapshot's :class:`PodTable` rows (a selector is evaluated once per group of identical pods),
then per domain with ``np.bincount`` over the node table's label ids.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from kubesched.api import (
    DO_NOT_SCHEDULE,
    NODE_INCLUSION_POLICY_HONOR,
    NODE_INCLUSION_POLICY_IGNORE,
    SCHEDULE_ANYWAY,
    Node,
    Pod,
    TopologySpreadConstraint,
    find_untolerated_taint,
)
from kubesched.config import SYSTEM_DEFAULTING, PodTopologySpreadArgs, decode_args
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
    NodeTable,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScorePlugin,
    Snapshot,
    Status,
)
from kubesched.plugins.helper import DO_NOT_SCHEDULE_TAINT_EFFECTS, as_objects
from kubesched.plugins.inter_pod_affinity import EVERYTHING, Selector, SelectorError
from kubesched.plugins.node_affinity import RequiredNodeAffinity

NAME = "PodTopologySpread"

#: Filter: placing the pod on the node would exceed a constraint's maxSkew.
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
#: Filter: the node lacks a constraint's topology key.
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"

#: ``defaultingType: System``: spread over hostnames and zones, as a preference.
SYSTEM_DEFAULT_CONSTRAINTS = (
    TopologySpreadConstraint(
        max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
    TopologySpreadConstraint(
        max_skew=5, topology_key=LABEL_TOPOLOGY_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY
    ),
)

_MAX_INT32 = 2**31 - 1

#: Owner kinds with the apiVersion they must have, for default constraints' selector.
_CONTROLLER_KINDS = {
    ("v1", "ReplicationController"): "ReplicationController",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
}


@dataclass(frozen=True, slots=True)
class Constraint:
    """A parsed constraint (``topologySpreadConstraint``)."""

    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int = 1
    node_affinity_policy: str = NODE_INCLUSION_POLICY_HONOR
    node_taints_policy: str = NODE_INCLUSION_POLICY_IGNORE


def filter_constraints(
    constraints: Sequence[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> list[Constraint]:
    """The constraints with ``whenUnsatisfiable == action``, parsed, ``matchLabelKeys`` merged
    into the selector. Raises :class:`SelectorError`."""
    out = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        selector = Selector.parse(c.label_selector)
        if c.match_label_keys:
            own = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
            if own:
                selector = selector.and_labels(own)
        out.append(
            Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=selector,
                min_domains=1 if c.min_domains is None else c.min_domains,
                node_affinity_policy=c.node_affinity_policy or NODE_INCLUSION_POLICY_HONOR,
                node_taints_policy=c.node_taints_policy or NODE_INCLUSION_POLICY_IGNORE,
            )
        )
    return out


# --- counting -------------------------------------------------------------------------------------


def _value_ids(table: NodeTable, key: str, slots: IntArray) -> IntArray:
    col = table.labels.get(key)
    if col is None:
        return np.zeros(len(slots), dtype=np.int64)
    return col.ids.take(slots).astype(np.int64)


def _n_values(table: NodeTable, key: str) -> int:
    col = table.labels.get(key)
    return 1 if col is None else len(col.values)


def _gather(counts: IntArray, ids: IntArray) -> IntArray:
    if len(ids) and int(ids.max()) >= len(counts):
        padded = np.zeros(int(ids.max()) + 1, dtype=counts.dtype)
        padded[: len(counts)] = counts
        counts = padded
    return counts.take(ids)


def _node_match_counts(snap: Snapshot, selector: Selector, namespace: str) -> IntArray:
    """``countPodsMatchSelector`` for every node slot: non-terminating pods in ``namespace``
    that ``selector`` matches (none for an empty selector)."""
    capacity = snap.table.capacity
    if selector.empty:
        return np.zeros(capacity, dtype=np.int64)
    pods = snap.pods
    lut = pods.namespace_mask((namespace,)) & selector.group_mask(pods)
    return pods.count_by_slot(pods.rows_where(lut, skip_terminating=True), capacity)


class _Inclusion:
    """Per pod, which nodes pass its required node affinity and tolerate its taints (computed
    on first use, over given slots)."""

    def __init__(self, pod: Pod, nodes: Nodes) -> None:
        self.pod = pod
        self.nodes = nodes
        self._affinity: BoolArray | None = None
        self._taints: BoolArray | None = None

    def affinity(self) -> BoolArray:
        if self._affinity is None:
            self._affinity = RequiredNodeAffinity.of(self.pod).mask(self.nodes)
        return self._affinity

    def taints(self) -> BoolArray:
        if self._taints is None:
            column = self.nodes.table.taints
            tolerations = self.pod.spec.tolerations
            lut = np.fromiter(
                (
                    find_untolerated_taint(v, tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS) is None
                    for v in column.values
                ),
                dtype=np.bool_,
                count=len(column.values),
            )
            self._taints = lut.take(column.ids.take(self.nodes.slots))
        return self._taints

    def mask(self, c: Constraint) -> BoolArray:
        out = np.ones(len(self.nodes), dtype=np.bool_)
        if c.node_affinity_policy == NODE_INCLUSION_POLICY_HONOR:
            out &= self.affinity()
        if c.node_taints_policy == NODE_INCLUSION_POLICY_HONOR:
            out &= self.taints()
        return out


def _node_matches_inclusion(pod: Pod, node: Node, c: Constraint) -> bool:
    """``matchNodeInclusionPolicies`` for one node."""
    if c.node_affinity_policy == NODE_INCLUSION_POLICY_HONOR and not RequiredNodeAffinity.of(
        pod
    ).matches(node):
        return False
    if c.node_taints_policy == NODE_INCLUSION_POLICY_HONOR:
        taint = find_untolerated_taint(
            node.spec.taints, pod.spec.tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS
        )
        if taint is not None:
            return False
    return True


def _has_all_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    """``nodeLabelsMatchSpreadConstraints``."""
    return all(c.topology_key in labels for c in constraints)


# --- state ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Domains:
    """One constraint's matching pods per domain (value id of its topology key)."""

    constraint: Constraint
    #: Matching pods per value id (0, the missing label, always 0).
    counts: IntArray
    #: Value ids that are eligible domains.
    present: BoolArray
    #: Whether the incoming pod matches the constraint's selector.
    self_match: int

    def min_match(self) -> int:
        """The global minimum, 0 with fewer eligible domains than minDomains."""
        n = int(np.count_nonzero(self.present))
        if n < self.constraint.min_domains:
            return 0
        if n == 0:
            return _MAX_INT32
        return int(self.counts[self.present].min())

    def clone(self) -> _Domains:
        return _Domains(self.constraint, self.counts.copy(), self.present, self.self_match)


@dataclass(slots=True)
class _PreFilterState:
    domains: list[_Domains]

    @property
    def constraints(self) -> list[Constraint]:
        return [d.constraint for d in self.domains]

    def clone(self) -> _PreFilterState:
        return _PreFilterState([d.clone() for d in self.domains])


@dataclass(slots=True)
class _ScoreConstraint:
    constraint: Constraint
    weight: float
    #: Non-hostname: matching pods per canonical value id of candidate domains.
    counts: IntArray | None
    #: Value id -> canonical id (a node without the label counts as the value "").
    canonical: IntArray | None
    #: Hostname: matching pods per node slot.
    per_node: IntArray | None


@dataclass(slots=True)
class _PreScoreState:
    constraints: list[_ScoreConstraint]
    #: Per node slot: a candidate missing a topology key, scored 0.
    ignored: BoolArray


def _filter_statuses() -> list[Status | None]:
    """Filter verdicts by id (fresh each time: the runtime stamps its plugin name on them)."""
    return [
        None,
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH),
        Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH),
    ]


def _not_found(key: str) -> Status:
    return Status(Code.ERROR, f'reading "{key}" from cycleState: not found')


# --- the plugin -----------------------------------------------------------------------------------


class PodTopologySpread(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    """Hard spread constraints as a filter, soft ones as a score."""

    name = NAME
    args_type = PodTopologySpreadArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(PodTopologySpreadArgs, args)
        super().__init__(handle, decoded)
        self.system_defaulted = decoded.defaulting_type == SYSTEM_DEFAULTING
        if self.system_defaulted:
            self.default_constraints: tuple[TopologySpreadConstraint, ...] = (
                SYSTEM_DEFAULT_CONSTRAINTS
            )
        else:
            self.default_constraints = tuple(
                msgspec.convert(msgspec.to_builtins(c), TopologySpreadConstraint)
                for c in decoded.default_constraints
            )
        # The default constraints, parsed, per whenUnsatisfiable: without matchLabelKeys they
        # do not depend on the pod, so each cycle need not parse them again.
        self._parsed_defaults: dict[str, list[Constraint]] = {}
        self._defaults_per_pod = any(c.match_label_keys for c in self.default_constraints)

    @property
    def _snapshot(self) -> Snapshot:
        return self.handle.snapshot

    # -- constraints ---------------------------------------------------------------------------

    def default_selector(self, pod: Pod) -> Selector:
        """``helper.DefaultSelector``: the Services selecting the pod, and its controlling
        ReplicationController, ReplicaSet or StatefulSet, all ANDed."""
        snap = self._snapshot
        ns, labels = pod.metadata.namespace, pod.metadata.labels
        label_set: dict[str, str] = {}
        for s in snap.workload_selectors("Service", ns).values():
            # labels.Set(selector).AsSelector().Matches(labels): every pair present.
            if s.match_labels.items() <= labels.items():
                label_set.update(s.match_labels)
        # Most pods: no Service selects them, so nothing to build.
        selector = Selector.from_set(label_set) if label_set else EVERYTHING
        owner = None
        for o in pod.metadata.owner_references:
            if o.controller:
                owner = o
                break
        if owner is None:
            return selector
        kind = _CONTROLLER_KINDS.get((owner.api_version, owner.kind))
        if kind is None:
            return selector
        found = snap.workload_selectors(kind, ns).get(owner.name)
        if found is None:
            return selector
        if kind == "ReplicationController":
            label_set.update(found.match_labels)
            return Selector.from_set(label_set)
        try:
            other = Selector.parse(found)
        except SelectorError:
            return selector
        if other.nothing:
            return selector
        return Selector(selector.requirements + other.requirements)

    def _default_constraints(self, pod: Pod, action: str) -> list[Constraint]:
        constraints = self._parsed_defaults.get(action)
        if constraints is None:
            constraints = filter_constraints(self.default_constraints, pod.metadata.labels, action)
            if not self._defaults_per_pod:
                self._parsed_defaults[action] = constraints
        if not constraints:
            return []
        selector = self.default_selector(pod)
        if selector.empty:
            return []
        return [
            Constraint(
                c.max_skew,
                c.topology_key,
                selector,
                c.min_domains,
                c.node_affinity_policy,
                c.node_taints_policy,
            )
            for c in constraints
        ]

    def constraints(self, pod: Pod, action: str) -> list[Constraint]:
        """The pod's constraints for ``action``, or the default ones if it has none at all.
        Raises :class:`SelectorError`."""
        if pod.spec.topology_spread_constraints:
            return filter_constraints(
                pod.spec.topology_spread_constraints, pod.metadata.labels, action
            )
        return self._default_constraints(pod, action)

    # -- PreFilter -----------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as e:
            what = "obtaining pod's hard topology spread constraints"
            if not pod.spec.topology_spread_constraints:
                what = "setting default hard topology spread constraints"
            return None, Status(Code.ERROR, f"get constraints from pod: {what}: {e}")
        if not constraints:
            return None, SKIP
        snap = self._snapshot
        table, slots = snap.table, nodes.slots
        vids = [_value_ids(table, c.topology_key, slots) for c in constraints]
        all_keys = np.ones(len(slots), dtype=np.bool_)
        for v in vids:
            all_keys &= v != 0
        inclusion = _Inclusion(pod, nodes)
        labels = pod.metadata.labels
        domains = []
        for c, v in zip(constraints, vids, strict=True):
            eligible = all_keys & inclusion.mask(c)
            per_node = _node_match_counts(snap, c.selector, pod.metadata.namespace)
            n = _n_values(table, c.topology_key)
            ev = v[eligible]
            counts = np.bincount(
                ev, weights=per_node.take(slots[eligible]).astype(np.float64), minlength=n
            ).astype(np.int64)
            present = np.bincount(ev, minlength=n) > 0
            counts[0] = 0
            present[0] = False
            domains.append(_Domains(c, counts, present, int(c.selector.matches(labels))))
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(domains))
        return None, None

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
        if n is None or other.metadata.namespace != pod.metadata.namespace:
            return None
        node_labels = n.metadata.labels
        if not _has_all_keys(node_labels, s.constraints):
            return None
        table = self._snapshot.table
        for d in s.domains:
            c = d.constraint
            if not c.selector.matches(other.metadata.labels):
                continue
            if not _node_matches_inclusion(pod, n, c):
                continue
            col = table.labels.get(c.topology_key)
            vid = None if col is None else col.id_of(node_labels[c.topology_key])
            if vid is None:
                continue
            if vid >= len(d.counts):
                grown = np.zeros(vid + 1, dtype=np.int64)
                grown[: len(d.counts)] = d.counts
                d.counts = grown
            d.counts[vid] += delta
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
        n = len(nodes)
        ids = np.zeros(n, dtype=np.int32)
        undecided = np.ones(n, dtype=np.bool_)
        for d in s.domains:
            c = d.constraint
            vids = _value_ids(nodes.table, c.topology_key, nodes.slots)
            missing = undecided & (vids == 0)
            ids[missing] = 1
            undecided &= ~missing
            skew = _gather(d.counts, vids) + d.self_match - d.min_match()
            too_much = undecided & (skew > c.max_skew)
            ids[too_much] = 2
            undecided &= ~too_much
        return NodeStatuses(ids, _filter_statuses())

    # -- PreScore / Score ----------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        snap = self._snapshot
        if len(snap) == 0:
            return SKIP
        own = bool(pod.spec.topology_spread_constraints)
        try:
            constraints = self.constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as e:
            what = (
                "obtaining pod's soft topology spread constraints"
                if own
                else "setting default soft topology spread constraints"
            )
            return Status(Code.ERROR, f"calculating preScoreState: {what}: {e}")
        if not constraints:
            return SKIP
        # Only non-system-default spreading needs every topology key on a node, so nodes
        # without a zone still get hostname spreading.
        require_all = own or not self.system_defaulted
        table = snap.table
        filtered = nodes.slots
        ignored_f = np.zeros(len(filtered), dtype=np.bool_)
        if require_all:
            for c in constraints:
                ignored_f |= _value_ids(table, c.topology_key, filtered) == 0
        candidates = filtered[~ignored_f]
        ignored = np.zeros(table.capacity, dtype=np.bool_)
        ignored[filtered[ignored_f]] = True

        all_nodes = Nodes(snap, snap.present_slots())
        all_slots = all_nodes.slots
        all_keys = np.ones(len(all_slots), dtype=np.bool_)
        if require_all:
            for c in constraints:
                all_keys &= _value_ids(table, c.topology_key, all_slots) != 0
        inclusion = _Inclusion(pod, all_nodes)
        out = []
        for c in constraints:
            per_node = _node_match_counts(snap, c.selector, pod.metadata.namespace)
            if c.topology_key == LABEL_HOSTNAME:
                size = len(candidates)
                out.append(_ScoreConstraint(c, _weight(size), None, None, per_node))
                continue
            n = _n_values(table, c.topology_key)
            canonical = np.arange(n, dtype=np.int64)
            col = table.labels.get(c.topology_key)
            empty_id = None if col is None else col.id_of("")
            if empty_id is not None:
                canonical[0] = empty_id
            registered = (
                np.bincount(
                    canonical.take(_value_ids(table, c.topology_key, candidates)), minlength=n
                )
                > 0
            )
            eligible = all_keys & inclusion.mask(c)
            ev = canonical.take(_value_ids(table, c.topology_key, all_slots[eligible]))
            counts = np.bincount(
                ev, weights=per_node.take(all_slots[eligible]).astype(np.float64), minlength=n
            ).astype(np.int64)
            out.append(
                _ScoreConstraint(
                    c, _weight(int(np.count_nonzero(registered))), counts, canonical, None
                )
            )
        state.write(PRE_SCORE_STATE_KEY, _PreScoreState(out, ignored))
        return None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(
            state, pod, Nodes(self._snapshot, np.array([node.slot], dtype=np.int64))
        )
        return int(scores[0]), status

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return np.zeros(len(nodes), dtype=np.int64), _not_found(PRE_SCORE_STATE_KEY)
        slots = nodes.slots
        total = np.zeros(len(slots), dtype=np.float64)
        for sc in s.constraints:
            c = sc.constraint
            vids = _value_ids(nodes.table, c.topology_key, slots)
            if sc.per_node is not None:
                cnt = sc.per_node.take(slots)
            else:
                assert sc.counts is not None
                assert sc.canonical is not None
                cnt = _gather(sc.counts, _gather(sc.canonical, vids))
            # scoreForCount, in float64 as Go: cnt * weight + (maxSkew - 1).
            term = cnt.astype(np.float64) * sc.weight + float(c.max_skew - 1)
            total += np.where(vids != 0, term, 0.0)
        total[s.ignored.take(slots)] = 0.0
        return _round_half_away(total), None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        s = state.get(PRE_SCORE_STATE_KEY)
        if not isinstance(s, _PreScoreState):
            return _not_found(PRE_SCORE_STATE_KEY)
        ignored = s.ignored.take(nodes.slots)
        valid = scores[~ignored]
        min_score = int(valid.min()) if len(valid) else 0
        max_score = max(int(valid.max()), 0) if len(valid) else 0
        if max_score == 0:
            out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = MAX_NODE_SCORE * (max_score + min_score - scores) // max_score
        out[ignored] = 0
        scores[:] = out
        return None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A pod added, relabelled or deleted changes the counts; the pod's own new
            # tolerations change which nodes count under nodeTaintsPolicy: Honor.
            ClusterEventWithHint(
                ClusterEvent(
                    "Pod",
                    ActionType.ADD
                    | ActionType.UPDATE_POD_LABEL
                    | ActionType.UPDATE_POD_TOLERATIONS
                    | ActionType.DELETE,
                ),
                self.is_schedulable_after_pod_change,
            ),
            # A node added, deleted, relabelled or retainted changes the domains.
            ClusterEventWithHint(
                ClusterEvent(
                    "Node",
                    ActionType.ADD
                    | ActionType.DELETE
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_TAINT,
                ),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a scheduled pod of the namespace that one of the pod's hard constraints
        selects appears or disappears, or is relabelled into or out of a selector; or when the
        pod itself gets tolerations while a constraint honors taints."""
        try:
            original, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if (modified is not None and not _involved(modified, pod)) or (
            original is not None and not _involved(original, pod)
        ):
            return QueueingHint.SKIP
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        if modified is not None and original is not None:
            if (
                modified.metadata.uid == pod.metadata.uid
                and modified.spec.tolerations != original.spec.tolerations
                and any(c.node_taints_policy == NODE_INCLUSION_POLICY_HONOR for c in constraints)
            ):
                return QueueingHint.QUEUE
            if modified.metadata.labels == original.metadata.labels:
                return QueueingHint.SKIP
            for c in constraints:
                if c.selector.matches(original.metadata.labels) != c.selector.matches(
                    modified.metadata.labels
                ):
                    return QueueingHint.QUEUE
            return QueueingHint.SKIP
        changed = modified if modified is not None else original
        if changed is not None and any(
            c.selector.matches(changed.metadata.labels) for c in constraints
        ):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node carrying every topology key appears or disappears, gains or loses
        a key, or changes a key's value or its taints."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return QueueingHint.QUEUE
        try:
            constraints = self.constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError:
            return QueueingHint.QUEUE
        was = original is not None and _has_all_keys(original.metadata.labels, constraints)
        now = modified is not None and _has_all_keys(modified.metadata.labels, constraints)
        if original is not None and modified is not None:
            if was != now:
                return QueueingHint.QUEUE
            if now and (
                any(
                    original.metadata.labels.get(c.topology_key)
                    != modified.metadata.labels.get(c.topology_key)
                    for c in constraints
                )
                or original.spec.taints != modified.spec.taints
            ):
                return QueueingHint.QUEUE
            return QueueingHint.SKIP
        if modified is not None:
            return QueueingHint.QUEUE if now else QueueingHint.SKIP
        return QueueingHint.QUEUE if was else QueueingHint.SKIP


def _involved(changed: Pod, pod: Pod) -> bool:
    """``involvedInTopologySpreading``: the pod itself, or a scheduled pod of its namespace."""
    return changed.metadata.uid == pod.metadata.uid or (
        bool(changed.spec.node_name) and changed.metadata.namespace == pod.metadata.namespace
    )


def _weight(size: int) -> float:
    """``topologyNormalizingWeight``: log(domains + 2)."""
    return math.log(size + 2)


def _round_half_away(x: np.ndarray[Any, np.dtype[np.float64]]) -> IntArray:
    """Go's ``math.Round`` (half away from zero) for non-negative values, to int64."""
    floor = np.floor(x)
    rounded: IntArray = np.where(x - floor >= 0.5, floor + 1.0, floor).astype(np.int64)
    return rounded
