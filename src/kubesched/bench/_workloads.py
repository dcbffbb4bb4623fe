"""The nodes and pods a benchmark creates, as the API server's JSON.

``basic`` and ``spread`` are kube-scheduler's scheduler_perf workloads (``SchedulingBasic``;
``TopologySpreading`` with anti-affinity and preferred-spreading pods mixed in), ``mixed`` and
``small`` kubesched's own. What each holds, and where ``spread`` departs from scheduler_perf so
that its placement can be checked against hard bounds: docs/benchmarks.md.

:data:`UPSTREAM` holds scheduler_perf's own workloads under their upstream names (e.g.
``SchedulingBasic/5000Nodes_10000Pods``), each from its templates, with its sizes and CI
threshold; :data:`ALL` is the set ``--workload all`` runs.
"""

from __future__ import annotations

import copy
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
#: The labels of ``namespace-with-labels.yaml``, which the ``-ns-selector`` pods' terms select.
TEAM_LABELS = {"team": "devops"}
#: The prefix of the namespaces a workload's init pods are spread over (upstream's ``init-ns``).
INIT_NAMESPACE_PREFIX = "init-ns"

Json = dict[str, Any]

#: The scope of the ``-ns-selector`` templates' terms: the namespaces labelled ``team: devops``.
_TEAM: Json = {"namespaceSelector": {"matchLabels": TEAM_LABELS}}
#: The label of ``pod-with-label.yaml``, which ``gated-pod-with-pod-affinity.yaml`` selects.
_SCHEDULER_PERF = {"app": "scheduler-perf"}


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


def light_pod(name: str, namespace: str) -> Json:
    """``light-pod.yaml``: one pause container, no requests, terminationGracePeriodSeconds 0."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [{"name": "pause", "image": PAUSE_IMAGE}],
            "terminationGracePeriodSeconds": 0,
        },
    }


def gated_pod(name: str, namespace: str) -> Json:
    """``gated-pod.yaml``: a pause container held by the scheduling gate ``test.k8s.io/hold``."""
    pod = light_pod(name, namespace)
    del pod["spec"]["terminationGracePeriodSeconds"]
    pod["spec"]["schedulingGates"] = [{"name": "test.k8s.io/hold"}]
    return pod


def _sized(name: str, namespace: str, cpu: str, *, limits: bool = True) -> Json:
    pod = pod_default(name, namespace)
    container = pod["spec"]["containers"][0]
    requests = {"cpu": cpu, "memory": "500Mi"}
    container["resources"] = {"requests": requests}
    if limits:
        container["resources"]["limits"] = dict(requests)
    return pod


def pod_low_priority(name: str, namespace: str) -> Json:
    """``pod-low-priority.yaml``: 900m CPU, 500Mi, no priority, terminationGracePeriodSeconds 0
    (a victim is gone as soon as it is deleted: no kubelet here)."""
    pod = _sized(name, namespace, "900m")
    pod["spec"]["terminationGracePeriodSeconds"] = 0
    return pod


def pod_high_priority(name: str, namespace: str) -> Json:
    """``pod-high-priority.yaml``: priority 10, 3 CPU, 500Mi: on a node of 4 CPU holding four
    900m pods it fits only once three are preempted."""
    pod = _sized(name, namespace, "3000m")
    pod["spec"]["priority"] = 10
    return pod


def pod_high_priority_large_cpu(name: str, namespace: str) -> Json:
    """``pod-high-priority-large-cpu.yaml``: priority 10, 9 CPU requested: fits no node of 4."""
    pod = _sized(name, namespace, "9", limits=False)
    pod["spec"]["priority"] = 10
    return pod


def node_churn(name: str) -> Json:
    """``churn/node-default.yaml``: a Ready node of no labels that takes no pods (capacity
    ``pods: 0``)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "capacity": {"pods": "0"},
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def service_churn(name: str, namespace: str) -> Json:
    """``churn/service-default.yaml``: a service selecting ``app: foo``, TCP 8080."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"app": "foo"},
            "ports": [{"protocol": "TCP", "port": 8080, "targetPort": 8080}],
        },
    }


def pod_with_node_affinity(name: str, namespace: str) -> Json:
    """``pod-with-node-affinity.yaml``: ``pod-default`` with required node affinity to zone1 or
    zone2."""
    pod = pod_default(name, namespace)
    pod["spec"]["affinity"] = {
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
    return pod


def pod_with_pod_anti_affinity(name: str, namespace: str) -> Json:
    """``pod-with-pod-anti-affinity.yaml``: ``pod-default`` labelled ``color: green`` with
    required anti-affinity to green pods by hostname."""
    return _required(pod_default(name, namespace), "podAntiAffinity", "green", HOSTNAME_LABEL)


def pod_with_pod_affinity(name: str, namespace: str) -> Json:
    """``pod-with-pod-affinity.yaml``: ``pod-default`` labelled ``color: blue`` with required
    affinity to blue pods by zone."""
    return _required(pod_default(name, namespace), "podAffinity", "blue", ZONE_LABEL)


def pod_with_preferred_pod_affinity(name: str, namespace: str) -> Json:
    """``pod-with-preferred-pod-affinity.yaml``: ``pod-default`` labelled ``color: red`` with a
    preferred affinity (weight 1) to red pods by hostname."""
    return _preferred(pod_default(name, namespace), "podAffinity", "red")


def pod_with_preferred_pod_anti_affinity(name: str, namespace: str) -> Json:
    """``pod-with-preferred-pod-anti-affinity.yaml``: ``pod-default`` labelled ``color: yellow``
    with a preferred anti-affinity (weight 1) to yellow pods by hostname."""
    return _preferred(pod_default(name, namespace), "podAntiAffinity", "yellow")


def namespace_with_labels(name: str) -> Json:
    """``namespace-with-labels.yaml``: a namespace labelled ``team: devops``."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": dict(TEAM_LABELS)},
    }


def pod_affinity_ns_selector(name: str, namespace: str) -> Json:
    """``pod-affinity-ns-selector.yaml``: ``pod-default`` labelled ``color: blue`` with required
    affinity to blue pods by zone, in the namespaces labelled ``team: devops``."""
    return _required(pod_default(name, namespace), "podAffinity", "blue", ZONE_LABEL, _TEAM)


def pod_anti_affinity_ns_selector(name: str, namespace: str) -> Json:
    """``pod-anti-affinity-ns-selector.yaml``: ``pod-default`` labelled ``color: green`` with
    required anti-affinity to green pods by hostname, in the namespaces labelled
    ``team: devops``."""
    return _required(
        pod_default(name, namespace), "podAntiAffinity", "green", HOSTNAME_LABEL, _TEAM
    )


def pod_preferred_affinity_ns_selector(name: str, namespace: str) -> Json:
    """``pod-preferred-affinity-ns-selector.yaml``: ``pod-default`` labelled ``color: red`` with
    a preferred affinity (weight 1) to red pods by hostname, in the namespaces labelled
    ``team: devops``."""
    return _preferred(pod_default(name, namespace), "podAffinity", "red", _TEAM)


def pod_preferred_anti_affinity_ns_selector(name: str, namespace: str) -> Json:
    """``pod-preferred-anti-affinity-ns-selector.yaml``: ``pod-default`` labelled
    ``color: green`` with a preferred anti-affinity (weight 1) to green pods by hostname, in the
    namespaces labelled ``team: devops``."""
    return _preferred(pod_default(name, namespace), "podAntiAffinity", "green", _TEAM)


def _term(pod: Json, color: str, topology_key: str, scope: Json | None) -> Json:
    """Labels ``pod`` ``color``; a term to the pods of that color by ``topology_key`` in the
    namespaces ``scope`` selects, or without one in the pod's own namespace (upstream's templates
    name their two, ``sched-0`` and ``sched-1``)."""
    pod["metadata"]["labels"] = {COLOR: color}
    term = {"labelSelector": {"matchLabels": {COLOR: color}}, "topologyKey": topology_key}
    term.update(
        copy.deepcopy(scope)
        if scope is not None
        else {"namespaces": [pod["metadata"]["namespace"]]}
    )
    return term


def _required(
    pod: Json, kind: str, color: str, topology_key: str, scope: Json | None = None
) -> Json:
    """``pod`` with a required ``kind`` (``podAffinity`` or ``podAntiAffinity``) term (see
    :func:`_term`)."""
    term = _term(pod, color, topology_key, scope)
    pod["spec"]["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod


def _preferred(pod: Json, kind: str, color: str, scope: Json | None = None) -> Json:
    """``pod`` with a preferred ``kind`` term of weight 1 by hostname (see :func:`_term`)."""
    term = {"podAffinityTerm": _term(pod, color, HOSTNAME_LABEL, scope), "weight": 1}
    pod["spec"]["affinity"] = {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [term]}}
    return pod


def pod_with_topology_spreading(name: str, namespace: str) -> Json:
    """``pod-with-topology-spreading.yaml``: ``pod-default`` labelled ``color: blue``, maxSkew 5
    by zone among blue pods, DoNotSchedule."""
    return _spreading(pod_default(name, namespace), "blue", "DoNotSchedule")


def pod_with_preferred_topology_spreading(name: str, namespace: str) -> Json:
    """``pod-with-preferred-topology-spreading.yaml``: as ``pod-with-topology-spreading``, but
    ScheduleAnyway (a preference scored, not a filter)."""
    return _spreading(pod_default(name, namespace), "blue", "ScheduleAnyway")


def pod_with_node_inclusion_policy(name: str, namespace: str) -> Json:
    """``pod-with-node-inclusion-policy.yaml``: ``pod-default`` labelled ``foo: bar``, maxSkew 1
    by hostname among those pods, DoNotSchedule, honouring the pod's node affinity and the nodes'
    taints in the count (``nodeAffinityPolicy``, ``nodeTaintsPolicy``: Honor)."""
    pod = pod_default(name, namespace)
    pod["metadata"]["labels"] = {"foo": "bar"}
    pod["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": HOSTNAME_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "nodeAffinityPolicy": "Honor",
            "nodeTaintsPolicy": "Honor",
            "labelSelector": {"matchLabels": {"foo": "bar"}},
        }
    ]
    return pod


def node_with_taint(name: str) -> Json:
    """``node-with-taint.yaml``: ``node-default`` tainted ``foo:NoSchedule``."""
    node = node_default(name)
    node["spec"]["taints"] = [{"key": "foo", "effect": "NoSchedule"}]
    return node


def pod_with_label(name: str, namespace: str) -> Json:
    """``pod-with-label.yaml``: one pause container, no requests, labelled
    ``app: scheduler-perf``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(_SCHEDULER_PERF)},
        "spec": {"containers": [{"name": "pause", "image": PAUSE_IMAGE}]},
    }


def gated_pod_with_pod_affinity(name: str, namespace: str) -> Json:
    """``gated-pod-with-pod-affinity.yaml``: ``pod-with-label`` held by the scheduling gate
    ``scheduling-gate-1``, with required affinity to ``app: scheduler-perf`` pods by hostname
    (in its own namespace: the term names none)."""
    pod = pod_with_label(name, namespace)
    term = {"labelSelector": {"matchLabels": dict(_SCHEDULER_PERF)}, "topologyKey": HOSTNAME_LABEL}
    pod["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    pod["spec"]["schedulingGates"] = [{"name": "scheduling-gate-1"}]
    return pod


def daemonset_pod(name: str, namespace: str, node: str) -> Json:
    """``daemonset-pod.yaml``: a pause container, no requests, bound to ``node`` by required node
    affinity on ``metadata.name`` (``matchFields``), as the DaemonSet controller pins its pods."""
    pod = light_pod(name, namespace)
    del pod["spec"]["terminationGracePeriodSeconds"]
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
        }
    }
    return pod


def node_with_name(name: str) -> Json:
    """``node-with-name.yaml``: ``node-default`` that takes 90,000 pods."""
    node = node_default(name)
    for resources in (node["status"]["capacity"], node["status"]["allocatable"]):
        resources["pods"] = "90000"
    return node


#: The CSI driver of scheduler_perf's volume workloads, its attach limit on each node
#: (``nodeAllocatableStrategy``), and the in-tree plugin migrated to it.
EBS_CSI_DRIVER = "ebs.csi.aws.com"
EBS_ATTACH_LIMIT = 39
AWS_EBS_IN_TREE = "kubernetes.io/aws-ebs"


def pod_with_secret_volume(name: str, namespace: str) -> Json:
    """``pod-with-secret-volume.yaml``: ``pod-default`` mounting Secret ``secret`` (which need
    not exist for scheduling)."""
    pod = pod_default(name, namespace)
    pod["spec"]["volumes"] = [{"name": "secret", "secret": {"secretName": "secret"}}]
    return pod


def node_with_attach_limit(index: int, name: str) -> Json:
    """``node-default`` with the EBS CSI driver's attach limit in its allocatable
    (``nodeAllocatable`` of the volume workloads' ``nodeAllocatableStrategy``)."""
    node = node_default(name)
    node["status"]["allocatable"][f"attachable-volumes-csi-{EBS_CSI_DRIVER}"] = str(
        EBS_ATTACH_LIMIT
    )
    return node


def csi_node(name: str, migrated: tuple[str, ...] = ()) -> Json:
    """The CSINode of node ``name``: the EBS driver and its attach limit
    (``csiNodeAllocatable``), the in-tree plugins ``migrated`` in its annotation."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {
            "name": name,
            "annotations": {"storage.alpha.kubernetes.io/migrated-plugins": ",".join(migrated)},
        },
        "spec": {
            "drivers": [
                {
                    "name": EBS_CSI_DRIVER,
                    "nodeID": name,
                    "allocatable": {"count": EBS_ATTACH_LIMIT},
                }
            ]
        },
    }


def _migrated_csi_node(name: str) -> Json:
    return csi_node(name, (AWS_EBS_IN_TREE,))


def pv_csi(name: str) -> Json:
    """``pv-csi.yaml``: 1Gi ReadOnlyMany of the EBS CSI driver, its handle the volume's name."""
    return _pv(name, {"csi": {"driver": EBS_CSI_DRIVER, "volumeHandle": name}})


def pv_aws(name: str) -> Json:
    """``pv-aws.yaml``: 1Gi ReadOnlyMany in-tree AWS EBS, its volume id the volume's name."""
    return _pv(name, {"awsElasticBlockStore": {"volumeID": name}})


def _pv(name: str, source: Json) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "capacity": {"storage": "1Gi"},
            "persistentVolumeReclaimPolicy": "Retain",
            **source,
        },
    }


def pvc(name: str, namespace: str, volume: str) -> Json:
    """``pvc.yaml``, bound to PersistentVolume ``volume`` (``bind-completed``)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"pv.kubernetes.io/bind-completed": "true"},
        },
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "resources": {"requests": {"storage": "1Gi"}},
            "volumeName": volume,
        },
    }


#: The driver of scheduler_perf's ``createResourceDriver`` (DRA), its DeviceClass
#: (``deviceclass.yaml``), the ResourceClaimTemplate of ``resourceclaimtemplate.yaml`` and the
#: pod claim of the ``pod-with-claim-*`` templates.
DRA_DRIVER = "test-driver.cdi.k8s.io"
DEVICE_CLASS = "test-class"
CLAIM_TEMPLATE = "test-claim-template"
POD_CLAIM = "resource"
#: ``pod-with-claim-ref.yaml``: five pods share each ResourceClaim.
PODS_PER_CLAIM = 5
RESOURCE_API = "resource.k8s.io/v1"


def node_with_dra_test_driver(index: int, name: str) -> Json:
    """``node-with-dra-test-driver.yaml``: ``node-default`` labelled ``node-with-dra``."""
    node = node_default(name)
    node["metadata"]["labels"]["node-with-dra"] = "true"
    return node


def device_class() -> Json:
    """``deviceclass.yaml``: the devices of :data:`DRA_DRIVER`, by a CEL selector."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRA_DRIVER}"'}}]},
    }


def resource_slice(node: str, devices: int) -> Json:
    """``createResourceDriver``'s ResourceSlice of ``node``: a pool of its own with ``devices``
    devices ``instance-<i>``, each with upstream's attributes and 1Gi of memory."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {"name": node},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"instance-{i}",
                    "attributes": {
                        "model": {"string": "A100"},
                        "family": {"string": "GPU"},
                        "driverVersion": {"version": "1.2.3"},
                        "dra.example.com/numa": {"int": i},
                    },
                    "capacity": {"memory": {"value": "1Gi"}},
                }
                for i in range(devices)
            ],
        },
    }


def _claim_spec() -> Json:
    return {
        "devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": DEVICE_CLASS}}]}
    }


def resource_claim(name: str, namespace: str) -> Json:
    """``resourceclaim.yaml``: one device of :data:`DEVICE_CLASS`."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": _claim_spec(),
    }


def resource_claim_template(namespace: str) -> Json:
    """``resourceclaimtemplate.yaml``: claims of one device of :data:`DEVICE_CLASS`."""
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": CLAIM_TEMPLATE, "namespace": namespace},
        "spec": {"spec": _claim_spec()},
    }


def _claiming(name: str, namespace: str, image: str, source: Json) -> Json:
    """A pause pod whose container uses pod claim :data:`POD_CLAIM` from ``source``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {"name": "pause", "image": image, "resources": {"claims": [{"name": POD_CLAIM}]}}
            ],
            "resourceClaims": [{"name": POD_CLAIM, **source}],
        },
    }


def pod_with_claim_template(name: str, namespace: str) -> Json:
    """``pod-with-claim-template.yaml``: a claim of its own from :data:`CLAIM_TEMPLATE`."""
    return _claiming(name, namespace, PAUSE_IMAGE, {"resourceClaimTemplateName": CLAIM_TEMPLATE})


def shared_claim_name(index: int) -> str:
    """The ResourceClaim pod ``index`` shares with the :data:`PODS_PER_CLAIM` - 1 next to it."""
    return f"test-claim-{index // PODS_PER_CLAIM:05d}"


def pod_with_claim_ref(index: int, name: str, namespace: str) -> Json:
    """``pod-with-claim-ref.yaml``: the pod's claim is :func:`shared_claim_name`, created
    before it. Init and measured pods count on in one sequence, so each claim's pods are of one
    phase when the init pods are a multiple of five (upstream gives each phase its own claims)."""
    source = {"resourceClaimName": shared_claim_name(index)}
    return _claiming(name, namespace, "registry.k8s.io/pause:3.9", source)


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
        return pod_with_pod_anti_affinity(name, namespace)
    return pod


def node_name(index: int) -> str:
    """The name of a benchmark's node ``index``."""
    return f"node-{index:05d}"


CHURN_CREATE = "create"
CHURN_RECREATE = "recreate"


@dataclass(frozen=True, slots=True)
class Churn:
    """scheduler_perf's ``churn`` op, beside the measured pods: every ``interval_s``, one object
    of each template. In ``create`` mode each object stays; in ``recreate`` mode a tick creates
    the objects of slot ``tick % number`` when the slot is empty and deletes them when it is not
    (with ``number`` 1: created, deleted, created ...)."""

    #: ``(resource, template)``: ``pods``, ``services`` (in the bench's namespace) or ``nodes``;
    #: the template takes the churn object's index, name and namespace.
    templates: tuple[tuple[str, Callable[[int, str, str], Json]], ...]
    mode: str = CHURN_CREATE
    interval_s: float = 0.5
    number: int = 1


@dataclass(frozen=True, slots=True)
class Workload:
    """A cluster shape and its default size.

    The init pods are created and (``init_pods_bind``) bound before measuring; the measured
    pods are ``pod``; ``churn`` goes on while they are scheduled.
    """

    name: str
    description: str
    nodes: int
    init_pods: int
    measured_pods: int
    node: Callable[[int, str], Json]
    pod: Callable[[int, str, str], Json]
    #: The init pods' template, when not ``pod``.
    init_pod: Callable[[int, str, str], Json] | None = None
    #: False for init pods no scheduler binds (gated, or larger than any node).
    init_pods_bind: bool = True
    churn: Churn | None = None
    #: scheduler_perf's CI threshold for this workload (pods/s, v1.34.4), for reference.
    threshold: float | None = None
    #: Namespaces ``init-ns-<k>`` the init pods are spread over in turn, instead of the measured
    #: pods' one (``createPodSets``); every namespace of the run is then
    #: ``namespace-with-labels``, as upstream's ``init-ns-*`` and ``measure-ns-0``.
    init_namespaces: int = 0
    #: The CSINode each node gets, from the node's name, if any.
    csi_node: Callable[[str], Json] | None = None
    #: A PersistentVolume of its own for each measured pod, from the volume's name, bound to a
    #: claim of its own that the pod mounts, both created (and marked Bound) before the pod
    #: (``persistentVolumeTemplatePath`` with ``pvc.yaml``).
    volume: Callable[[str], Json] | None = None
    #: Whether the init pods get one too.
    init_volumes: bool = True
    #: DRA (``createResourceDriver``): a ResourceSlice of :data:`DRA_DRIVER` with this many
    #: devices on every node, the DeviceClass, and the ResourceClaimTemplate in each namespace.
    #: The pods' shared claims are created before them; the claims of pods with a template are
    #: made once the pods exist, as the resourceclaim controller makes them.
    devices_per_node: int = 0

    def sizes(
        self,
        nodes: int | None = None,
        init_pods: int | None = None,
        measured_pods: int | None = None,
    ) -> tuple[int, int, int]:
        """Nodes, init pods and measured pods of a run: the workload's, or those given. Init
        pods not given shrink with the workload, by the smaller of the nodes' and the measured
        pods' ratios (so that as many init pods per node fit as at full size)."""
        n = self.nodes if nodes is None else nodes
        m = self.measured_pods if measured_pods is None else measured_pods
        if init_pods is None:
            ratio = min(n / self.nodes, m / self.measured_pods, 1.0)
            init_pods = round(self.init_pods * ratio)
        return n, init_pods, m

    def node_name(self, index: int) -> str:
        return node_name(index)

    def make_node(self, index: int) -> Json:
        return self.node(index, self.node_name(index))

    def make_pod(self, index: int, name: str, namespace: str) -> Json:
        return self._mounting(self.pod(index, name, namespace), self.has_volume(init=False))

    def make_init_pod(self, index: int, name: str, namespace: str) -> Json:
        pod = (self.init_pod or self.pod)(index, name, namespace)
        return self._mounting(pod, self.has_volume(init=True))

    def has_volume(self, *, init: bool) -> bool:
        """Whether measured (or init) pods get a volume of their own."""
        return self.volume is not None and (self.init_volumes or not init)

    def make_volume(self, pod_name: str, namespace: str) -> tuple[Json, Json]:
        """The PersistentVolume and the claim bound to it of pod ``pod_name``
        (``CreatePodWithPersistentVolume``: each bound to the other)."""
        assert self.volume is not None
        claim = _claim_name(pod_name)
        pv = self.volume(f"{namespace}-vol-{pod_name}")
        pv["spec"]["claimRef"] = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": namespace,
            "name": claim,
        }
        return pv, pvc(claim, namespace, pv["metadata"]["name"])

    @staticmethod
    def _mounting(pod: Json, volume: bool) -> Json:
        """``pod`` with its claim as its one volume, when it has one."""
        if volume:
            claim = _claim_name(pod["metadata"]["name"])
            pod["spec"]["volumes"] = [
                {"name": "vol", "persistentVolumeClaim": {"claimName": claim}}
            ]
        return pod

    def init_namespace(self, index: int, measured: str) -> str:
        """The namespace of init pod ``index``: ``measured``, the measured pods' one, unless
        the workload spreads its init pods over namespaces of their own."""
        if not self.init_namespaces:
            return measured
        return f"{INIT_NAMESPACE_PREFIX}-{index % self.init_namespaces}"

    def make_namespaces(self, measured: str) -> list[Json]:
        """The namespaces of a run whose measured pods live in ``measured``, that one first."""
        if not self.init_namespaces:
            return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": measured}}]
        names = [f"{INIT_NAMESPACE_PREFIX}-{k}" for k in range(self.init_namespaces)]
        return [namespace_with_labels(n) for n in (measured, *names)]


def _claim_name(pod_name: str) -> str:
    return f"pvc-{pod_name}"


def _basic_node(index: int, name: str) -> Json:
    return node_default(name)


def _basic_pod(index: int, name: str, namespace: str) -> Json:
    return pod_default(name, namespace)


def _every(template: Callable[[str, str], Json]) -> Callable[[int, str, str], Json]:
    """A pod template that is the same for every index."""

    def make(index: int, name: str, namespace: str) -> Json:
        return template(name, namespace)

    return make


def _churn_node(index: int, name: str, namespace: str) -> Json:
    return node_churn(name)


def _zone1_node(index: int, name: str) -> Json:
    """``node-default`` labelled zone1 (SchedulingNodeAffinity's ``labelNodePrepareStrategy``)."""
    node = node_default(name)
    node["metadata"]["labels"][ZONE_LABEL] = "zone1"
    return node


def _one_big_node(index: int, name: str) -> Json:
    return node_with_name(name)


def _named_then_default(index: int, name: str) -> Json:
    """SchedulingDaemonset's nodes: ``node-with-name`` first (upstream's
    ``scheduler-perf-node``, here node 0), then ``node-default``."""
    return node_with_name(name) if index == 0 else node_default(name)


def _daemonset_pod(index: int, name: str, namespace: str) -> Json:
    """``daemonset-pod.yaml``: every pod pinned to node 0, the one ``node-with-name``."""
    return daemonset_pod(name, namespace, node_name(0))


#: MixedSchedulingBasePod's init pods: as many of each, in turn.
_MIXED_BASE_INIT = (
    pod_default,
    pod_with_pod_affinity,
    pod_with_pod_anti_affinity,
    pod_with_preferred_pod_affinity,
    pod_with_preferred_pod_anti_affinity,
)


def _mixed_base_init_pod(index: int, name: str, namespace: str) -> Json:
    """MixedSchedulingBasePod's init pods: the five templates of its five ``createPods`` ops in
    turn (upstream creates them one op after the other)."""
    return _MIXED_BASE_INIT[index % len(_MIXED_BASE_INIT)](name, namespace)


#: SchedulingWithNodeInclusionPolicy: of every five nodes, one is ``node-with-taint``.
_TAINTED_EVERY = 5


def _inclusion_policy_node(index: int, name: str) -> Json:
    """SchedulingWithNodeInclusionPolicy's nodes: four ``node-default`` for each
    ``node-with-taint`` (upstream creates the 4,000 and then the 1,000)."""
    if index % _TAINTED_EVERY == _TAINTED_EVERY - 1:
        return node_with_taint(name)
    return node_default(name)


#: scheduler_perf's workloads by their names in ``test/integration/scheduler_perf`` (v1.34.4):
#: ``<test case>/<workload>``, the shapes of its templates and the sizes and thresholds of its
#: ``performance-config.yaml`` files (the ``_QueueingHintsEnabled`` variant's threshold where
#: it differs: kube-scheduler v1.34 runs with queueing hints).
UPSTREAM: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            name="SchedulingBasic/5000Nodes_10000Pods",
            description="node-default, pod-default (misc)",
            nodes=5000,
            init_pods=1000,
            measured_pods=10000,
            node=_basic_node,
            pod=_basic_pod,
            threshold=270,
        ),
        Workload(
            name="SchedulingBasic/5000Nodes_50000Pods",
            description="node-default, pod-default, 50,000 measured pods (misc; upstream's "
            "_QueueingHintsEnabled variant, no threshold in v1.34.4)",
            nodes=5000,
            init_pods=5000,
            measured_pods=50000,
            node=_basic_node,
            pod=_basic_pod,
        ),
        Workload(
            name="SchedulingDaemonset/15000Nodes",
            description="one node-with-name that every daemonset-pod names by matchFields "
            "metadata.name, and 15,000 node-default nodes that NodeAffinity's PreFilter rules "
            "out (misc)",
            nodes=15001,
            init_pods=0,
            measured_pods=30000,
            node=_named_then_default,
            pod=_daemonset_pod,
            threshold=390,
        ),
        Workload(
            name="SchedulingPodAntiAffinity/5000Nodes_2000Pods",
            description="pod-with-pod-anti-affinity for init and measured pods (affinity)",
            nodes=5000,
            init_pods=1000,
            measured_pods=2000,
            node=_basic_node,
            pod=_every(pod_with_pod_anti_affinity),
            threshold=60,
        ),
        Workload(
            name="SchedulingPodAffinity/5000Nodes_5000Pods",
            description="nodes in zone1, pod-with-pod-affinity for init and measured pods "
            "(affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=_zone1_node,
            pod=_every(pod_with_pod_affinity),
            threshold=35,
        ),
        Workload(
            name="SchedulingPreferredPodAffinity/5000Nodes_5000Pods",
            description="pod-with-preferred-pod-affinity for init and measured pods (affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=_basic_node,
            pod=_every(pod_with_preferred_pod_affinity),
            threshold=90,
        ),
        Workload(
            name="SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods",
            description="pod-with-preferred-pod-anti-affinity for init and measured pods "
            "(affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=_basic_node,
            pod=_every(pod_with_preferred_pod_anti_affinity),
            threshold=90,
        ),
        Workload(
            name="MixedSchedulingBasePod/5000Nodes_5000Pods",
            description="nodes in zone1; init pods pod-default, pod-with-pod-affinity, "
            "pod-with-pod-anti-affinity, pod-with-preferred-pod-affinity and "
            "pod-with-preferred-pod-anti-affinity, 2,000 each; pod-default measured (affinity)",
            nodes=5000,
            init_pods=10000,
            measured_pods=5000,
            node=_zone1_node,
            pod=_basic_pod,
            init_pod=_mixed_base_init_pod,
            threshold=140,
        ),
        Workload(
            name="SchedulingRequiredPodAntiAffinityWithNSSelector/5000Nodes_2000Pods",
            description="6,000 nodes, pod-anti-affinity-ns-selector, init pods 40 in each of "
            "100 namespace-with-labels (affinity)",
            nodes=6000,
            init_pods=4000,
            measured_pods=2000,
            node=_basic_node,
            pod=_every(pod_anti_affinity_ns_selector),
            threshold=24,
            init_namespaces=100,
        ),
        Workload(
            name="SchedulingPreferredAntiAffinityWithNSSelector/5000Nodes_2000Pods",
            description="pod-preferred-anti-affinity-ns-selector, init pods 40 in each of 100 "
            "namespace-with-labels (affinity)",
            nodes=5000,
            init_pods=4000,
            measured_pods=2000,
            node=_basic_node,
            pod=_every(pod_preferred_anti_affinity_ns_selector),
            threshold=55,
            init_namespaces=100,
        ),
        Workload(
            name="SchedulingRequiredPodAffinityWithNSSelector/5000Nodes_2000Pods",
            description="nodes in zone1, pod-affinity-ns-selector, init pods 50 in each of 100 "
            "namespace-with-labels (affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=2000,
            node=_zone1_node,
            pod=_every(pod_affinity_ns_selector),
            threshold=35,
            init_namespaces=100,
        ),
        Workload(
            name="SchedulingPreferredAffinityWithNSSelector/5000Nodes_5000Pods",
            description="pod-preferred-affinity-ns-selector, init pods 50 in each of 100 "
            "namespace-with-labels (affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=_basic_node,
            pod=_every(pod_preferred_affinity_ns_selector),
            threshold=90,
            init_namespaces=100,
        ),
        Workload(
            name="TopologySpreading/5000Nodes_5000Pods",
            description="nodes in zones moon-1..3, pod-default init pods, "
            "pod-with-topology-spreading measured (topology_spreading)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=node_spread,
            pod=_every(pod_with_topology_spreading),
            init_pod=_basic_pod,
            threshold=85,
        ),
        Workload(
            name="PreferredTopologySpreading/5000Nodes_5000Pods",
            description="nodes in zones moon-1..3, pod-default init pods, "
            "pod-with-preferred-topology-spreading measured (topology_spreading)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=node_spread,
            pod=_every(pod_with_preferred_topology_spreading),
            init_pod=_basic_pod,
            threshold=125,
        ),
        Workload(
            name="SchedulingWithNodeInclusionPolicy/5000Nodes",
            description="4,000 node-default and 1,000 node-with-taint nodes, "
            "pod-with-node-inclusion-policy measured: maxSkew 1 by hostname over the untainted "
            "nodes (topology_spreading)",
            nodes=5000,
            init_pods=0,
            measured_pods=4000,
            node=_inclusion_policy_node,
            pod=_every(pod_with_node_inclusion_policy),
            threshold=68,
        ),
        Workload(
            name="SchedulingNodeAffinity/5000Nodes_10000Pods",
            description="nodes in zone1, pod-with-node-affinity (affinity)",
            nodes=5000,
            init_pods=5000,
            measured_pods=10000,
            node=_zone1_node,
            pod=_every(pod_with_node_affinity),
            threshold=220,
        ),
        Workload(
            name="Unschedulable/5kNodes/100Init/10kPods",
            description="pod-default, and a pod-high-priority-large-cpu (fits nowhere) created "
            "every 200 ms while measuring (misc)",
            nodes=5000,
            init_pods=100,
            measured_pods=10000,
            node=_basic_node,
            pod=_basic_pod,
            churn=Churn((("pods", _every(pod_high_priority_large_cpu)),), interval_s=0.2),
            threshold=170,
        ),
        Workload(
            name="SchedulingWithMixedChurn/5000Nodes_10000Pods",
            description="pod-default; every second a node that takes no pods, a "
            "pod-high-priority-large-cpu and a service created, the next second deleted (misc)",
            nodes=5000,
            init_pods=0,
            measured_pods=10000,
            node=_basic_node,
            pod=_basic_pod,
            churn=Churn(
                (
                    ("nodes", _churn_node),
                    ("pods", _every(pod_high_priority_large_cpu)),
                    ("services", _every(service_churn)),
                ),
                mode=CHURN_RECREATE,
                interval_s=1.0,
            ),
            threshold=265,
        ),
        Workload(
            name="SchedulingWhileGated/1Node_10000GatedPods",
            description="one node of 90,000 pods, 10,000 gated pods, 20,000 light-pods measured "
            "(misc; without its 20,000 pods deleted at 50/s on the side)",
            nodes=1,
            init_pods=10000,
            measured_pods=20000,
            node=_one_big_node,
            pod=_every(light_pod),
            init_pod=_every(gated_pod),
            init_pods_bind=False,
            threshold=130,
        ),
        Workload(
            name="SchedulingGatedPodsWithPodAffinityImpactForThroughput/1Node_10000GatedPods",
            description="one node of 90,000 pods, 10,000 gated-pod-with-pod-affinity, 20,000 "
            "pod-with-label measured, which the gated pods' affinity selects (affinity)",
            nodes=1,
            init_pods=10000,
            measured_pods=20000,
            node=_one_big_node,
            pod=_every(pod_with_label),
            init_pod=_every(gated_pod_with_pod_affinity),
            init_pods_bind=False,
            threshold=110,
        ),
        Workload(
            name="PreemptionBasic/1000Nodes",
            description="pod-low-priority init pods fill the nodes, each pod-high-priority "
            "measured preempts three of them (misc; no threshold upstream)",
            nodes=1000,
            init_pods=4000,
            measured_pods=1000,
            node=_basic_node,
            pod=_every(pod_high_priority),
            init_pod=_every(pod_low_priority),
        ),
        Workload(
            name="PreemptionAsync/5000Nodes",
            description="pod-low-priority init pods fill the nodes, a pod-high-priority created "
            "every 200 ms preempts three of them, pod-default measured (misc)",
            nodes=5000,
            init_pods=20000,
            measured_pods=5000,
            node=_basic_node,
            pod=_basic_pod,
            init_pod=_every(pod_low_priority),
            churn=Churn((("pods", _every(pod_high_priority)),), interval_s=0.2),
            threshold=160,
        ),
        Workload(
            name="SchedulingSecrets/5000Nodes_10000Pods",
            description="pod-with-secret-volume for init and measured pods (volumes)",
            nodes=5000,
            init_pods=1000,
            measured_pods=10000,
            node=_basic_node,
            pod=_every(pod_with_secret_volume),
            threshold=260,
        ),
        Workload(
            name="SchedulingInTreePVs/5000Nodes_2000Pods",
            description="node-default, pod-default each with its own claim bound to an in-tree "
            "AWS EBS PersistentVolume (pv-aws, pvc) (volumes)",
            nodes=5000,
            init_pods=1000,
            measured_pods=2000,
            node=_basic_node,
            pod=_basic_pod,
            volume=pv_aws,
            threshold=90,
        ),
        Workload(
            name="SchedulingMigratedInTreePVs/5000Nodes_5000Pods",
            description="nodes with the EBS CSI driver's limit of 39 and CSINodes listing "
            "aws-ebs as migrated, each pod with its own in-tree AWS EBS volume (volumes)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=node_with_attach_limit,
            pod=_basic_pod,
            csi_node=_migrated_csi_node,
            volume=pv_aws,
            threshold=35,
        ),
        Workload(
            name="SchedulingCSIPVs/5000Nodes_5000Pods",
            description="nodes with the EBS CSI driver's limit of 39 (allocatable and CSINode), "
            "each pod with its own CSI volume (pv-csi, pvc) (volumes)",
            nodes=5000,
            init_pods=5000,
            measured_pods=5000,
            node=node_with_attach_limit,
            pod=_basic_pod,
            csi_node=csi_node,
            volume=pv_csi,
            threshold=48,
        ),
        Workload(
            name="PreemptionPVs/1000Nodes",
            description="pod-low-priority init pods; pod-high-priority measured pods, each with "
            "its own in-tree AWS EBS volume, preempting them (volumes)",
            nodes=1000,
            init_pods=4000,
            measured_pods=1000,
            node=_basic_node,
            pod=_every(pod_high_priority),
            init_pod=_every(pod_low_priority),
            volume=pv_aws,
            init_volumes=False,
        ),
        Workload(
            name="SchedulingWithResourceClaimTemplate/5000pods_500nodes",
            description="node-with-dra-test-driver with 10 devices each, pod-with-claim-template: "
            "each pod a claim of its own from resourceclaimtemplate (dra)",
            nodes=500,
            init_pods=2500,
            measured_pods=2500,
            node=node_with_dra_test_driver,
            pod=_every(pod_with_claim_template),
            devices_per_node=10,
            threshold=56,
        ),
        Workload(
            name="SchedulingWithResourceClaim/5000pods_500nodes",
            description="node-with-dra-test-driver with 2 devices each, pod-with-claim-ref: "
            "five pods share each resourceclaim (dra)",
            nodes=500,
            init_pods=2500,
            measured_pods=2500,
            node=node_with_dra_test_driver,
            pod=pod_with_claim_ref,
            devices_per_node=2,
        ),
    )
}
#: What ``--workload all`` runs: what fits in an hour on a 2-core machine, timed from each
#: workload's full-size run by its name (docs/benchmarks.md: 54 minutes at most). Left out, each
#: runs by its name: the volume and DRA workloads (newer than the set), the two of 30,000 pods (a
#: quarter of an hour each), SchedulingDaemonset's 45,000 objects and SchedulingBasic's 55,000
#: pods (half an hour each), and the two affinity workloads that took longest, so that the set
#: stays within the hour.
_NOT_IN_ALL = (
    "SchedulingSecrets/5000Nodes_10000Pods",
    "SchedulingInTreePVs/5000Nodes_2000Pods",
    "SchedulingMigratedInTreePVs/5000Nodes_5000Pods",
    "SchedulingCSIPVs/5000Nodes_5000Pods",
    "PreemptionPVs/1000Nodes",
    "SchedulingWithResourceClaimTemplate/5000pods_500nodes",
    "SchedulingWithResourceClaim/5000pods_500nodes",
    "SchedulingWhileGated/1Node_10000GatedPods",
    "SchedulingGatedPodsWithPodAffinityImpactForThroughput/1Node_10000GatedPods",
    "SchedulingDaemonset/15000Nodes",
    "SchedulingBasic/5000Nodes_50000Pods",
    "SchedulingPreferredPodAntiAffinity/5000Nodes_5000Pods",
    "MixedSchedulingBasePod/5000Nodes_5000Pods",
)
ALL = tuple(n for n in UPSTREAM if n not in _NOT_IN_ALL)


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


WORKLOADS.update(UPSTREAM)


def workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(
            f"unknown workload {name!r}; one of {', '.join(sorted(WORKLOADS))}"
        ) from None


__all__ = [
    "ALL",
    "CHURN_CREATE",
    "CHURN_RECREATE",
    "CLAIM_TEMPLATE",
    "COLOR",
    "DEDICATED",
    "DEDICATED_VALUE",
    "DEVICE_CLASS",
    "DRA_DRIVER",
    "HOSTNAME_LABEL",
    "INIT_NAMESPACE_PREFIX",
    "PAUSE_IMAGE",
    "PODS_PER_CLAIM",
    "POD_CLAIM",
    "RESOURCE_API",
    "SPREAD_MAX_SKEW",
    "SPREAD_ZONES",
    "TEAM_LABELS",
    "UPSTREAM",
    "WORKLOADS",
    "ZONE_LABEL",
    "Churn",
    "Json",
    "Workload",
    "daemonset_pod",
    "device_class",
    "gated_pod",
    "gated_pod_with_pod_affinity",
    "light_pod",
    "namespace_with_labels",
    "node_churn",
    "node_default",
    "node_mixed",
    "node_name",
    "node_spread",
    "node_with_dra_test_driver",
    "node_with_name",
    "node_with_taint",
    "pod_affinity_ns_selector",
    "pod_anti_affinity_ns_selector",
    "pod_default",
    "pod_high_priority",
    "pod_high_priority_large_cpu",
    "pod_low_priority",
    "pod_mixed",
    "pod_preferred_affinity_ns_selector",
    "pod_preferred_anti_affinity_ns_selector",
    "pod_spread",
    "pod_with_claim_ref",
    "pod_with_claim_template",
    "pod_with_label",
    "pod_with_node_affinity",
    "pod_with_node_inclusion_policy",
    "pod_with_pod_affinity",
    "pod_with_pod_anti_affinity",
    "pod_with_preferred_pod_affinity",
    "pod_with_preferred_pod_anti_affinity",
    "pod_with_preferred_topology_spreading",
    "pod_with_topology_spreading",
    "resource_claim",
    "resource_claim_template",
    "resource_slice",
    "service_churn",
    "shared_claim_name",
    "workload",
]
