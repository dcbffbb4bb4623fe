"""SafeOverload and SafeBalance: the Beta CDF against closed forms and 40-digit references, the
documented formulas worked by hand on annotated nodes, and the missing, invalid and stale
statistics paths."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from builders import NodeWrapper, make_pod
from kubesched.api import Node, Pod
from kubesched.config import ConfigError
from kubesched.framework import (
    ActionType,
    Code,
    CycleState,
    FitError,
    Framework,
    Nodes,
    Registry,
    Snapshot,
)
from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.plugins.safe import (
    ERR_REASON_CPU,
    ERR_REASON_MEMORY,
    SafeBalance,
    SafeBalanceArgs,
    SafeOverload,
    SafeOverloadArgs,
    balance_scores,
    beta_cdf,
    beta_fit,
    combine,
    overload_scores,
    rank,
)

GI = 1 << 30


CAPACITY = {"cpu": "4", "memory": "8Gi", "pods": "110"}


class _Handle:
    def __init__(self, snapshot: Snapshot, profile_name: str = "test") -> None:
        self.snapshot = snapshot
        self.profile_name = profile_name


def node(name: str, annotations: Mapping[str, str] | None = None) -> Node:
    """A 4-CPU node carrying SafeOverload's annotations."""
    return NodeWrapper(name).annotations(annotations or {}).capacity(CAPACITY).obj()


def snapshot_of(*nodes: Node) -> Snapshot:
    snap = Snapshot()
    for n in nodes:
        snap.set_node(n)
    return snap


def all_nodes(snap: Snapshot) -> Nodes:
    return Nodes(snap, snap.present_slots())


def binomial_tail(n: int, k: int, p: float) -> float:
    """P(Bin(n, p) >= k) = I_p(k, n - k + 1): the Beta CDF for integer shapes, by hand."""
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


# --- the Beta CDF ----------------------------------------------------------------------------


@pytest.mark.parametrize("x", [0.01, 0.1, 0.37, 0.5, 0.9, 0.999])
def test_beta_cdf_closed_forms(x: float) -> None:
    def cdf(a: float, b: float) -> float:
        return float(beta_cdf(x, np.array([a]), np.array([b]))[0])

    assert cdf(1, 1) == pytest.approx(x, abs=1e-14)
    assert cdf(3.5, 1) == pytest.approx(x**3.5, abs=1e-14)
    assert cdf(1, 4.25) == pytest.approx(1 - (1 - x) ** 4.25, abs=1e-14)
    assert cdf(2, 2) == pytest.approx(3 * x**2 - 2 * x**3, abs=1e-14)
    # integer shapes: a binomial tail
    for a, b in [(12, 3), (5, 40), (150, 190)]:
        assert cdf(a, b) == pytest.approx(binomial_tail(a + b - 1, a, x), abs=1e-12)


def test_beta_cdf_symmetry_and_large_shapes() -> None:
    rng = random.Random(7)
    for _ in range(200):
        a = 10 ** rng.uniform(-1, 9)
        b = 10 ** rng.uniform(-1, 9)
        mean, sd = a / (a + b), math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
        x = min(max(mean + sd * rng.uniform(-6, 6), 1e-9), 1 - 1e-9)
        x = max(round(x * 2**40), 1) / 2**40  # so that 1 - x is exact
        left = float(beta_cdf(x, np.array([a]), np.array([b]))[0])
        right = float(beta_cdf(1 - x, np.array([b]), np.array([a]))[0])
        assert 0.0 <= left <= 1.0
        assert left + right == pytest.approx(1.0, abs=1e-10)
    # equal shapes are symmetric about 1/2, on both sides of the integration threshold
    for shape in (150.0, 250.0, 1e6, 1e10):
        half = float(beta_cdf(0.5, np.array([shape]), np.array([shape]))[0])
        assert half == pytest.approx(0.5, abs=1e-10)


# 40-digit references (mpmath, integrating the density), for shapes where the continued
# fraction would need thousands of terms.
REFERENCES = [
    (125000.0, 125000.0, 0.5005, 0.69146232924957),
    (81000.0, 9000.0, 0.9005, 0.69067958061602),
    (3.2e6, 1.28e7, 0.20001, 0.53987695909309),
    (1.25e9, 1.25e9, 0.500001, 0.53982783727424),
    (3.995, 3991.0, 0.0012, 0.70570579083669),
    (391.1, 3.95, 0.9, 1.2207428195033e-14),
    (0.8889, 0.8889, 0.9, 0.88358123968886),
    (13.8, 9.2, 0.9, 0.99989919126168095),
    (42.5, 7.5, 0.9, 0.84270991303384433),
    (5.833333333333333, 2.5, 0.9, 0.92661499547919078),
]


@pytest.mark.parametrize(("a", "b", "x", "want"), REFERENCES)
def test_beta_cdf_references(a: float, b: float, x: float, want: float) -> None:
    got = float(beta_cdf(x, np.array([a]), np.array([b]))[0])
    assert got == pytest.approx(want, rel=1e-9, abs=1e-15)


def test_beta_fit_matches_moments() -> None:
    mu = np.array([0.8, 0.5, 0.3, 0.5, 1.0, 0.0])
    sd = np.array([0.1, 0.2, 0.01, 0.5, 0.1, 0.0])
    a, b, ok = beta_fit(mu, sd)
    assert ok.tolist() == [True, True, True, False, False, False]
    assert a[0] == pytest.approx(12.0)
    assert b[0] == pytest.approx(3.0)
    mean = a[ok] / (a[ok] + b[ok])
    var = a[ok] * b[ok] / ((a[ok] + b[ok]) ** 2 * (a[ok] + b[ok] + 1))
    np.testing.assert_allclose(mean, mu[ok])
    np.testing.assert_allclose(np.sqrt(var), sd[ok])


# --- the formulas ------------------------------------------------------------------------------


def test_rank_special_cases() -> None:
    mu = np.array([0.0, 0.5, 0.95, 1.0, 0.5, 0.8])
    sigma = np.array([0.3, 0.0, 0.0, 0.1, 0.5, 0.1])
    got = rank(mu, sigma, 0.9)
    # mu 0: 1; sigma 0 below / above the threshold: 1 / 0; mu 1 and sigma**2 >= mu (1 - mu):
    # no Beta distribution, 0; else the CDF
    assert got[:5].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert got[5] == pytest.approx(binomial_tail(14, 12, 0.9), abs=1e-12)


def test_overload_and_balance_scores_by_hand() -> None:
    risk = np.array([0.0, 0.075, 0.15, 0.3, 0.9])
    # int((1 - sqrt(risk / 0.3)) * 100): 100, 50, int(29.29) = 29, 0 (fraction 1), 0
    assert overload_scores(risk, 0.3).tolist() == [100, 50, 29, 0, 0]
    # percentile 0: any risk is too much
    assert overload_scores(np.array([0.0, 1e-9]), 0.0).tolist() == [100, 0]
    # int((1 - (mu + sqrt(sigma)) / 2) * 100 + 0.5)
    mu = np.array([0.8, 0.0, 0.5, 1.0])
    sigma = np.array([0.1, 0.0, 0.25, 1.0])
    assert balance_scores(mu, sigma).tolist() == [44, 100, 50, 0]


def test_combine_takes_the_lower_or_the_one_known() -> None:
    cpu = np.array([40, 40, 40, 40])
    memory = np.array([70, 30, 70, 70])
    cpu_ok = np.array([True, True, False, False])
    memory_ok = np.array([True, True, True, False])
    assert combine(cpu, cpu_ok, memory, memory_ok).tolist() == [40, 30, 70, 0]


# --- the plugins on annotated nodes ---------------------------------------------------------


def stats(
    cpu: tuple[float, float] | None = None, memory: tuple[float, float] | None = None
) -> dict[str, str]:
    out = {}
    if cpu is not None:
        out["mean-free-cpu"], out["std-free-cpu"] = str(cpu[0]), str(cpu[1])
    if memory is not None:
        out["mean-free-memory"], out["std-free-memory"] = str(memory[0]), str(memory[1])
    return out


def test_safe_overload_by_hand() -> None:
    # 4 CPUs (4000m), a pod asking 200m:
    #   "calm":  free 2800 +- 0:   mu = (1200 + 200) / 4000 = 0.35, sigma 0: rank 1, risk 0
    #   "noisy": free 1000 +- 400: mu = (3000 + 200) / 4000 = 0.8, sigma 0.1: Beta(12, 3),
    #            risk = 1 - P(Bin(14, 0.9) >= 12) = 0.158..., accepted (<= 0.3),
    #            score int((1 - sqrt(0.158... / 0.3)) * 100) = 27
    #   "full":  free 300 +- 0:    mu = (3700 + 200) / 4000 = 0.975 > 0.9: risk 1, rejected
    #   "bare":  no statistics:    accepted, scored 0
    snap = snapshot_of(
        node("calm", stats(cpu=(2800, 0))),
        node("noisy", stats(cpu=(1000, 400))),
        node("full", stats(cpu=(300, 0))),
        node("bare"),
    )
    plugin = SafeOverload(_Handle(snap), {"utilization": 90, "percentile": 30})
    pod = make_pod("p", cpu="200m")
    state = CycleState()
    verdict = plugin.filter_nodes(state, pod, all_nodes(snap))
    statuses = [verdict.statuses[i] for i in verdict.ids.tolist()]
    assert [s is None for s in statuses] == [True, True, False, True]
    full = statuses[2]
    assert full is not None
    assert full.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert full.reasons == (ERR_REASON_CPU,)

    risk, ok = plugin.risks(pod, all_nodes(snap))
    want_noisy = 1 - binomial_tail(14, 12, 0.9)
    assert risk["cpu"][:3].tolist() == pytest.approx([0.0, want_noisy, 1.0], abs=1e-12)
    assert ok["cpu"].tolist() == [True, True, True, False]
    assert not ok["memory"].any()
    expected_noisy = int((1 - math.sqrt(want_noisy / 0.3)) * 100)
    assert expected_noisy == 27
    scores, status = plugin.score_nodes(state, pod, all_nodes(snap))
    assert status is None
    assert scores.tolist() == [100, 27, 0, 0]
    # the per-node forms agree
    infos = list(all_nodes(snap).infos())
    assert [plugin.score(CycleState(), pod, i)[0] for i in infos] == [100, 27, 0, 0]
    assert plugin.filter(CycleState(), pod, infos[1]) is None
    assert plugin.filter(CycleState(), pod, infos[2]) == full


def test_safe_overload_rejects_on_memory_and_both() -> None:
    # 8Gi: free 0.5Gi +- 0 with a 1Gi pod: mu = (7.5 + 1) / 8 > 0.9: rejected on memory;
    # "both" also has too little cpu.
    snap = snapshot_of(
        node("mem", stats(cpu=(3000, 0), memory=(0.5 * GI, 0))),
        node("both", stats(cpu=(100, 0), memory=(0.5 * GI, 0))),
    )
    plugin = SafeOverload(_Handle(snap))
    pod = make_pod("p", cpu="200m", memory="1Gi")
    verdict = plugin.filter_nodes(CycleState(), pod, all_nodes(snap))
    reasons = [verdict.statuses[i].reasons for i in verdict.ids.tolist()]  # type: ignore[union-attr]
    assert reasons == [(ERR_REASON_MEMORY,), (ERR_REASON_CPU, ERR_REASON_MEMORY)]


def test_safe_overload_in_a_framework_explains_rejections() -> None:
    snap = snapshot_of(node("a", stats(cpu=(100, 0))), node("b", stats(cpu=(150, 0))))
    fw = Framework(
        profile_name="safe",
        registry=Registry(
            {
                "PrioritySort": PrioritySort,
                "DefaultBinder": DefaultBinder,
                "SafeOverload": SafeOverload,
            }
        ),
        plugins={
            "queueSort": [("PrioritySort", 1)],
            "filter": [("SafeOverload", 1)],
            "score": [("SafeOverload", 1)],
            "bind": [("DefaultBinder", 1)],
        },
        snapshot=snap,
        rng=random.Random(0),
    )
    with pytest.raises(FitError) as err:
        fw.schedule_pod(CycleState(), make_pod("p", cpu="100m"))
    assert str(err.value) == f"0/2 nodes are available: 2 {ERR_REASON_CPU}."


def test_safe_balance_by_hand() -> None:
    # mu 0.8, sigma 0.1: int((1 - (0.8 + sqrt(0.1)) / 2) * 100 + 0.5) = int(44.69) = 44;
    # memory 8Gi with 2Gi free +- 0.8Gi and a 0 request: mu 0.75, sigma 0.1:
    # int((1 - (0.75 + 0.3162...) / 2) * 100 + 0.5) = 47; the node scores min(44, 47) = 44.
    snap = snapshot_of(
        node("a", stats(cpu=(1000, 400), memory=(2 * GI, 0.8 * GI))),
        node("b", stats(memory=(2 * GI, 0.8 * GI))),
        node("c"),
    )
    plugin = SafeBalance(_Handle(snap))
    scores, _ = plugin.score_nodes(CycleState(), make_pod("p", cpu="200m"), all_nodes(snap))
    assert scores.tolist() == [44, 47, 0]


def test_forecast_blends_the_mean_with_either_spelling() -> None:
    # mean free 2000, forecast 1000, weight 20%: free = 0.8 * 2000 + 0.2 * 1000 = 1800,
    # mu = (2200 + 0) / 4000 = 0.55: SafeBalance int((1 - 0.275) * 100 + 0.5) = 73
    base = stats(cpu=(2000, 0))
    snap = snapshot_of(
        node("correct", {**base, "forecasted-free-cpu": "1000"}),
        node("original", {**base, "forcasted-free-cpu": "1000"}),
        node("both", {**base, "forecasted-free-cpu": "1000", "forcasted-free-cpu": "0"}),
        node("none", base),
        node("garbage", {**base, "forecasted-free-cpu": "soon"}),
    )
    plugin = SafeBalance(_Handle(snap), {"forecastWeight": 20})
    scores, _ = plugin.score_nodes(CycleState(), make_pod("p"), all_nodes(snap))
    # no forecast: mu = 0.5 -> int(75.5) = 75
    assert scores.tolist() == [73, 73, 73, 75, 75]


def test_missing_invalid_and_stale_statistics_are_reported_and_accepted() -> None:
    now = time.time()
    old = datetime.fromtimestamp(now - 3600, UTC).isoformat().replace("+00:00", "Z")
    fresh = datetime.fromtimestamp(now - 10, UTC).isoformat().replace("+00:00", "Z")
    full = stats(cpu=(100, 0))  # would be rejected if used
    snap = snapshot_of(
        node("missing"),
        node("invalid", {"mean-free-cpu": "lots", "std-free-cpu": "1"}),
        node("nan", {"mean-free-cpu": "NaN"}),
        node("stale", {**full, "kubesched.io/stats-updated-at": old}),
        node("fresh", {**full, "kubesched.io/stats-updated-at": fresh}),
        node("undated", full),
    )
    plugin = SafeOverload(_Handle(snap), {"maxStatsAge": "5m"})
    pod = make_pod("p", cpu="100m")
    verdict = plugin.filter_nodes(CycleState(), pod, all_nodes(snap))
    # only the statistics that are used reject
    assert (verdict.ids != 0).tolist() == [False, False, False, False, True, True]
    assert plugin.unusable == {
        ("cpu", "missing"): 1,
        ("cpu", "invalid"): 2,
        ("cpu", "stale"): 1,
        ("memory", "missing"): 6,
    }
    scores, _ = plugin.score_nodes(CycleState(), pod, all_nodes(snap))
    assert scores.tolist() == [0, 0, 0, 0, 0, 0]
    # 0s turns the age check off
    unchecked = SafeOverload(_Handle(snap), {"maxStatsAge": "0s"})
    verdict = unchecked.filter_nodes(CycleState(), pod, all_nodes(snap))
    assert (verdict.ids != 0).tolist() == [False, False, False, True, True, True]


def test_statistics_are_parsed_again_when_the_node_changes() -> None:
    snap = snapshot_of(node("a", stats(cpu=(100, 0))))
    plugin = SafeOverload(_Handle(snap))
    pod = make_pod("p", cpu="100m")
    assert plugin.filter_nodes(CycleState(), pod, all_nodes(snap)).ids.tolist() == [1]
    snap.set_node(node("a", stats(cpu=(3900, 0))))
    assert plugin.filter_nodes(CycleState(), pod, all_nodes(snap)).ids.tolist() == [0]


# --- args ----------------------------------------------------------------------------------


def test_args_defaults_come_from_the_original_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAFEUTILIZATION", raising=False)
    monkeypatch.delenv("SAFEPERCENTILE", raising=False)
    monkeypatch.delenv("SAFEFORECASTWEIGHT", raising=False)
    assert SafeOverloadArgs() == SafeOverloadArgs(
        utilization=90, percentile=30, forecast_weight=20, max_stats_age=300.0
    )
    monkeypatch.setenv("SAFEUTILIZATION", "80")
    monkeypatch.setenv("SAFEPERCENTILE", "101")  # out of range: ignored, as the original
    monkeypatch.setenv("SAFEFORECASTWEIGHT", "0")
    got = SafeOverloadArgs()
    assert (got.utilization, got.percentile, got.forecast_weight) == (80, 30, 0)
    assert SafeBalanceArgs().forecast_weight == 0
    # explicit args win over the environment
    plugin = SafeOverload(_Handle(Snapshot()), {"utilization": 70})
    assert plugin.threshold == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"utilization": 101}, "args.utilization: Invalid value: 101: must be between 0 and 100"),
        ({"percentile": -1}, "args.percentile: Invalid value: -1: must be between 0 and 100"),
        ({"maxStatsAge": "-1s"}, 'args.maxStatsAge: Invalid value: "-1s": must not be negative'),
        ({"percentil": 3}, 'args.percentil: Unknown field (did you mean "percentile"?)'),
    ],
)
def test_args_validation(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        SafeOverload(_Handle(Snapshot()), args)
    assert message in str(err.value)


def test_vectorized_scores_match_per_node_scores_on_random_nodes() -> None:
    rng = random.Random(3)
    nodes = []
    for i in range(60):
        annotations = {}
        if rng.random() < 0.9:
            annotations["mean-free-cpu"] = str(rng.uniform(0, 4000))
            annotations["std-free-cpu"] = str(rng.uniform(0, 1500))
        if rng.random() < 0.9:
            annotations["mean-free-memory"] = str(rng.uniform(0, 8 * GI))
            annotations["std-free-memory"] = str(rng.uniform(0, 3 * GI))
        nodes.append(node(f"n{i}", annotations))
    snap = snapshot_of(*nodes)
    pod: Pod = make_pod("p", cpu="300m", memory="512Mi")
    for plugin in (SafeOverload(_Handle(snap)), SafeBalance(_Handle(snap))):
        vec, _ = plugin.score_nodes(CycleState(), pod, all_nodes(snap))
        one = [plugin.score(CycleState(), pod, info)[0] for info in all_nodes(snap).infos()]
        assert vec.tolist() == one
        assert ((vec >= 0) & (vec <= 100)).all()


def test_new_statistics_requeue_rejected_pods() -> None:
    plugin = SafeOverload(_Handle(Snapshot()))
    [registered] = plugin.events_to_register()
    assert registered.event.resource == "Node"
    for action in (
        ActionType.ADD,
        ActionType.UPDATE_NODE_ANNOTATION,
        ActionType.UPDATE_NODE_ALLOCATABLE,
    ):
        assert registered.event.action & action
    assert not registered.event.action & ActionType.UPDATE_NODE_LABEL
