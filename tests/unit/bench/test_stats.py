"""The measurement math: percentiles, throughput windows, spread, overcommit detection."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kubesched.bench import (
    NodeUsage,
    Summary,
    average_throughput,
    cpu_fraction_spread,
    overcommitted_nodes,
    percentile,
    std_dev,
    throughput_series,
)


@pytest.mark.parametrize("q", [0, 1, 10, 25, 50, 75, 90, 99, 100])
def test_percentile_is_numpys_linear_interpolation(q: float) -> None:
    values = [0.3, 5.0, 1.2, 9.9, 0.001, 7.5, 7.5, 2.25, 4.0, 8.0, 3.3]
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_small_samples() -> None:
    assert percentile([], 50) is None
    assert percentile([4.0], 99) == 4.0
    # Halfway between the two values.
    assert percentile([1.0, 3.0], 50) == 2.0
    # p99 of 1..100: rank 98.01 -> 99.01
    assert percentile([float(i) for i in range(1, 101)], 99) == pytest.approx(99.01)


def test_percentile_rejects_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101)
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], -1)


def test_summary() -> None:
    s = Summary.of([1.0, 2.0, 3.0, 4.0])
    assert (s.count, s.mean, s.p50, s.max) == (4, 2.5, 2.5, 4.0)
    empty = Summary.of([])
    assert (empty.count, empty.mean, empty.p50, empty.p99, empty.max) == (0, None, None, None, None)


def test_std_dev_is_the_population_one() -> None:
    assert std_dev([]) == 0.0
    assert std_dev([5.0]) == 0.0
    assert std_dev([2, 4, 4, 4, 5, 5, 7, 9]) == 2.0
    values = [0.1, 0.5, 0.25, 0.75]
    assert std_dev(values) == pytest.approx(float(np.std(values)))


def test_throughput_series_counts_per_window() -> None:
    times = [10.1, 10.2, 10.9, 11.0, 11.5, 12.2, 12.4]
    # Windows [10, 11), [11, 12), [12, 12.5]: the last one is half a window long.
    assert throughput_series(times, 10.0, 12.5) == [3.0, 2.0, 4.0]


def test_throughput_series_edges() -> None:
    assert throughput_series([1.0], 5.0, 5.0) == []
    # Events outside [start, end] do not count; one at `end` falls in the last window.
    assert throughput_series([0.5, 1.0, 3.0, 9.0], 1.0, 3.0) == [1.0, 1.0]
    # Half-second windows.
    assert throughput_series([0.1, 0.2, 0.7], 0.0, 1.0, interval=0.5) == [4.0, 2.0]
    with pytest.raises(ValueError, match="positive"):
        throughput_series([], 0.0, 1.0, interval=0)


def test_throughput_series_sums_to_the_events() -> None:
    rng = np.random.default_rng(1)
    times = sorted(rng.uniform(0, 37.3, 1000).tolist())
    series = throughput_series(times, 0.0, 37.3)
    assert len(series) == 38
    whole = sum(series[:-1]) + series[-1] * (37.3 - 37)
    assert whole == pytest.approx(1000)


def test_average_throughput() -> None:
    assert average_throughput([], 0.0) == 0.0
    assert average_throughput([1.0, 2.0, 4.0], 0.0) == 0.75
    assert average_throughput([3.0], 3.0) == 0.0


def usage(
    name: str, alloc_cpu: int, alloc_memory: int, max_pods: int, **requested: int
) -> NodeUsage:
    allocatable = {"cpu": alloc_cpu, "memory": alloc_memory, "pods": max_pods}
    return NodeUsage(name, allocatable, dict(requested))


def test_node_usage_adds_requests_and_counts_pods() -> None:
    u = usage("n", 4000, 32 << 30, 110)
    u.add({"cpu": 100, "memory": 500 << 20})
    u.add({})
    assert u.requested == {"cpu": 100, "memory": 500 << 20, "pods": 2}
    assert u.overcommitted() == []
    assert u.cpu_fraction() == 0.025


def test_overcommit_detection() -> None:
    nodes = [
        usage("fits-exactly", 4000, 1000, 2, cpu=4000, memory=1000, pods=2),
        usage("cpu", 4000, 1000, 110, cpu=4001, memory=10, pods=1),
        usage("pods", 4000, 1000, 2, cpu=10, pods=3),
        usage("both", 1000, 1000, 110, cpu=1001, memory=1001, pods=2),
        # A resource the node does not offer at all is allocatable 0.
        usage("gpu", 4000, 1000, 110, pods=1, **{"example.com/gpu": 1}),
        # Requesting 0 of something the node lacks is fine.
        usage("zero", 4000, 1000, 110, pods=1, **{"example.com/gpu": 0}),
        usage("empty", 4000, 1000, 110),
    ]
    assert overcommitted_nodes(nodes) == {
        "cpu": ["cpu"],
        "pods": ["pods"],
        "both": ["cpu", "memory"],
        "gpu": ["example.com/gpu"],
    }


def test_cpu_fraction_spread() -> None:
    even = [usage(f"n{i}", 4000, 1, 110, cpu=1000) for i in range(10)]
    assert cpu_fraction_spread(even) == 0.0
    uneven = [usage("a", 4000, 1, 110, cpu=4000), usage("b", 4000, 1, 110)]
    assert cpu_fraction_spread(uneven) == 0.5
    # Fractions of allocatable, not absolute millicores: 1/2 and 1/2 on unequal nodes.
    mixed = [usage("a", 2000, 1, 110, cpu=1000), usage("b", 8000, 1, 110, cpu=4000)]
    assert cpu_fraction_spread(mixed) == 0.0
    # A node without CPU counts as 0.
    assert usage("x", 0, 1, 110, cpu=0).cpu_fraction() == 0.0
    assert math.isclose(
        cpu_fraction_spread([usage("a", 4000, 1, 1, cpu=1000), usage("b", 4000, 1, 1, cpu=3000)]),
        0.25,
    )
