"""The gang perf runner (tests/gang_perf.py) on a small shape: every group placed whole, one
attempt each, and the figures it reports."""

from __future__ import annotations

import asyncio

from gang_perf import SIZE, run


def test_small_gang_run_places_every_group() -> None:
    result = asyncio.run(run(gangs=30, nodes=50))
    assert result.pods_bound == 30 * SIZE
    assert len(result.attempts) == 30
    assert all(a > 0 for a in result.attempts)
    assert all(c <= a for c, a in zip(result.cycle_time, result.attempts, strict=True))
    report = result.report()
    assert "bound                90 / 90 pods" in report
    assert "PodGroup attempt     average" in report
