"""NodeResourcesFit: keep pods off nodes without room for their requests, and score the rest.

Filter compares the pod's requests (kube-scheduler's ``PodRequests``) with each node's
allocatable minus what its pods request, one reason per missing resource; Score is
LeastAllocated, MostAllocated or RequestedToCapacityRatio over ``scoringStrategy.resources``.
The rules, the reasons in their order, the formulas with an example:
docs/plugins/node-resources.md.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    Node,
    Pod,
    Resources,
    is_extended_resource_name,
    is_scalar_resource_name,
    node_allocatable,
    pod_requests,
)
from kubesched.config import (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    ConfigError,
    NodeResourcesFitArgs,
    decode_args,
    validate_args,
)
from kubesched.framework import (
    MANY_ROWS,
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
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    RowDerived,
    ScorePlugin,
    Status,
)
from kubesched.plugins.helper import as_objects
from kubesched.plugins.node_resources._allocation import (
    FEW_ROWS,
    FloatColumns,
    Scratch,
    WeightedResource,
    covering_rows,
    node_lists,
    picked,
    pod_request_list,
    requested_to_capacity_ratio_score,
    rows_of,
    shape_lut,
    strategy_scores,
    weighted_score,
)

NAME = "NodeResourcesFit"
# The hints run for each waiting pod an event reaches: an Enum member read through its class
# costs ten times a global on Python 3.11.
_QUEUE, _QUEUE_SKIP = QueueingHint.QUEUE, QueueingHint.SKIP
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME

#: The node already runs as many pods as its ``allocatable.pods``.
REASON_TOO_MANY_PODS = "Too many pods"
#: The node lacks room for the pod's request of a resource; ``{}`` is the resource name.
REASON_INSUFFICIENT = "Insufficient {}"
REASON_INSUFFICIENT_CPU = REASON_INSUFFICIENT.format(CPU)
REASON_INSUFFICIENT_MEMORY = REASON_INSUFFICIENT.format(MEMORY)
REASON_INSUFFICIENT_EPHEMERAL_STORAGE = REASON_INSUFFICIENT.format(EPHEMERAL_STORAGE)

#: ``RequestedToCapacityRatio`` shape scores are 0..10 (``MaxCustomPriorityScore``); node scores
#: are 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10

#: Feature gates kube-scheduler v1.34 enables by default that change this plugin's events.
ENABLE_IN_PLACE_POD_VERTICAL_SCALING = True
ENABLE_SCHEDULING_QUEUE_HINT = True

_FIXED_CHECKS = ((CPU, REASON_INSUFFICIENT_CPU), (MEMORY, REASON_INSUFFICIENT_MEMORY))
#: Request shapes whose checks PreFilter keeps (all are dropped when more come).
_MAX_SHAPES = 1024
#: The room :class:`_LeastFree` gives a row of no node: more than any request.
_NO_NODE = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class InsufficientResource:
    """A resource a node lacks for a pod (``InsufficientResource``)."""

    resource_name: str
    reason: str
    requested: int
    used: int
    capacity: int
    #: The request exceeds the node's whole allocatable: preemption cannot help.
    unresolvable: bool = False


@dataclass(frozen=True, slots=True)
class _Check:
    name: str
    amount: int
    reason: str


def _checks(
    requests: Mapping[str, int],
    ignored: Collection[str] = (),
    ignored_groups: Collection[str] = (),
) -> tuple[_Check, ...]:
    """The resources the filter compares, in upstream's order: cpu, memory, ephemeral-storage,
    then scalar resources (in the order the pod lists them; upstream walks a Go map)."""
    out = [
        _Check(name, requests.get(name, 0), reason)
        for name, reason in (
            *_FIXED_CHECKS,
            (EPHEMERAL_STORAGE, REASON_INSUFFICIENT_EPHEMERAL_STORAGE),
        )
        if requests.get(name, 0) > 0
    ]
    for name, amount in requests.items():
        if amount <= 0 or not is_scalar_resource_name(name):
            continue
        if is_extended_resource_name(name) and (
            name in ignored or (ignored_groups and name.split("/", 1)[0] in ignored_groups)
        ):
            continue
        out.append(_Check(name, amount, REASON_INSUFFICIENT.format(name)))
    return tuple(out)


def fits_request(
    checks: tuple[_Check, ...], allocatable: Mapping[str, int], requested: Mapping[str, int]
) -> list[InsufficientResource]:
    """``fitsRequest``: what a node with ``allocatable`` and ``requested`` (pod count under
    ``pods``) lacks for a pod whose request is ``checks``."""
    out: list[InsufficientResource] = []
    num_pods = requested.get(PODS, 0)
    allowed = allocatable.get(PODS, 0)
    if num_pods + 1 > allowed:
        out.append(InsufficientResource(PODS, REASON_TOO_MANY_PODS, 1, num_pods, allowed))
    for c in checks:
        cap = allocatable.get(c.name, 0)
        used = requested.get(c.name, 0)
        if c.amount > cap - used:
            out.append(InsufficientResource(c.name, c.reason, c.amount, used, cap, c.amount > cap))
    return out


def _node_bits(checks: tuple[_Check, ...], info: NodeInfo) -> int:
    """:func:`fits_request` of one node as :meth:`NodeResourcesFit.filter_nodes` encodes it."""
    allocatable, requested = info.allocatable, info.requested
    bits = 1 if requested.get(PODS, 0) + 1 > allocatable.get(PODS, 0) else 0
    unresolvable = False
    for k, c in enumerate(checks, start=1):
        cap = allocatable.get(c.name, 0)
        if c.amount > cap - requested.get(c.name, 0):
            bits |= 1 << k
            unresolvable = unresolvable or c.amount > cap
    return bits | (1 << len(checks) + 1 if unresolvable else 0)


def fits(pod: Pod, info: NodeInfo) -> list[InsufficientResource]:
    """``Fits``: what ``info``'s node lacks for ``pod``, ignoring no resource."""
    return fits_request(_checks(pod_requests(pod)), info.allocatable, info.requested)


def _status_of(insufficient: list[InsufficientResource]) -> Status:
    code = (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        if any(r.unresolvable for r in insufficient)
        else Code.UNSCHEDULABLE
    )
    return Status(code, *(r.reason for r in insufficient))


@dataclass(slots=True)
class PreFilterState:
    """The pod's request, computed once per cycle (``preFilterState``)."""

    requests: Resources
    checks: tuple[_Check, ...]
    #: Failure bit pattern -> status, so equal failures share one Status object.
    statuses: dict[int, Status] = field(default_factory=dict)

    def clone(self) -> PreFilterState:
        return self


@dataclass(slots=True)
class PreScoreState:
    """The pod's request of each scored resource (``preScoreState``)."""

    pod_requests: list[int]

    def clone(self) -> PreScoreState:
        return self


class _LeastFree:
    """The least room (allocatable minus requested) of each resource column on any node of a
    table, kept in step with it: between two cycles only the changed rows are looked at.

    When no check of a pod asks for more than that, and every node has room for one more pod,
    no node fails Filter and the pass over every node is skipped: most pods, until the cluster
    fills (9,903 of the 10,000 distinct pods of ``docs/benchmarks.md``'s simulate input).
    """

    __slots__ = ("_free", "_layout", "_least", "_table", "_version")

    def __init__(self) -> None:
        self._table: NodeTable | None = None
        self._layout = self._version = -1
        #: Per row and column, the room; rows of no node hold ``_NO_NODE`` (no limit).
        self._free: IntArray = np.empty((0, 0), dtype=np.int64)
        self._least: list[int] = []

    def all_fit(self, t: NodeTable, checks: tuple[_Check, ...]) -> bool:
        """Whether every node of ``t`` passes Filter for a pod of ``checks``."""
        least, index = self.least(t), t.resource_index
        if least[index[PODS]] <= 0:
            return False
        for c in checks:
            col = index.get(c.name)
            if col is None or least[col] < c.amount:
                return False
        return True

    def least(self, t: NodeTable) -> list[int]:
        """Per resource column, the least room on any node of ``t`` (no node: no limit)."""
        if t is not self._table or t.layout != self._layout:
            self._rebuild(t)
        elif t.version != self._version:
            rows = t.changed_rows_since(self._version)
            # A Node that changed may have come or gone: its room is looked at again with all.
            if rows is None or rows[0] or len(rows[1]) > MANY_ROWS:
                self._rebuild(t)
            else:
                self._update(t, rows[1])
        return self._least

    def _rebuild(self, t: NodeTable) -> None:
        free = t.allocatable - t.requested
        free[~t.present] = _NO_NODE
        self._free = free
        self._least = free.min(axis=0, initial=_NO_NODE).tolist()
        self._table, self._layout, self._version = t, t.layout, t.version

    def _update(self, t: NodeTable, rows: list[int]) -> None:
        free, least = self._free, self._least
        for r in rows:
            if not t.present[r]:
                continue  # pods on a node without a Node object: no node to fit on
            old = free[r].tolist()
            free[r] = t.allocatable[r] - t.requested[r]
            for col, v in enumerate(free[r].tolist()):
                if v < least[col]:
                    least[col] = v
                elif v > old[col] == least[col]:
                    # The node that had the least room has more now: look at all again.
                    least[col] = int(free[:, col].min())
        self._version = t.version


class NodeResourcesFit(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    """Filters out nodes without room for the pod's requests; scores the others by a strategy."""

    name = NAME
    node_local = True
    args_type = NodeResourcesFitArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        if args is None:
            args = decode_args(NodeResourcesFitArgs, None)
        if not isinstance(args, NodeResourcesFitArgs):
            raise TypeError(
                f"want args to be of type NodeResourcesFitArgs, got {type(args).__name__}"
            )
        errors = validate_args(args)
        if errors:
            raise ConfigError(errors)
        strategy = args.scoring_strategy
        if strategy is None:
            raise ValueError("scoring strategy not specified")
        if strategy.type not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
            raise ValueError(f"scoring strategy {strategy.type} is not supported")
        super().__init__(handle, args)
        self._scratch = Scratch()
        self._columns = FloatColumns()
        self._fit_bits = RowDerived()
        self._least_free = _LeastFree()
        self._scores = RowDerived()
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_resource_groups = frozenset(args.ignored_resource_groups)
        self._checks_by_shape: dict[tuple[tuple[str, int], ...], tuple[_Check, ...]] = {}
        self.strategy: str = strategy.type
        self.resources = [WeightedResource(r.name, int(r.weight)) for r in strategy.resources]
        self.shape: list[tuple[int, int]] = []
        self._lut: IntArray | None = None
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            assert strategy.requested_to_capacity_ratio is not None
            self.shape = [
                (int(p.utilization), int(p.score) * (100 // MAX_CUSTOM_PRIORITY_SCORE))
                for p in strategy.requested_to_capacity_ratio.shape
            ]
            self._lut = shape_lut(self.shape)

    # -- PreFilter / Filter -------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        requests = state.pod_info_of(pod).requests
        # Pods come in few shapes: their checks are kept per request.
        shape = tuple(requests.items())
        checks = self._checks_by_shape.get(shape)
        if checks is None:
            if len(self._checks_by_shape) >= _MAX_SHAPES:
                self._checks_by_shape.clear()
            checks = _checks(requests, self.ignored_resources, self.ignored_resource_groups)
            self._checks_by_shape[shape] = checks
        state.write(PRE_FILTER_STATE_KEY, PreFilterState(requests, checks))
        return None, None

    def _pre_filter_state(self, state: CycleState) -> PreFilterState | Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status(
                Code.ERROR, f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState: not found'
            )
        if not isinstance(s, PreFilterState):
            return Status(Code.ERROR, f"{s!r}  convert to NodeResourcesFit.preFilterState error")
        return s

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        s = self._pre_filter_state(state)
        if isinstance(s, Status):
            return s
        insufficient = fits_request(s.checks, node.allocatable, node.requested)
        return _status_of(insufficient) if insufficient else None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        """The per-node rule over all nodes: each failure is a bit (bit 0 too many pods, bit k
        the k-th requested resource, the top bit "some request exceeds the node's allocatable"),
        and each distinct bit pattern becomes one shared status. A node's bits depend on its row
        and the pod's checks only, so they are kept per checks across cycles."""
        n = len(nodes)
        s = self._pre_filter_state(state)
        if isinstance(s, Status):
            return NodeStatuses(np.ones(n, dtype=np.int32), [None, s])
        t = nodes.table
        checks = s.checks
        if self._least_free.all_fit(t, checks):
            return NodeStatuses.passing(n)
        at = nodes.snapshot.at

        def bits(slots: IntArray) -> IntArray:
            if len(slots) > FEW_ROWS:
                return self._bits(t, checks, slots)
            return np.fromiter(
                (_node_bits(checks, at(slot)) for slot in slots.tolist()), np.int64, len(slots)
            )

        code = self._fit_bits.get_unless_zero(t, checks, nodes.slots, bits)
        if code is None:
            return NodeStatuses.passing(n)
        return self._intern(s, code, len(checks) + 1)

    def _bits(self, t: NodeTable, checks: tuple[_Check, ...], slots: IntArray) -> IntArray:
        """The failure bits of each node of ``slots`` (0: the pod fits)."""
        covered = covering_rows(slots)
        alloc = rows_of(t.allocatable, slots, covered, self._scratch, "allocatable rows")
        used = rows_of(t.requested, slots, covered, self._scratch, "requested rows")
        pods_col = t.resource_index[PODS]
        # Bit 0: "pods on the node + 1 > allocatable pods".
        code: IntArray = (used[:, pods_col] >= alloc[:, pods_col]).astype(np.int64)
        unresolvable: BoolArray | None = None
        for k, c in enumerate(checks, start=1):
            col = t.resource_index.get(c.name)
            if col is None:
                # No node has ever offered or used it: 0 allocatable everywhere.
                code |= 1 << k
                unresolvable = np.ones(len(code), dtype=np.bool_)
                continue
            a = alloc[:, col]
            lacking = a - used[:, col] < c.amount
            if np.count_nonzero(lacking):
                code |= lacking.astype(np.int64) << k
                over = a < c.amount
                unresolvable = over if unresolvable is None else unresolvable | over
        if unresolvable is not None:
            code |= unresolvable.astype(np.int64) << (len(checks) + 1)
        return picked(code, slots, covered)

    def _intern(self, s: PreFilterState, code: IntArray, nbits: int) -> NodeStatuses:
        if nbits < 12:
            distinct = np.flatnonzero(np.bincount(code, minlength=1 << (nbits + 1)))
            lut = np.zeros(1 << (nbits + 1), dtype=np.int32)
            ids = None
        else:
            distinct, inverse = np.unique(code, return_inverse=True)
            lut = np.zeros(len(distinct), dtype=np.int32)
            ids = inverse
        statuses: list[Status | None] = [None]
        for i, c in enumerate(distinct.tolist()):
            if c == 0:
                continue
            status = s.statuses.get(c)
            if status is None:
                status = s.statuses[c] = self._status_for_bits(s, c, nbits)
            lut[c if ids is None else i] = len(statuses)
            statuses.append(status)
        out = lut[code] if ids is None else lut[ids]
        return NodeStatuses(out.astype(np.int32, copy=False), statuses)

    @staticmethod
    def _status_for_bits(s: PreFilterState, bits: int, nbits: int) -> Status:
        reasons = [REASON_TOO_MANY_PODS] if bits & 1 else []
        reasons += [c.reason for k, c in enumerate(s.checks, start=1) if bits >> k & 1]
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if bits >> nbits & 1 else Code.UNSCHEDULABLE
        return Status(code, *reasons)

    # -- PreScore / Score ----------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(self._pod_request_list(state, pod)))
        return None

    def _pod_request_list(self, state: CycleState, pod: Pod) -> list[int]:
        return pod_request_list(state.pod_info_of(pod), self.resources, use_requested=False)

    def _pre_score_state(self, state: CycleState, pod: Pod) -> PreScoreState:
        s = state.get(PRE_SCORE_STATE_KEY)
        if isinstance(s, PreScoreState):
            return s
        return PreScoreState(self._pod_request_list(state, pod))

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        if not self.resources:
            return 0, Status(Code.ERROR, "resources not found")
        return self._node_score(self._pre_score_state(state, pod), node), None

    def _node_score(self, s: PreScoreState, node: NodeInfo) -> int:
        requested, allocatable = node_lists(node, self.resources, s.pod_requests, False)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            return requested_to_capacity_ratio_score(
                requested, allocatable, self.resources, self.shape
            )
        per = "most" if self.strategy == MOST_ALLOCATED else "least"
        return weighted_score(requested, allocatable, self.resources, per)

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        n = len(nodes)
        if not self.resources:
            return np.zeros(n, dtype=np.int64), Status(Code.ERROR, "resources not found")
        s = self._pre_score_state(state, pod)
        t = nodes.table
        at = nodes.snapshot.at

        def scores_of(slots: IntArray) -> IntArray:
            if len(slots) > FEW_ROWS:
                return strategy_scores(
                    t,
                    slots,
                    self.resources,
                    s.pod_requests,
                    self.strategy,
                    self._lut,
                    self._scratch,
                    self._columns,
                )
            return np.fromiter(
                (self._node_score(s, at(slot)) for slot in slots.tolist()), np.int64, len(slots)
            )

        return self._scores.get(t, tuple(s.pod_requests), nodes.slots, scores_of), None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_action = ActionType.DELETE
        if ENABLE_IN_PLACE_POD_VERTICAL_SCALING:
            # A running pod resized down frees room.
            pod_action |= ActionType.UPDATE_POD_SCALE_DOWN
        node_action = ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
        if not ENABLE_SCHEDULING_QUEUE_HINT:
            node_action |= ActionType.UPDATE_NODE_TAINT | ActionType.UPDATE_NODE_LABEL
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", pod_action), self.is_schedulable_after_pod_event
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", node_action), self.is_schedulable_after_node_change
            ),
        ]

    def is_schedulable_after_pod_event(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A pod was deleted or scaled down: queue ``pod`` if that may have freed what it needs."""
        try:
            original, modified = as_objects(old, new, Pod)
        except TypeError:
            return _QUEUE
        if modified is None:
            if original is None:
                return _QUEUE
            if not original.spec.node_name and not original.status.nominated_node_name:
                # An unscheduled pod's deletion frees nothing.
                return _QUEUE_SKIP
            return _QUEUE
        if not ENABLE_IN_PLACE_POD_VERTICAL_SCALING:
            return _QUEUE_SKIP
        if original is None or not self._scaled_down_for(pod, original, modified):
            return _QUEUE_SKIP
        return _QUEUE

    @staticmethod
    def _scaled_down_for(target: Pod, original: Pod, modified: Pod) -> bool:
        """``isSchedulableAfterPodScaleDown``: the update is to ``target`` itself, or a scheduled
        pod's request of something ``target`` requests went down."""
        if modified.metadata.uid == target.metadata.uid:
            return True
        if not modified.spec.node_name:
            return False
        before = pod_requests(original)
        after = pod_requests(modified)
        for name, value in pod_requests(target).items():
            if value == 0:
                continue
            if _is_checked(name) and before.get(name, 0) > after.get(name, 0):
                return True
        return False

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A node was added or its allocatable changed: queue ``pod`` if it would fit the node
        and, for an update, some resource it requests (or the pod count) went up."""
        try:
            original, modified = as_objects(old, new, Node)
        except TypeError:
            return _QUEUE
        if modified is None:
            return _QUEUE
        if not is_fit(pod, modified):
            # It would not fit even on the empty node.
            return _QUEUE_SKIP
        if original is None:
            return _QUEUE
        if not have_any_requested_resources_increased(pod, original, modified):
            return _QUEUE_SKIP
        return _QUEUE


def _is_checked(name: str) -> bool:
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource_name(name)


def is_fit(pod: Pod, node: Node | None) -> bool:
    """``isFit``: whether ``pod`` would fit ``node`` were it empty."""
    if node is None:
        return False
    return not fits_request(_checks(pod_requests(pod)), node_allocatable(node), {})


def have_any_requested_resources_increased(pod: Pod, original: Node, modified: Node) -> bool:
    """``haveAnyRequestedResourcesIncreased``: whether the node's allocatable pod count, or its
    allocatable of something ``pod`` requests, went up."""
    requests = pod_requests(pod)
    before = node_allocatable(original)
    after = node_allocatable(modified)
    if after.get(PODS, 0) > before.get(PODS, 0):
        return True
    for name, value in requests.items():
        if value <= 0:
            continue
        if _is_checked(name) and after.get(name, 0) > before.get(name, 0):
            return True
    return False


__all__ = [
    "NAME",
    "PRE_FILTER_STATE_KEY",
    "PRE_SCORE_STATE_KEY",
    "REASON_INSUFFICIENT",
    "REASON_INSUFFICIENT_CPU",
    "REASON_INSUFFICIENT_EPHEMERAL_STORAGE",
    "REASON_INSUFFICIENT_MEMORY",
    "REASON_TOO_MANY_PODS",
    "InsufficientResource",
    "NodeResourcesFit",
    "PreFilterState",
    "PreScoreState",
    "fits",
    "fits_request",
    "have_any_requested_resources_increased",
    "is_fit",
]
