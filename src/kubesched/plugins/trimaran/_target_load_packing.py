"""TargetLoadPacking: pack nodes up to a target CPU utilisation, then spread (best fit).

Per node, with ``U`` the node's average CPU utilisation over the window (percent), ``C`` its CPU
capacity (millicores), ``p`` the pod's predicted CPU and ``m`` the predicted CPU of pods placed
on the node since the window ended or within the 60 s before (not in the measurement yet)::

    predicted = 100 * (U / 100 * C + p + m) / C
    score     = round((100 - T) * predicted / T + T)          if predicted <= T
              = round(T * (100 - predicted) / (100 - T))     if T < predicted <= 100
              = 0                                             if predicted > 100

``T`` is ``targetUtilization``. A container's predicted CPU is its limit; else its request times
``defaultRequestsMultiplier``; else ``defaultRequests.cpu``. A node without load scores 0.

Upstream stamps a pod when its informer first sees it on a node; here a pod is stamped when the
plugin first sees it counted on a node (assumed or bound), looking again at a node only when its
pods changed. Either way the pods already running at start count as new for a while.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api import CPU, Container, Pod, quantity_milli_value
from kubesched.framework import CycleState, Handle, NodeInfo, Status
from kubesched.plugins.trimaran._args import TargetLoadPackingArgs
from kubesched.plugins.trimaran._load import (
    MIN_NODE_SCORE,
    NodeLoad,
    TrimaranPlugin,
    go_round,
)

NAME = "TargetLoadPacking"
#: How often a metrics agent reports (``metricsAgentReportingIntervalSeconds``).
METRICS_AGENT_REPORTING_INTERVAL = 60.0
#: Placed pods are forgotten after this (``cacheCleanupIntervalMinutes``).
PLACED_PODS_TTL = 5 * 60.0


class TargetLoadPacking(TrimaranPlugin):
    """Score: best fit of measured CPU load around ``targetUtilization``."""

    name = NAME
    args_type = TargetLoadPackingArgs

    def __init__(
        self,
        handle: Handle,
        args: Any = None,
        *,
        fetch: Callable[[], Mapping[str, NodeLoad]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(handle, args, fetch=fetch, clock=clock, wall=wall)
        decoded: TargetLoadPackingArgs = self.args
        self.target = float(decoded.target_utilization)
        self.requests_milli_cores = decoded.requests_milli_cores()
        self.multiplier = decoded.multiplier()
        #: Pods seen placed lately, per node: uid -> (predicted millicores, wall-clock time).
        self.placed: dict[str, dict[str, tuple[int, float]]] = {}
        #: The node generation whose pods :attr:`placed` has seen, per node.
        self._seen: dict[str, int] = {}
        self._capacity: dict[int, tuple[object, float]] = {}

    def predict_container(self, c: Container) -> int:
        """``PredictUtilisation``: a container's expected CPU in millicores."""
        limits, requests = c.resources.limits, c.resources.requests
        if CPU in limits:
            return quantity_milli_value(limits[CPU])
        if CPU in requests:
            return go_round(quantity_milli_value(requests[CPU]) * self.multiplier)
        return self.requests_milli_cores

    def predict_pod(self, pod: Pod) -> int:
        total = sum(self.predict_container(c) for c in pod.spec.containers)
        overhead = pod.spec.overhead.get(CPU)
        return total + (quantity_milli_value(overhead) if overhead is not None else 0)

    def _cpu_capacity(self, node: NodeInfo) -> float:
        """The node's ``status.capacity`` cpu in millicores, parsed once per Node object."""
        cached = self._capacity.get(node.slot)
        if cached is not None and cached[0] is node.node:
            return cached[1]
        assert node.node is not None
        raw = node.node.status.capacity.get(CPU)
        capacity = float(quantity_milli_value(raw)) if raw is not None else 0.0
        self._capacity[node.slot] = (node.node, capacity)
        return capacity

    def _missing(self, node: NodeInfo) -> int:
        """Predicted CPU of pods placed on ``node`` that the measured load may not show yet."""
        now = self._wall()
        placed = self.placed.setdefault(node.name, {})
        if self._seen.get(node.name) != node.generation:
            self._seen[node.name] = node.generation
            for uid in [u for u in placed if u not in node.pods]:
                del placed[uid]
            for uid, info in node.pods.items():
                if uid not in placed:
                    placed[uid] = (self.predict_pod(info.pod), now)
        end = self.window_end
        total = 0
        for uid, (predicted, at) in list(placed.items()):
            if now - at > PLACED_PODS_TTL:
                del placed[uid]
            elif at > end or end - at < METRICS_AGENT_REPORTING_INTERVAL:
                total += predicted
        return total

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        data = self.usable_data()
        if data is None:
            return MIN_NODE_SCORE, None
        load = data.traffic.get(node.name)
        if load is None or load.cpu_avg is None:
            self.count_minimum("unknown_node")
            return MIN_NODE_SCORE, None
        capacity = self._cpu_capacity(node)
        used = load.cpu_avg / 100 * capacity
        predicted = 0.0
        if capacity != 0:
            predicted = 100 * (used + self.predict_pod(pod) + self._missing(node)) / capacity
        target = self.target
        if predicted > target:
            if predicted > 100:
                return MIN_NODE_SCORE, None
            return go_round(target * (100 - predicted) / (100 - target)), None
        return go_round((100 - target) * predicted / target + target), None
