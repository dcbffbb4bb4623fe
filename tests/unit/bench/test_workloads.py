"""The benchmark workloads: scheduler_perf's templates, and mixed shapes that all fit."""

from __future__ import annotations

import msgspec
import pytest

from kubesched.api import Node, Pod, node_allocatable, pod_requests
from kubesched.bench import WORKLOADS, workload
from kubesched.bench._workloads import SPREAD_ZONES, TAINT_EVERY, ZONE_LABEL


def test_basic_is_scheduling_basic() -> None:
    w = workload("basic")
    assert (w.nodes, w.init_pods, w.measured_pods) == (5000, 1000, 10000)
    node = msgspec.convert(w.make_node(7), Node)
    assert node.metadata.name == "node-00007"
    assert node_allocatable(node) == {"cpu": 4000, "memory": 32 << 30, "pods": 110}
    assert [(c.type, c.status) for c in node.status.conditions] == [("Ready", "True")]
    assert node.spec.taints == []
    pod = msgspec.convert(w.make_pod(3, "pod-3", "ns"), Pod)
    assert (pod.metadata.name, pod.metadata.namespace) == ("pod-3", "ns")
    assert pod_requests(pod) == {"cpu": 100, "memory": 500 << 20}
    assert pod.spec.containers[0].image == "registry.k8s.io/pause:3.10.1"


def test_mixed_nodes_have_zones_and_a_tainted_fifth() -> None:
    w = workload("mixed")
    nodes = [msgspec.convert(w.make_node(i), Node) for i in range(30)]
    assert {n.metadata.labels[ZONE_LABEL] for n in nodes} == {"zone1", "zone2", "zone3"}
    tainted = [n for n in nodes if n.spec.taints]
    assert len(tainted) == 30 // TAINT_EVERY
    assert all(n.metadata.labels["dedicated"] == "batch" for n in tainted)


def test_mixed_pods_have_five_kinds() -> None:
    w = workload("mixed")
    pods = [msgspec.convert(w.make_pod(i, f"p{i}", "ns"), Pod) for i in range(20)]
    cpus = sorted({pod_requests(p).get("cpu", 0) for p in pods})
    assert cpus == [0, 100, 250, 500, 1000]
    assert sum(1 for p in pods if p.spec.tolerations) == 3
    assert sum(1 for p in pods if p.spec.node_selector) == 3
    required = [
        p
        for p in pods
        if p.spec.affinity
        and p.spec.affinity.node_affinity
        and p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    ]
    assert len(required) == 4


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_every_workload_fits_its_nodes(name: str) -> None:
    """A coarse capacity check: the pods ask for well under what the nodes offer."""
    w = workload(name)
    total = w.init_pods + w.measured_pods
    cpu = sum(
        pod_requests(msgspec.convert(w.make_pod(i, "p", "ns"), Pod)).get("cpu", 0)
        for i in range(total)
    )
    offered = sum(
        node_allocatable(msgspec.convert(w.make_node(i), Node))["cpu"] for i in range(w.nodes)
    )
    assert cpu < offered / 2
    assert total < w.nodes * 110 / 2


def test_unknown_workload() -> None:
    with pytest.raises(ValueError, match="unknown workload 'nope'"):
        workload("nope")


def test_spread_is_topology_spreading_with_anti_affinity() -> None:
    w = workload("spread")
    assert (w.nodes, w.init_pods, w.measured_pods) == (5000, 5000, 5000)
    nodes = [msgspec.convert(w.make_node(i), Node) for i in range(6)]
    # labelNodePrepareStrategy: the zones in turn.
    assert [n.metadata.labels[ZONE_LABEL] for n in nodes] == [*SPREAD_ZONES, *SPREAD_ZONES]
    assert SPREAD_ZONES == ("moon-1", "moon-2", "moon-3")
    assert all(node_allocatable(n)["cpu"] == 4000 for n in nodes)

    pods = [msgspec.convert(w.make_pod(i, f"p{i}", "ns"), Pod) for i in range(20)]
    assert all(pod_requests(p) == {"cpu": 100, "memory": 500 << 20} for p in pods)
    kinds = []
    for p in pods:
        color = p.metadata.labels.get("color")
        spread = p.spec.topology_spread_constraints
        anti = p.spec.affinity.pod_anti_affinity if p.spec.affinity else None
        if spread:
            (c,) = spread
            assert (c.max_skew, c.topology_key) == (5, ZONE_LABEL)
            assert c.label_selector is not None
            assert c.label_selector.match_labels == {"color": color}
            kinds.append(f"{color} {c.when_unsatisfiable}")
        elif anti is not None:
            (t,) = anti.required_during_scheduling_ignored_during_execution
            assert (t.topology_key, t.namespaces) == ("kubernetes.io/hostname", ["ns"])
            assert t.label_selector is not None
            assert t.label_selector.match_labels == {"color": "green"} == p.metadata.labels
            kinds.append("green anti-affinity")
        else:
            assert not p.metadata.labels
            kinds.append("default")
    cycle = [
        *["blue DoNotSchedule"] * 5,
        "yellow ScheduleAnyway",
        *["green anti-affinity"] * 2,
        *["default"] * 2,
    ]
    assert kinds == cycle * 2
