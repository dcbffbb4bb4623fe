"""The benchmark workloads: scheduler_perf's templates, and mixed shapes that all fit."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from kubesched.api import (
    DeviceClass,
    Node,
    Pod,
    PodAffinityTerm,
    ResourceClaimTemplate,
    ResourceSlice,
    node_allocatable,
    pod_requests,
)
from kubesched.bench import ALL, UPSTREAM, WORKLOADS, constraint_violation, workload
from kubesched.bench._workloads import (
    CHURN_CREATE,
    CHURN_RECREATE,
    DRA_DRIVER,
    SPREAD_ZONES,
    TAINT_EVERY,
    ZONE_LABEL,
    Json,
    device_class,
    resource_claim,
    resource_claim_template,
    resource_slice,
)


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


_FILLED = ("PreemptionBasic/1000Nodes", "PreemptionAsync/5000Nodes", "PreemptionPVs/1000Nodes")


@pytest.mark.parametrize("name", sorted(set(WORKLOADS) - set(_FILLED)))
def test_every_workload_fits_its_nodes(name: str) -> None:
    """A coarse capacity check: the pods that bind ask for well under what the nodes offer
    (the preemption workloads fill their nodes on purpose: below)."""
    w = workload(name)
    pods = [w.make_pod(w.init_pods + i, "p", "ns") for i in range(w.measured_pods)]
    if w.init_pods_bind:
        pods += [w.make_init_pod(i, "p", "ns") for i in range(w.init_pods)]
    cpu = sum(pod_requests(msgspec.convert(p, Pod)).get("cpu", 0) for p in pods)
    nodes = [node_allocatable(msgspec.convert(w.make_node(i), Node)) for i in range(w.nodes)]
    assert cpu < sum(n["cpu"] for n in nodes) / 2
    assert len(pods) < sum(n["pods"] for n in nodes) / 2


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


#: scheduler_perf v1.34.4: (nodes, init pods, measured pods, threshold) of each workload.
UPSTREAM_SIZES = {
    "SchedulingBasic/5000Nodes_10000Pods": (5000, 1000, 10000, 270),
    "SchedulingBasic/5000Nodes_50000Pods": (5000, 5000, 50000, None),
    "SchedulingDaemonset/15000Nodes": (15001, 0, 30000, 390),
    "SchedulingPodAntiAffinity/5000Nodes_2000Pods": (5000, 1000, 2000, 60),
    "SchedulingPodAffinity/5000Nodes_5000Pods": (5000, 5000, 5000, 35),
    "TopologySpreading/5000Nodes_5000Pods": (5000, 5000, 5000, 85),
    "PreferredTopologySpreading/5000Nodes_5000Pods": (5000, 5000, 5000, 125),
    "SchedulingNodeAffinity/5000Nodes_10000Pods": (5000, 5000, 10000, 220),
    "Unschedulable/5kNodes/100Init/10kPods": (5000, 100, 10000, 170),
    "SchedulingWhileGated/1Node_10000GatedPods": (1, 10000, 20000, 130),
    "PreemptionBasic/1000Nodes": (1000, 4000, 1000, None),
    "PreemptionAsync/5000Nodes": (5000, 20000, 5000, 160),
    "SchedulingWithMixedChurn/5000Nodes_10000Pods": (5000, 0, 10000, 265),
    "SchedulingPreferredPodAffinity/5000Nodes_5000Pods": (5000, 5000, 5000, 90),
    "SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods": (5000, 5000, 5000, 90),
    # Five createPods ops of 2,000 init pods each.
    "MixedSchedulingBasePod/5000Nodes_5000Pods": (5000, 10000, 5000, 140),
    # 100 namespaces of 40 or 50 init pods (createPodSets); the required anti-affinity one has
    # 6,000 nodes despite its name: one green pod per node at the end.
    "SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods": (6000, 4000, 2000, 24),
    "SchedulingPreferredAntiAffinityWithNSSelector/5000Nodes_2000Pods": (5000, 4000, 2000, 55),
    "SchedulingRequiredPodAffinityWithNSSelector/5000Nodes_2000Pods": (5000, 5000, 2000, 35),
    "SchedulingPreferredAffinityWithNSSelector/5000Nodes_5000Pods": (5000, 5000, 5000, 90),
    # 4,000 normal nodes and 1,000 tainted ones.
    "SchedulingWithNodeInclusionPolicy/5000Nodes": (5000, 0, 4000, 68),
    "SchedulingGatedPodsWithPodAffinityImpactForThroughput/1Node_10000GatedPods": (
        1,
        10000,
        20000,
        110,
    ),
    "SchedulingSecrets/5000Nodes_10000Pods": (5000, 1000, 10000, 260),
    "SchedulingInTreePVs/5000Nodes_2000Pods": (5000, 1000, 2000, 90),
    "SchedulingMigratedInTreePVs/5000Nodes_5000Pods": (5000, 5000, 5000, 35),
    "SchedulingCSIPVs/5000Nodes_5000Pods": (5000, 5000, 5000, 48),
    "PreemptionPVs/1000Nodes": (1000, 4000, 1000, None),
    "SchedulingWithResourceClaimTemplate/5000pods_500nodes": (500, 2500, 2500, 56),
    "SchedulingWithResourceClaim/5000pods_500nodes": (500, 2500, 2500, None),
}


def test_upstream_workloads_by_name_with_their_sizes_and_thresholds() -> None:
    assert set(UPSTREAM) == set(UPSTREAM_SIZES)
    # `all` leaves out the ones that do not fit in the hour.
    assert set(ALL) == {
        "SchedulingBasic/5000Nodes_10000Pods",
        "SchedulingPodAntiAffinity/5000Nodes_2000Pods",
        "SchedulingPodAffinity/5000Nodes_5000Pods",
        "TopologySpreading/5000Nodes_5000Pods",
        "PreferredTopologySpreading/5000Nodes_5000Pods",
        "SchedulingNodeAffinity/5000Nodes_10000Pods",
        "Unschedulable/5kNodes/100Init/10kPods",
        "PreemptionBasic/1000Nodes",
        "PreemptionAsync/5000Nodes",
        "SchedulingWithMixedChurn/5000Nodes_10000Pods",
        "SchedulingPreferredPodAffinity/5000Nodes_5000Pods",
        "SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods",
        "SchedulingPreferredAntiAffinityWithNSSelector/5000Nodes_2000Pods",
        "SchedulingRequiredPodAffinityWithNSSelector/5000Nodes_2000Pods",
        "SchedulingPreferredAffinityWithNSSelector/5000Nodes_5000Pods",
        "SchedulingWithNodeInclusionPolicy/5000Nodes",
    }
    for name, sizes in UPSTREAM_SIZES.items():
        w = workload(name)
        assert (w.nodes, w.init_pods, w.measured_pods, w.threshold) == sizes, name
    # The project's own shapes are still there.
    assert {"basic", "mixed", "small"} <= set(WORKLOADS)


def pods_of(name: str, *, init: bool = False) -> list[Pod]:
    w = workload(name)
    make = w.make_init_pod if init else w.make_pod
    return [msgspec.convert(make(i, f"p{i}", "ns"), Pod) for i in range(3)]


def test_anti_affinity_pods() -> None:
    for p in pods_of("SchedulingPodAntiAffinity/5000Nodes_2000Pods", init=True):
        assert p.metadata.labels == {"color": "green"}
        assert p.spec.affinity is not None
        assert p.spec.affinity.pod_anti_affinity is not None
        (term,) = (
            p.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
        )
        assert (term.topology_key, term.namespaces) == ("kubernetes.io/hostname", ["ns"])
        assert pod_requests(p) == {"cpu": 100, "memory": 500 << 20}


def test_pod_affinity_pods_on_zone1_nodes() -> None:
    name = "SchedulingPodAffinity/5000Nodes_5000Pods"
    for p in [*pods_of(name), *pods_of(name, init=True)]:
        assert p.metadata.labels == {"color": "blue"}
        assert p.spec.affinity is not None
        assert p.spec.affinity.pod_affinity is not None
        (term,) = p.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution
        assert (term.topology_key, term.namespaces) == (ZONE_LABEL, ["ns"])
    assert workload(name).make_node(0)["metadata"]["labels"][ZONE_LABEL] == "zone1"


@pytest.mark.parametrize(
    ("name", "when"),
    [
        ("TopologySpreading/5000Nodes_5000Pods", "DoNotSchedule"),
        ("PreferredTopologySpreading/5000Nodes_5000Pods", "ScheduleAnyway"),
    ],
)
def test_topology_spreading_measured_pods_spread_init_pods_do_not(name: str, when: str) -> None:
    for p in pods_of(name):
        (c,) = p.spec.topology_spread_constraints
        assert (c.max_skew, c.topology_key, c.when_unsatisfiable) == (5, ZONE_LABEL, when)
        assert p.metadata.labels == {"color": "blue"}
    assert all(not p.spec.topology_spread_constraints for p in pods_of(name, init=True))
    zones = {workload(name).make_node(i)["metadata"]["labels"][ZONE_LABEL] for i in range(3)}
    assert zones == set(SPREAD_ZONES)


def test_node_affinity_pods_and_zone1_nodes() -> None:
    name = "SchedulingNodeAffinity/5000Nodes_10000Pods"
    node = msgspec.convert(workload(name).make_node(0), Node)
    assert node.metadata.labels[ZONE_LABEL] == "zone1"
    for p in pods_of(name):
        assert p.spec.affinity is not None
        assert p.spec.affinity.node_affinity is not None
        required = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        assert required is not None
        assert constraint_violation(p, node) is None


def churned(name: str) -> list[tuple[str, Json]]:
    churn = workload(name).churn
    assert churn is not None
    return [(resource, make(0, "c", "ns")) for resource, make in churn.templates]


def test_unschedulable_churns_pods_that_fit_no_node() -> None:
    w = workload("Unschedulable/5kNodes/100Init/10kPods")
    assert w.churn is not None
    assert (w.churn.mode, w.churn.interval_s) == (CHURN_CREATE, 0.2)
    ((resource, body),) = churned(w.name)
    churn = msgspec.convert(body, Pod)
    assert resource == "pods"
    assert churn.spec.priority == 10
    assert (
        pod_requests(churn)["cpu"]
        == 9000
        > node_allocatable(msgspec.convert(w.make_node(0), Node))["cpu"]
    )


def test_mixed_churn_recreates_a_node_a_pod_and_a_service_every_second() -> None:
    w = workload("SchedulingWithMixedChurn/5000Nodes_10000Pods")
    assert w.churn is not None
    assert (w.churn.mode, w.churn.interval_s, w.churn.number) == (CHURN_RECREATE, 1.0, 1)
    (node_resource, node), (pod_resource, pod), (service_resource, service) = churned(w.name)
    assert (node_resource, pod_resource, service_resource) == ("nodes", "pods", "services")
    # The node takes no pods; the pod fits no node.
    assert msgspec.convert(node, Node).status.capacity == {"pods": "0"}
    assert node["metadata"] == {"name": "c"}
    assert pod_requests(msgspec.convert(pod, Pod))["cpu"] == 9000
    assert service["metadata"] == {"name": "c", "namespace": "ns"}
    assert service["spec"]["selector"] == {"app": "foo"}


def test_preemption_async_fills_nodes_then_high_pods_preempt_beside_default_ones() -> None:
    w = workload("PreemptionAsync/5000Nodes")
    node_cpu = node_allocatable(msgspec.convert(w.make_node(0), Node))["cpu"]
    (low, *_) = pods_of(w.name, init=True)
    (measured, *_) = pods_of(w.name)
    ((resource, body),) = churned(w.name)
    high = msgspec.convert(body, Pod)
    assert resource == "pods"
    assert w.churn is not None
    assert (w.churn.mode, w.churn.interval_s) == (CHURN_CREATE, 0.2)
    assert (low.spec.priority, measured.spec.priority, high.spec.priority) == (None, None, 10)
    per_node = w.init_pods // w.nodes
    left = node_cpu - per_node * pod_requests(low)["cpu"]
    # The measured pods fit in what the init pods leave; a high-priority one needs victims.
    assert w.measured_pods * pod_requests(measured)["cpu"] <= left * w.nodes
    assert pod_requests(high)["cpu"] > left


@pytest.mark.parametrize("nodes", [None, 1, 7])
def test_daemonset_pods_all_name_the_one_big_node(nodes: int | None) -> None:
    """upstream: one node-with-name every daemonset-pod names by matchFields metadata.name, and
    15,000 node-default nodes that NodeAffinity's PreFilter rules out; at any size."""
    w = workload("SchedulingDaemonset/15000Nodes")
    n, init, measured = w.sizes(nodes, None, 20)
    assert (init, measured) == (0, 20)
    node_objs = [msgspec.convert(w.make_node(i), Node) for i in range(n)]
    big, *others = node_objs
    assert node_allocatable(big) == {"cpu": 4000, "memory": 32 << 30, "pods": 90000}
    assert all(node_allocatable(o)["pods"] == 110 for o in others)
    for i, p in enumerate(pods_of(w.name)):
        assert pod_requests(p) == {}
        assert p.spec.affinity is not None
        assert p.spec.affinity.node_affinity is not None
        required = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        assert required is not None
        (term,) = required.node_selector_terms
        assert not term.match_expressions
        (field,) = term.match_fields
        assert (field.key, field.operator, field.values) == ("metadata.name", "In", ["node-00000"])
        assert [o.metadata.name for o in node_objs if constraint_violation(p, o) is None] == [
            big.metadata.name
        ], i
    # Every measured pod fits on the one node.
    assert w.measured_pods < node_allocatable(big)["pods"]


def test_while_gated_init_pods_are_gated_and_never_bound() -> None:
    w = workload("SchedulingWhileGated/1Node_10000GatedPods")
    assert not w.init_pods_bind
    assert all(
        [g.name for g in p.spec.scheduling_gates] == ["test.k8s.io/hold"]
        for p in pods_of(w.name, init=True)
    )
    measured = pods_of(w.name)
    assert all(not p.spec.scheduling_gates and pod_requests(p) == {} for p in measured)
    assert all(p.spec.termination_grace_period_seconds == 0 for p in measured)
    assert node_allocatable(msgspec.convert(w.make_node(0), Node))["pods"] == 90000


def test_preemption_low_priority_pods_fill_nodes_a_high_one_needs_three_victims() -> None:
    w = workload("PreemptionBasic/1000Nodes")
    node_cpu = node_allocatable(msgspec.convert(w.make_node(0), Node))["cpu"]
    (low, *_) = pods_of(w.name, init=True)
    (high, *_) = pods_of(w.name)
    assert (low.spec.priority, high.spec.priority) == (None, 10)
    assert low.spec.termination_grace_period_seconds == 0
    low_cpu, high_cpu = pod_requests(low)["cpu"], pod_requests(high)["cpu"]
    per_node = w.init_pods // w.nodes
    assert per_node * low_cpu <= node_cpu  # the init pods all fit...
    assert (per_node - 2) * low_cpu + high_cpu > node_cpu  # ...and two victims are not enough
    assert (per_node - 3) * low_cpu + high_cpu <= node_cpu


def test_sizes_shrink_the_init_pods_with_the_workload() -> None:
    basic = workload("SchedulingBasic/5000Nodes_10000Pods")
    assert basic.sizes() == (5000, 1000, 10000)
    assert basic.sizes(100, None, 500) == (100, 20, 500)
    assert basic.sizes(100, 7, 500) == (100, 7, 500)
    # Preemption keeps its four low-priority pods per node.
    assert workload("PreemptionBasic/1000Nodes").sizes(100, None, 500) == (100, 400, 500)
    # One node, fewer pods: the gated pods shrink with the measured ones.
    assert workload("SchedulingWhileGated/1Node_10000GatedPods").sizes(1, None, 500) == (
        1,
        250,
        500,
    )


def preferred_term(pod: Pod, kind: str) -> tuple[int, PodAffinityTerm]:
    """The weight and term of ``pod``'s one preferred ``kind`` (``affinity``, ``anti``) term."""
    affinity = pod.spec.affinity
    assert affinity is not None
    of = affinity.pod_affinity if kind == "affinity" else affinity.pod_anti_affinity
    assert of is not None
    assert not of.required_during_scheduling_ignored_during_execution
    (weighted,) = of.preferred_during_scheduling_ignored_during_execution
    return weighted.weight, weighted.pod_affinity_term


def required_term(pod: Pod, kind: str) -> PodAffinityTerm:
    """``pod``'s one required ``kind`` (``affinity``, ``anti``) term."""
    affinity = pod.spec.affinity
    assert affinity is not None
    of = affinity.pod_affinity if kind == "affinity" else affinity.pod_anti_affinity
    assert of is not None
    assert not of.preferred_during_scheduling_ignored_during_execution
    (term,) = of.required_during_scheduling_ignored_during_execution
    return term


@pytest.mark.parametrize(
    ("name", "kind", "color"),
    [
        ("SchedulingPreferredPodAffinity/5000Nodes_5000Pods", "affinity", "red"),
        ("SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods", "anti", "yellow"),
    ],
)
def test_preferred_pod_affinity_pods(name: str, kind: str, color: str) -> None:
    """pod-with-preferred-pod-(anti-)affinity: weight 1 by hostname to the pods of their own
    color, init and measured alike, on node-default nodes."""
    for p in [*pods_of(name), *pods_of(name, init=True)]:
        assert p.metadata.labels == {"color": color}
        weight, term = preferred_term(p, kind)
        assert weight == 1
        assert (term.topology_key, term.namespaces) == ("kubernetes.io/hostname", ["ns"])
        assert term.label_selector is not None
        assert term.label_selector.match_labels == {"color": color}
        assert term.namespace_selector is None
        assert pod_requests(p) == {"cpu": 100, "memory": 500 << 20}
    assert workload(name).make_node(0)["metadata"]["labels"] == {
        "kubernetes.io/hostname": "node-00000"
    }


def test_mixed_scheduling_base_pod_init_pods_of_five_templates() -> None:
    """Upstream's five createPods ops of as many init pods each, in turn here; pod-default
    measured, on zone1 nodes."""
    w = workload("MixedSchedulingBasePod/5000Nodes_5000Pods")
    init = [msgspec.convert(w.make_init_pod(i, f"i{i}", "ns"), Pod) for i in range(10)]
    kinds = []
    for p in init:
        affinity = p.spec.affinity
        if affinity is None:
            kinds.append("default")
        elif affinity.pod_affinity is not None:
            required = affinity.pod_affinity.required_during_scheduling_ignored_during_execution
            kinds.append("affinity" if required else "preferred affinity")
        else:
            assert affinity.pod_anti_affinity is not None
            anti = affinity.pod_anti_affinity
            required = anti.required_during_scheduling_ignored_during_execution
            kinds.append("anti-affinity" if required else "preferred anti-affinity")
    cycle = [
        "default",
        "affinity",
        "anti-affinity",
        "preferred affinity",
        "preferred anti-affinity",
    ]
    assert kinds == cycle * 2
    assert [p.metadata.labels.get("color") for p in init[:5]] == [
        None,
        "blue",
        "green",
        "red",
        "yellow",
    ]
    assert required_term(init[1], "affinity").topology_key == ZONE_LABEL
    assert required_term(init[2], "anti").topology_key == "kubernetes.io/hostname"
    assert all(pod_requests(p) == {"cpu": 100, "memory": 500 << 20} for p in init)
    for p in pods_of(w.name):
        assert p.spec.affinity is None
        assert not p.metadata.labels
    assert w.make_node(0)["metadata"]["labels"][ZONE_LABEL] == "zone1"


_TEAM = {"team": "devops"}


@pytest.mark.parametrize(
    ("name", "required", "kind", "color", "topology_key", "zone1"),
    [
        (
            "SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods",
            True,
            "anti",
            "green",
            "kubernetes.io/hostname",
            False,
        ),
        (
            "SchedulingPreferredAntiAffinityWithNSSelector/5000Nodes_2000Pods",
            False,
            "anti",
            "green",
            "kubernetes.io/hostname",
            False,
        ),
        (
            "SchedulingRequiredPodAffinityWithNSSelector/5000Nodes_2000Pods",
            True,
            "affinity",
            "blue",
            ZONE_LABEL,
            True,
        ),
        (
            "SchedulingPreferredAffinityWithNSSelector/5000Nodes_5000Pods",
            False,
            "affinity",
            "red",
            "kubernetes.io/hostname",
            False,
        ),
    ],
)
def test_namespace_selector_pods_select_the_labelled_namespaces(
    name: str, required: bool, kind: str, color: str, topology_key: str, zone1: bool
) -> None:
    """The -ns-selector templates: a term by namespaceSelector team=devops (no namespaces
    named), init and measured pods alike; the nodes in zone1 where upstream labels them."""
    w = workload(name)
    for p in [*pods_of(name), *pods_of(name, init=True)]:
        assert p.metadata.labels == {"color": color}
        if required:
            term = required_term(p, kind)
        else:
            weight, term = preferred_term(p, kind)
            assert weight == 1
        assert (term.topology_key, term.namespaces) == (topology_key, [])
        assert term.label_selector is not None
        assert term.label_selector.match_labels == {"color": color}
        assert term.namespace_selector is not None
        assert term.namespace_selector.match_labels == _TEAM
        assert pod_requests(p) == {"cpu": 100, "memory": 500 << 20}
    assert (ZONE_LABEL in w.make_node(0)["metadata"]["labels"]) == zone1


@pytest.mark.parametrize(
    ("name", "per_namespace"),
    [
        ("SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods", 40),
        ("SchedulingPreferredAntiAffinityWithNSSelector/5000Nodes_2000Pods", 40),
        ("SchedulingRequiredPodAffinityWithNSSelector/5000Nodes_2000Pods", 50),
        ("SchedulingPreferredAffinityWithNSSelector/5000Nodes_5000Pods", 50),
    ],
)
def test_namespace_selector_init_pods_spread_over_100_labelled_namespaces(
    name: str, per_namespace: int
) -> None:
    """createNamespaces init-ns (100) and measure-ns (1) from namespace-with-labels, and the
    init pods' createPodSets: as many in each init namespace as upstream's."""
    w = workload(name)
    namespaces = w.make_namespaces("bench")
    assert [n["metadata"]["name"] for n in namespaces] == [
        "bench",
        *(f"init-ns-{k}" for k in range(100)),
    ]
    assert all(n["kind"] == "Namespace" and n["metadata"]["labels"] == _TEAM for n in namespaces)
    counts = Counter(w.init_namespace(i, "bench") for i in range(w.init_pods))
    assert counts == {f"init-ns-{k}": per_namespace for k in range(100)}


def test_other_workloads_have_one_plain_namespace() -> None:
    w = workload("SchedulingPodAffinity/5000Nodes_5000Pods")
    assert w.make_namespaces("bench") == [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
    ]
    assert {w.init_namespace(i, "bench") for i in range(10)} == {"bench"}


def test_node_inclusion_policy_spreads_by_hostname_over_untainted_nodes() -> None:
    """pod-with-node-inclusion-policy (maxSkew 1 by hostname, both policies Honor) on four
    node-default nodes for each node-with-taint (taint foo:NoSchedule); every node has its
    hostname label, as scheduler_perf's node preparer gives it."""
    w = workload("SchedulingWithNodeInclusionPolicy/5000Nodes")
    nodes = [msgspec.convert(w.make_node(i), Node) for i in range(w.nodes)]
    tainted = [n for n in nodes if n.spec.taints]
    assert len(tainted) == 1000
    assert all(
        [(t.key, t.value, t.effect) for t in n.spec.taints] == [("foo", "", "NoSchedule")]
        for n in tainted
    )
    assert all(n.metadata.labels["kubernetes.io/hostname"] == n.metadata.name for n in nodes)
    assert all(node_allocatable(n) == node_allocatable(nodes[0]) for n in nodes)
    for p in pods_of(w.name):
        assert p.metadata.labels == {"foo": "bar"}
        (c,) = p.spec.topology_spread_constraints
        assert (c.max_skew, c.topology_key, c.when_unsatisfiable) == (
            1,
            "kubernetes.io/hostname",
            "DoNotSchedule",
        )
        assert (c.node_affinity_policy, c.node_taints_policy) == ("Honor", "Honor")
        assert c.label_selector is not None
        assert c.label_selector.match_labels == {"foo": "bar"}
        assert pod_requests(p) == {"cpu": 100, "memory": 500 << 20}
        assert constraint_violation(p, tainted[0]) == "untolerated taint foo=:NoSchedule"
    # One measured pod per untainted node at full size.
    assert w.measured_pods == len(nodes) - len(tainted)


def test_gated_pods_with_pod_affinity_select_the_measured_pods() -> None:
    """gated-pod-with-pod-affinity: held by scheduling-gate-1, required affinity by hostname to
    app=scheduler-perf pods in its own namespace, which the measured pod-with-label pods are
    here; on one node of 90,000 pods."""
    w = workload("SchedulingGatedPodsWithPodAffinityImpactForThroughput/1Node_10000GatedPods")
    assert not w.init_pods_bind
    for p in pods_of(w.name, init=True):
        assert [g.name for g in p.spec.scheduling_gates] == ["scheduling-gate-1"]
        assert p.metadata.labels == {"app": "scheduler-perf"}
        term = required_term(p, "affinity")
        assert (term.topology_key, term.namespaces) == ("kubernetes.io/hostname", [])
        assert term.namespace_selector is None
        assert term.label_selector is not None
        assert term.label_selector.match_labels == {"app": "scheduler-perf"}
        assert pod_requests(p) == {}
    for p in pods_of(w.name):
        assert p.metadata.labels == {"app": "scheduler-perf"}
        assert p.spec.affinity is None
        assert not p.spec.scheduling_gates
        assert pod_requests(p) == {}
        assert [(c.name, c.image, c.ports) for c in p.spec.containers] == [
            ("pause", "registry.k8s.io/pause:3.10.1", [])
        ]
    assert node_allocatable(msgspec.convert(w.make_node(0), Node))["pods"] == 90000


def test_volume_workloads_give_each_pod_a_volume_bound_to_its_claim() -> None:
    csi = workload("SchedulingCSIPVs/5000Nodes_5000Pods")
    pod = msgspec.convert(csi.make_pod(0, "p0", "ns"), Pod)
    [volume] = pod.spec.volumes
    assert volume.persistent_volume_claim is not None
    pv, claim = csi.make_volume("p0", "ns")
    assert volume.persistent_volume_claim.claim_name == claim["metadata"]["name"] == "pvc-p0"
    # Each bound to the other, as CreatePodWithPersistentVolume makes them.
    assert claim["spec"]["volumeName"] == pv["metadata"]["name"] == "ns-vol-p0"
    assert pv["spec"]["claimRef"]["name"] == "pvc-p0"
    assert pv["spec"]["claimRef"]["namespace"] == "ns"
    assert pv["spec"]["csi"] == {"driver": "ebs.csi.aws.com", "volumeHandle": "ns-vol-p0"}
    assert csi.csi_node is not None
    [driver] = csi.csi_node("node-00000")["spec"]["drivers"]
    assert driver["allocatable"] == {"count": 39}
    node = csi.make_node(0)
    assert node["status"]["allocatable"]["attachable-volumes-csi-ebs.csi.aws.com"] == "39"
    # The migrated workload's volumes are in-tree, its CSINodes say they are migrated.
    migrated = workload("SchedulingMigratedInTreePVs/5000Nodes_5000Pods")
    pv, _ = migrated.make_volume("p1", "ns")
    assert pv["spec"]["awsElasticBlockStore"] == {"volumeID": "ns-vol-p1"}
    assert migrated.csi_node is not None
    annotations = migrated.csi_node("n")["metadata"]["annotations"]
    assert annotations == {"storage.alpha.kubernetes.io/migrated-plugins": "kubernetes.io/aws-ebs"}
    # PreemptionPVs: the low-priority init pods have no volume, the preemptors have one each.
    preemption = workload("PreemptionPVs/1000Nodes")
    assert preemption.has_volume(init=True) is False
    assert "volumes" not in preemption.make_init_pod(0, "i0", "ns")["spec"]
    assert preemption.make_pod(1, "p1", "ns")["spec"]["priority"] == 10
    assert preemption.make_pod(1, "p1", "ns")["spec"]["volumes"][0]["name"] == "vol"
    # SchedulingSecrets: a secret volume, no claim.
    secrets = workload("SchedulingSecrets/5000Nodes_10000Pods")
    assert secrets.make_pod(0, "p0", "ns")["spec"]["volumes"] == [
        {"name": "secret", "secret": {"secretName": "secret"}}
    ]


def test_dra_workloads_give_each_node_a_slice_and_each_pod_a_claim() -> None:
    templated = workload("SchedulingWithResourceClaimTemplate/5000pods_500nodes")
    assert templated.devices_per_node == 10
    node = msgspec.convert(templated.make_node(3), Node)
    assert node.metadata.labels["node-with-dra"] == "true"
    body = templated.make_pod(7, "p7", "ns")
    assert body["spec"]["containers"][0]["resources"] == {"claims": [{"name": "resource"}]}
    [claim] = msgspec.convert(body, Pod).spec.resource_claims
    assert (claim.name, claim.resource_claim_template_name) == ("resource", "test-claim-template")
    # createResourceDriver: one pool per node, named after it, with its devices.
    sliced = msgspec.convert(resource_slice("node-00003", 10), ResourceSlice)
    assert sliced.spec.node_name == sliced.spec.pool.name == "node-00003"
    assert sliced.spec.driver == DRA_DRIVER
    assert [d.name for d in sliced.spec.devices] == [f"instance-{i}" for i in range(10)]
    assert sliced.spec.devices[4].attributes["dra.example.com/numa"].int_ == 4
    assert msgspec.convert(device_class(), DeviceClass).spec.selectors[0].cel is not None
    template = msgspec.convert(resource_claim_template("ns"), ResourceClaimTemplate)
    [request] = template.spec.spec.devices.requests
    assert request.exactly is not None
    assert request.exactly.device_class_name == "test-class"
    # Shared claims: five pods each, init and measured pods counted in one sequence.
    shared = workload("SchedulingWithResourceClaim/5000pods_500nodes")
    assert shared.devices_per_node == 2
    names = [
        msgspec.convert(shared.make_pod(i, f"p{i}", "ns"), Pod).spec.resource_claims[0]
        for i in (0, 4, 5, 2504)
    ]
    assert [c.resource_claim_name for c in names] == [
        "test-claim-00000",
        "test-claim-00000",
        "test-claim-00001",
        "test-claim-00500",
    ]
    # A shared claim asks for what a claim from the template asks for.
    assert resource_claim("c", "ns")["spec"] == resource_claim_template("ns")["spec"]["spec"]
