"""The nodes and pods a benchmark creates, as the API server's JSON.

``basic`` and ``spread`` are kube-scheduler's scheduler_perf workloads (``SchedulingBasic``;
``TopologySpreading`` with anti-affinity and preferred-spreading pods mixed in), ``mixed`` and
``small`` kubesched's own. What each holds, and where ``spread`` departs from scheduler_perf so
that its placement can be checked against hard bounds: docs/benchmarks.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: The image of scheduler_perf's pod templates.
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEDICATED = "dedicated"
DEDICATED_VALUE = "batch"
#: Every ``TAINT_EVERY``-th node of ``mixed`` is tainted ``dedicated=batch:NoSchedule``.
TAINT_EVERY = 5
ZONES = 3
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: The zones of scheduler_perf's ``labelNodePrepareStrategy`` for topology spreading, in turn.
SPREAD_ZONES = ("moon-1", "moon-2", "moon-3")
#: The label of the spread workload's pods (``color``: ``blue`` spread, ``green`` anti-affinity).
COLOR = "color"
SPREAD_MAX_SKEW = 5

Json = dict[str, Any]


def node_default(name: str) -> Json:
    """``node-default.yaml``: 4 CPU, 32Gi, 110 pods, Ready (allocatable = capacity)."""
    capacity = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def _container(cpu: str | None, memory: str | None) -> Json:
    container: Json = {"name": "pause", "image": PAUSE_IMAGE, "ports": [{"containerPort": 80}]}
    if cpu is not None and memory is not None:
        resources = {"cpu": cpu, "memory": memory}
        container["resources"] = {"requests": resources, "limits": dict(resources)}
    return container


def pod_default(name: str, namespace: str) -> Json:
    """``pod-default.yaml``: one pause container, 100m CPU and 500Mi requested (and limited)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [_container("100m", "500Mi")]},
    }


def node_mixed(index: int, name: str) -> Json:
    """A ``node-default`` in zone ``zone<index % 3 + 1>``; every fifth one dedicated to batch
    pods (label and ``NoSchedule`` taint)."""
    node = node_default(name)
    labels = node["metadata"]["labels"]
    labels[ZONE_LABEL] = f"zone{index % ZONES + 1}"
    if index % TAINT_EVERY == TAINT_EVERY - 1:
        labels[DEDICATED] = DEDICATED_VALUE
        node["spec"]["taints"] = [
            {"key": DEDICATED, "value": DEDICATED_VALUE, "effect": "NoSchedule"}
        ]
    return node


def pod_mixed(index: int, name: str, namespace: str) -> Json:
    """Pod ``index`` of the ``mixed`` cycle of 20:

    - 8 small: 100m / 500Mi (``pod-default``);
    - 4 medium: 500m / 1Gi, required node affinity to zone1 or zone2;
    - 3 large: 1 CPU / 4Gi, preferred node affinity to zone3;
    - 3 batch: 250m / 2Gi, tolerating the batch taint and selecting batch nodes;
    - 2 best-effort: no requests.
    """
    kind = index % 20
    pod = pod_default(name, namespace)
    spec = pod["spec"]
    if kind < 8:
        return pod
    if kind < 12:
        spec["containers"] = [_container("500m", "1Gi")]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": ZONE_LABEL, "operator": "In", "values": ["zone1", "zone2"]}
                            ]
                        }
                    ]
                }
            }
        }
    elif kind < 15:
        spec["containers"] = [_container("1", "4Gi")]
        spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {"key": ZONE_LABEL, "operator": "In", "values": ["zone3"]}
                            ]
                        },
                    }
                ]
            }
        }
    elif kind < 18:
        spec["containers"] = [_container("250m", "2Gi")]
        spec["nodeSelector"] = {DEDICATED: DEDICATED_VALUE}
        spec["tolerations"] = [
            {
                "key": DEDICATED,
                "operator": "Equal",
                "value": DEDICATED_VALUE,
                "effect": "NoSchedule",
            }
        ]
    else:
        spec["containers"] = [_container(None, None)]
    return pod


def node_spread(index: int, name: str) -> Json:
    """A ``node-default`` in zone ``moon-<index % 3 + 1>`` (``labelNodePrepareStrategy``)."""
    node = node_default(name)
    node["metadata"]["labels"][ZONE_LABEL] = SPREAD_ZONES[index % len(SPREAD_ZONES)]
    return node


def _spreading(pod: Json, color: str, when: str) -> Json:
    """``pod-with-topology-spreading.yaml`` (``when``: DoNotSchedule) or
    ``pod-with-preferred-topology-spreading.yaml`` (ScheduleAnyway): maxSkew 5 by zone among the
    pods of the same color."""
    pod["metadata"]["labels"] = {COLOR: color}
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": SPREAD_MAX_SKEW,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {COLOR: color}},
        }
    ]
    return pod


def pod_spread(index: int, name: str, namespace: str) -> Json:
    """Pod ``index`` of the ``spread`` cycle of 10 (see the module doc): 5 blue DoNotSchedule
    spreading, 1 yellow ScheduleAnyway spreading, 2 green with required anti-affinity by hostname,
    2 ``pod-default``."""
    kind = index % 10
    pod = pod_default(name, namespace)
    if kind < 5:
        return _spreading(pod, "blue", "DoNotSchedule")
    if kind == 5:
        return _spreading(pod, "yellow", "ScheduleAnyway")
    if kind < 8:
        # pod-with-pod-anti-affinity.yaml
        pod["metadata"]["labels"] = {COLOR: "green"}
        pod["spec"]["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {COLOR: "green"}},
                        "topologyKey": HOSTNAME_LABEL,
                        "namespaces": [namespace],
                    }
                ]
            }
        }
    return pod


@dataclass(frozen=True, slots=True)
class Workload:
    """A cluster shape and its default size."""

    name: str
    description: str
    nodes: int
    init_pods: int
    measured_pods: int
    node: Callable[[int, str], Json]
    pod: Callable[[int, str, str], Json]

    def node_name(self, index: int) -> str:
        return f"node-{index:05d}"

    def make_node(self, index: int) -> Json:
        return self.node(index, self.node_name(index))

    def make_pod(self, index: int, name: str, namespace: str) -> Json:
        return self.pod(index, name, namespace)


def _basic_node(index: int, name: str) -> Json:
    return node_default(name)


def _basic_pod(index: int, name: str, namespace: str) -> Json:
    return pod_default(name, namespace)


WORKLOADS: dict[str, Workload] = {
    "basic": Workload(
        name="basic",
        description="SchedulingBasic (5000Nodes_10000Pods): node-default, pod-default",
        nodes=5000,
        init_pods=1000,
        measured_pods=10000,
        node=_basic_node,
        pod=_basic_pod,
    ),
    "mixed": Workload(
        name="mixed",
        description="zones, a tainted fifth of the nodes, pods of five kinds "
        "(sizes, required/preferred node affinity, tolerations, best-effort)",
        nodes=5000,
        init_pods=1000,
        measured_pods=10000,
        node=node_mixed,
        pod=pod_mixed,
    ),
    "spread": Workload(
        name="spread",
        description="TopologySpreading (5000Nodes_5000Pods) with SchedulingPodAntiAffinity's and "
        "PreferredTopologySpreading's pods mixed in: zones, maxSkew 5, anti-affinity by hostname",
        nodes=5000,
        init_pods=5000,
        measured_pods=5000,
        node=node_spread,
        pod=pod_spread,
    ),
    "small": Workload(
        name="small",
        description="mixed at CI size",
        nodes=100,
        init_pods=100,
        measured_pods=500,
        node=node_mixed,
        pod=pod_mixed,
    ),
}


def workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(
            f"unknown workload {name!r}; one of {', '.join(sorted(WORKLOADS))}"
        ) from None


__all__ = [
    "COLOR",
    "DEDICATED",
    "DEDICATED_VALUE",
    "HOSTNAME_LABEL",
    "PAUSE_IMAGE",
    "SPREAD_MAX_SKEW",
    "SPREAD_ZONES",
    "WORKLOADS",
    "ZONE_LABEL",
    "Json",
    "Workload",
    "node_default",
    "node_mixed",
    "node_spread",
    "pod_default",
    "pod_mixed",
    "pod_spread",
    "workload",
]
