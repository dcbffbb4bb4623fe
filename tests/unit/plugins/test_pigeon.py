"""PigeonHole: each policy's objective and the rank mapping worked by hand on a three-node
cluster, the vectorized objectives against direct per-candidate evaluations of the documented
formulas, the fit check, the demand history, args and their environment defaults."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.config import ConfigError
from kubesched.framework import CycleState, Nodes, PodInfo, Snapshot
from kubesched.plugins.pigeon import (
    DemandStats,
    PigeonHole,
    PigeonHoleArgs,
    binpack_values,
    clamped_utilization,
    consolidate_values,
    load_balance_values,
    rank_values,
)


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.profile_name = "test"


def cluster(cpu: str, used: list[tuple[str, str]]) -> Snapshot:
    """Nodes a, b, c with ``cpu`` CPUs and 8Gi, each running one pod of ``used[i]``."""
    snap = Snapshot()
    for name, (pod_cpu, pod_memory) in zip("abc", used, strict=True):
        snap.set_node(make_node(name, cpu=cpu, memory="8Gi"))
        snap.add_pod(PodInfo.of(make_pod(f"on-{name}", cpu=pod_cpu, memory=pod_memory)), name)
    return snap


def score(plugin: PigeonHole, snap: Snapshot, cpu: str, memory: str = "1Gi") -> list[int]:
    nodes = Nodes(snap, snap.present_slots())
    got, status = plugin.score_nodes(CycleState(), make_pod("p", cpu=cpu, memory=memory), nodes)
    assert status is None
    return list(got.tolist())


USED = [("1", "1Gi"), ("2", "2Gi"), ("3", "3Gi")]


def test_load_balance_by_hand() -> None:
    # cpu utilization 0.25, 0.5, 0.75; a 1-CPU pod adds 0.25 to the node it lands on:
    #   on a: [0.5, 0.5, 0.75]  sd = sqrt(1/72)
    #   on b: [0.25, 0.75, 0.75] sd = sqrt(4/72)
    #   on c: [0.25, 0.5, 1.0]  sd = sqrt(7/72)
    # a scores 100, c 1, b round(1 + 99 * (sqrt7 - 2) / (sqrt7 - 1)) = round(39.85) = 40
    plugin = PigeonHole(_Handle(snap := cluster("4", USED)), {"policy": "LOAD_BALANCE"})
    assert round(1 + 99 * (math.sqrt(7) - 2) / (math.sqrt(7) - 1)) == 40
    assert score(plugin, snap, "1") == [100, 40, 1]


def test_consolidate_by_hand() -> None:
    # the mean with the pod anywhere is a = 1.75 / 3; t = (a - u) / a below it, (u - a) / (1 - a)
    # above; value = 1 - sqrt(mean(t**2)):
    #   on a: [0.5, 0.5, 0.75]: t = 1/7, 1/7, 0.4    -> 1 - sqrt((2/49 + 0.16) / 3)
    #   on b: [0.25, 0.75, 0.75]: t = 4/7, 0.4, 0.4  -> 1 - sqrt((16/49 + 0.32) / 3)
    #   on c: [0.25, 0.5, 1.0]: t = 4/7, 1/7, 1      -> 1 - sqrt((17/49 + 1) / 3)
    va = 1 - math.sqrt((2 / 49 + 0.16) / 3)
    vb = 1 - math.sqrt((16 / 49 + 0.32) / 3)
    vc = 1 - math.sqrt((17 / 49 + 1) / 3)
    # smaller is better: c 100, a 1, b in between
    want_b = round(1 + 99 * (va - vb) / (va - vc))
    assert want_b == 50
    plugin = PigeonHole(_Handle(snap := cluster("4", USED)), {"policy": "CONSOLIDATE"})
    assert score(plugin, snap, "1") == [1, 50, 100]


def test_adaptive_bin_packing_by_hand() -> None:
    # One resource (cpu), 8 CPUs per node, 1, 2 and 3 CPUs used.
    # First pod, 1 CPU: the demand history is that one pod, so its variation is 0 and the value
    # is the system's coefficient of variation sd/mean of cpu utilization with the pod placed:
    #   a: [0.25, 0.25, 0.375], b: [0.125, 0.375, 0.375], c: [0.125, 0.25, 0.5] (mean 7/24)
    #   -> 0.2020, 0.4041, 0.5345: a 100, c 1, b round(39.85) = 40
    snap = cluster("8", USED)
    plugin = PigeonHole(_Handle(snap), {"policy": "A_BINPACK", "numResources": 1})
    assert score(plugin, snap, "1") == [100, 40, 1]
    # Second pod, 3 CPUs: the history holds 1 and 3 CPUs: mean 2000m, second moment 5e6, over
    # the mean capacity 8000m: mean 0.25, sd sqrt(5e6 - 4e6) / 8000 = 0.125, variation 0.5.
    # With the pod: a [0.5, 0.25, 0.375], b [0.125, 0.625, 0.375], c [0.125, 0.25, 0.75],
    # mean 0.375, variations sqrt(1/96), sqrt(4/96), sqrt(7/96) over 0.375; value |c - 0.5|.
    cs = [math.sqrt(k / 96) / 0.375 for k in (1, 4, 7)]
    va, vb, vc = (abs(c - 0.5) for c in cs)
    assert vb < vc < va
    want_c = round(1 + 99 * (va - vc) / (va - vb))
    assert want_c == 5
    assert score(plugin, snap, "3") == [1, 100, 5]
    assert plugin.history.count == 2


def test_proportional_resources_give_the_cpu_variation() -> None:
    # cpu and memory utilization in the same proportions on every node: Albert and Zhang's
    # variation equals the one-resource sd/mean, so two resources rank as one.
    snap = cluster("4", [("1", "1Gi"), ("2", "2Gi"), ("3", "3Gi")])
    two = PigeonHole(_Handle(snap), {"policy": "A_BINPACK", "numResources": 2})
    snap8 = cluster("8", [("2", "1Gi"), ("4", "2Gi"), ("6", "3Gi")])
    assert score(two, snap, "1", "1Gi") == score(
        PigeonHole(_Handle(snap8), {"policy": "A_BINPACK", "numResources": 1}), snap8, "2"
    )


def test_nodes_without_room_score_zero() -> None:
    # c has 1 CPU left: a 2-CPU pod does not fit there
    plugin = PigeonHole(_Handle(snap := cluster("4", USED)), {"policy": "LOAD_BALANCE"})
    got = score(plugin, snap, "2")
    assert got[2] == 0
    assert got[:2] == [100, 1]
    # nowhere: all 0
    assert score(plugin, snap, "5") == [0, 0, 0]


def test_minimum_demand_of_a_pod_without_requests() -> None:
    plugin = PigeonHole(_Handle(Snapshot()), {"numResources": 5})
    assert plugin.demand(make_pod("p")).tolist() == [10, 16, 1, 0, 0]
    pod = make_pod(
        "q",
        cpu="1500m",
        memory="100Mi",
        spec={
            "containers": [
                {
                    "name": "c",
                    "image": "i",
                    "resources": {
                        "requests": {
                            "cpu": "1500m",
                            "memory": "100Mi",
                            "nvidia.com/gpu": "2",
                            "ephemeral-storage": "3Gi",
                        }
                    },
                }
            ]
        },
    )
    assert plugin.demand(pod).tolist() == [1500, 100, 1, 2, 3]


def test_rank_values() -> None:
    assert rank_values(np.array([0.2, 0.4, 0.6, np.nan])).tolist() == [100, 51, 1, 0]
    # equal values (to 9 decimals): all 100
    assert rank_values(np.array([0.3, 0.3 + 1e-12, np.nan])).tolist() == [100, 100, 0]
    assert rank_values(np.array([np.nan, np.nan])).tolist() == [0, 0]
    # half away from zero: 1 + 99 * 0.5 = 50.5 -> 51
    assert rank_values(np.array([0.0, 0.5, 1.0])).tolist() == [100, 51, 1]


# --- the vectorized objectives against direct evaluation ------------------------------------


def _std(x: list[float]) -> float:
    m = sum(x) / len(x)
    return math.sqrt(max(sum(v * v for v in x) / len(x) - m * m, 0.0))


def _unbalance_scaled(x: list[float]) -> float:
    a = sum(x) / len(x)
    if a <= 0 or a >= 1:
        return 0.0
    total = 0.0
    for v in x:
        t = (a - v) / a if v < a else ((v - a) / (1 - a) if v > a else 0.0)
        total += t * t
    return 1 - math.sqrt(total / len(x))


def _cov_variation(cov: np.ndarray[Any, Any], mean: np.ndarray[Any, Any]) -> float:
    if len(mean) == 1:
        return math.sqrt(cov[0, 0]) / mean[0] if mean[0] != 0 and cov[0, 0] >= 0 else 0.0
    nom = max(float(mean @ cov @ mean), 0.0)
    denom = float(mean @ mean)
    return math.sqrt(nom) / denom if denom > 0 and nom > 0 else 0.0


def test_objectives_against_direct_evaluation() -> None:
    rng = random.Random(11)
    for _ in range(30):
        n = rng.randint(1, 25)
        u = np.array([rng.choice([0.0, rng.random(), 1.0, 1.2]) for _ in range(n)])
        placed = u + np.array([rng.random() * 0.3 for _ in range(n)])
        lb = load_balance_values(u, placed)
        cons = consolidate_values(u, placed)
        for i in range(n):
            x = list(u)
            x[i] = float(placed[i])
            assert lb[i] == pytest.approx(_std(x), abs=1e-9)
            assert cons[i] == pytest.approx(_unbalance_scaled(x), abs=1e-9)

        m = rng.randint(1, 4)
        capacity = np.array([[rng.choice([0, 100, 400, 1000]) for _ in range(m)] for _ in range(n)])
        usage = np.array([[rng.randint(0, 500) for _ in range(m)] for _ in range(n)])
        demand = np.array([rng.randint(1, 200) for _ in range(m)], dtype=np.float64)
        history = DemandStats()
        for _ in range(rng.randint(1, 5)):
            history.add(np.array([rng.randint(1, 300) for _ in range(m)], dtype=np.float64))
        util = clamped_utilization(usage.astype(float), capacity.astype(float))
        util_placed = clamped_utilization((usage + demand).astype(float), capacity.astype(float))
        got = binpack_values(util, util_placed, capacity.astype(float), history)
        # the demand side, directly
        assert history.mean is not None
        assert history.second is not None
        caps = [
            float(np.mean([c for c in capacity[:, j] if c > 0]))
            if (capacity[:, j] > 0).any()
            else 1.0
            for j in range(m)
        ]
        mu = np.array([history.mean[j] / caps[j] for j in range(m)])
        mu2 = np.array(
            [[history.second[j, k] / (caps[j] * caps[k]) for k in range(m)] for j in range(m)]
        )
        c_demand = _cov_variation(mu2 - np.outer(mu, mu), mu)
        for i in range(n):
            system = util.copy()
            system[i] = util_placed[i]
            mean = system.mean(axis=0)
            cov = (system.T @ system) / n - np.outer(mean, mean)
            assert got[i] == pytest.approx(abs(_cov_variation(cov, mean) - c_demand), abs=1e-9)


def test_demand_history_is_a_mean_then_exponential() -> None:
    stats = DemandStats()
    for v in range(1, 101):
        stats.add(np.array([float(v)]))
    assert stats.mean is not None
    assert stats.mean[0] == pytest.approx(50.5)  # plain mean of the first 100
    stats.add(np.array([1050.5]))
    assert stats.mean[0] == pytest.approx(0.99 * 50.5 + 0.01 * 1050.5)
    assert stats.count == 100


# --- args ----------------------------------------------------------------------------------


def test_args_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POLICY_OBJECTIVE", raising=False)
    monkeypatch.delenv("NUM_RESOURCES", raising=False)
    assert PigeonHoleArgs() == PigeonHoleArgs(
        policy="A_BINPACK",
        num_resources=2,
        policy_resource_index=0,
        gpu_resource_name="nvidia.com/gpu",
    )
    monkeypatch.setenv("POLICY_OBJECTIVE", "CONSOLIDATE")
    monkeypatch.setenv("NUM_RESOURCES", "4")
    assert (PigeonHoleArgs().policy, PigeonHoleArgs().num_resources) == ("CONSOLIDATE", 4)
    monkeypatch.setenv("POLICY_OBJECTIVE", "SPREAD")
    monkeypatch.setenv("NUM_RESOURCES", "9")
    assert (PigeonHoleArgs().policy, PigeonHoleArgs().num_resources) == ("A_BINPACK", 2)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"policy": "SPREAD"},
            'args.policy: Unsupported value: "SPREAD": supported values: "A_BINPACK", '
            '"LOAD_BALANCE", "CONSOLIDATE"',
        ),
        ({"numResources": 6}, "args.numResources: Invalid value: 6: must be between 1 and 5"),
        (
            {"numResources": 2, "policyResourceIndex": 2},
            "args.policyResourceIndex: Invalid value: 2: "
            "must be between 0 and numResources - 1 (1)",
        ),
    ],
)
def test_args_validation(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        PigeonHole(_Handle(Snapshot()), args)
    assert message in str(err.value)


def test_memory_as_the_prime_resource() -> None:
    # memory used 1, 2, 3 Gi of 8Gi: u = 0.125, 0.25, 0.375; a 1Gi pod: the same shape as cpu
    # in test_load_balance_by_hand, halved: a 100, b 40, c 1
    snap = cluster("64", USED)
    plugin = PigeonHole(
        _Handle(snap), {"policy": "LOAD_BALANCE", "numResources": 2, "policyResourceIndex": 1}
    )
    assert score(plugin, snap, "1", "1Gi") == [100, 40, 1]
