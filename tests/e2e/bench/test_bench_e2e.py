"""bench e2e --workload small against real control planes: correct outcomes, complete JSON.

Nothing here asserts speed: a timed test on a shared machine is not a benchmark.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubesched.bench import E2EResult

FIELDS = set(E2EResult.__dataclass_fields__)
REQUIRED = {
    "scheduler",
    "throughput_pods_per_s",
    "latency_p50_s",
    "latency_p90_s",
    "latency_p99_s",
    "cpu_s",
    "peak_rss_bytes",
    "overcommitted_nodes",
    "unbound_pods",
    "constraint_violations",
    "cpu_fraction_std",
    "throughput_series",
}


def bench_e2e(*options: str) -> tuple[dict[str, Any], str]:
    """``kubesched bench e2e OPTIONS -o json`` in a process of its own: the JSON document and
    what went to stderr (the progress)."""
    argv = [sys.executable, "-c", "from kubesched.cli import main; main()", "bench", "e2e"]
    argv += [*options, "-o", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    document: dict[str, Any] = json.loads(done.stdout)
    return document, done.stderr


def test_small_workload_both_schedulers(tmp_path: Path) -> None:
    plot = tmp_path / "throughput.png"
    document, stderr = bench_e2e(
        "--workload=small",
        "--scheduler=both",
        f"--plot={plot}",
    )
    results = document["results"]
    assert [r["scheduler"] for r in results] == ["kubesched", "kube-scheduler", "binder"]
    *schedulers, binder = results
    # The binder decides nothing (taints and affinity are ignored), but binds every pod and
    # writes each one's event.
    assert binder["pods_bound"] == binder["events_written"] == 500
    assert set(binder) == FIELDS
    for r in schedulers:
        assert set(r) >= REQUIRED, REQUIRED - set(r)
        assert set(r) == FIELDS
        assert r["overcommitted_nodes"] == 0, (r["scheduler"], r["errors"])
        assert r["unbound_pods"] == 0, (r["scheduler"], r["errors"])
        assert r["constraint_violations"] == 0, (r["scheduler"], r["errors"])
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == (100, 100, 500)
        assert r["throughput_pods_per_s"] > 0
        assert r["latency_p50_s"] <= r["latency_p99_s"]
        assert r["cpu_s"] > 0
        assert r["peak_rss_bytes"] > 0
        assert r["throughput_series"]
        assert r["pods_bound"] == 500
        # Every bound pod has its Scheduled event in the API server.
        assert r["events_written"] == r["pods_bound"], r["scheduler"]
    [comparison] = document["comparisons"]
    assert comparison["comparable"], comparison["not_comparable"]
    assert comparison["throughput_ratio"] > 0
    assert comparison["ceiling_pods_per_s"] == binder["throughput_pods_per_s"] > 0
    assert set(comparison["of_ceiling"]) == {"kubesched", "kube-scheduler"}
    assert plot.read_bytes()[:4] == b"\x89PNG"
    # Progress went to stderr, one bar per phase and scheduler.
    assert "[kubesched] measured pods bound" in stderr
    assert "[kube-scheduler] measured pods bound" in stderr
    assert "[binder] measured pods bound" in stderr


def test_backlog_arrival() -> None:
    """Every measured pod exists before the scheduler starts; all are bound, each with its
    event, and the throughput counts from the scheduler's launch."""
    document, stderr = bench_e2e(
        "--workload=small",
        "--scheduler=kubesched",
        "--no-ceiling",
        "--arrival=backlog",
    )
    assert document["arrival"] == "backlog"
    [r] = document["results"]
    assert r["arrival"] == "backlog"
    assert (r["overcommitted_nodes"], r["unbound_pods"], r["constraint_violations"]) == (0, 0, 0)
    assert r["pods_bound"] == r["events_written"] == 500
    assert r["startup_s"] > 0
    assert r["throughput_pods_per_s"] > 0
    # The pods were all created before the scheduler started.
    assert "creating 500 pods before the scheduler starts" in stderr


def test_preemption_basic_by_its_upstream_name() -> None:
    """PreemptionBasic at upstream's integration size (5 nodes, 20 low-priority init pods, 5
    high-priority measured pods): each measured pod is bound once three victims are deleted,
    with no node over-committed, for both schedulers."""
    document, _ = bench_e2e(
        "--workload=PreemptionBasic/1000Nodes",
        "--nodes=5",
        "--pods=5",
        "--no-ceiling",
    )
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "kube-scheduler"]
    for r in document["results"]:
        assert r["workload"] == "PreemptionBasic/1000Nodes"
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == (5, 20, 5)
        assert (r["overcommitted_nodes"], r["unbound_pods"]) == (0, 0), (
            r["scheduler"],
            r["errors"],
        )
        assert r["pods_bound"] == r["events_written"] == 5
    [comparison] = document["comparisons"]
    assert comparison["workload"] == "PreemptionBasic/1000Nodes"
    assert comparison["upstream_threshold"] is None


def test_scheduling_daemonset_by_its_upstream_name() -> None:
    """SchedulingDaemonset at upstream's integration size (the named node and 5 others, 10
    pods): both schedulers bind every pod to the node its required node affinity names by
    ``metadata.name``, the others being ruled out at PreFilter."""
    document, _ = bench_e2e(
        "--workload=SchedulingDaemonset/15000Nodes",
        "--nodes=6",
        "--pods=10",
        "--arrival=backlog",
        "--no-ceiling",
    )
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "kube-scheduler"]
    for r in document["results"]:
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == (6, 0, 10)
        # A pod off the node it names would be a violation of its required node affinity.
        assert (r["constraint_violations"], r["unbound_pods"]) == (0, 0), (
            r["scheduler"],
            r["errors"],
        )
        assert r["pods_bound"] == r["events_written"] == 10
    [comparison] = document["comparisons"]
    assert comparison["upstream_threshold"] == 390


@pytest.mark.parametrize(
    ("workload", "sizes", "churned", "threshold"),
    [
        # A node, a pod that fits nowhere and a service created and deleted each second: one
        # of each at the first tick at least.
        ("SchedulingWithMixedChurn/5000Nodes_10000Pods", (10, 0, 100), 3, 265),
        # Low-priority init pods fill the nodes; a high-priority pod every 200 ms preempts.
        ("PreemptionAsync/5000Nodes", (5, 20, 5), 1, 160),
    ],
)
def test_churning_workloads_by_their_upstream_names(
    workload: str, sizes: tuple[int, int, int], churned: int, threshold: int
) -> None:
    """At upstream's integration sizes, with their churn going on beside the measured pods:
    both schedulers bind every measured pod with its event, no node over-committed, and the
    churn objects were created."""
    nodes, _, pods = sizes
    document, _ = bench_e2e(
        f"--workload={workload}", f"--nodes={nodes}", f"--pods={pods}", "--no-ceiling"
    )
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "kube-scheduler"]
    for r in document["results"]:
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == sizes
        assert (r["overcommitted_nodes"], r["unbound_pods"]) == (0, 0), (
            r["scheduler"],
            r["errors"],
        )
        assert r["pods_bound"] == r["events_written"] == pods
        assert r["churn_objects"] >= churned
    [comparison] = document["comparisons"]
    assert comparison["upstream_threshold"] == threshold


@pytest.mark.parametrize(
    ("workload", "arrival", "sizes", "threshold"),
    [
        # CSINodes with the EBS driver's limit; each pod with its own bound CSI claim.
        ("SchedulingCSIPVs/5000Nodes_5000Pods", "rate", (5, 5, 10), 48),
        # High-priority pods, each with its own bound in-tree EBS claim, preempting.
        ("PreemptionPVs/1000Nodes", "rate", (5, 20, 5), None),
        # DRA: a claim of its own per pod, made from the template once the pod exists (as the
        # resourceclaim controller would), while the scheduler runs.
        ("SchedulingWithResourceClaimTemplate/5000pods_500nodes", "rate", (2, 5, 10), 56),
        # Five pods per claim, the claims created first: the pods of a claim go to one node.
        ("SchedulingWithResourceClaim/5000pods_500nodes", "backlog", (2, 5, 10), None),
    ],
)
def test_workloads_with_claims_by_their_upstream_names(
    workload: str, arrival: str, sizes: tuple[int, int, int], threshold: int | None
) -> None:
    """At upstream's integration sizes: each pod's PersistentVolume and claim are created and
    marked Bound before it (a claim left unbound would keep its pod pending, unbound), or its
    ResourceClaim made; both schedulers bind every measured pod with its event, and each pod's
    ResourceClaims end allocated on its node and reserved for it, no device in two claims (a
    violation of any counts in ``constraint_violations``). On the DRA workloads the binder
    writes the claims too, so its claims are checked alike."""
    nodes, init, pods = sizes
    dra = "ResourceClaim" in workload
    document, _ = bench_e2e(
        f"--workload={workload}",
        f"--arrival={arrival}",
        f"--nodes={nodes}",
        f"--init-pods={init}",
        f"--pods={pods}",
        "--ceiling" if dra else "--no-ceiling",
    )
    schedulers = ["kubesched", "kube-scheduler", *(["binder"] if dra else [])]
    assert [r["scheduler"] for r in document["results"]] == schedulers
    for r in document["results"]:
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == sizes
        assert (r["overcommitted_nodes"], r["unbound_pods"]) == (0, 0), (
            r["scheduler"],
            r["errors"],
        )
        assert r["constraint_violations"] == 0, (r["scheduler"], r["errors"])
        assert r["errors"] == []
        assert r["pods_bound"] == r["events_written"] == pods
    [comparison] = document["comparisons"]
    assert comparison["upstream_threshold"] == threshold


def test_namespace_selector_anti_affinity_by_its_upstream_name() -> None:
    """SchedulingRequiredPodAntiAffinityWithNSSelector at upstream's integration size (10 nodes,
    4 init pods, 6 measured): the init pods live in labelled namespaces of their own, which the
    measured pods' anti-affinity selects by label. Both schedulers give each of the ten pods a
    node of its own; the bench awaits and checks the init pods in their namespaces like the
    rest (a pod it did not see bound, or one placed against a term, would be in errors)."""
    document, _ = bench_e2e(
        "--workload=SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods",
        "--nodes=10",
        "--init-pods=4",
        "--pods=6",
        "--no-ceiling",
    )
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "kube-scheduler"]
    for r in document["results"]:
        assert (r["nodes"], r["init_pods"], r["measured_pods"]) == (10, 4, 6)
        assert (r["overcommitted_nodes"], r["unbound_pods"]) == (0, 0), (
            r["scheduler"],
            r["errors"],
        )
        assert r["constraint_violations"] == 0, (r["scheduler"], r["errors"])
        assert r["errors"] == []
        assert r["pods_bound"] == r["events_written"] == 6
    [comparison] = document["comparisons"]
    assert comparison["upstream_threshold"] == 24
