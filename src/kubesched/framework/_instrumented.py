"""Filter and Score plugins timed by wrapping them, as kube-scheduler's instrumented plugins
(``runtime/instrumented_plugins.go``) count by wrapping: the loops that call plugins know
nothing of metrics, and a cycle whose plugin metrics are not sampled calls the plugins bare."""

from __future__ import annotations

import time
from typing import Protocol

from kubesched.api import Pod
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._interface import FilterPlugin, Nodes, NodeStatuses, ScorePlugin
from kubesched.framework._metrics import Metrics
from kubesched.framework._node_info import NodeInfo
from kubesched.framework._status import Code, Status
from kubesched.framework._table import IntArray


class FilterCalls(Protocol):
    """What the Filter loop calls: a :class:`FilterPlugin` or its :class:`InstrumentedFilter`."""

    @property
    def name(self) -> str: ...

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses: ...

    def filter_one(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None: ...


class ScoreCalls(Protocol):
    """What the Score loop calls: a :class:`ScorePlugin` or its :class:`InstrumentedScore`."""

    @property
    def name(self) -> str: ...

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]: ...

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]: ...

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None: ...


class _Instrumented:
    __slots__ = ("_metrics", "name")

    def __init__(self, name: str, metrics: Metrics) -> None:
        self.name = name
        self._metrics = metrics

    def _observe(self, point: str, start: float) -> None:
        self._metrics.plugin(self.name, point, Code.SUCCESS, time.perf_counter() - start)


class InstrumentedFilter(_Instrumented):
    """A Filter plugin whose every call is timed (``plugin_execution_duration_seconds``)."""

    __slots__ = ("_plugin",)

    def __init__(self, plugin: FilterPlugin, metrics: Metrics) -> None:
        super().__init__(plugin.name, metrics)
        self._plugin = plugin

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        start = time.perf_counter()
        verdict = self._plugin.filter_nodes(state, pod, nodes)
        self._observe("Filter", start)
        return verdict

    def filter_one(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        start = time.perf_counter()
        status = self._plugin.filter_one(state, pod, node)
        self._observe("Filter", start)
        return status


class InstrumentedScore(_Instrumented):
    """A Score plugin whose Score calls are timed; NormalizeScore is passed through."""

    __slots__ = ("_plugin",)

    def __init__(self, plugin: ScorePlugin, metrics: Metrics) -> None:
        super().__init__(plugin.name, metrics)
        self._plugin = plugin

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        start = time.perf_counter()
        out = self._plugin.score_nodes(state, pod, nodes)
        self._observe("Score", start)
        return out

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        start = time.perf_counter()
        out = self._plugin.score(state, pod, node)
        self._observe("Score", start)
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        return self._plugin.normalize_score(state, pod, nodes, scores)
