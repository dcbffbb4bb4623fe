"""Trimaran: TargetLoadPacking's and LoadVariationRiskBalancing's scores worked by hand from
upstream's formulas, Go's rounding, recently placed pods, missing and stale load (every node the
minimum, reported), the queries load-watcher sends, and the args."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.cli import main
from kubesched.config import ConfigError
from kubesched.framework import CycleState, NodeInfo, PodInfo, Snapshot
from kubesched.plugins.network_traffic import Sample
from kubesched.plugins.trimaran import (
    LoadVariationRiskBalancing,
    NodeLoad,
    TargetLoadPacking,
    go_round,
    load_by_node,
    load_queries,
    requested,
    risk_score,
)
from kubesched.plugins.trimaran._load import TrimaranPlugin

ARGS = {"metricProvider": {"type": "Prometheus", "address": "http://prometheus.invalid:9090"}}


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "test"


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Source:
    def __init__(self, load: Mapping[str, NodeLoad]) -> None:
        self.load = dict(load)
        self.error: Exception | None = None

    def __call__(self) -> Mapping[str, NodeLoad]:
        if self.error is not None:
            raise self.error
        return dict(self.load)


def snapshot(cpu: str = "4", memory: str = "8Gi", names: tuple[str, ...] = ("n1",)) -> Snapshot:
    s = Snapshot()
    for n in names:
        s.set_node(make_node(n, cpu=cpu, memory=memory))
    return s


def info(s: Snapshot, name: str = "n1") -> NodeInfo:
    node = s.get(name)
    assert node is not None
    return node


@pytest.fixture
def make() -> Iterator[Callable[..., Any]]:
    made: list[TrimaranPlugin] = []

    def build(
        cls: type[TrimaranPlugin],
        s: Snapshot,
        load: Mapping[str, NodeLoad],
        args: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
        wall: Clock | None = None,
        source: Source | None = None,
    ) -> Any:
        source = source or Source(load)
        plugin = cls(
            _Handle(s),  # type: ignore[arg-type]
            {**ARGS, **(args or {})},
            fetch=source,
            clock=clock or Clock(),
            wall=wall or Clock(5000.0),
        )
        assert plugin.refresher.refresh_once()
        made.append(plugin)
        return plugin

    yield build
    for p in made:
        p.close()


def pod(cpu: str | None = None, limit: str | None = None, memory: str | None = None) -> Pod:
    p = make_pod("p", cpu=cpu, memory=memory)
    if limit is not None:
        p.spec.containers[0].resources.limits["cpu"] = limit
    return p


def test_go_round_halves_away_from_zero() -> None:
    assert [go_round(x) for x in (62.5, 63.5, 0.5, 2.4999, -2.5)] == [63, 64, 1, 2, -3]


# --- TargetLoadPacking -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cpu_avg", "the_pod", "expected"),
    [
        # 400m used of 4000m; 500m requested x 1.5 = 750m: 28.75% <= 40:
        # round(60 * 28.75 / 40 + 40) = round(83.125) = 83
        (10.0, pod(cpu="500m"), 83),
        # 2000m + 750m = 68.75% > 40: round(40 * 31.25 / 60) = round(20.83) = 21
        (50.0, pod(cpu="500m"), 21),
        # 3600m + 750m = 108.75% > 100: 0
        (90.0, pod(cpu="500m"), 0),
        # the limit, 600m: 15%: round(60 * 15 / 40 + 40) = round(62.5) = 63 (Go rounds up)
        (0.0, pod(cpu="100m", limit="600m"), 63),
        # neither: defaultRequests 1000m: 25%: round(77.5) = 78
        (0.0, pod(), 78),
    ],
)
def test_target_load_packing_scores(
    make: Callable[..., Any], cpu_avg: float, the_pod: Pod, expected: int
) -> None:
    s = snapshot()
    plugin = make(TargetLoadPacking, s, {"n1": NodeLoad(cpu_avg=cpu_avg)})
    assert plugin.score(CycleState(), the_pod, info(s)) == (expected, None)


def test_target_load_packing_args(make: Callable[..., Any]) -> None:
    s = snapshot()
    plugin = make(
        TargetLoadPacking,
        s,
        {"n1": NodeLoad(cpu_avg=10.0)},
        {
            "targetUtilization": 60,
            "defaultRequestsMultiplier": "2",
            "defaultRequests": {"cpu": "2"},
        },
    )
    # 400m + 500m x 2 = 1400m: 35%: round(40 * 35 / 60 + 60) = round(83.33) = 83
    assert plugin.score(CycleState(), pod(cpu="500m"), info(s)) == (83, None)
    # best effort: 400m + 2000m = 60%: round(40 * 60 / 60 + 60) = 100
    assert plugin.score(CycleState(), pod(), info(s)) == (100, None)


def test_target_load_packing_counts_pods_placed_since_the_measurement(
    make: Callable[..., Any],
) -> None:
    s = snapshot()
    wall = Clock(5000.0)
    plugin = make(TargetLoadPacking, s, {"n1": NodeLoad(cpu_avg=10.0)}, wall=wall)
    assert plugin.window_end == 5000.0
    assert plugin.score(CycleState(), pod(cpu="500m"), info(s)) == (83, None)
    wall.now = 5010.0
    placed = make_pod("placed", cpu="1", node_name="n1")
    s.add_pod(PodInfo.of(placed), "n1")
    # 400m + 1500m (placed, not measured yet) + 750m = 66.25%: round(40 * 33.75 / 60) = 23
    assert plugin.score(CycleState(), pod(cpu="500m"), info(s)) == (23, None)
    # Measured again 30 s later: it may not show yet (agents report every 60 s).
    wall.now = 5040.0
    assert plugin.refresher.refresh_once()
    assert plugin.score(CycleState(), pod(cpu="500m"), info(s)) == (23, None)
    # A minute and more after it was placed: in the load now, no longer added.
    wall.now = 5071.0
    assert plugin.refresher.refresh_once()
    assert plugin.score(CycleState(), pod(cpu="500m"), info(s)) == (83, None)
    # Gone from the node, forgotten.
    s.remove_pod(placed.metadata.uid)
    plugin.score(CycleState(), pod(cpu="500m"), info(s))
    assert plugin.placed == {"n1": {}}


# --- LoadVariationRiskBalancing ----------------------------------------------------------------

LOAD = NodeLoad(cpu_avg=25.0, cpu_std=10.0, memory_avg=50.0, memory_std=5.0)


@pytest.mark.parametrize(
    ("load", "args", "expected"),
    [
        # cpu: mu (1000 + 1000) / 4000 = 0.5, sigma 0.1: 100 (1 - 0.3) = 70
        # memory: mu (4096 + 1024) / 8192 = 0.625, sigma 0.05: 100 (1 - 0.3375) = 66.25
        # both: min -> 66
        (LOAD, {}, 66),
        # sensitivity 2: cpu sigma sqrt(0.1) = 0.3162: 59.19; memory sqrt(0.05) = 0.2236:
        # 57.57 -> 58
        (LOAD, {"safeVarianceSensitivity": 2}, 58),
        # margin 3: cpu sigma 0.3: 60; memory 0.15: 61.25 -> 60
        (LOAD, {"safeVarianceMargin": 3}, 60),
        # cpu only: 70
        (NodeLoad(cpu_avg=25.0, cpu_std=10.0), {}, 70),
        # memory only, no deviation: 100 (1 - 0.625 / 2) = 68.75 -> 69
        (NodeLoad(memory_avg=50.0), {}, 69),
    ],
)
def test_load_variation_risk_balancing_scores(
    make: Callable[..., Any], load: NodeLoad, args: Mapping[str, Any], expected: int
) -> None:
    s = snapshot()
    plugin = make(LoadVariationRiskBalancing, s, {"n1": load}, args)
    assert plugin.score(CycleState(), pod(cpu="1", memory="1Gi"), info(s)) == (expected, None)


def test_risk_score_edges() -> None:
    # sensitivity 0: Go's 1/0 is +Inf, sigma ** Inf is 0 below 1.
    assert risk_score(50.0, 10.0, 0.0, 1000.0, 1.0, 0.0) == pytest.approx(75.0)
    # usage clamped to capacity; no capacity scores 0.
    assert risk_score(150.0, 0.0, 0.0, 1000.0, 1.0, 1.0) == pytest.approx(50.0)
    assert risk_score(10.0, 0.0, 0.0, 0.0, 1.0, 1.0) == 0.0


def test_requested_as_upstream_adds_it() -> None:
    p = make_pod("p", cpu="1", memory="1Gi")
    p.spec.containers.append(p.spec.containers[0])
    init = make_pod("i", cpu="3", memory="512Mi").spec.containers[0]
    p.spec.init_containers.append(init)
    p.spec.overhead["cpu"] = "100m"
    assert requested(p) == {"cpu": 3100, "memory": 2 << 30}


# --- missing and stale load --------------------------------------------------------------------


@pytest.mark.parametrize("cls", [TargetLoadPacking, LoadVariationRiskBalancing])
def test_unknown_missing_and_stale_load_score_the_minimum(
    make: Callable[..., Any], cls: type[TrimaranPlugin]
) -> None:
    s = snapshot(names=("n1", "n2"))
    clock = Clock()
    source = Source({"n1": LOAD})
    plugin = make(cls, s, {}, {"maxDataAge": "2m", "refreshInterval": "30s"}, clock, source=source)
    assert plugin.score(CycleState(), pod(cpu="1"), info(s, "n1"))[0] > 0
    assert plugin.score(CycleState(), pod(cpu="1"), info(s, "n2")) == (0, None)
    assert plugin.minimum == {"unknown_node": 1}
    # Prometheus fails from now on: the last answer serves until it is two minutes old.
    source.error = RuntimeError("down")
    assert not plugin.refresher.refresh_once()
    clock.now += 120
    assert plugin.score(CycleState(), pod(cpu="1"), info(s, "n1"))[0] > 0
    clock.now += 1
    assert plugin.score(CycleState(), pod(cpu="1"), info(s, "n1")) == (0, None)
    assert plugin.minimum["stale"] == 1
    assert plugin.data_age() == 121.0


# --- the queries and the answers ---------------------------------------------------------------


def test_load_watcher_queries() -> None:
    assert load_queries(900.0) == [
        ("cpu_avg", "avg_over_time(instance:node_cpu:ratio[900s])"),
        ("memory_avg", "avg_over_time(instance:node_memory_utilisation:ratio[900s])"),
        ("cpu_std", "stddev_over_time(instance:node_cpu:ratio[900s])"),
        ("memory_std", "stddev_over_time(instance:node_memory_utilisation:ratio[900s])"),
    ]


def test_load_by_node_in_percent() -> None:
    answers = {
        "cpu_avg": [
            Sample({"instance": "n1"}, 0.25),
            Sample({"job": "x"}, 0.5),
            Sample({"instance": "n2"}, float("nan")),
        ],
        "memory_std": [Sample({"instance": "n1"}, 0.05)],
    }
    assert load_by_node(answers, "instance") == {"n1": NodeLoad(cpu_avg=25.0, memory_std=5.0)}


# --- args --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cls", "args", "field"),
    [
        (TargetLoadPacking, {"metricProvider": {"type": "KubernetesMetricsServer"}}, "type"),
        (TargetLoadPacking, {"metricProvider": {}}, "metricProvider.type"),
        (TargetLoadPacking, {"watcherAddress": "http://lw:2020"}, "watcherAddress"),
        (TargetLoadPacking, {**ARGS, "targetUtilization": 101}, "targetUtilization"),
        (TargetLoadPacking, {**ARGS, "defaultRequestsMultiplier": "x"}, "Multiplier"),
        (TargetLoadPacking, {**ARGS, "defaultRequests": {"cpu": "lots"}}, "defaultRequests"),
        (LoadVariationRiskBalancing, {**ARGS, "safeVarianceMargin": -1}, "safeVarianceMargin"),
        (LoadVariationRiskBalancing, {**ARGS, "maxDataAge": "1s"}, "maxDataAge"),
        (LoadVariationRiskBalancing, {**ARGS, "nodeLabel": "a-b"}, "nodeLabel"),
    ],
)
def test_bad_args_name_the_field(
    cls: type[TrimaranPlugin], args: Mapping[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        cls(_Handle(Snapshot()), dict(args), fetch=Source({}))  # type: ignore[arg-type]


def test_default_address_is_load_watchers() -> None:
    plugin = LoadVariationRiskBalancing(
        _Handle(Snapshot()),  # type: ignore[arg-type]
        {"metricProvider": {"type": "Prometheus"}},
    )
    assert plugin.address == "http://prometheus-k8s:9090"
    plugin.close()


# --- in simulate -------------------------------------------------------------------------------


def test_in_simulate_without_prometheus_every_node_scores_the_minimum(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    manifests: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for n in ("a", "b")
    ]
    manifests.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "schedulerName": "trimaran",
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                ],
            },
        }
    )
    provider = {"metricProvider": {"type": "Prometheus", "address": closed}}
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "trimaran",
                "plugins": {
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [
                            {"name": "TargetLoadPacking"},
                            {"name": "LoadVariationRiskBalancing"},
                        ],
                    }
                },
                "pluginConfig": [
                    {"name": "TargetLoadPacking", "args": provider},
                    {"name": "LoadVariationRiskBalancing", "args": provider},
                ],
            }
        ],
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(manifests))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    got = CliRunner().invoke(
        main,
        [
            "simulate",
            *("-f", str(tmp_path / "cluster.yaml")),
            *("--config", str(tmp_path / "config.yaml")),
            *("-o", "json", "--explain"),
        ],
    )
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout[got.stdout.index("{") :])
    [placed] = report["pods"]
    assert placed["node"] in ("a", "b")
    for node in ("a", "b"):
        assert placed["nodes"][node]["scores"] == {
            "TargetLoadPacking": 0,
            "LoadVariationRiskBalancing": 0,
        }
