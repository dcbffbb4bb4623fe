"""Args, node statistics and reporting shared by SafeOverload and SafeBalance."""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
from prometheus_client import Counter

from kubesched.api import Pod, pod_requests
from kubesched.config import Duration, FieldError, format_duration
from kubesched.framework import Handle, Nodes, Plugin
from kubesched.plugins.safe._beta import FloatArray
from kubesched.plugins.safe._stats import (
    MISSING,
    PROBLEMS,
    RESOURCES,
    STATS_UPDATED_AT,
    BoolArray,
    StatsTable,
    mu_sigma,
)

log = logging.getLogger("kubesched.plugins.safe")

#: The original's environment variables, read (when set to an integer 0..100) for the defaults.
ENV_UTILIZATION = "SAFEUTILIZATION"
ENV_PERCENTILE = "SAFEPERCENTILE"
ENV_FORECAST_WEIGHT = "SAFEFORECASTWEIGHT"

DEFAULT_UTILIZATION = 90
DEFAULT_PERCENTILE = 30
DEFAULT_FORECAST_WEIGHT = 20
#: Statistics written longer ago than this are not used (0 turns the check off).
DEFAULT_MAX_STATS_AGE = 300.0

_GO_INT = re.compile(r"^[+-]?\d+$")

UNUSABLE_STATISTICS = Counter(
    "kubesched_safe_statistics_unusable",
    "Node evaluations by SafeOverload or SafeBalance without usable statistics for a resource, "
    "by reason (missing, invalid, stale). Such a node is accepted, and scored from the other "
    "resource, or 0 when it has none.",
    ["plugin", "profile", "resource", "reason"],
)


def env_percent(name: str, default: int) -> int:
    """The integer 0..100 in environment variable ``name``, else ``default`` (as the original,
    which ignores a value that is not such an integer; here it is also logged)."""
    raw = os.environ.get(name, "")
    if not raw:
        return default
    if _GO_INT.match(raw) and 0 <= int(raw) <= 100:
        return int(raw)
    log.warning("ignoring %s=%r: not an integer from 0 to 100; using %d", name, raw, default)
    return default


def _percent_errors(path: str, name: str, value: int) -> list[FieldError]:
    if 0 <= value <= 100:
        return []
    return [FieldError.invalid(f"{path}.{name}", value, "must be between 0 and 100")]


def _age_errors(path: str, value: float) -> list[FieldError]:
    if value >= 0:
        return []
    return [
        FieldError.invalid(f"{path}.maxStatsAge", format_duration(value), "must not be negative")
    ]


class SafeOverloadArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``SafeOverload``. Percentages are integers 0..100, as the original's variables."""

    #: Utilization (percent) that counts as overload (``SAFEUTILIZATION``, default 90).
    utilization: int = msgspec.field(
        default_factory=lambda: env_percent(ENV_UTILIZATION, DEFAULT_UTILIZATION)
    )
    #: Highest acceptable probability (percent) of exceeding it (``SAFEPERCENTILE``, default 30).
    percentile: int = msgspec.field(
        default_factory=lambda: env_percent(ENV_PERCENTILE, DEFAULT_PERCENTILE)
    )
    #: Weight (percent) of a forecast against the mean (``SAFEFORECASTWEIGHT``, default 20).
    forecast_weight: int = msgspec.field(
        default_factory=lambda: env_percent(ENV_FORECAST_WEIGHT, DEFAULT_FORECAST_WEIGHT)
    )
    #: Older statistics are ignored; ``0s`` never ignores them.
    max_stats_age: Duration = DEFAULT_MAX_STATS_AGE

    def validate(self, path: str) -> list[FieldError]:
        return [
            *_percent_errors(path, "utilization", self.utilization),
            *_percent_errors(path, "percentile", self.percentile),
            *_percent_errors(path, "forecastWeight", self.forecast_weight),
            *_age_errors(path, self.max_stats_age),
        ]


class SafeBalanceArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``SafeBalance``."""

    #: Weight (percent) of a forecast against the mean (``SAFEFORECASTWEIGHT``, default 20).
    forecast_weight: int = msgspec.field(
        default_factory=lambda: env_percent(ENV_FORECAST_WEIGHT, DEFAULT_FORECAST_WEIGHT)
    )
    #: Older statistics are ignored; ``0s`` never ignores them.
    max_stats_age: Duration = DEFAULT_MAX_STATS_AGE

    def validate(self, path: str) -> list[FieldError]:
        return [
            *_percent_errors(path, "forecastWeight", self.forecast_weight),
            *_age_errors(path, self.max_stats_age),
        ]


@dataclass(slots=True)
class Utilization:
    """Per resource, over the evaluated nodes: where statistics are usable, and ``mu``/``sigma``
    with the pod placed."""

    ok: dict[str, BoolArray]
    mu: dict[str, FloatArray]
    sigma: dict[str, FloatArray]


class SafePlugin(Plugin):
    """Reads, caches and reports the nodes' statistics; subclasses apply the formulas."""

    forecast_weight: float
    max_stats_age: float

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        self._table = StatsTable()
        # resource -> slot -> the problem code last reported for the node in that slot
        self._reported: dict[str, npt.NDArray[np.int8]] = {}
        #: Node evaluations without usable statistics, by (resource, reason); also exported as
        #: ``kubesched_safe_statistics_unusable_total``.
        self.unusable: dict[tuple[str, str], int] = {}

    def _sync(self, nodes: Nodes) -> None:
        """Parse the statistics of nodes whose Node object changed since the last cycle."""
        slots = nodes.slots.tolist()
        at = nodes.snapshot.at
        refs = self._table.refs
        size = len(refs)
        changed = [s for s in slots if s >= size or refs[s] is not at(s).node]
        if not changed:
            return
        objects = []
        for s in changed:
            node = at(s).node
            assert node is not None
            objects.append((node, node.metadata.annotations))
        for slot in self._table.sync(changed, objects):
            log.warning(
                "%s: node %s has an unreadable %s; its statistics are used without an age check",
                self.name,
                nodes.table.names[slot],
                STATS_UPDATED_AT,
            )

    def utilization(self, pod: Pod, nodes: Nodes, now: float | None = None) -> Utilization:
        """``mu`` and ``sigma`` per resource with ``pod`` placed on each node."""
        self._sync(nodes)
        table = nodes.table
        demand = pod_requests(pod)
        result = Utilization({}, {}, {})
        now = time.time() if now is None else now
        for resource in RESOURCES:
            column = table.resource_column(resource)
            capacity = (
                np.zeros(len(nodes), dtype=np.float64)
                if column is None
                else table.allocatable[nodes.slots, column].astype(np.float64)
            )
            columns = self._table.columns(
                nodes.slots, resource, capacity, self.forecast_weight, self.max_stats_age, now
            )
            self._report(resource, nodes, columns.codes)
            mu, sigma = mu_sigma(columns, float(demand.get(resource, 0)))
            result.ok[resource] = columns.valid
            result.mu[resource] = mu
            result.sigma[resource] = sigma
        return result

    def _report(self, resource: str, nodes: Nodes, codes: npt.NDArray[np.int8]) -> None:
        """Count the nodes without usable statistics; log the ones whose state changed."""
        profile = self.handle.profile_name
        counts = np.bincount(codes, minlength=len(PROBLEMS))
        for code in range(1, len(PROBLEMS)):
            n = int(counts[code])
            if n:
                key = (resource, PROBLEMS[code])
                self.unusable[key] = self.unusable.get(key, 0) + n
                UNUSABLE_STATISTICS.labels(self.name, profile, resource, PROBLEMS[code]).inc(n)
        last = self._reported.get(resource)
        size = nodes.table.capacity
        if last is None or len(last) < size:
            grown = np.zeros(size, dtype=np.int8)
            if last is not None:
                grown[: len(last)] = last
            last = self._reported[resource] = grown
        changed = np.flatnonzero(last[nodes.slots] != codes)
        if not len(changed):
            return
        names = nodes.table.names
        for i in changed.tolist():
            slot = int(nodes.slots[i])
            before, now = int(last[slot]), int(codes[i])
            last[slot] = now
            if PROBLEMS[now] == MISSING:
                log.info("%s: node %s has no %s statistics", self.name, names[slot], resource)
            elif now:
                log.warning(
                    "%s: node %s has %s %s statistics; they are not used",
                    self.name,
                    names[slot],
                    PROBLEMS[now],
                    resource,
                )
            elif before:
                log.info(
                    "%s: node %s has usable %s statistics again", self.name, names[slot], resource
                )
