"""Helpers for the extender's unit tests: request bodies, small plugins, an Extender to drive.

The bodies under ``fixtures/`` were recorded from the real kube-scheduler v1.34.4 calling an
extender (``tests/e2e/extender/test_extender_e2e_recorded.py`` records them again): filter and
prioritize with ``NodeNames`` (a ``nodeCacheCapable`` extender) and with a full ``NodeList``,
bind, and preempt with ``NodeNameToMetaVictims`` and with ``NodeNameToVictims``. They concern a
cluster of two nodes, ``rec-a`` and ``rec-b`` (room for one pod each), holding ``rec-low-1`` and
``rec-low-2``; the pod is ``default/rec-low-1`` (filter, prioritize) or ``default/rec-high``
(preempt).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from builders import make_node, make_pod
from kubesched.api import Node, Pod
from kubesched.config import KubeSchedulerConfiguration, load_config_from_dict
from kubesched.extender import Extender, ExtenderMetrics
from kubesched.framework import (
    Code,
    CycleState,
    FilterPlugin,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreScorePlugin,
    Registry,
    ScorePlugin,
    Status,
    plugin_args_types,
)
from kubesched.plugins import default_registry

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(name: str) -> bytes:
    """The recorded body ``fixtures/<name>.json``."""
    return (FIXTURES / f"{name}.json").read_bytes()


def fixture_json(name: str) -> Any:
    return json.loads(fixture(name))


def rec_nodes() -> list[Node]:
    """The recorded cluster's nodes as the informers would deliver them."""
    items = fixture_json("filter-nodes")["Nodes"]["items"]
    return [_convert(item, Node) for item in items]


def rec_pods() -> list[Pod]:
    """The two low-priority pods, bound as in the recording (UIDs from the preempt body)."""
    victims = fixture_json("preempt-victims")["NodeNameToVictims"]
    return [_convert(v["Pods"][0], Pod) for v in victims.values()]


def _convert(data: Any, kind: type[Any]) -> Any:
    import msgspec

    return msgspec.json.decode(json.dumps(data).encode(), type=kind)


# --- plugins ----------------------------------------------------------------------------------


class RejectOdd(FilterPlugin):
    """Rejects nodes whose name ends in an odd digit (Unschedulable), ``-x`` unresolvably."""

    name = "RejectOdd"

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        ids = np.zeros(len(nodes), dtype=np.int32)
        for i, name in enumerate(nodes.names()):
            if name.endswith("-x"):
                ids[i] = 2
            elif name[-1:].isdigit() and int(name[-1]) % 2:
                ids[i] = 1
        return NodeStatuses(
            ids,
            [
                None,
                Status(Code.UNSCHEDULABLE, "node(s) had an odd name"),
                Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) were crossed out"),
            ],
        )


class Broken(FilterPlugin):
    """Answers Error for every node."""

    name = "Broken"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        return Status(Code.ERROR, "the oracle is unreachable")


class Raising(FilterPlugin):
    """Raises: a bug in a plugin."""

    name = "Raising"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        raise ZeroDivisionError("division by zero")


class Slow(FilterPlugin):
    """Takes ``Slow.seconds`` per call (and tells when it started)."""

    name = "Slow"
    seconds = 0.5
    calls = 0
    started = threading.Event()

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        Slow.calls += 1
        Slow.started.set()
        time.sleep(Slow.seconds)
        return NodeStatuses.passing(len(nodes))


class Digits(ScorePlugin):
    """Scores a node by the last digit of its name times 10 (``n-7`` → 70; no digit → 0)."""

    name = "Digits"

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        scores = [int(n[-1]) * 10 if n[-1:].isdigit() else 0 for n in nodes.names()]
        return np.array(scores, dtype=np.int64), None


class Full(ScorePlugin):
    """Scores every node 100."""

    name = "Full"

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        return np.full(len(nodes), 100, dtype=np.int64), None


class SkipScore(PreScorePlugin, ScorePlugin):
    """Skips itself at PreScore (its weight must then not count)."""

    name = "SkipScore"

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        return Status(Code.SKIP)

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        raise AssertionError("skipped plugins are not called")


class BrokenScore(ScorePlugin):
    name = "BrokenScore"

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        return np.zeros(len(nodes), dtype=np.int64), Status(Code.ERROR, "no metrics")


TEST_PLUGINS = (RejectOdd, Broken, Raising, Slow, Digits, Full, SkipScore, BrokenScore)


def registry() -> Registry:
    r = default_registry()
    for cls in TEST_PLUGINS:
        r.register(cls)
    return r


def config(*plugins: str | tuple[str, int], **extra: Any) -> KubeSchedulerConfiguration:
    """One profile ``test`` running just ``plugins`` (``(name, weight)`` for a weight)."""
    enabled = [
        {"name": p} if isinstance(p, str) else {"name": p[0], "weight": p[1]} for p in plugins
    ]
    profile = {
        "schedulerName": "test",
        "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
        **extra,
    }
    return load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [profile],
        },
        plugin_args_types=plugin_args_types(registry()),
    )


def make_extender(
    cfg: KubeSchedulerConfiguration,
    *,
    nodes: list[Node] | None = None,
    pods: list[Pod] | None = None,
    informers: bool = True,
    client: Any = None,
) -> Extender:
    """An Extender whose cluster snapshot holds ``nodes`` and ``pods``, for calling its verbs
    directly from the test's thread (no worker-side flushes)."""
    ext = Extender(cfg, registry(), client=client, metrics=ExtenderMetrics(), informers=informers)
    ext.cache.on_pending = None
    for node in nodes or []:
        ext.cache.set_node(node)
    for pod in pods or []:
        ext.cache.set_pod(pod)
    ext.cache.flush()
    return ext


def names_body(pod: Pod, names: list[str]) -> bytes:
    """An ExtenderArgs body in NodeNames mode, in kube-scheduler's shape."""
    return _args(pod, {"Nodes": None, "NodeNames": names})


def nodes_body(pod: Pod, nodes: list[Node]) -> bytes:
    """An ExtenderArgs body with a full NodeList, in kube-scheduler's shape."""
    import msgspec

    items = [msgspec.to_builtins(n) for n in nodes]
    return _args(pod, {"Nodes": {"metadata": {}, "items": items}, "NodeNames": None})


def _args(pod: Pod, rest: dict[str, Any]) -> bytes:
    import msgspec

    return json.dumps({"Pod": msgspec.to_builtins(pod), **rest}).encode()


def nodes(*names: str, **kwargs: Any) -> list[Node]:
    """Nodes with a resourceVersion, as the API server gives them."""
    import msgspec

    out = []
    for name in names:
        n = make_node(name, **kwargs)
        meta = msgspec.structs.replace(n.metadata, resource_version="1")
        out.append(msgspec.structs.replace(n, metadata=meta))
    return out


__all__ = [
    "FIXTURES",
    "TEST_PLUGINS",
    "config",
    "fixture",
    "fixture_json",
    "make_extender",
    "make_node",
    "make_pod",
    "names_body",
    "nodes",
    "nodes_body",
    "rec_nodes",
    "rec_pods",
    "registry",
]
