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
nodes have an image).
"""

from __future__ import annotations

import random
import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

import msgspec
import numpy as np

from kubesched.api import Pod
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._interface import (
    FilterPlugin,
    Nodes,
    Plugin,
    ScorePlugin,
    filter_one,
    has_normalize_score,
)
from kubesched.framework._node_info import PodInfo
from kubesched.framework._snapshot import Snapshot
from kubesched.framework._status import Code, Status
from kubesched.framework._table import MANY_ROWS, IdArray, IntArray

if TYPE_CHECKING:
    from kubesched.framework._runtime import NodeGroup

#: Up to this many changed rows are asked about one node at a time (the per-node forms cost
#: less than numpy's calls on a few values); beyond it, vectorized.
_FEW_ROWS = 8
#: Shapes kept per profile, least recently used dropped first.
_MAX_ENTRIES = 16

_encode = msgspec.json.Encoder().encode


def pod_shape(info: PodInfo) -> bytes:
    """What a node-local plugin may read of the pod, as bytes; derived once per PodInfo."""
    shape = info.shape
    if shape is None:
        m = info.pod.metadata
        shape = info.shape = _encode((m.namespace, m.labels, m.annotations, info.pod.spec))
    return shape


class BailError(Exception):
    """A plugin answered something the cache does not keep (an Error): the cycle takes the
    ordinary path, which reports it as it always does."""


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


#: How the runtime checks a score plugin's scores: raises on one out of range.
RangeCheck = Callable[[str, IntArray], None]
#: Times a plugin's calls: plugin name, extension point, seconds.
Record = Callable[[str, str, float], None]
#: The range of a normalized score (``MinNodeScore``, ``MaxNodeScore``).
SCORE_RANGE = (0, 100)


class _FilterPlan:
    """The Filter plugins active when the plugins in a skip set are skipped, and what the cache
    needs to know of them; made once per distinct skip set."""

    __slots__ = ("epochs", "local", "plugins", "pod_plugins", "recheck_on_pods")

    def __init__(self, plugins: list[FilterPlugin]) -> None:
        self.plugins = plugins
        self.local = all(p.node_local for p in plugins)
        self.pod_plugins = [p for p in plugins if p.node_local_reads_pods]
        # A node failed by one of these may fail otherwise once its pods change: the plugin
        # reads pods, or one that runs before it does.
        recheck: list[str] = []
        for p in plugins:
            if p.node_local_reads_pods or recheck:
                recheck.append(p.name)
        self.recheck_on_pods = frozenset(recheck)
        self.epochs = [p for p in plugins if _has_epoch(p)]


class _ScorePlan:
    """The active Score plugins for a skip set, their weights, and how each is called."""

    __slots__ = ("epochs", "local", "normalizes", "per_node", "plugins", "reads_pods", "weights")

    def __init__(self, plugins: list[ScorePlugin], weights: list[int]) -> None:
        self.plugins = plugins
        self.weights = weights
        self.local = all(p.node_local for p in plugins)
        self.normalizes = [has_normalize_score(p) for p in plugins]
        self.per_node = [type(p).score is not ScorePlugin.score for p in plugins]
        self.reads_pods = [p.node_local_reads_pods for p in plugins]
        self.epochs = [p for p in plugins if _has_epoch(p)]


def _has_epoch(p: FilterPlugin | ScorePlugin) -> bool:
    return type(p).node_local_epoch is not Plugin.node_local_epoch


class EquivalenceCache:
    """Per pod shape, what the node-local Filter and Score plugins said about each node."""

    def __init__(
        self,
        snapshot: Snapshot,
        filter_plugins: Sequence[FilterPlugin],
        score_plugins: Sequence[ScorePlugin],
        score_weights: Sequence[int],
    ) -> None:
        self._snapshot = snapshot
        self._filter_plugins = list(filter_plugins)
        self._score_plugins = list(score_plugins)
        self._score_weights = list(score_weights)
        self._filter_plans: dict[frozenset[str], _FilterPlan] = {}
        self._score_plans: dict[frozenset[str], _ScorePlan] = {}
        self._entries: dict[Hashable, Filtered] = {}

    def _filter_plan(self, skip: set[str]) -> _FilterPlan:
        key = frozenset(skip)
        plan = self._filter_plans.get(key)
        if plan is None:
            plan = _FilterPlan([p for p in self._filter_plugins if p.name not in key])
            self._filter_plans[key] = plan
        return plan

    def _score_plan(self, skip: set[str]) -> _ScorePlan:
        key = frozenset(skip)
        plan = self._score_plans.get(key)
        if plan is None:
            kept = [i for i, p in enumerate(self._score_plugins) if p.name not in key]
            plan = _ScorePlan(
                [self._score_plugins[i] for i in kept], [self._score_weights[i] for i in kept]
            )
            self._score_plans[key] = plan
        return plan

    # -- Filter ---------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: Pod, record: Record | None) -> Filtered | None:
        """The shape's verdicts, up to date, or ``None`` when a Filter plugin active for the
        pod is not node-local. ``record`` times the plugin calls when the cycle's metrics are
        sampled. Raises :class:`BailError` when a plugin errs."""
        plan = self._filter_plan(state.skip_filter_plugins)
        if not plan.local:
            return None
        plugins = plan.plugins
        table = self._snapshot.table
        shape = pod_shape(state.pod_info_of(pod))
        key: Hashable = (shape, plan)
        if plan.epochs:
            key = (shape, plan, *[p.node_local_epoch() for p in plan.epochs])
        entry = self._entries.pop(key, None)
        rows = self._changed(entry, table.version, table.layout)
        if entry is None or rows is None:
            entry = self._build(state, pod, plugins, record)
        elif rows[0] or rows[1]:
            self._refilter(state, pod, entry, plan, rows, record)
            entry.version = table.version
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
        plan: _FilterPlan,
        rows: tuple[list[int], list[int]],
        record: Record | None,
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
        dirty = False
        for group, group_plugins in ((every, plan.plugins), (some, plan.pod_plugins)):
            if not group:
                continue
            new = self._evaluate(state, pod, group, group_plugins, entry, record)
            for r, sid in zip(group, new, strict=True):
                if ids[r] != sid:
                    ids[r] = sid
                    dirty = True
        if dirty:
            entry.present = None

    def _evaluate(
        self,
        state: CycleState,
        pod: Pod,
        rows: list[int],
        plugins: Sequence[FilterPlugin],
        entry: Filtered,
        record: Record | None,
    ) -> list[int]:
        """The verdict (status id) of ``plugins`` in order on each of ``rows``: the first
        plugin to reject a node decides. A few rows one node at a time (:func:`filter_one`)."""
        table = self._snapshot.table
        out = [0] * len(rows)
        present = table.present
        live = [i for i, r in enumerate(rows) if present[r]]
        if not live or not plugins:
            return out
        if len(live) > _FEW_ROWS:
            slots = np.array([rows[i] for i in live], dtype=np.int64)
            ids = self._filter_vectorized(state, pod, slots, plugins, entry, record)
            for i, sid in zip(live, ids.take(slots).tolist(), strict=True):
                out[i] = sid
            return out
        at = self._snapshot.at
        t0 = 0.0
        for p in plugins:
            if record is not None:
                t0 = time.perf_counter()
            still = []
            for i in live:
                s = filter_one(p, state, pod, at(rows[i]))
                if s is None or s.code == Code.SUCCESS:
                    still.append(i)
                    continue
                if not s.is_rejected():
                    raise BailError
                out[i] = entry.intern(s.with_plugin(p.name))
            if record is not None:
                record(p.name, "Filter", time.perf_counter() - t0)
            live = still
            if not live:
                break
        return out

    def _build(
        self,
        state: CycleState,
        pod: Pod,
        plugins: Sequence[FilterPlugin],
        record: Record | None,
    ) -> Filtered:
        table = self._snapshot.table
        entry = Filtered(table.capacity, table.version, table.layout)
        entry.ids = self._filter_vectorized(
            state, pod, table.present_slots(), plugins, entry, record
        )
        return entry

    def _filter_vectorized(
        self,
        state: CycleState,
        pod: Pod,
        slots: IntArray,
        plugins: Sequence[FilterPlugin],
        entry: Filtered,
        record: Record | None,
    ) -> IdArray:
        """Status ids per slot (all slots; 0 outside ``slots``) of ``plugins`` in order on
        ``slots``, as ``Framework.run_filter`` runs them."""
        ids: IdArray = np.zeros(self._snapshot.table.capacity, dtype=np.int32)
        remaining = slots
        for p in plugins:
            if not len(remaining):
                break
            t0 = time.perf_counter()
            verdict = p.filter_nodes(state, pod, Nodes(self._snapshot, remaining))
            if record is not None:
                record(p.name, "Filter", time.perf_counter() - t0)
            if len(verdict.statuses) == 1:
                continue
            failing = verdict.ids != 0
            if not failing.any():
                continue
            lut = np.zeros(len(verdict.statuses), dtype=np.int32)
            for vid, s in enumerate(verdict.statuses):
                if vid == 0 or s is None:
                    continue
                if s.code == Code.ERROR:
                    raise BailError
                lut[vid] = entry.intern(s.with_plugin(p.name))
            ids[remaining[failing]] = lut[verdict.ids[failing]]
            remaining = remaining[~failing]
        return ids

    def _derive(self, entry: Filtered, present: IntArray) -> None:
        """Feasible slots and the failure groups, from the verdicts."""
        from kubesched.framework._runtime import NodeGroup  # noqa: PLC0415

        table = self._snapshot.table
        ids = entry.ids[: len(present)] if table.is_leading(present) else entry.ids.take(present)
        failing = ids != 0
        if not failing.any():
            entry.feasible = present
            entry.groups = []
        else:
            entry.feasible = present[~failing]
            failed_ids, failed_slots = ids[failing], present[failing]
            entry.groups = [
                NodeGroup(failed_slots[failed_ids == sid], entry.status(sid))
                for sid in np.unique(failed_ids).tolist()
            ]
        entry.present = present

    # -- Score ----------------------------------------------------------------------------------

    def score(
        self,
        state: CycleState,
        pod: Pod,
        entry: Filtered,
        check: RangeCheck,
        record: Record | None,
        rng: random.Random,
        *,
        plugin_scores: bool = True,
    ) -> tuple[dict[str, IntArray], IntArray, int] | None:
        """Weighted scores per plugin and their sum over the entry's feasible nodes, as
        ``Framework.run_score`` gives them, after PreScore ran on those nodes, and the slot of
        the node picked (:meth:`_Scored.pick`); ``None`` when a Score plugin active for the pod
        is not node-local. Without ``plugin_scores`` the per-plugin scores are left out and the
        sum may be a view of the cache's, valid until the next cycle."""
        plan = self._score_plan(state.skip_score_plugins)
        if not plan.local:
            return None
        table = self._snapshot.table
        feasible = entry.feasible
        assert feasible is not None
        key: Hashable = plan
        if plan.epochs:
            key = (plan, *[p.node_local_epoch() for p in plan.epochs])
        # Taken out while it is brought up to date: an error halfway leaves none behind.
        scored = entry.scored.pop(key, None)
        rows = self._changed(scored, table.version, table.layout)
        if scored is None or rows is None:
            scored = self._score_all(state, pod, plan, feasible, check, record)
        else:
            renormalize = scored.feasible is not feasible
            if rows[0] or rows[1]:
                renormalize |= self._rescore(state, pod, entry, scored, rows, plan, check, record)
            if renormalize:
                self._normalize(state, pod, scored, plan, feasible, check)
            scored.version = table.version
        entry.scored[key] = scored
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
        return per_plugin, totals, scored.pick(feasible, leading, rng)

    def _score_all(
        self,
        state: CycleState,
        pod: Pod,
        plan: _ScorePlan,
        feasible: IntArray,
        check: RangeCheck,
        record: Record | None,
    ) -> _Scored:
        table = self._snapshot.table
        scored = _Scored(len(plan.plugins), table.capacity, table.version, table.layout)
        nodes = Nodes(self._snapshot, feasible)
        for i, p in enumerate(plan.plugins):
            t0 = time.perf_counter()
            scores, s = p.score_nodes(state, pod, nodes)
            if record is not None:
                record(p.name, "Score", time.perf_counter() - t0)
            if s is not None and s.code != Code.SUCCESS:
                raise BailError
            scored.raw[i][feasible] = scores
        scored.valid[feasible] = True
        self._normalize(state, pod, scored, plan, feasible, check)
        return scored

    def _rescore(
        self,
        state: CycleState,
        pod: Pod,
        entry: Filtered,
        scored: _Scored,
        rows: tuple[list[int], list[int]],
        plan: _ScorePlan,
        check: RangeCheck,
        record: Record | None,
    ) -> bool:
        """Score the changed rows that are feasible now (where only pods changed and the row's
        scores were valid, by the plugins that read pods); whether a plugin that normalizes saw
        a score change (its normalized scores may all move).

        Rows that are not feasible are not scored, and their scores are no longer valid; a row
        becomes feasible only by changing, so it is among ``rows`` then, and is scored by every
        plugin."""
        ids, present, valid = entry.ids, self._snapshot.table.present, scored.valid
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
        if not node_rows and not pod_rows:
            return False
        both = node_rows + pod_rows
        renormalize = False
        at = self._snapshot.at
        lo, hi = SCORE_RANGE
        total = scored.total
        t0 = 0.0
        for i, p in enumerate(plan.plugins):
            live = both if plan.reads_pods[i] else node_rows
            if not live:
                continue
            if record is not None:
                t0 = time.perf_counter()
            if plan.per_node[i] and len(live) <= _FEW_ROWS:
                values = []
                for r in live:
                    v, s = p.score(state, pod, at(r))
                    if s is not None and s.code != Code.SUCCESS:
                        raise BailError
                    values.append(v)
            else:
                arr, s = p.score_nodes(
                    state, pod, Nodes(self._snapshot, np.array(live, dtype=np.int64))
                )
                if s is not None and s.code != Code.SUCCESS:
                    raise BailError
                values = arr.tolist()
            if record is not None:
                record(p.name, "Score", time.perf_counter() - t0)
            raw = scored.raw[i]
            if plan.normalizes[i]:
                for r, v in zip(live, values, strict=True):
                    if raw.item(r) != v:
                        raw[r] = v
                        renormalize = True
                continue
            weighted, weight = scored.weighted[i], plan.weights[i]
            for r, v in zip(live, values, strict=True):
                if not lo <= v <= hi:
                    check(p.name, np.array([v], dtype=np.int64))
                raw[r] = v
                w = v * weight
                total[r] = total.item(r) + w - weighted.item(r)
                weighted[r] = w
        valid[both] = True
        if not renormalize:
            scored.retie(both)
        return renormalize

    def _normalize(
        self,
        state: CycleState,
        pod: Pod,
        scored: _Scored,
        plan: _ScorePlan,
        feasible: IntArray,
        check: RangeCheck,
    ) -> None:
        """Weighted scores on ``feasible`` from the raw ones, and their sum."""
        nodes = Nodes(self._snapshot, feasible)
        total = scored.total
        total[:] = 0
        for i, p in enumerate(plan.plugins):
            scores = scored.raw[i].take(feasible)
            if plan.normalizes[i]:
                s = p.normalize_score(state, pod, nodes, scores)
                if s is not None and s.code != Code.SUCCESS:
                    raise BailError
            check(p.name, scores)
            weight = plan.weights[i]
            if weight != 1:
                scores *= weight
            scored.weighted[i][feasible] = scores
            total[feasible] += scores
        scored.feasible = feasible
        scored.ties = None
