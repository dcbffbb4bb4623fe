"""``kubesched annotate-nodes``: the statistics (mean, sample deviation) worked by hand, the
queries, the annotations written and removed, and a round against fake Prometheus and API
server objects."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from kubesched.annotator import (
    AnnotatorError,
    Options,
    annotate_once,
    annotations_for,
    cpu_query,
    format_number,
    memory_query,
    parse_seconds,
    per_node,
    statistics,
    summary,
)
from kubesched.api import Node, ObjectList
from kubesched.cli import main
from kubesched.kube import NotFound
from kubesched.plugins.network_traffic import PrometheusError, Series


def test_statistics_by_hand() -> None:
    # 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, sample sd sqrt(32 / 7)
    got = statistics([2, 4, 4, 4, 5, 5, 7, 9])
    assert got is not None
    assert got.mean == 5
    assert got.sd == pytest.approx(math.sqrt(32 / 7))
    assert got.points == 8
    # one point: no spread; NaN and infinities are left out; nothing: None
    single = statistics([3.0, float("nan"), float("inf")])
    assert single is not None
    assert (single.mean, single.sd, single.points) == (3.0, 0.0, 1)
    assert statistics([float("nan")]) is None
    assert statistics([]) is None


def test_per_node_joins_series_of_a_node() -> None:
    series = [
        Series({"kubernetes_node": "a"}, [(1, 1.0), (2, 3.0)]),
        Series({"kubernetes_node": "a", "job": "other"}, [(1, 5.0)]),
        Series({"kubernetes_node": "b"}, [(1, float("nan"))]),
        Series({"instance": "x"}, [(1, 1.0)]),
    ]
    got = per_node(series, "kubernetes_node")
    assert list(got) == ["a"]
    assert got["a"].mean == 3.0
    assert got["a"].sd == 2.0


def test_queries() -> None:
    assert memory_query(Options("http://p")) == (
        "max by (kubernetes_node) (node_memory_MemAvailable_bytes)",
        "kubernetes_node",
    )
    assert cpu_query(Options("http://p", rate_window="30s", node_label="node")) == (
        'sum by (node) (rate(node_cpu_seconds_total{mode="idle"}[30s])) * 1000',
        "node",
    )
    uname = Options("http://p", node_uname_info=True)
    assert cpu_query(uname) == (
        'sum by (nodename) (rate(node_cpu_seconds_total{mode="idle"}[1m]) * on(instance) '
        "group_left(nodename) node_uname_info) * 1000",
        "nodename",
    )
    assert memory_query(uname)[0].startswith("max by (nodename) (node_memory_MemAvailable_bytes *")


def test_annotation_values() -> None:
    assert format_number(6442450944.0) == "6442450944"
    assert format_number(2500.000026) == "2500.000026"
    assert format_number(0.0) == "0"
    assert format_number(1e20) == "1e+20"
    got = annotations_for(statistics([1000, 3000]), None, 0.0)
    assert got == {
        "kubesched.io/stats-updated-at": "1970-01-01T00:00:00Z",
        "mean-free-cpu": "2000",
        "std-free-cpu": repr(math.sqrt(2) * 1000),
        "mean-free-memory": None,  # removed
        "std-free-memory": None,
    }


def test_options_are_checked() -> None:
    with pytest.raises(AnnotatorError, match="--interval must be positive, not 0"):
        Options("http://p", interval=0)
    with pytest.raises(AnnotatorError, match="--step must be positive"):
        Options("http://p", step=-1)
    with pytest.raises(AnnotatorError, match="86400 points per node; Prometheus answers at most"):
        Options("http://p", window=86400, step=1)


def test_parse_seconds() -> None:
    assert parse_seconds("60") == 60
    assert parse_seconds("1.5") == 1.5
    assert parse_seconds("1m30s") == 90
    with pytest.raises(ValueError, match="unknown unit"):
        parse_seconds("1x")


# --- a round against fakes ------------------------------------------------------------------------


class FakePrometheus:
    base_url = "http://prometheus.test"

    def __init__(self, answers: Mapping[str, list[Series]], error: str = "") -> None:
        self.answers = answers
        self.error = error
        self.calls: list[tuple[str, float, float, float]] = []

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[Series]:
        self.calls.append((expr, start, end, step))
        if self.error:
            raise PrometheusError(self.error)
        return self.answers.get(expr.split(" (", maxsplit=1)[0], [])


class FakeAPI:
    def __init__(self, nodes: list[str], missing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.nodes = nodes
        self.missing = missing
        self.patches: dict[str, Any] = {}

    async def list(self, path: str, **kwargs: Any) -> ObjectList[Node]:
        assert path == "/api/v1/nodes"
        return msgspec.convert(
            {"items": [{"metadata": {"name": n}} for n in self.nodes]}, ObjectList[Node]
        )

    async def patch(self, path: str, body: Any, **kwargs: Any) -> bytes:
        name = path.rsplit("/", 1)[1]
        if name in self.missing:
            raise NotFound(404, "NotFound", f'nodes "{name}" not found')
        self.patches[name] = body
        return b"{}"


def _series(node: str, *values: float) -> Series:
    return Series({"kubernetes_node": node}, [(float(i), v) for i, v in enumerate(values)])


def test_a_round() -> None:
    prometheus = FakePrometheus(
        {
            "sum by": [_series("a", 2000, 3000), _series("b", 1000), _series("ghost", 1)],
            "max by": [_series("a", 4e9, 4e9)],
        }
    )
    api = FakeAPI(["a", "b", "c"])
    options = Options("http://prometheus.test", window=600, step=30)
    result = asyncio.run(annotate_once(api, prometheus, options, clock=lambda: 10_000.0))  # type: ignore[arg-type]
    assert [c[1:] for c in prometheus.calls] == [(9400.0, 10_000.0, 30), (9400.0, 10_000.0, 30)]
    assert api.patches["a"] == {
        "metadata": {
            "annotations": {
                "kubesched.io/stats-updated-at": "1970-01-01T02:46:40Z",
                "mean-free-cpu": "2500",
                "std-free-cpu": repr(math.sqrt(0.5e6)),
                "mean-free-memory": "4000000000",
                "std-free-memory": "0",
            }
        }
    }
    b = api.patches["b"]["metadata"]["annotations"]
    assert (b["mean-free-cpu"], b["std-free-cpu"], b["mean-free-memory"]) == ("1000", "0", None)
    assert "c" not in api.patches
    assert result.without_data == ["c"]
    assert result.unknown == ["ghost"]
    table = summary(result).splitlines()
    assert table[0].split() == [
        "NODE",
        "mean-free-cpu",
        "std-free-cpu",
        "mean-free-memory",
        "std-free-memory",
    ]
    assert table[2].split() == ["b", "1000", "0", "-", "-"]
    assert table[3].split() == ["c", "-", "-", "-", "-"]


def test_a_round_with_failures() -> None:
    options = Options("http://prometheus.test")
    with pytest.raises(AnnotatorError, match=r"Prometheus at http://prometheus\.test: down"):
        asyncio.run(annotate_once(FakeAPI(["a"]), FakePrometheus({}, error="down"), options))  # type: ignore[arg-type]
    # a node deleted between the list and its patch: reported, the others written
    prometheus = FakePrometheus({"sum by": [_series("a", 1), _series("b", 2)]})
    api = FakeAPI(["a", "b"], missing={"a"})
    result = asyncio.run(annotate_once(api, prometheus, options))  # type: ignore[arg-type]
    assert list(result.annotated) == ["b"]
    assert "not found" in result.failed["a"]


def test_cli_reports_an_unreachable_prometheus() -> None:
    runner = CliRunner()
    got = runner.invoke(
        main,
        [
            "annotate-nodes",
            "--prometheus=http://127.0.0.1:9",
            "--once",
            "--kubeconfig=/nonexistent",
        ],
    )
    assert got.exit_code == 1
    assert "Error:" in got.output
    bad = runner.invoke(main, ["annotate-nodes", "--prometheus=http://p", "--interval=soon"])
    assert bad.exit_code == 1
    assert 'time: invalid duration "soon"' in bad.output
