"""The nodes' measured load, as load-watcher reads it from Prometheus, refreshed in the
background; and what both Trimaran plugins share around it (staleness, reporting).

load-watcher asks Prometheus, for all nodes at once::

    avg_over_time(instance:node_cpu:ratio[15m])                    CPU, Average
    stddev_over_time(instance:node_cpu:ratio[15m])                 CPU, Std
    avg_over_time(instance:node_memory_utilisation:ratio[15m])     Memory, Average
    stddev_over_time(instance:node_memory_utilisation:ratio[15m])  Memory, Std

(the recording rules of kube-prometheus' node-mixin over node-exporter's series), keys each
answer by its ``instance`` label and multiplies it by 100: percentages of the node's capacity.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge

from kubesched.config import decode_args
from kubesched.framework import Handle, ScorePlugin
from kubesched.plugins.network_traffic import (
    PrometheusClient,
    Sample,
    TrafficData,
    TrafficRefresher,
)
from kubesched.plugins.trimaran._args import TrimaranArgs

#: load-watcher's metrics and operators.
CPU_METRIC = "instance:node_cpu:ratio"
MEMORY_METRIC = "instance:node_memory_utilisation:ratio"
AVERAGE = "avg_over_time"
STD = "stddev_over_time"

MIN_NODE_SCORE = 0

log = logging.getLogger("kubesched.plugins.trimaran")

REFRESHES = Counter(
    "kubesched_trimaran_refreshes",
    "Load queries a Trimaran plugin sent to Prometheus, by result (success, error).",
    ["plugin", "profile", "result"],
)
MINIMUM_SCORES = Counter(
    "kubesched_trimaran_minimum_scores",
    "Nodes a Trimaran plugin scored the minimum for want of load, by reason: missing (no "
    "answer from Prometheus yet), stale (older than maxDataAge), unknown_node (not in it).",
    ["plugin", "profile", "reason"],
)
DATA_AGE = Gauge(
    "kubesched_trimaran_data_age_seconds",
    "Age of the load a Trimaran plugin scores with (-1 before the first answer).",
    ["plugin", "profile"],
)


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """One node's utilisation over the window, in percent of capacity (``None``: no series)."""

    cpu_avg: float | None = None
    cpu_std: float | None = None
    memory_avg: float | None = None
    memory_std: float | None = None


def load_queries(window: float) -> list[tuple[str, str]]:
    """``(field of NodeLoad, PromQL)`` for every query load-watcher sends."""
    rollup = f"{round(window)}s"
    return [
        (f"{resource}_{op}", f"{function}({metric}[{rollup}])")
        for function, op in ((AVERAGE, "avg"), (STD, "std"))
        for metric, resource in ((CPU_METRIC, "cpu"), (MEMORY_METRIC, "memory"))
    ]


def load_by_node(answers: Mapping[str, list[Sample]], node_label: str) -> dict[str, NodeLoad]:
    """Node name -> load from each query's samples (keyed by NodeLoad field); values are the
    ratios times 100; samples without the label or not finite are left out."""
    fields: dict[str, dict[str, float]] = {}
    for name, samples in answers.items():
        for s in samples:
            node = s.labels.get(node_label)
            if node and math.isfinite(s.value):
                fields.setdefault(node, {})[name] = s.value * 100
    return {node: NodeLoad(**values) for node, values in fields.items()}


def go_round(x: float) -> int:
    """Go's ``math.Round``: halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


class TrimaranPlugin(ScorePlugin):
    """A Score plugin fed by the background load refresher; subclasses give the formula."""

    args_type = TrimaranArgs

    def __init__(
        self,
        handle: Handle,
        args: Any = None,
        *,
        fetch: Callable[[], Mapping[str, NodeLoad]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        decoded = decode_args(self.args_type, args)
        super().__init__(handle, decoded)
        self.config: TrimaranArgs = decoded
        self._clock = clock
        self._wall = wall
        self._profile = handle.profile_name
        self.address = decoded.address()
        if fetch is None:
            provider = decoded.metric_provider
            client = PrometheusClient(
                self.address,
                bearer_token=provider.token,
                timeout=decoded.request_timeout,
                insecure_skip_verify=provider.insecure_skip_verify,
            )
            self.address = client.base_url
            queries = load_queries(decoded.window)

            def fetch() -> Mapping[str, NodeLoad]:
                return load_by_node(
                    {name: client.query(q) for name, q in queries}, decoded.node_label
                )

        self.refresher: TrafficRefresher[NodeLoad] = TrafficRefresher(
            fetch,
            decoded.refresh_interval,
            name=f"{self.name}-{self._profile}",
            clock=clock,
            on_result=self._on_result,
        )
        #: When the data in use arrived, as wall-clock seconds (load-watcher's window end).
        self.window_end = 0.0
        self._source_ok: bool | None = None
        self._usable: bool | None = None
        #: Nodes scored the minimum for want of load, by reason (also a metric).
        self.minimum: dict[str, int] = {}
        DATA_AGE.labels(self.name, self._profile).set_function(self.data_age)

    def _on_result(self, ok: bool, detail: str) -> None:
        REFRESHES.labels(self.name, self._profile, "success" if ok else "error").inc()
        if ok:
            self.window_end = self._wall()
            level = logging.INFO if self._source_ok is not True else logging.DEBUG
            log.log(level, "%s: load of %s from %s", self.name, detail, self.address)
        else:
            level = logging.WARNING if self._source_ok is not False else logging.DEBUG
            log.log(level, "%s: load query to %s failed: %s", self.name, self.address, detail)
        self._source_ok = ok

    def data_age(self) -> float:
        data = self.refresher.data
        return -1.0 if data is None else self._clock() - data.fetched_at

    def count_minimum(self, reason: str, n: int = 1) -> None:
        self.minimum[reason] = self.minimum.get(reason, 0) + n
        MINIMUM_SCORES.labels(self.name, self._profile, reason).inc(n)

    def usable_data(self) -> TrafficData[NodeLoad] | None:
        """The load to score with, or ``None`` (missing or stale), logging changes."""
        self.refresher.start()
        data = self.refresher.data
        reason = ""
        if data is None:
            reason = "missing"
        elif self._clock() - data.fetched_at > self.config.max_data_age:
            reason = "stale"
        usable = not reason
        if usable != self._usable:
            if not usable:
                log.warning(
                    "%s: no current load from %s (%s): every node scores %d until there is; "
                    "last error: %s",
                    self.name,
                    self.address,
                    reason,
                    MIN_NODE_SCORE,
                    self.refresher.last_error or "none yet",
                )
            elif self._usable is not None:
                log.info("%s: current load again from %s", self.name, self.address)
            self._usable = usable
        if not usable:
            self.count_minimum(reason)
            return None
        return data

    def close(self) -> None:
        self.refresher.stop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)
