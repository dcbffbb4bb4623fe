"""The extender benchmark runs end to end on a small cluster and reports every row."""

from __future__ import annotations

import pytest

from kubesched.extender.bench import run, table


def test_bench_reports_both_modes_and_verbs() -> None:
    rows = run([40], requests=6, warmup=1, pods_per_node=1)
    assert [(r["mode"], r["verb"]) for r in rows] == [
        ("NodeNames", "filter"),
        ("NodeNames", "prioritize"),
        ("Nodes", "filter"),
        ("Nodes", "prioritize"),
    ]
    for r in rows:
        assert r["nodes"] == 40
        assert 0 < r["p50_ms"] <= r["p99_ms"]
        assert r["server_cpu_ms"] > 0
    assert rows[0]["requests"] == 6
    assert rows[2]["requests"] == 20  # NodeList bodies: at least 20
    text = table(rows)
    assert "| 40 | NodeNames | filter |" in text


def test_bench_runs_the_modes_asked_for_and_names_unknown_ones() -> None:
    rows = run([20], requests=3, warmup=1, pods_per_node=1, modes=["NodeNames"])
    assert [(r["mode"], r["verb"]) for r in rows] == [
        ("NodeNames", "filter"),
        ("NodeNames", "prioritize"),
    ]
    with pytest.raises(ValueError, match=r"unknown modes \['Names'\]; known: NodeNames, Nodes"):
        run([20], modes=["Names"])
