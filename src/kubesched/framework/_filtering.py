"""The Filter loop (``RunFilterPlugins``): the active Filter plugins in order, each asked about
the nodes no plugin before it rejected, so that a node's status is that of the first plugin to
reject it. How the plugins are asked is the loop's form: vectorized (:class:`Vectorized`), or
one node at a time (:class:`PerNode`: a plugin's Handle call about one node, the per-shape
cache's few changed nodes)."""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Protocol, TypeVar

import numpy as np

from kubesched.api import Pod
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._errors import FilterError
from kubesched.framework._instrumented import FilterCalls, InstrumentedFilter
from kubesched.framework._interface import FilterPlugin, Nodes, Plugin
from kubesched.framework._metrics import Metrics
from kubesched.framework._snapshot import Snapshot
from kubesched.framework._status import Code, Status
from kubesched.framework._table import IntArray

#: Up to this many nodes are asked about one at a time: on a few nodes the per-node forms cost
#: less than numpy's calls.
PER_NODE_AT_MOST = 8

K = TypeVar("K")
K_co = TypeVar("K_co", covariant=True)


class FilterForm(Protocol[K_co]):
    """How the loop asks plugins about the nodes left, and how it names the rejected ones."""

    @property
    def remaining(self) -> Sized:
        """The nodes no plugin has rejected yet."""
        ...

    def ask(
        self, plugin: FilterCalls, state: CycleState, pod: Pod
    ) -> Sequence[tuple[K_co, Status]]:
        """``plugin``'s rejections among the nodes left, which then leave."""
        ...


def filter_in_order(
    state: CycleState, pod: Pod, plugins: Sequence[FilterCalls], form: FilterForm[K]
) -> list[tuple[K, Status]]:
    """Run ``plugins`` in order over the form's nodes: the rejected nodes with the status of
    the first plugin to reject them; the form keeps the others. A status that is no rejection
    (an Error) raises :class:`FilterError`."""
    rejected: list[tuple[K, Status]] = []
    for p in plugins:
        if not len(form.remaining):
            break
        for nodes, said in form.ask(p, state, pod):
            status = said.with_plugin(p.name)
            if not status.is_rejected():
                raise FilterError(p.name, status)
            rejected.append((nodes, status))
    return rejected


class Vectorized:
    """Each plugin's vectorized form on the nodes left; a rejection names an array of slots."""

    __slots__ = ("_snapshot", "remaining")

    def __init__(self, snapshot: Snapshot, slots: IntArray) -> None:
        self._snapshot = snapshot
        self.remaining = slots

    def ask(
        self, plugin: FilterCalls, state: CycleState, pod: Pod
    ) -> list[tuple[IntArray, Status]]:
        verdict = plugin.filter_nodes(state, pod, Nodes(self._snapshot, self.remaining))
        if len(verdict.statuses) == 1:
            # No status but success to point to: every node passed, no need to look.
            return []
        # Counting costs a third of comparing and asking any(), and most plugins fail no node.
        if not np.count_nonzero(verdict.ids):
            return []
        failing = verdict.ids != 0
        failed_slots = self.remaining[failing]
        self.remaining = self.remaining[~failing]
        if len(verdict.statuses) == 2:
            # One status to point to (the usual rejection): no need to tell failures apart.
            status = verdict.statuses[1]
            assert status is not None
            return [(failed_slots, status)]
        failed_ids = verdict.ids[failing]
        out = []
        # The ids are small (indexes into the statuses): counting them beats sorting them.
        present = np.bincount(failed_ids, minlength=len(verdict.statuses))
        for sid in np.flatnonzero(present).tolist():
            status = verdict.statuses[sid]
            assert status is not None
            out.append((failed_slots[failed_ids == sid], status))
        return out


class PerNode:
    """Each plugin's per-node form (:meth:`FilterPlugin.filter_one`) on the nodes left; a
    rejection names one slot."""

    __slots__ = ("_snapshot", "remaining")

    def __init__(self, snapshot: Snapshot, slots: list[int]) -> None:
        self._snapshot = snapshot
        self.remaining = slots

    def ask(self, plugin: FilterCalls, state: CycleState, pod: Pod) -> list[tuple[int, Status]]:
        at = self._snapshot.at
        kept: list[int] = []
        out: list[tuple[int, Status]] = []
        for slot in self.remaining:
            s = plugin.filter_one(state, pod, at(slot))
            if s is None or s.code == Code.SUCCESS:
                kept.append(slot)
            else:
                out.append((slot, s))
        self.remaining = kept
        return out


class FilterPlan:
    """The Filter plugins active for a pod (not skipped at its PreFilter), and what the
    per-shape cache needs to know of them; made once per distinct skip set."""

    __slots__ = (
        "_metrics",
        "_timed",
        "claim_readers",
        "epochs",
        "keyed",
        "local",
        "narrowed",
        "plugins",
        "pod_plugins",
        "recheck_on_pods",
        "split",
    )

    def __init__(
        self, plugins: list[FilterPlugin], metrics: Metrics | None, *, keyed: bool = False
    ) -> None:
        self.plugins = plugins
        self._metrics = metrics
        self._timed: dict[bool, list[InstrumentedFilter]] = {}
        self.local = all(p.node_local for p in plugins)
        #: When some plugins are not node-local but the first ones are: those first ones and
        #: the rest, as plans. A node's status is the first rejecting plugin's, so the verdicts
        #: of the first ones may come from the per-shape cache and the rest run on the nodes
        #: they pass.
        self.split: tuple[FilterPlan, FilterPlan] | None = None
        if not self.local and plugins[0].node_local:
            n = next(i for i, p in enumerate(plugins) if not p.node_local)
            self.split = FilterPlan(plugins[:n], metrics), FilterPlan(plugins[n:], metrics)
        #: Whether verdicts are kept by what the plugins read of the pod
        #: (``node_local_pod_key``) rather than by its whole shape: only the first plan of
        #: :attr:`narrowed` is, and scores are never kept on such an entry (it holds pods that
        #: differ in what Score reads).
        self.keyed = keyed
        #: For a node-local plan whose first plugins read less of the pod than its shape: those
        #: first ones (:attr:`keyed`) and the rest, as plans. Pods alike but for what only the
        #: rest read (say, their requests) share the first ones' verdicts, and the rest run on
        #: the nodes those pass.
        self.narrowed: tuple[FilterPlan, FilterPlan] | None = None
        if self.local and not keyed and plugins and has_pod_key(plugins[0]):
            n = next((i for i, p in enumerate(plugins) if not has_pod_key(p)), len(plugins))
            self.narrowed = (
                FilterPlan(plugins[:n], metrics, keyed=True),
                FilterPlan(plugins[n:], metrics),
            )
        self.pod_plugins = [p for p in plugins if p.node_local_reads_pods]
        # A node failed by one of these may fail otherwise once its pods change: the plugin
        # reads pods, or one that runs before it does.
        recheck: list[str] = []
        for p in plugins:
            if p.node_local_reads_pods or recheck:
                recheck.append(p.name)
        self.recheck_on_pods = frozenset(recheck)
        self.epochs = [p for p in plugins if has_epoch(p)]
        self.claim_readers = [p for p in plugins if reads_claims(p)]

    def calls(self, state: CycleState, *, pods_only: bool = False) -> Sequence[FilterCalls]:
        """The plugins (those that read pods with ``pods_only``) as the loop calls them: timed
        in a cycle whose plugin metrics are recorded."""
        plugins = self.pod_plugins if pods_only else self.plugins
        if self._metrics is None or not state.record_plugin_metrics:
            return plugins
        timed = self._timed.get(pods_only)
        if timed is None:
            timed = self._timed[pods_only] = [InstrumentedFilter(p, self._metrics) for p in plugins]
        return timed


def has_epoch(p: Plugin) -> bool:
    """Whether a node-local plugin reads something cluster-wide too (``node_local_epoch``)."""
    return type(p).node_local_epoch is not Plugin.node_local_epoch


def has_pod_key(p: Plugin) -> bool:
    """Whether a node-local plugin reads less of the pod than its shape (``node_local_pod_key``)."""
    return type(p).node_local_pod_key is not Plugin.node_local_pod_key


def reads_claims(p: Plugin) -> bool:
    """Whether a node-local plugin reads the pod's claims (``node_local_claims``)."""
    return type(p).node_local_claims is not Plugin.node_local_claims
