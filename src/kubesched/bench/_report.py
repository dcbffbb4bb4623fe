"""Results as text tables, and the throughput plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubesched.bench._compare import CEILING
from kubesched.bench._e2e import E2EFailure, E2EResult

if TYPE_CHECKING:
    from kubesched.bench._compare import Comparison
    from kubesched.bench._core import CoreResult


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.2f} ms"


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.3f} s"


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _rows(rows: Sequence[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def core_table(r: CoreResult) -> str:
    c = r.cycle
    rows = [
        ("scheduled", f"{r.scheduled} / {r.pods} ({r.failed_attempts} failed attempts)"),
        (
            "throughput",
            f"{r.pods_per_s:,.0f} pods/s wall clock, {r.pods_per_cpu_s:,.0f} pods per CPU second"
            f" ({r.elapsed_s:.2f} s wall, {r.cpu_s:.2f} s CPU)",
        ),
        (
            "cycle latency",
            f"p50 {_ms(c.p50)}  p90 {_ms(c.p90)}  p99 {_ms(c.p99)}  max {_ms(c.max)}",
        ),
        ("peak RSS", f"{_mb(r.peak_rss_bytes)} ({_mb(r.rss_before_bytes)} before scheduling)"),
        (
            "correctness",
            f"{r.overcommitted_nodes} overcommitted nodes, "
            f"{r.constraint_violations} constraint violations",
        ),
        ("CPU fraction spread", f"std dev {r.cpu_fraction_std:.4f}"),
        ("setup", f"{r.setup_s:.2f} s (not measured)"),
        ("load average", f"{r.load_average[0]:.2f} at start, {r.load_average[1]:.2f} at end"),
    ]
    head = (
        f"bench core: {r.nodes} nodes, {r.pods} pods, profile {r.profile}, "
        f"plugins {r.plugin_set}, seed {r.seed}" + (", distinct pods" if r.distinct else "")
    )
    points = ", ".join(f"{k} {v * 1e6:.0f}" for k, v in r.extension_points.items())
    plugins = "\n".join(f"  {v * 1e6:8.1f} µs  {k}" for k, v in r.plugins.items())
    return (
        f"{head}\n{_rows(rows)}\n"
        f"µs per cycle by extension point: {points}\n"
        f"µs per call by plugin:\n{plugins}"
    )


_E2E_COLUMNS: tuple[tuple[str, str], ...] = (
    ("throughput (pods/s)", "throughput"),
    ("pods bound / Scheduled events written", "events"),
    ("throughput p50 / max of 1 s windows", "windows"),
    ("latency p50 / p90 / p99", "latency"),
    ("start-up to first binding (s)", "startup"),
    ("scheduler CPU (s)", "cpu"),
    ("scheduler CPU per pod (ms)", "cpu_per_pod"),
    ("scheduler peak RSS", "rss"),
    ("CPU fraction std dev", "spread"),
    ("overcommitted nodes", "overcommitted"),
    ("unbound pods", "unbound"),
    ("constraint violations", "violations"),
    ("pod creation rate (pods/s)", "creation"),
    ("measured phase (s)", "duration"),
    ("API server CPU (s)", "apiserver"),
    ("load average at start / end", "load"),
)


def _e2e_cell(r: E2EResult, key: str) -> str:
    if key == "throughput":
        return f"{r.throughput_pods_per_s:,.1f}"
    if key == "events":
        return f"{r.pods_bound} / {r.events_written}"
    if key == "windows":
        p50 = r.throughput_window_p50
        peak = r.throughput_window_max
        return f"{p50 or 0:,.0f} / {peak or 0:,.0f}"
    if key == "latency":
        return f"{_s(r.latency_p50_s)} / {_s(r.latency_p90_s)} / {_s(r.latency_p99_s)}"
    if key == "startup":
        return "-" if r.startup_s is None else f"{r.startup_s:.1f}"
    if key == "cpu":
        return f"{r.cpu_s:.1f}"
    if key == "cpu_per_pod":
        return f"{r.cpu_per_pod_ms:.2f}"
    if key == "rss":
        return _mb(r.peak_rss_bytes)
    if key == "spread":
        return f"{r.cpu_fraction_std:.4f}"
    if key == "overcommitted":
        return str(r.overcommitted_nodes)
    if key == "unbound":
        return str(r.unbound_pods)
    if key == "violations":
        return str(r.constraint_violations)
    if key == "creation":
        return f"{r.creation_pods_per_s:,.0f}"
    if key == "duration":
        return f"{r.measured_duration_s:.1f}"
    if key == "apiserver":
        return f"{r.apiserver_cpu_s:.1f}"
    if key == "load":
        return f"{r.load_average[0]:.2f} / {r.load_average[1]:.2f}"
    raise KeyError(key)


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def comparison_line(c: Comparison) -> str:
    """kubesched / kube-scheduler in a line, or why the runs are not comparable."""
    if not c.comparable:
        why = "; ".join(c.not_comparable) or "needs a run of each"
        rss = _x(c.peak_rss_ratio)
        return f"kubesched / kube-scheduler: not comparable ({why}); peak RSS {rss}"
    return (
        f"kubesched / kube-scheduler: throughput {_x(c.throughput_ratio)}, "
        f"CPU per pod {_x(c.cpu_per_pod_ratio)}, peak RSS {_x(c.peak_rss_ratio)}"
    )


def ceiling_line(c: Comparison) -> str | None:
    """Each scheduler's throughput over the binder's, when the binder ran."""
    if c.ceiling_pods_per_s is None:
        return None
    parts = [f"{name} {_x(c.of_ceiling.get(name))}" for name in c.throughput if name != CEILING]
    return f"of the API server's ceiling ({c.ceiling_pods_per_s:,.1f} pods/s, binder): " + (
        ", ".join(parts) or "-"
    )


def e2e_table(parts: Sequence[E2EResult | E2EFailure], comparison: Comparison | None = None) -> str:
    """The runs of one workload, a column each for those that finished and a line each for
    those that failed; with ``comparison``, its line below."""
    if not parts:
        return "no results"
    first = parts[0]
    head = (
        f"bench e2e: workload {first.workload}, {first.nodes} nodes, {first.init_pods} init pods, "
        f"{first.measured_pods} measured pods, {first.arrival} arrival"
    )
    results = [p for p in parts if isinstance(p, E2EResult)]
    lines: list[str] = []
    if results:
        rows: list[tuple[str, ...]] = [("", *(r.scheduler for r in results))]
        for label, key in _E2E_COLUMNS:
            rows.append((label, *(_e2e_cell(r, key) for r in results)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines += [_failure_line(p) for p in parts if isinstance(p, E2EFailure)]
    if comparison is not None:
        if {"kubesched", "kube-scheduler"} <= comparison.throughput.keys():
            lines.append(comparison_line(comparison))
        ceiling = ceiling_line(comparison)
        if ceiling is not None:
            lines.append(ceiling)
    return head + "\n" + "\n".join(line.rstrip() for line in lines)


def _failure_line(p: E2EFailure) -> str:
    """``NAME failed: ERROR``, with what was known of the run when it failed."""
    known = []
    if p.pods_bound is not None:
        known.append(f"{p.pods_bound} of {p.measured_pods} measured pods bound")
    if p.peak_rss_bytes is not None:
        known.append(f"peak RSS {p.peak_rss_bytes / 1e6:.0f} MB")
    return f"{p.scheduler} failed: {p.error}" + (f" ({', '.join(known)})" if known else "")


_SUMMARY_HEAD = (
    "workload",
    "arrival",
    "kubesched pods/s",
    "kube-scheduler pods/s",
    "kubesched / kube-scheduler",
    "ceiling pods/s",
    "kubesched / ceiling",
    "kube-scheduler / ceiling",
    "upstream threshold",
)


def _pods_per_s(c: Comparison, scheduler: str) -> str:
    if scheduler in c.failed:
        return "failed"
    value = c.throughput.get(scheduler)
    return "-" if value is None else f"{value:,.1f}"


def summary_table(comparisons: Sequence[Comparison]) -> str:
    """One line per workload: throughputs (``failed``: that run failed), ratios (``n/c``: not
    comparable, a run wrote fewer events than it bound pods), and upstream's threshold beside
    them for reference."""
    rows: list[tuple[str, ...]] = [_SUMMARY_HEAD]
    for c in comparisons:
        ratio = _x(c.throughput_ratio) if c.comparable else "n/c"
        threshold = c.upstream_threshold
        rows.append(
            (
                c.workload,
                c.arrival,
                _pods_per_s(c, "kubesched"),
                _pods_per_s(c, "kube-scheduler"),
                ratio if "kubesched" in c.throughput and "kube-scheduler" in c.throughput else "-",
                _pods_per_s(c, CEILING),
                _x(c.of_ceiling.get("kubesched")),
                _x(c.of_ceiling.get("kube-scheduler")),
                "-" if threshold is None else f"{threshold:g}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(_SUMMARY_HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


def plot_throughput(results: Sequence[E2EResult], path: Path) -> None:
    """A PNG of each run's scheduling throughput (bound pods per 1 s window) over time.

    Needs matplotlib (``pip install 'kubesched[bench]'``).
    """
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as err:
        raise RuntimeError(
            "--plot needs matplotlib: pip install 'kubesched[bench]' (or matplotlib)"
        ) from err
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for r in results:
        xs = [i * r.throughput_interval_s for i in range(len(r.throughput_series))]
        ax.plot(xs, r.throughput_series, label=f"{r.scheduler} (avg {r.throughput_pods_per_s:.0f})")
    first = results[0] if results else None
    if first is not None:
        ax.set_title(f"{first.workload}: {first.nodes} nodes, {first.measured_pods} measured pods")
    ax.set_xlabel("seconds since the first measured pod was created")
    ax.set_ylabel("pods bound per second")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = ["comparison_line", "core_table", "e2e_table", "plot_throughput", "summary_table"]
