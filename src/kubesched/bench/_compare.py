"""kubesched against kube-scheduler on one workload: ratios, and whether they mean anything.

A run that wrote fewer ``Scheduled`` events than it bound pods did less API work than one that
wrote them all (an event costs the API server about what a binding does), so its throughput and
CPU per pod are not comparable with the other's: those ratios are left out and the reason given.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubesched.bench._e2e import E2EFailure, E2EResult

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "kube-scheduler"
#: The binder that decides nothing: the API server's ceiling on the same control plane shape.
CEILING = "binder"


def short_of_events(r: E2EResult) -> str | None:
    """Why ``r`` is not comparable (it wrote fewer events than it bound pods), or ``None``."""
    if r.events_written >= r.pods_bound:
        return None
    return f"{r.scheduler} wrote {r.events_written} Scheduled events for {r.pods_bound} pods bound"


def _ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


@dataclass(slots=True)
class Comparison:
    """The runs of one workload side by side."""

    workload: str
    arrival: str
    #: scheduler_perf's CI threshold for the workload (pods/s), printed for reference only:
    #: its machines are far larger than a 2-core one.
    upstream_threshold: float | None
    #: Measured pods bound per second, by scheduler.
    throughput: dict[str, float]
    #: kubesched / kube-scheduler; ``None`` without both runs or when not comparable.
    throughput_ratio: float | None
    cpu_per_pod_ratio: float | None
    peak_rss_ratio: float | None
    #: Whether both runs wrote an event per bound pod.
    comparable: bool
    #: Why not, one line per run that fell short.
    not_comparable: list[str] = field(default_factory=list)
    #: The binder's throughput, when it ran.
    ceiling_pods_per_s: float | None = None
    #: Each scheduler's throughput over the ceiling; only for runs that, like the binder's,
    #: wrote an event per bound pod.
    of_ceiling: dict[str, float] = field(default_factory=dict)
    #: The schedulers whose run failed (each failure's error is in the report beside it).
    failed: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def compare(
    parts: Sequence[E2EResult | E2EFailure], *, threshold: float | None = None
) -> Comparison:
    """Compare the runs of one workload (any of kubesched, kube-scheduler and the binder) that
    finished; ``threshold`` is upstream's for the workload."""
    results = [p for p in parts if isinstance(p, E2EResult)]
    by = {r.scheduler: r for r in results}
    ours, theirs, binder = by.get(KUBESCHED), by.get(KUBE_SCHEDULER), by.get(CEILING)
    reasons = [
        why for r in (ours, theirs) if r is not None and (why := short_of_events(r)) is not None
    ]
    both = ours is not None and theirs is not None
    comparable = both and not reasons
    throughput_ratio = cpu_ratio = rss_ratio = None
    if ours is not None and theirs is not None:
        rss_ratio = _ratio(ours.peak_rss_bytes, theirs.peak_rss_bytes)
        if comparable:
            throughput_ratio = _ratio(ours.throughput_pods_per_s, theirs.throughput_pods_per_s)
            cpu_ratio = _ratio(ours.cpu_per_pod_ms, theirs.cpu_per_pod_ms)
    of_ceiling: dict[str, float] = {}
    if binder is not None and short_of_events(binder) is None:
        for r in (ours, theirs):
            if r is not None and short_of_events(r) is None:
                ratio = _ratio(r.throughput_pods_per_s, binder.throughput_pods_per_s)
                if ratio is not None:
                    of_ceiling[r.scheduler] = ratio
    return Comparison(
        workload=parts[0].workload if parts else "",
        arrival=parts[0].arrival if parts else "",
        upstream_threshold=threshold,
        throughput={r.scheduler: r.throughput_pods_per_s for r in results},
        throughput_ratio=throughput_ratio,
        cpu_per_pod_ratio=cpu_ratio,
        peak_rss_ratio=rss_ratio,
        comparable=comparable,
        not_comparable=reasons,
        ceiling_pods_per_s=binder.throughput_pods_per_s if binder is not None else None,
        of_ceiling=of_ceiling,
        failed=[p.scheduler for p in parts if isinstance(p, E2EFailure)],
    )


__all__ = ["CEILING", "Comparison", "compare", "short_of_events"]
