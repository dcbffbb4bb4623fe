"""LoadVariationRiskBalancing: balance nodes by the risk of their load, mean and variation.

Per node and resource (CPU in millicores, memory in MiB), with ``A`` the node's allocatable,
``r`` the pod's request, and the utilisation's average ``avg`` and standard deviation ``std``
over the window (percent)::

    mu    = clamp((clamp(avg * A / 100, 0, A) + r) / A, 0, 1)
    sigma = clamp(clamp(std * A / 100, 0, A) / A, 0, 1)
    sigma = clamp(margin * sigma ** (1 / sensitivity), 0, 1)
    score = (1 - (mu + sigma) / 2) * 100

``margin`` and ``sensitivity`` are ``safeVarianceMargin`` and ``safeVarianceSensitivity``. The
node's score is the lower of the two resources' when it has load for both, the one it has
otherwise, rounded; a node without load scores 0.
"""

from __future__ import annotations

import math

from kubesched.api import CPU, MEMORY, Pod, quantity_milli_value, quantity_value
from kubesched.framework import CycleState, NodeInfo, Status
from kubesched.plugins.trimaran._args import LoadVariationRiskBalancingArgs
from kubesched.plugins.trimaran._load import (
    MIN_NODE_SCORE,
    TrimaranPlugin,
    go_round,
)

NAME = "LoadVariationRiskBalancing"
MAX_NODE_SCORE = 100
#: Bytes to MiB (``MegaFactor``).
MEGA_FACTOR = 1.0 / 1024.0 / 1024.0


def requested(pod: Pod) -> dict[str, int]:
    """``GetResourceRequested``: the containers' requests added up, raised to any init
    container's, plus the overhead; cpu in millicores, memory in bytes."""

    def of(resources: dict[str, str]) -> tuple[int, int]:
        cpu = resources.get(CPU)
        memory = resources.get(MEMORY)
        return (
            quantity_milli_value(cpu) if cpu is not None else 0,
            quantity_value(memory) if memory is not None else 0,
        )

    cpu = memory = 0
    for c in pod.spec.containers:
        dc, dm = of(c.resources.requests)
        cpu, memory = cpu + dc, memory + dm
    for c in pod.spec.init_containers:
        dc, dm = of(c.resources.requests)
        cpu, memory = max(cpu, dc), max(memory, dm)
    oc, om = of(pod.spec.overhead)
    return {CPU: cpu + oc, MEMORY: memory + om}


def risk_score(
    avg: float, std: float, request: float, capacity: float, margin: float, sensitivity: float
) -> float:
    """``computeScore`` for one resource (before rounding)."""
    if capacity <= 0:
        return 0.0
    request = max(request, 0.0)
    used_avg = max(min(avg * capacity / 100, capacity), 0.0)
    used_std = max(min(std * capacity / 100, capacity), 0.0)
    mu = max(min((used_avg + request) / capacity, 1.0), 0.0)
    sigma = max(min(used_std / capacity, 1.0), 0.0)
    if sensitivity >= 0:
        # Go divides by zero into +Inf: sigma ** inf is 0 below 1, 1 at 1.
        exponent = math.inf if sensitivity == 0 else 1 / sensitivity
        sigma = sigma**exponent
    sigma = max(min(sigma * margin, 1.0), 0.0)
    risk = (mu + sigma) / 2
    return (1.0 - risk) * MAX_NODE_SCORE


class LoadVariationRiskBalancing(TrimaranPlugin):
    """Score: lower risk (mean plus variation of measured load) first."""

    name = NAME
    args_type = LoadVariationRiskBalancingArgs

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        data = self.usable_data()
        if data is None:
            return MIN_NODE_SCORE, None
        load = data.traffic.get(node.name)
        if load is None:
            self.count_minimum("unknown_node")
            return MIN_NODE_SCORE, None
        args: LoadVariationRiskBalancingArgs = self.args
        margin, sensitivity = args.safe_variance_margin, args.safe_variance_sensitivity
        request = requested(pod)
        allocatable = node.allocatable
        cpu_ok = load.cpu_avg is not None or load.cpu_std is not None
        memory_ok = load.memory_avg is not None or load.memory_std is not None
        cpu = memory = 0.0
        if cpu_ok:
            cpu = risk_score(
                load.cpu_avg or 0.0,
                load.cpu_std or 0.0,
                float(request[CPU]),
                float(allocatable.get(CPU, 0)),
                margin,
                sensitivity,
            )
        if memory_ok:
            memory = risk_score(
                load.memory_avg or 0.0,
                load.memory_std or 0.0,
                request[MEMORY] * MEGA_FACTOR,
                allocatable.get(MEMORY, 0) * MEGA_FACTOR,
                margin,
                sensitivity,
            )
        total = min(cpu, memory) if cpu_ok and memory_ok else max(cpu, memory)
        return go_round(total), None
