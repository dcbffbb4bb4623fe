"""bench core: the scheduling loop of `run` in memory, with every pod accounted for."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from builders import make_pod
from kubesched.bench import MemoryCluster, run_core
from kubesched.bench._core import DISTINCT_LABEL, BindConflictError, make_pods
from kubesched.bench._plugin_sets import NOT_CORE, plugin_set_config
from kubesched.bench._workloads import workload
from kubesched.framework import Snapshot, build_frameworks
from kubesched.plugins import in_tree_registry


def test_schedules_every_pod_without_overcommitting() -> None:
    r = run_core(nodes=20, pods=300, profile="default")
    assert (r.scheduled, r.unscheduled, r.attempts, r.failed_attempts) == (300, 0, 300, 0)
    assert r.overcommitted_nodes == 0
    assert r.constraint_violations == 0
    assert r.cycle.count == 300
    assert r.cycle.p50 is not None
    assert r.cycle.p99 is not None
    assert r.cycle.p50 <= r.cycle.p99
    assert r.elapsed_s > 0
    assert r.cpu_s > 0
    assert r.pods_per_s > 0
    assert r.peak_rss_bytes > 0
    # 300 pods of 100m over 20 nodes, spread by LeastAllocated: 15 per node.
    assert r.cpu_fraction_std < 0.01
    assert {"Filter", "Score"} <= set(r.extension_points)
    assert any(k.startswith("Filter/") for k in r.plugins)


def test_mixed_profile_respects_taints_and_affinity() -> None:
    r = run_core(nodes=60, pods=400, profile="mixed", seed=3)
    assert r.scheduled == 400
    assert r.overcommitted_nodes == 0
    assert r.constraint_violations == 0


def test_spread_profile_keeps_skew_and_anti_affinity() -> None:
    # 30 nodes in three zones, 140 pods: 28 green ones need a node each.
    r = run_core(nodes=30, pods=140, profile="spread", seed=1)
    assert (r.scheduled, r.failed_attempts) == (140, 0)
    assert r.overcommitted_nodes == 0
    assert r.constraint_violations == 0
    assert "Filter/PodTopologySpread" in r.plugins
    assert "Filter/InterPodAffinity" in r.plugins


def test_daemonset_profile_binds_every_pod_to_the_node_it_names() -> None:
    # More pods than a node-default takes (110): only node 0, of 90,000 pods, holds them all.
    r = run_core(nodes=40, pods=300, profile="daemonset")
    assert (r.scheduled, r.failed_attempts) == (300, 0)
    assert r.constraint_violations == 0
    assert r.overcommitted_nodes == 0
    # NodeAffinity's PreFilter left one node to Filter, and one feasible node needs no Score.
    assert "Filter/NodeAffinity" in r.plugins
    assert "Score" not in r.extension_points


def test_unschedulable_pods_end_the_run() -> None:
    # One node of 4 CPU takes 40 pods of 100m; the run stops once only the other 10 are left.
    r = run_core(nodes=1, pods=50, profile="default")
    assert (r.scheduled, r.unscheduled) == (40, 10)
    assert r.failed_attempts >= 10
    assert r.overcommitted_nodes == 0


def test_json_has_the_figures() -> None:
    out = run_core(nodes=5, pods=10).to_json()
    for key in ("pods_per_s", "pods_per_cpu_s", "cycle", "peak_rss_bytes", "overcommitted_nodes"):
        assert key in out
    assert set(out["cycle"]) == {"count", "mean", "p50", "p90", "p99", "max"}


def test_distinct_pods_are_each_a_shape_of_their_own() -> None:
    shape = workload("basic")
    alike = make_pods(shape, 3)
    assert len({msgspec.json.encode((p.metadata.labels, p.spec)) for p in alike}) == 1
    distinct = make_pods(shape, 3, distinct=True)
    assert [p.metadata.labels for p in distinct] == [{DISTINCT_LABEL: str(i)} for i in range(3)]
    # The spread pods keep the labels their selectors match.
    (spread, *_) = make_pods(workload("spread"), 1, distinct=True)
    assert spread.metadata.labels == {"color": "blue", DISTINCT_LABEL: "0"}
    r = run_core(nodes=20, pods=100, distinct=True)
    assert (r.scheduled, r.overcommitted_nodes, r.distinct) == (100, 0, True)
    assert r.to_json()["distinct"] is True


def test_unknown_profile() -> None:
    with pytest.raises(ValueError, match="unknown profile"):
        run_core(nodes=1, pods=1, profile="huge")


def test_memory_cluster_refuses_what_the_api_server_would() -> None:
    cluster = MemoryCluster()
    pod = make_pod("p")
    cluster.add(pod)

    async def go() -> None:
        await cluster.bind("default", "p", pod.metadata.uid, "n1")
        with pytest.raises(BindConflictError):
            await cluster.bind("default", "p", pod.metadata.uid, "n2")
        with pytest.raises(BindConflictError):
            await cluster.bind("default", "missing", "x", "n1")

    asyncio.run(go())
    assert cluster.bound == 1
    assert cluster.conflicts == 2
    bound = cluster.lookup("default", "p")
    assert bound is not None
    assert bound.spec.node_name == "n1"


def test_plugin_sets() -> None:
    core = run_core(nodes=5, pods=10)
    assert core.plugin_set == "core"
    assert core.scheduled == 10
    frameworks = build_frameworks(plugin_set_config("core"), in_tree_registry(), Snapshot())
    fw = next(iter(frameworks.values()))
    enabled = {name for plugins in fw.plugins_by_point().values() for name, _ in plugins}
    assert enabled.isdisjoint(NOT_CORE)
    assert {"NodeResourcesFit", "TaintToleration", "ImageLocality", "DefaultBinder"} <= enabled
    assert run_core(nodes=5, pods=10, plugin_set="default").plugin_set == "default"
    # Topology spread and anti-affinity pods need the whole default profile.
    assert run_core(nodes=6, pods=12, profile="spread").plugin_set == "default"
    with pytest.raises(ValueError, match="unknown plugin set"):
        run_core(nodes=1, pods=1, plugin_set="most")
