"""The Score loop (``RunScorePlugins``): each active Score plugin's scores on the feasible
nodes, normalized (NormalizeScore), checked to lie in ``[MIN_NODE_SCORE, MAX_NODE_SCORE]``,
weighted and summed. Where the scores come from and where the weighted ones go is the loop's
form: :class:`Fresh` asks every plugin about every node; the per-shape cache keeps scores
across cycles and asks only about the nodes that changed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

import numpy as np

from kubesched.api import Pod
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._errors import ScoreError
from kubesched.framework._filtering import has_epoch, reads_claims
from kubesched.framework._instrumented import InstrumentedScore, ScoreCalls
from kubesched.framework._interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    Nodes,
    ScorePlugin,
)
from kubesched.framework._metrics import Metrics
from kubesched.framework._status import Code, Status, go_quote
from kubesched.framework._table import IntArray

#: A plugin's raw scores: an array aligned with the nodes asked, or a few values in a list.
S = TypeVar("S", IntArray, list[int])


class ScoreForm(Protocol[S]):
    """Which plugins the loop asks, where their scores come from and where they go."""

    def asked(self, n: int) -> Iterable[int]:
        """The indexes, ascending, of the plan's plugins (``n`` of them) to ask."""
        ...

    def score(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod
    ) -> tuple[S, Status | None]:
        """The raw scores of the plan's ``i``-th plugin."""
        ...

    def weigh(self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod, raw: S) -> None:
        """Normalize, check, weight and sum the scores :meth:`score` gave."""
        ...


def score_in_order(
    state: CycleState, pod: Pod, plugins: Sequence[ScoreCalls], form: ScoreForm[S]
) -> None:
    """Run ``plugins`` (a :class:`ScorePlan`'s) in order through ``form``. A plugin's Error,
    or a score out of range, raises :class:`ScoreError`."""
    for i in form.asked(len(plugins)):
        p = plugins[i]
        raw, status = form.score(i, p, state, pod)
        if status is not None and status.code != Code.SUCCESS:
            raise ScoreError(p.name, _failed("running Score plugins", p.name, status))
        form.weigh(i, p, state, pod, raw)


class ScorePlan:
    """The Score plugins active for a pod (not skipped at its PreScore), their weights, how
    each is called; made once per distinct skip set."""

    __slots__ = (
        "_metrics",
        "_timed",
        "claim_readers",
        "epochs",
        "local",
        "normalizes",
        "per_node",
        "plugins",
        "pod_readers",
        "reads_pods",
        "split",
        "weights",
    )

    def __init__(self, plugins: list[ScorePlugin], weights: list[int], metrics: Metrics | None):
        self.plugins = plugins
        self.weights = weights
        self._metrics = metrics
        self._timed: list[InstrumentedScore] | None = None
        self.local = all(p.node_local for p in plugins)
        self.normalizes = [
            type(p).normalize_score is not ScorePlugin.normalize_score for p in plugins
        ]
        self.per_node = [type(p).score is not ScorePlugin.score for p in plugins]
        self.reads_pods = [p.node_local_reads_pods for p in plugins]
        self.pod_readers = [i for i, reads in enumerate(self.reads_pods) if reads]
        self.epochs = [p for p in plugins if has_epoch(p)]
        self.claim_readers = [p for p in plugins if reads_claims(p)]
        #: When some plugins are node-local and some not: the two kinds, as plans. A node's
        #: total is a sum, so the node-local plugins' scores may come from the per-shape cache
        #: and only the others be asked each cycle.
        self.split: tuple[ScorePlan, ScorePlan] | None = None
        if not self.local and any(p.node_local for p in plugins):
            local = [i for i, p in enumerate(plugins) if p.node_local]
            other = [i for i, p in enumerate(plugins) if not p.node_local]
            self.split = (
                ScorePlan([plugins[i] for i in local], [weights[i] for i in local], metrics),
                ScorePlan([plugins[i] for i in other], [weights[i] for i in other], metrics),
            )

    def calls(self, state: CycleState) -> Sequence[ScoreCalls]:
        """The plugins as the loop calls them: timed in a cycle whose plugin metrics are
        recorded."""
        if self._metrics is None or not state.record_plugin_metrics:
            return self.plugins
        if self._timed is None:
            self._timed = [InstrumentedScore(p, self._metrics) for p in self.plugins]
        return self._timed

    def weighted(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod, nodes: Nodes, raw: IntArray
    ) -> IntArray:
        """The ``i``-th plugin's ``raw`` scores on ``nodes`` normalized (in place), checked and
        weighted (a weight of 1 keeps the array)."""
        if self.normalizes[i]:
            s = plugin.normalize_score(state, pod, nodes, raw)
            if s is not None and s.code != Code.SUCCESS:
                raise ScoreError(
                    plugin.name, _failed("running Normalize on Score plugins", plugin.name, s)
                )
        check_range(plugin.name, raw)
        weight = self.weights[i]
        return raw if weight == 1 else raw * weight


class Fresh:
    """Every plugin asked about every one of ``nodes``; the weighted scores per plugin and
    their sum, aligned with the nodes."""

    __slots__ = ("_nodes", "_plan", "per_plugin", "total")

    def __init__(self, plan: ScorePlan, nodes: Nodes) -> None:
        self._plan = plan
        self._nodes = nodes
        self.per_plugin: dict[str, IntArray] = {}
        self.total: IntArray = np.zeros(len(nodes), dtype=np.int64)

    def asked(self, n: int) -> Iterable[int]:
        return range(n)

    def score(
        self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod
    ) -> tuple[IntArray, Status | None]:
        return plugin.score_nodes(state, pod, self._nodes)

    def weigh(self, i: int, plugin: ScoreCalls, state: CycleState, pod: Pod, raw: IntArray) -> None:
        # The scores are the runtime's (NormalizeScore rescales them in place).
        weighted = self._plan.weighted(i, plugin, state, pod, self._nodes, raw)
        self.per_plugin[plugin.name] = weighted
        self.total += weighted


def check_range(plugin: str, scores: IntArray) -> None:
    """Raise :class:`ScoreError` if a normalized score is outside the range."""
    if _out_of_range(scores):
        bad = int(scores.max() if scores.max() > MAX_NODE_SCORE else scores.min())
        raise ScoreError(
            plugin,
            Status(
                Code.ERROR,
                f"applying score defaultWeights on Score plugins: plugin {go_quote(plugin)} "
                f"returns an invalid score {bad}, it should in the range of "
                f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
            ),
        )


def _failed(context: str, plugin: str, status: Status) -> Status:
    """A Score or NormalizeScore plugin's error as ``RunScorePlugins`` reports it."""
    return status.wrapped(f"{context}: plugin {go_quote(plugin)} failed with", plugin)


def _out_of_range(scores: IntArray) -> bool:
    """Whether some score is outside ``[MIN_NODE_SCORE, MAX_NODE_SCORE]``."""
    if not len(scores):
        return False
    if scores.dtype == np.int64 and MIN_NODE_SCORE == 0:
        # One pass instead of two: a negative int64 read as uint64 is above 2**63. argmax rather
        # than max: numpy's argmax over integers is a few times faster.
        unsigned = scores.view(np.uint64)
        return bool(unsigned[unsigned.argmax()] > MAX_NODE_SCORE)
    return bool(scores.max() > MAX_NODE_SCORE or scores.min() < MIN_NODE_SCORE)
