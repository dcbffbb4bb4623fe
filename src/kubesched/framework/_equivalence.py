"""Filter verdicts and scores kept per pod shape, across scheduling cycles.

kube-scheduler runs every Filter and Score plugin on every node for every pod. Most pods come
from workloads whose pods are alike, and a *node-local* plugin's verdict or score on a node
depends on nothing but that node and the pod (:attr:`Plugin.node_local`). Between two cycles one
or two nodes change out of thousands (the node the last pod was assumed on), so for a pod shaped
like an earlier one the runtime keeps what the plugins said about each node and asks them again
about the changed nodes only (:meth:`NodeTable.changed_rows_since`). What comes out is what running
every plugin on every node would give: the same feasible nodes, the same statuses, the same
scores and totals, the same pick.

kube-scheduler had an "equivalence class cache" once (1.10 to 1.12) and dropped it because
invalidating it by event kind was hard to get right. Here nothing is invalidated by event: every
row change is recorded by the table, and an entry is brought up to date from those records.

A *shape* is what a node-local plugin may read of the pod (its namespace, labels, annotations
and spec), which plugins are active for it (not skipped at PreFilter or PreScore), and the
epochs those plugins report (:meth:`Plugin.node_local_epoch`: ImageLocality reads how many
nodes have an image). Claims enter by what the plugins reading them read of them
(:meth:`Plugin.node_local_claims`), not by name: pods that each bring a volume of their own,
bound and used nowhere else, are one shape. Plugins that read less of the pod say what
(:meth:`Plugin.node_local_pod_key`): the Filter plugins that run first in the default profile
read no requests, so pods that differ only in those share their verdicts, and the plugins that
read requests run on the nodes the first ones pass.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Hashable, Iterable

import msgspec
import numpy as np

from kubesched.api import Pod, Volume
from kubesched.framework._admission import Doorkeeper
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._diagnosis import NodeGroup, groups_of
from kubesched.framework._errors import FilterError, ScoreError
from kubesched.framework._filtering import (
    PER_NODE_AT_MOST,
    FilterForm,
    FilterPlan,
    PerNode,
    Vectorized,
    filter_in_order,
)
from kubesched.framework._instrumented import ScoreCalls
from kubesched.framework._interface import MAX_NODE_SCORE, MIN_NODE_SCORE, Nodes, Plugin
from kubesched.framework._node_info import PodInfo
from kubesched.framework._scoring import (
    Fresh,
    ScorePlan,
    check_range,
    score_in_order,
)
from kubesched.framework._snapshot import Snapshot
from kubesched.framework._status import Code, Status
from kubesched.framework._table import MANY_ROWS, IdArray, IntArray

#: Shapes kept per profile, least recently used dropped first.
_MAX_ENTRIES = 16

_encode = msgspec.json.Encoder().encode


def pod_shape(info: PodInfo) -> bytes:
    """What a node-local plugin may read of the pod, claims' names left out, as bytes; derived
    once per PodInfo."""
    shape = info.shape
    if shape is None:
        m = info.pod.metadata
        spec = info.pod.spec
        if any(v.persistent_volume_claim is not None for v in spec.volumes):
            spec = msgspec.structs.replace(spec, volumes=[_nameless(v) for v in spec.volumes])
        shape = info.shape = _encode((m.namespace, m.labels, m.annotations, spec))
    return shape


def _nameless(volume: Volume) -> Volume:
    claim = volume.persistent_volume_claim
    if claim is None:
        return volume
    return msgspec.structs.replace(
        volume, persistent_volume_claim=msgspec.structs.replace(claim, claim_name="")
    )


def shape_key(state: CycleState, pod: Pod, plan: FilterPlan) -> Hashable:
    """The key the plan's verdicts for ``pod`` are kept by: its shape and :func:`plan_key`."""
    return (pod_shape(state.pod_info_of(pod)), *plan_key(pod, plan))


def filter_key(state: CycleState, pod: Pod, plan: FilterPlan) -> Hashable:
    """The key the plan's verdicts for ``pod`` are kept by: what its plugins read of the pod
    when each says (:attr:`FilterPlan.keyed`), else :func:`shape_key`."""
    if not plan.keyed:
        return shape_key(state, pod, plan)
    return (tuple(p.node_local_pod_key(pod) for p in plan.plugins), *plan_key(pod, plan))


def plan_key(pod: Pod, plan: FilterPlan | ScorePlan) -> tuple[Hashable, ...]:
    """The plan, its plugins' epochs and what they read of the pod's claims
    (:func:`claims_key`)."""
    key: tuple[Hashable, ...] = (plan,)
    if plan.epochs:
        key += tuple(p.node_local_epoch() for p in plan.epochs)
    if plan.claim_readers:
        key += claims_key(pod, plan.claim_readers)
    return key


def claims_key(pod: Pod, readers: Iterable[Plugin]) -> tuple[Hashable, ...]:
    """What ``readers`` read of the pod's claims (:meth:`Plugin.node_local_claims`); the pod
    itself when one of them cannot tell (its claims are then its own)."""
    claims = tuple(p.node_local_claims(pod) for p in readers)
    if any(c is None for c in claims):
        m = pod.metadata
        return (m.namespace, m.name, m.uid)
    return claims


class Filtered:
    """A shape's Filter verdicts: per slot, 0 (passes) or an index into ``statuses``."""

    __slots__ = (
        "feasible",
        "groups",
        "ids",
        "index",
        "layout",
        "present",
        "scored",
        "statuses",
        "version",
    )

    def __init__(self, capacity: int, version: int, layout: int) -> None:
        self.ids: IdArray = np.zeros(capacity, dtype=np.int32)
        self.statuses: list[Status] = []
        self.index: dict[Status, int] = {}
        self.version = version
        self.layout = layout
        #: The present slots the derived fields below were made from.
        self.present: IntArray | None = None
        self.feasible: IntArray | None = None
        self.groups: list[NodeGroup] = []
        #: Scores by the active Score plugins and their epochs.
        self.scored: dict[Hashable, _Scored] = {}

    def intern(self, status: Status) -> int:
        i = self.index.get(status)
        if i is None:
            self.statuses.append(status)
            i = self.index[status] = len(self.statuses)
        return i

    def status(self, i: int) -> Status:
        return self.statuses[i - 1]


class _Scored:
    """A shape's scores: per Score plugin, raw (before NormalizeScore) and weighted per slot,
    and their weighted sum; valid on the feasible slots they were made for."""

    __slots__ = (
        "best",
        "feasible",
        "layout",
        "raw",
        "ties",
        "total",
        "valid",
        "version",
        "weighted",
    )

    def __init__(self, n_plugins: int, capacity: int, version: int, layout: int) -> None:
        self.raw: list[IntArray] = [np.zeros(capacity, dtype=np.int64) for _ in range(n_plugins)]
        self.weighted: list[IntArray] = [
            np.zeros(capacity, dtype=np.int64) for _ in range(n_plugins)
        ]
        self.total: IntArray = np.zeros(capacity, dtype=np.int64)
        self.version = version
        self.layout = layout
        self.feasible: IntArray | None = None
        #: Rows whose raw scores are every plugin's for the row as it is now.
        self.valid = np.zeros(capacity, dtype=np.bool_)
        #: The top total and the feasible slots that have it, ascending (``None``: to find).
        #: Kept up to date as rows change: a pass over every node per pod otherwise.
        self.best = 0
        self.ties: list[int] | None = None

    def pick(self, feasible: IntArray, leading: bool, rng: random.Random) -> int:
        """The slot of a feasible node with the top total, drawn among equals as
        ``Framework.schedule_pod`` draws (the same draw from ``rng`` picks the same node)."""
        ties = self.ties
        if ties is None:
            totals = self.total[: len(feasible)] if leading else self.total.take(feasible)
            top = totals[totals.argmax()]
            self.best = int(top)
            ties = self.ties = feasible[(totals == top).nonzero()[0]].tolist()
        return ties[rng.randrange(len(ties))] if len(ties) > 1 else ties[0]

    def retie(self, rows: list[int]) -> None:
        """Bring :attr:`ties` up to date after the totals of feasible ``rows`` changed."""
        ties = self.ties
        if ties is None:
            return
        best, total = self.best, self.total
        for r in rows:
            t = total.item(r)
            i = bisect_left(ties, r)
            tied = i < len(ties) and ties[i] == r
            if t > best:
                self.best = best = t
                ties[:] = [r]
            elif t == best:
                if not tied:
                    ties.insert(i, r)
            elif tied:
                del ties[i]
        if not ties:
            self.ties = None


class EquivalenceCache:
    """Per pod shape, what the node-local Filter and Score plugins said about each node."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._entries: dict[Hashable, Filtered] = {}
        self._doorkeeper = Doorkeeper(window=2 * _MAX_ENTRIES)

    # -- Filter ---------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, plan: FilterPlan) -> Filtered | None:
        """The shape's verdicts, up to date; ``None`` when a plugin of ``plan`` is not
        node-local, or one erred (the ordinary path then reports it as it always does), or the
        shape is new (:class:`Doorkeeper`: the ordinary path costs less once)."""
        if not plan.local:
            return None
        table = self._snapshot.table
        key = filter_key(state, pod, plan)
        if key not in self._entries and not self._doorkeeper.admit(key):
            return None
        # Taken out while it is brought up to date: an error halfway leaves none behind.
        entry = self._entries.pop(key, None)
        rows = self._changed(entry, table.version, table.layout)
        try:
            if entry is None or rows is None:
                entry = Filtered(table.capacity, table.version, table.layout)
                form = Vectorized(self._snapshot, table.present_slots())
                for slots, status in filter_in_order(state, pod, plan.calls(state), form):
                    entry.ids[slots] = entry.intern(status)
            elif rows[0] or rows[1]:
                self._refilter(state, pod, entry, plan, rows)
                entry.version = table.version
        except FilterError:
            return None
        self._entries[key] = entry
        if len(self._entries) > _MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        present_slots = table.present_slots()
        if entry.present is not present_slots:
            self._derive(entry, present_slots)
        return entry

    def _changed(
        self, entry: Filtered | _Scored | None, version: int, layout: int
    ) -> tuple[list[int], list[int]] | None:
        """The rows changed since ``entry`` was made (``changed_rows_since``); ``None`` to
        build it again."""
        if entry is None or entry.layout != layout:
            return None
        if entry.version == version:
            return [], []
        rows = self._snapshot.table.changed_rows_since(entry.version)
        if rows is None or len(rows[0]) + len(rows[1]) > MANY_ROWS:
            return None
        return rows

    def _refilter(
        self,
        state: CycleState,
        pod: Pod,
        entry: Filtered,
        plan: FilterPlan,
        rows: tuple[list[int], list[int]],
    ) -> None:
        """Verdicts again on the changed rows. Where only pods changed, a node that passed is
        asked again by the plugins that read pods; one that failed, by every plugin if the one
        that failed it reads pods or runs after one that does, else not at all."""
        node_rows, pod_rows = rows
        present, ids = self._snapshot.table.present, entry.ids
        recheck = plan.recheck_on_pods
        every: list[int] = []
        some: list[int] = []
        for r in node_rows:
            (every if present[r] else some).append(r)
        for r in pod_rows:
            if not present[r] or not ids[r]:
                some.append(r)
            elif entry.status(int(ids[r])).plugin in recheck:
                every.append(r)
        for group, pods_only in ((every, False), (some, True)):
            if not group:
                continue
            verdicts: dict[int, int] = {}
            live = [r for r in group if present[r]]
            if live:
                # A few one node at a time (cheaper than numpy's calls), more vectorized.
                form: FilterForm[int | IntArray] = (
                    PerNode(self._snapshot, live)
                    if len(live) <= PER_NODE_AT_MOST
                    else Vectorized(self._snapshot, np.array(live, dtype=np.int64))
                )
                plugins = plan.calls(state, pods_only=pods_only)
                for nodes, status in filter_in_order(state, pod, plugins, form):
                    sid = entry.intern(status)
                    for r in nodes.tolist() if isinstance(nodes, np.ndarray) else (nodes,):
                        verdicts[r] = sid
            for r in group:
                sid = verdicts.get(r, 0)
                if ids.item(r) != sid:
                    ids[r] = sid
                    entry.present = None

    def _derive(self, entry: Filtered, present: IntArray) -> None:
        """Feasible slots and the failure groups, from the verdicts."""
        table = self._snapshot.table
        ids = entry.ids[: len(present)] if table.is_leading(present) else entry.ids.take(present)
        if not np.count_nonzero(ids):
            entry.feasible = present
            entry.groups = []
        else:
            failing = ids != 0
            entry.feasible = present[~failing]
            entry.groups = groups_of(present[failing], ids[failing], entry.statuses)
        entry.present = present

    # -- Score ----------------------------------------------------------------------------------

    def score(
        self,
        state: CycleState,
        pod: Pod,
        entry: Filtered,
        plan: ScorePlan,
        rng: random.Random,
        *,
        plugin_scores: bool = True,
        pick: bool = True,
        within: IntArray | None = None,
    ) -> tuple[dict[str, IntArray], IntArray, int] | None:
        """Weighted scores per plugin and their sum over the entry's feasible nodes, as the
        ordinary Score loop gives them, after PreScore ran on those nodes, and the slot of the
        node picked (:meth:`_Scored.pick`; -1 and nothing drawn from ``rng`` without ``pick``);
        ``None`` when a plugin of ``plan`` is not node-local or one erred. Without
        ``plugin_scores`` the per-plugin scores are left out and the sum may be a view of the
        cache's, valid until the next cycle.

        ``within``, some of the entry's feasible nodes (those that passed the Filter pass with
        nominated pods counted): the kept scores brought up to date all the same, then the
        raw ones of these nodes normalized and weighted over them alone, as the ordinary Score
        loop on them gives them (every plugin's scores, no pick)."""
        if not plan.local:
            return None
        table = self._snapshot.table
        feasible = entry.feasible
        assert feasible is not None
        key = plan_key(pod, plan)
        scored = entry.scored.pop(key, None)
        rows = self._changed(scored, table.version, table.layout)
        calls = plan.calls(state)
        try:
            if scored is None or rows is None:
                scored = _Scored(len(plan.plugins), table.capacity, table.version, table.layout)
                form = _Kept(self._snapshot, plan, scored, feasible, ask=True)
                score_in_order(state, pod, calls, form)
            else:
                renormalize = scored.feasible is not feasible
                if rows[0] or rows[1]:
                    changed = _Changed(self._snapshot, plan, entry.ids, scored, rows)
                    score_in_order(state, pod, calls, changed)
                    renormalize |= changed.finish(renormalize)
                if renormalize:
                    form = _Kept(self._snapshot, plan, scored, feasible, ask=False)
                    score_in_order(state, pod, calls, form)
                scored.version = table.version
        except ScoreError:
            return None
        entry.scored[key] = scored
        if within is not None:
            some = _Subset(plan, Nodes(self._snapshot, within), scored.raw)
            try:
                score_in_order(state, pod, calls, some)
            except ScoreError:
                return None
            return some.per_plugin, some.total, -1
        leading = table.is_leading(feasible)
        n = len(feasible)
        per_plugin = (
            {
                p.name: (w[:n].copy() if leading else w.take(feasible))
                for p, w in zip(plan.plugins, scored.weighted, strict=True)
            }
            if plugin_scores
            else {}
        )
        if leading:
            # Without plugin scores nobody keeps the result past the cycle: a view will do.
            totals = scored.total[:n].copy() if plugin_scores else scored.total[:n]
        else:
            totals = scored.total.take(feasible)
        return per_plugin, totals, scored.pick(feasible, leading, rng) if pick else -1


class _Kept:
    """The Score loop's form over every feasible node, into the shape's scores: the plugins
    asked (``ask``), or their raw scores kept normalized and weighted again."""

    __slots__ = ("_ask", "_feasible", "_nodes", "_plan", "_scored")

    def __init__(
        self, snapshot: Snapshot, plan: ScorePlan, scored: _Scored, feasible: IntArray, *, ask: bool
    ) -> None:
        self._plan = plan
        self._scored = scored
        self._feasible = feasible
        self._nodes = Nodes(snapshot, feasible)
        self._ask = ask
        scored.total[:] = 0
        scored.feasible = feasible
        scored.ties = None
        if ask:
            scored.valid[feasible] = True

    def asked(self, n: int) -> Iterable[int]:
        return range(n)

    def score(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod
    ) -> tuple[IntArray, Status | None]:
        if self._ask:
            return plugin.score_nodes(state, pod, self._nodes)
        return self._scored.raw[i].take(self._feasible), None

    def weigh(self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod, raw: IntArray) -> None:
        scored, feasible = self._scored, self._feasible
        if self._ask:
            scored.raw[i][feasible] = raw
        weighted = self._plan.weighted(i, plugin, state, pod, self._nodes, raw)
        scored.weighted[i][feasible] = weighted
        scored.total[feasible] += weighted


class _Subset(Fresh):
    """:class:`Fresh`'s loop over some of a shape's feasible nodes, their raw scores the kept
    ones (a copy: NormalizeScore rescales in place)."""

    __slots__ = ("_raw",)

    def __init__(self, plan: ScorePlan, nodes: Nodes, raw: list[IntArray]) -> None:
        super().__init__(plan, nodes)
        self._raw = raw

    def score(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod
    ) -> tuple[IntArray, Status | None]:
        return self._raw[i].take(self._nodes.slots), None


class _Changed:
    """The Score loop's form over the changed rows that are feasible now (where only pods
    changed and the row's scores were valid, by the plugins that read pods): their scores
    updated in place, unless a plugin that normalizes saw a score change (its normalized
    scores may all move: :attr:`renormalize`).

    Rows that are not feasible are not scored, and their scores are no longer valid; a row
    becomes feasible only by changing, so it is among the changed rows then, and is scored by
    every plugin."""

    __slots__ = ("_both", "_node_rows", "_plan", "_scored", "_snapshot", "renormalize")

    def __init__(
        self,
        snapshot: Snapshot,
        plan: ScorePlan,
        ids: IdArray,
        scored: _Scored,
        rows: tuple[list[int], list[int]],
    ) -> None:
        self._snapshot = snapshot
        self._plan = plan
        self._scored = scored
        self.renormalize = False
        present, valid = snapshot.table.present, scored.valid
        node_rows: list[int] = []
        pod_rows: list[int] = []
        for r in rows[0]:
            if present[r] and not ids[r]:
                node_rows.append(r)
            else:
                valid[r] = False
        for r in rows[1]:
            if present[r] and not ids[r]:
                (pod_rows if valid[r] else node_rows).append(r)
            else:
                valid[r] = False
        self._node_rows = node_rows
        self._both = node_rows + pod_rows

    def asked(self, n: int) -> Iterable[int]:
        if self._node_rows:
            return range(n)
        return self._plan.pod_readers if self._both else ()

    def score(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod
    ) -> tuple[list[int], Status | None]:
        live = self._both if self._plan.reads_pods[i] else self._node_rows
        values: list[int] = []
        if self._plan.per_node[i] and len(live) <= PER_NODE_AT_MOST:
            at = self._snapshot.at
            for r in live:
                v, s = plugin.score(state, pod, at(r))
                if s is not None and s.code != Code.SUCCESS:
                    return values, s
                values.append(v)
            return values, None
        nodes = Nodes(self._snapshot, np.array(live, dtype=np.int64))
        scores, s = plugin.score_nodes(state, pod, nodes)
        return scores.tolist(), s

    def weigh(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod, values: list[int]
    ) -> None:
        live = self._both if self._plan.reads_pods[i] else self._node_rows
        scored = self._scored
        kept = scored.raw[i]
        if self._plan.normalizes[i]:
            for r, v in zip(live, values, strict=True):
                if kept.item(r) != v:
                    kept[r] = v
                    self.renormalize = True
            return
        weighted, weight, total = scored.weighted[i], self._plan.weights[i], scored.total
        for r, v in zip(live, values, strict=True):
            if not MIN_NODE_SCORE <= v <= MAX_NODE_SCORE:
                check_range(plugin.name, np.array([v], dtype=np.int64))
            kept[r] = v
            w = v * weight
            total[r] = total.item(r) + w - weighted.item(r)
            weighted[r] = w

    def finish(self, renormalize: bool) -> bool:
        """Mark the rows scored valid; unless everything is to be normalized again
        (``renormalize``, or :attr:`renormalize`), bring the top nodes up to date. Whether to
        normalize again."""
        both = self._both
        self._scored.valid[both] = True
        if renormalize or self.renormalize:
            return True
        self._scored.retie(both)
        return False
