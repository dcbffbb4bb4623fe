"""What the safe plugins read from a node, and the formulas of kube-safe-scheduler's ``safe`` agent.

Every function here works on numpy arrays aligned with the nodes being evaluated, so one call
covers all nodes of a scheduling cycle.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.plugins.safe._beta import FloatArray, beta_cdf, beta_fit

BoolArray = npt.NDArray[np.bool_]

MAX_NODE_SCORE = 100

#: Annotation keys, as the original annotator writes them (free = allocatable - used; CPU in
#: millicores, memory in bytes).
MEAN_FREE_CPU = "mean-free-cpu"
STD_FREE_CPU = "std-free-cpu"
MEAN_FREE_MEMORY = "mean-free-memory"
STD_FREE_MEMORY = "std-free-memory"
#: Forecasts: the correct spelling first, then the original's (``forcasted``).
FORECASTED_FREE_CPU = ("forecasted-free-cpu", "forcasted-free-cpu")
FORECASTED_FREE_MEMORY = ("forecasted-free-memory", "forcasted-free-memory")
#: When ``kubesched annotate-nodes`` last wrote the statistics (RFC 3339).
STATS_UPDATED_AT = "kubesched.io/stats-updated-at"

CPU = "cpu"
MEMORY = "memory"
RESOURCES = (CPU, MEMORY)

_KEYS: Mapping[str, tuple[str, str, tuple[str, str]]] = {
    CPU: (MEAN_FREE_CPU, STD_FREE_CPU, FORECASTED_FREE_CPU),
    MEMORY: (MEAN_FREE_MEMORY, STD_FREE_MEMORY, FORECASTED_FREE_MEMORY),
}

_DECIMAL = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")

#: Why a node's statistics for a resource are not used.
MISSING = "missing"
INVALID = "invalid"
STALE = "stale"


def parse_number(text: str | None) -> float | None:
    """A finite decimal number (``12``, ``-1.5``, ``2.5e9``), else ``None``."""
    if text is None or not _DECIMAL.match(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def parse_timestamp(text: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (``2024-05-01T12:00:00Z``), else ``None``."""
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    return parsed.timestamp()


@dataclass(frozen=True, slots=True)
class ResourceAnnotations:
    """One resource's statistics as a node's annotations give them."""

    #: Mean free amount, or ``None`` when missing or not a number (``problem`` says which).
    mean: float | None
    #: Standard deviation; 0 when missing or not a number, as the original.
    sd: float
    #: Forecast free amount, or ``None``.
    forecast: float | None
    #: ``""``, :data:`MISSING` or :data:`INVALID` (about ``mean``).
    problem: str


@dataclass(frozen=True, slots=True)
class NodeAnnotations:
    """A node's safe statistics, parsed once per Node object."""

    cpu: ResourceAnnotations
    memory: ResourceAnnotations
    #: When the statistics were written (epoch seconds), if the node says so.
    updated_at: float | None
    #: The timestamp annotation was there but could not be read.
    bad_timestamp: bool

    def of(self, resource: str) -> ResourceAnnotations:
        return self.cpu if resource == CPU else self.memory


def _resource(annotations: Mapping[str, str], resource: str) -> ResourceAnnotations:
    mean_key, sd_key, forecast_keys = _KEYS[resource]
    raw = annotations.get(mean_key)
    mean = parse_number(raw)
    problem = "" if mean is not None else (MISSING if raw is None else INVALID)
    sd = parse_number(annotations.get(sd_key))
    forecast = None
    for key in forecast_keys:
        if key in annotations:
            forecast = parse_number(annotations[key])
            break
    return ResourceAnnotations(mean, 0.0 if sd is None else sd, forecast, problem)


def parse_annotations(annotations: Mapping[str, str]) -> NodeAnnotations:
    stamp = annotations.get(STATS_UPDATED_AT)
    updated_at = parse_timestamp(stamp)
    return NodeAnnotations(
        cpu=_resource(annotations, CPU),
        memory=_resource(annotations, MEMORY),
        updated_at=updated_at,
        bad_timestamp=stamp is not None and updated_at is None,
    )


#: Problem codes, as stored in :class:`StatsTable` (index into :data:`PROBLEMS`).
OK, MISSING_CODE, INVALID_CODE, STALE_CODE = 0, 1, 2, 3
PROBLEMS = ("", MISSING, INVALID, STALE)


@dataclass(slots=True)
class ResourceColumns:
    """One resource over the evaluated nodes."""

    #: Statistics usable (present, numbers, not stale, and the node has some of the resource).
    valid: BoolArray
    #: Why not, per node: a code into :data:`PROBLEMS` (0 where valid).
    codes: npt.NDArray[np.int8]
    #: Mean free amount, already blended with the forecast.
    free_mean: FloatArray
    free_sd: FloatArray
    #: The node's allocatable amount (millicores or bytes).
    capacity: FloatArray


class StatsTable:
    """Every node's parsed statistics as arrays by slot, parsed again only when the node's Node
    object changes (the scheduler's cache replaces it on every update)."""

    def __init__(self) -> None:
        self.size = 0
        self.refs: list[object | None] = []
        self.mean: dict[str, FloatArray] = {}
        self.sd: dict[str, FloatArray] = {}
        self.forecast: dict[str, FloatArray] = {}
        self.codes: dict[str, npt.NDArray[np.int8]] = {}
        self.updated_at: FloatArray = np.zeros(0)
        #: Bumped on every parse, so results derived from a row can be kept until it changes.
        self.generation: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._parses = 0
        self._empty(0)

    def _empty(self, size: int) -> None:
        def grow(a: npt.NDArray[Any], fill: float) -> npt.NDArray[Any]:
            out = np.full(size, fill, dtype=a.dtype if len(a) else np.float64)
            out[: len(a)] = a
            return out

        for r in RESOURCES:
            self.mean[r] = grow(self.mean.get(r, np.zeros(0)), 0.0)
            self.sd[r] = grow(self.sd.get(r, np.zeros(0)), 0.0)
            self.forecast[r] = grow(self.forecast.get(r, np.zeros(0)), np.nan)
            codes = self.codes.get(r, np.zeros(0, dtype=np.int8))
            grown = np.full(size, MISSING_CODE, dtype=np.int8)
            grown[: len(codes)] = codes
            self.codes[r] = grown
        self.updated_at = grow(self.updated_at, np.nan)
        generation = np.zeros(size, dtype=np.int64)
        generation[: len(self.generation)] = self.generation
        self.generation = generation
        self.refs.extend([None] * (size - len(self.refs)))
        self.size = size

    def sync(
        self, slots: Sequence[int], nodes: Sequence[tuple[object, Mapping[str, str]]]
    ) -> list[int]:
        """Bring the rows of ``slots`` up to date with their nodes (each a Node object and its
        annotations); returns the slots parsed anew whose timestamp was unreadable."""
        if slots and max(slots) >= self.size:
            self._empty(max(max(slots) + 1, 2 * self.size))
        bad: list[int] = []
        refs = self.refs
        for slot, (node, given) in zip(slots, nodes, strict=True):
            if refs[slot] is node:
                continue
            refs[slot] = node
            self._parses += 1
            self.generation[slot] = self._parses
            parsed = parse_annotations(given)
            for r in RESOURCES:
                a = parsed.of(r)
                self.mean[r][slot] = 0.0 if a.mean is None else a.mean
                self.sd[r][slot] = a.sd
                self.forecast[r][slot] = np.nan if a.forecast is None else a.forecast
                self.codes[r][slot] = PROBLEMS.index(a.problem)
            self.updated_at[slot] = np.nan if parsed.updated_at is None else parsed.updated_at
            if parsed.bad_timestamp:
                bad.append(slot)
        return bad

    def columns(
        self,
        slots: npt.NDArray[np.int64],
        resource: str,
        capacity: FloatArray,
        forecast_weight: float,
        max_age: float,
        now: float | None = None,
    ) -> ResourceColumns:
        """One resource's statistics for ``slots``.

        The forecast, where given, is blended in: ``mean = (1 - w) * mean + w * forecast``.
        Statistics older than ``max_age`` seconds (by :data:`STATS_UPDATED_AT`; ``max_age <= 0``
        never expires them) count as stale, and a node that offers none of the resource has
        none to use.
        """
        now = time.time() if now is None else now
        codes = self.codes[resource][slots]
        mean = self.mean[resource][slots]
        forecast = self.forecast[resource][slots]
        if max_age > 0:
            with np.errstate(invalid="ignore"):
                stale = (codes == OK) & (now - self.updated_at[slots] > max_age)
            codes = np.where(stale, STALE_CODE, codes).astype(np.int8)
        has_forecast = ~np.isnan(forecast)
        mean = np.where(
            has_forecast, (1.0 - forecast_weight) * mean + forecast_weight * forecast, mean
        )
        codes = np.where((codes == OK) & (capacity <= 0), INVALID_CODE, codes).astype(np.int8)
        return ResourceColumns(codes == OK, codes, mean, self.sd[resource][slots], capacity)


def mu_sigma(columns: ResourceColumns, demand: float) -> tuple[FloatArray, FloatArray]:
    """``getMuSigma``: the utilization's mean with the pod placed, and its deviation, in 0..1::

        used  = max(capacity - free_mean, 0)
        mu    = clamp((used + demand) / capacity, 0, 1)
        sigma = clamp(free_sd / capacity, 0, 1)

    Where the statistics are not valid the values are 0 (and unused).
    """
    cap = np.where(columns.valid, columns.capacity, 1.0)
    used = np.maximum(cap - columns.free_mean, 0.0)
    mu = np.clip((used + demand) / cap, 0.0, 1.0)
    sigma = np.clip(columns.free_sd / cap, 0.0, 1.0)
    return np.where(columns.valid, mu, 0.0), np.where(columns.valid, sigma, 0.0)


def rank(mu: FloatArray, sigma: FloatArray, threshold: float) -> FloatArray:
    """``computeRank``: the probability that utilization stays at or below ``threshold``.

    - ``mu == 0``, or ``sigma == 0`` and ``mu <= threshold``: 1;
    - ``sigma == 0`` and ``mu > threshold``: 0;
    - otherwise the CDF at ``threshold`` of the Beta distribution with mean ``mu`` and standard
      deviation ``sigma`` (``alpha = mu * t``, ``beta = (1 - mu) * t`` with
      ``t = mu (1 - mu) / sigma**2 - 1``), or 0 when no such Beta distribution exists
      (``sigma**2 >= mu (1 - mu)``, which includes ``mu == 1``).
    """
    out = np.zeros(mu.shape, dtype=np.float64)
    certain = (mu == 0) | ((sigma == 0) & (mu <= threshold))
    out[certain] = 1.0
    fit = ~certain & (sigma != 0)
    if fit.any():
        alpha, beta, ok = beta_fit(mu[fit], sigma[fit])
        values = np.zeros(len(alpha), dtype=np.float64)
        if ok.any():
            below = beta_cdf(threshold, alpha[ok], beta[ok])
            values[ok] = np.where(np.isnan(below), 1.0, below)
        out[fit] = values
    return out


def overload_scores(risk: FloatArray, percentile: float) -> npt.NDArray[np.int64]:
    """SafeOverload's score for one resource (``computeScore`` without balance)::

        fraction = min(risk / percentile, 1)
        score    = 0 if fraction >= 1 else int((1 - sqrt(fraction)) * 100)

    With ``percentile == 0`` any risk above 0 scores 0 and no risk scores 100.
    """
    if percentile > 0:
        fraction = np.minimum(risk / percentile, 1.0)
    else:
        fraction = np.where(risk > 0, 1.0, 0.0)
    raw = np.floor((1.0 - np.sqrt(fraction)) * MAX_NODE_SCORE)
    scores: npt.NDArray[np.int64] = np.where(fraction >= 1.0, 0, raw).astype(np.int64)
    return scores


def balance_scores(mu: FloatArray, sigma: FloatArray) -> npt.NDArray[np.int64]:
    """SafeBalance's score for one resource (``computeScore`` with balance)::

    obj   = (mu + sqrt(sigma)) / 2
    score = int((1 - obj) * 100 + 0.5)
    """
    obj = (mu + np.sqrt(sigma)) / 2.0
    scores: npt.NDArray[np.int64] = np.floor((1.0 - obj) * MAX_NODE_SCORE + 0.5).astype(np.int64)
    return scores


def combine(
    cpu: npt.NDArray[np.int64],
    cpu_ok: BoolArray,
    memory: npt.NDArray[np.int64],
    memory_ok: BoolArray,
) -> npt.NDArray[np.int64]:
    """A node's score from its two resources (``PriorityFunc``): the lower of the two where both
    have statistics, the one that has them, else 0."""
    both = np.minimum(cpu, memory)
    combined: npt.NDArray[np.int64] = np.where(
        cpu_ok & memory_ok, both, np.where(cpu_ok, cpu, np.where(memory_ok, memory, 0))
    ).astype(np.int64)
    return combined
