"""Tables and the throughput plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_results import e2e_result
from kubesched.bench import (
    compare,
    comparison_line,
    core_table,
    e2e_table,
    plot_throughput,
    run_core,
    summary_table,
)


def test_e2e_table_has_a_column_per_scheduler() -> None:
    text = e2e_table([e2e_result("kubesched", 90.0), e2e_result("kube-scheduler", 120.0)])
    lines = text.splitlines()
    assert lines[0].startswith("bench e2e: workload small, 100 nodes")
    assert lines[0].endswith("500 measured pods, rate arrival")
    assert "kubesched" in lines[1]
    assert "kube-scheduler" in lines[1]
    assert any(
        line.startswith("throughput (pods/s)") and "90.0" in line and "120.0" in line
        for line in lines
    )
    assert any(line.startswith("overcommitted nodes") for line in lines)
    assert any(
        line.startswith("pods bound / Scheduled events written") and "500 / 500" in line
        for line in lines
    )
    assert e2e_table([]) == "no results"


def test_ratios_when_both_wrote_an_event_per_pod() -> None:
    ours, theirs = e2e_result("kubesched", 90.0), e2e_result("kube-scheduler", 120.0)
    theirs.cpu_per_pod_ms = 8.0
    c = compare([ours, theirs])
    assert c.comparable
    assert c.throughput_ratio == pytest.approx(0.75)
    assert c.cpu_per_pod_ratio == pytest.approx(0.5)
    assert c.peak_rss_ratio == pytest.approx(1.0)
    assert c.not_comparable == []
    assert c.to_json()["throughput"] == {"kubesched": 90.0, "kube-scheduler": 120.0}
    text = e2e_table([ours, theirs], c)
    assert text.splitlines()[-1] == (
        "kubesched / kube-scheduler: throughput 0.75x, CPU per pod 0.50x, peak RSS 1.00x"
    )


@pytest.mark.parametrize("short", ["kubesched", "kube-scheduler"])
def test_not_comparable_when_a_scheduler_wrote_fewer_events(short: str) -> None:
    runs = [
        e2e_result(name, 100.0, events=102 if name == short else 500)
        for name in ("kubesched", "kube-scheduler")
    ]
    c = compare(runs)
    assert not c.comparable
    assert c.throughput_ratio is None
    assert c.cpu_per_pod_ratio is None
    assert c.peak_rss_ratio == pytest.approx(1.0)
    assert c.not_comparable == [f"{short} wrote 102 Scheduled events for 500 pods bound"]
    assert comparison_line(c).startswith(
        f"kubesched / kube-scheduler: not comparable ({short} wrote 102 Scheduled events"
    )


def test_one_scheduler_alone_is_not_compared() -> None:
    c = compare([e2e_result("kubesched", 90.0)])
    assert not c.comparable
    assert (c.throughput_ratio, c.peak_rss_ratio) == (None, None)
    assert "needs a run of each" in comparison_line(c)
    assert "kubesched / kube-scheduler" not in e2e_table([e2e_result("kubesched", 90.0)], c)


def test_core_table() -> None:
    text = core_table(run_core(nodes=3, pods=5))
    assert "bench core: 3 nodes, 5 pods, profile default, plugins core" in text
    assert "scheduled" in text
    assert "5 / 5" in text
    assert "0 overcommitted nodes" in text


def test_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "t.png"
    plot_throughput([e2e_result("kubesched", 90.0), e2e_result("kube-scheduler", 120.0)], out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_ratios_to_the_binders_ceiling() -> None:
    runs = [
        e2e_result("kubesched", 90.0),
        e2e_result("kube-scheduler", 60.0),
        e2e_result("binder", 120.0),
    ]
    c = compare(runs)
    assert c.comparable
    assert c.ceiling_pods_per_s == 120.0
    assert c.of_ceiling == {"kubesched": 0.75, "kube-scheduler": 0.5}
    assert e2e_table(runs, c).splitlines()[-1] == (
        "of the API server's ceiling (120.0 pods/s, binder): kubesched 0.75x, kube-scheduler 0.50x"
    )


def test_no_ratio_to_the_ceiling_for_a_run_short_of_events() -> None:
    runs = [
        e2e_result("kubesched", 90.0, events=100),
        e2e_result("kube-scheduler", 60.0),
        e2e_result("binder", 120.0),
    ]
    c = compare(runs)
    assert not c.comparable
    assert c.of_ceiling == {"kube-scheduler": 0.5}
    # A binder short of events is no ceiling for anyone, and does not affect the comparison.
    c = compare(
        [
            e2e_result("kubesched", 90.0),
            e2e_result("kube-scheduler", 60.0),
            e2e_result("binder", 1, events=3),
        ]
    )
    assert c.comparable
    assert c.of_ceiling == {}


def test_summary_table_one_line_per_workload_with_upstreams_threshold() -> None:
    ok = compare(
        [
            e2e_result("kubesched", 90.0),
            e2e_result("kube-scheduler", 60.0),
            e2e_result("binder", 120.0),
        ],
        threshold=270,
    )
    short = compare(
        [e2e_result("kubesched", 90.0, events=100), e2e_result("kube-scheduler", 60.0)],
        threshold=None,
    )
    assert (ok.upstream_threshold, ok.arrival) == (270, "rate")
    lines = summary_table([ok, short]).splitlines()
    assert lines[0].split("  ")[0] == "workload"
    assert lines[1].split() == [
        "small",
        "rate",
        "90.0",
        "60.0",
        "1.50x",
        "120.0",
        "0.75x",
        "0.50x",
        "270",
    ]
    # Not comparable: a run wrote fewer events than it bound pods.
    assert lines[2].split() == ["small", "rate", "90.0", "60.0", "n/c", "-", "-", "-", "-"]
