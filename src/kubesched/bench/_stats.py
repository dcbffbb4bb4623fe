"""The measurement math, kept apart from the runners so that it can be tested on its own.

Everything here is plain Python over lists of floats and small records: percentiles, the
throughput series, the spread of allocated CPU across nodes, and the overcommit check.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kubesched.api import CPU, PODS


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) by linear interpolation between closest ranks.

    This is numpy's default (``method="linear"``): rank ``q/100 * (n-1)`` in the sorted values,
    interpolated between its two neighbours. ``None`` when there are no values.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    fraction = rank - low
    return ordered[low] + (ordered[high] - ordered[low]) * fraction


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def std_dev(values: Sequence[float]) -> float:
    """Population standard deviation; 0 for fewer than two values."""
    n = len(values)
    if n < 2:
        return 0.0
    m = sum(values) / n
    return math.sqrt(sum((v - m) * (v - m) for v in values) / n)


@dataclass(frozen=True, slots=True)
class Summary:
    """Percentiles of a sample (seconds for latencies, pods/s for throughput)."""

    count: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    max: float | None

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        return cls(
            count=len(values),
            mean=mean(values),
            p50=percentile(values, 50),
            p90=percentile(values, 90),
            p99=percentile(values, 99),
            max=max(values) if values else None,
        )


def throughput_series(
    times: Iterable[float], start: float, end: float, interval: float = 1.0
) -> list[float]:
    """Events per second in consecutive ``interval``-long windows from ``start`` to ``end``.

    The last window may be shorter than ``interval``; its rate is over its own length. Events
    outside ``[start, end]`` are not counted.
    """
    if interval <= 0:
        raise ValueError("interval must be positive")
    if end <= start:
        return []
    buckets = math.ceil((end - start) / interval)
    counts = [0] * buckets
    for t in times:
        if start <= t <= end:
            counts[min(int((t - start) / interval), buckets - 1)] += 1
    last = (end - start) - (buckets - 1) * interval
    rates = [c / interval for c in counts]
    rates[-1] = counts[-1] / last if last > 0 else 0.0
    return rates


def average_throughput(times: Sequence[float], start: float) -> float:
    """Events per second from ``start`` to the last event: ``len(times) / (last - start)``."""
    if not times:
        return 0.0
    span = max(times) - start
    return len(times) / span if span > 0 else 0.0


@dataclass(slots=True)
class NodeUsage:
    """What a node offers and what the pods placed on it request (scheduler units: CPU in
    millicores, memory in bytes, ``pods`` the pod count)."""

    name: str
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)

    def add(self, requests: Mapping[str, int]) -> None:
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, 0) + value
        self.requested[PODS] = self.requested.get(PODS, 0) + 1

    def overcommitted(self) -> list[str]:
        """The resources requested beyond allocatable (``pods``: more pods than allowed).

        A resource the node does not offer at all counts as allocatable 0.
        """
        return sorted(
            name
            for name, value in self.requested.items()
            if value > 0 and value > self.allocatable.get(name, 0)
        )

    def cpu_fraction(self) -> float:
        """Requested CPU over allocatable CPU (0 on a node without CPU)."""
        alloc = self.allocatable.get(CPU, 0)
        return self.requested.get(CPU, 0) / alloc if alloc > 0 else 0.0


def overcommitted_nodes(usages: Iterable[NodeUsage]) -> dict[str, list[str]]:
    """Node name -> the resources it is overcommitted on, for every overcommitted node."""
    out: dict[str, list[str]] = {}
    for usage in usages:
        over = usage.overcommitted()
        if over:
            out[usage.name] = over
    return out


def cpu_fraction_spread(usages: Iterable[NodeUsage]) -> float:
    """Standard deviation of the allocated CPU fraction across nodes (0 = perfectly even)."""
    return std_dev([u.cpu_fraction() for u in usages])


__all__ = [
    "NodeUsage",
    "Summary",
    "average_throughput",
    "cpu_fraction_spread",
    "mean",
    "overcommitted_nodes",
    "percentile",
    "std_dev",
    "throughput_series",
]
