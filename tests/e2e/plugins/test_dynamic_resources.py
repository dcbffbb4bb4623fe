"""DynamicResources in ``kubesched run`` on the real apiserver, with ResourceSlices made by hand
(no driver and no controller-manager run; the scheduler needs neither to allocate).

- A pod claiming a GPU lands on the one node whose slice has a GPU that the claim's CEL selector
  accepts, and its claim ends allocated there: the device, the node selector, the pod in
  ``reservedFor``, the scheduler's finalizer. A second pod asking for the same kind of GPU finds
  none left and stays Pending with kube-scheduler's message.
- A pod whose claim comes from a ResourceClaimTemplate waits until the claim exists and is named
  in its status (this test does what the resourceclaim controller would), then is scheduled.
- A pending pod is scheduled once a ResourceSlice publishes a device for it.
- Ten pods created at once for six GPUs: six are bound, each with a device of its own (devices
  allocated in flight count as taken while their bindings run), four stay Pending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.scheduler.sched_e2e import (
    Runner,
    condition,
    create_all,
    create_node,
    create_pod,
    delete_node,
    eventually,
    get_pod,
    list_pods,
    node_manifest,
    pod_manifest,
    scheduler_config,
)
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

NAMESPACE_PREFIX = "dra-e2e"
RESOURCE = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.example.com"
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def cluster_objects(admin_client: AdminClient) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Create cluster-scoped objects (nodes, DeviceClasses, ResourceSlices); delete them after."""
    created: list[tuple[str, str]] = []

    def make(collection: str, manifest: dict[str, Any]) -> None:
        if collection == "/api/v1/nodes":
            create_node(admin_client, manifest)
        else:
            admin_client.post(collection, manifest).expect(201)
        created.append((collection, manifest["metadata"]["name"]))

    try:
        yield make
    finally:
        for collection, name in reversed(created):
            if collection == "/api/v1/nodes":
                delete_node(admin_client, name)
            else:
                admin_client.delete(f"{collection}/{name}")


@pytest.fixture
def claims(admin_client: AdminClient, namespace: str) -> Iterator[str]:
    """The namespace's ResourceClaims collection; the claims' finalizers are removed at the end
    (no controller would)."""
    path = f"{RESOURCE}/namespaces/{namespace}/resourceclaims"
    try:
        yield path
    finally:
        admin_client.request(
            "DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"}
        )
        for item in admin_client.get(path).json().get("items", []):
            item_path = f"{path}/{item['metadata']['name']}"
            admin_client.patch(item_path, {"metadata": {"finalizers": None}})
            admin_client.delete(item_path)


@pytest.fixture
def kubesched(tmp_path: Path, control_plane: ClusterInfo) -> Iterator[Runner]:
    runner = Runner(tmp_path / "kubesched", control_plane.kubeconfig)
    try:
        yield runner
    finally:
        runner.close()


def gpu_slice(name: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def gpu(name: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "attributes": {"model": {"string": "example"}},
        "capacity": {"memory": {"value": memory}},
    }


def claim_spec(device_class: str) -> dict[str, Any]:
    selector = f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": device_class,
                        "selectors": [{"cel": {"expression": selector}}],
                    },
                }
            ]
        }
    }


def claiming_pod(name: str, namespace: str, profile: str, claim: dict[str, str]) -> dict[str, Any]:
    return pod_manifest(
        name,
        namespace,
        profile,
        cpu="100m",
        spec={"resourceClaims": [{"name": "gpu", **claim}]},
    )


def test_gpu_claim_allocated_on_the_node_with_a_matching_gpu(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    claims: str,
    namespace: str,
    run_id: str,
) -> None:
    profile = f"dra-{run_id}"
    small, big = f"dra-{run_id}-small", f"dra-{run_id}-big"
    cluster_objects("/api/v1/nodes", node_manifest(small, cpu="4", memory="8Gi"))
    cluster_objects("/api/v1/nodes", node_manifest(big, cpu="32", memory="128Gi"))
    device_class = f"gpu-{run_id}"
    cluster_objects(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    # The big node's GPU is too small for the selector; the small node has one that fits.
    cluster_objects(
        f"{RESOURCE}/resourceslices", gpu_slice(f"{big}-gpus", big, [gpu("gpu-0", "16Gi")])
    )
    cluster_objects(
        f"{RESOURCE}/resourceslices",
        gpu_slice(f"{small}-gpus", small, [gpu("gpu-0", "16Gi"), gpu("gpu-1", "80Gi")]),
    )
    for name in ("first", "second"):
        admin_client.post(
            claims,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name},
                "spec": claim_spec(device_class),
            },
        ).expect(201)

    sched = kubesched(scheduler_config(profile))
    create_pod(
        admin_client, claiming_pod("trainer", namespace, profile, {"resourceClaimName": "first"})
    )
    pod = eventually(
        lambda: get_pod(admin_client, namespace, "trainer"),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=60,
        what="the pod bound",
        watch=sched,
    )
    assert pod["spec"]["nodeName"] == small

    claim = admin_client.get(f"{claims}/first").expect(200).json()
    assert FINALIZER in claim["metadata"]["finalizers"]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": small, "device": "gpu-1"}
    ]
    assert allocation["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [small]}]}
        ]
    }
    assert claim["status"]["reservedFor"] == [
        {"resource": "pods", "name": "trainer", "uid": pod["metadata"]["uid"]}
    ]

    # The only fitting GPU is taken now.
    create_pod(
        admin_client, claiming_pod("waiting", namespace, profile, {"resourceClaimName": "second"})
    )
    waiting = eventually(
        lambda: get_pod(admin_client, namespace, "waiting"),
        lambda p: condition(p, "PodScheduled") is not None,
        timeout=60,
        what="the second pod reported unschedulable",
        watch=sched,
    )
    cond = condition(waiting, "PodScheduled")
    assert cond is not None
    assert cond["reason"] == "Unschedulable"
    assert "cannot allocate all claims. still not schedulable, preemption: " in cond["message"]
    second = admin_client.get(f"{claims}/second").expect(200).json()
    assert "allocation" not in second.get("status", {})


def test_template_claim_pod_waits_for_its_claim(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    claims: str,
    namespace: str,
    run_id: str,
) -> None:
    profile = f"dra-t-{run_id}"
    node = f"dra-t-{run_id}"
    cluster_objects("/api/v1/nodes", node_manifest(node, cpu="4", memory="8Gi"))
    device_class = f"gpu-t-{run_id}"
    cluster_objects(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    cluster_objects(
        f"{RESOURCE}/resourceslices", gpu_slice(f"{node}-gpus", node, [gpu("gpu-0", "80Gi")])
    )
    admin_client.post(
        f"{RESOURCE}/namespaces/{namespace}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpu"},
            "spec": {"spec": claim_spec(device_class)},
        },
    ).expect(201)
    sched = kubesched(scheduler_config(profile))
    create_pod(
        admin_client,
        claiming_pod("templated", namespace, profile, {"resourceClaimTemplateName": "gpu"}),
    )
    pod = get_pod(admin_client, namespace, "templated")
    # What the resourceclaim controller does: the claim, owned by the pod, named in its status.
    admin_client.post(
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": "templated-gpu-x1y2z",
                "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": "templated",
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": claim_spec(device_class),
        },
    ).expect(201)
    admin_client.patch(
        f"/api/v1/namespaces/{namespace}/pods/templated/status",
        {
            "status": {
                "resourceClaimStatuses": [
                    {"name": "gpu", "resourceClaimName": "templated-gpu-x1y2z"}
                ]
            }
        },
    ).expect(200)
    bound = eventually(
        lambda: get_pod(admin_client, namespace, "templated"),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=60,
        what="the pod bound once its claim exists",
        watch=sched,
    )
    assert bound["spec"]["nodeName"] == node
    claim = admin_client.get(f"{claims}/templated-gpu-x1y2z").expect(200).json()
    assert claim["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_pending_pod_scheduled_when_a_slice_publishes_a_device(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    claims: str,
    namespace: str,
    run_id: str,
) -> None:
    profile = f"dra-q-{run_id}"
    node = f"dra-q-{run_id}"
    cluster_objects("/api/v1/nodes", node_manifest(node, cpu="4", memory="8Gi"))
    device_class = f"gpu-q-{run_id}"
    cluster_objects(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    admin_client.post(
        claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "later"},
            "spec": claim_spec(device_class),
        },
    ).expect(201)
    sched = kubesched(scheduler_config(profile))
    create_pod(
        admin_client, claiming_pod("patient", namespace, profile, {"resourceClaimName": "later"})
    )
    eventually(
        lambda: get_pod(admin_client, namespace, "patient"),
        lambda p: condition(p, "PodScheduled") is not None,
        timeout=60,
        what="the pod reported unschedulable",
        watch=sched,
    )
    # The driver publishes its devices: the ResourceSlice event moves the pod back (it would
    # otherwise wait for the 5 minute flush).
    cluster_objects(
        f"{RESOURCE}/resourceslices", gpu_slice(f"{node}-gpus", node, [gpu("gpu-0", "80Gi")])
    )
    bound = eventually(
        lambda: get_pod(admin_client, namespace, "patient"),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=30,
        what="the pod bound after the slice appeared",
        watch=sched,
    )
    assert bound["spec"]["nodeName"] == node


def test_pods_created_at_once_never_share_a_device(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    claims: str,
    namespace: str,
    run_id: str,
) -> None:
    profile = f"dra-r-{run_id}"
    nodes = [f"dra-r-{run_id}-{i}" for i in range(3)]
    device_class = f"gpu-r-{run_id}"
    cluster_objects(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": device_class},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    for node in nodes:
        cluster_objects("/api/v1/nodes", node_manifest(node, cpu="8", memory="16Gi"))
        cluster_objects(
            f"{RESOURCE}/resourceslices",
            gpu_slice(f"{node}-gpus", node, [gpu("gpu-0", "80Gi"), gpu("gpu-1", "80Gi")]),
        )
    names = [f"worker-{i}" for i in range(10)]
    for name in names:
        admin_client.post(
            claims,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name},
                "spec": claim_spec(device_class),
            },
        ).expect(201)
    sched = kubesched(scheduler_config(profile))
    create_all(
        admin_client,
        create_pod,
        [claiming_pod(n, namespace, profile, {"resourceClaimName": n}) for n in names],
    )

    def decided(pods: list[dict[str, Any]]) -> bool:
        ours = [p for p in pods if p["metadata"]["name"] in names]
        return len(ours) == len(names) and all(
            p["spec"].get("nodeName") or condition(p, "PodScheduled") is not None for p in ours
        )

    pods = eventually(
        lambda: list_pods(admin_client, namespace),
        decided,
        timeout=90,
        what="every pod bound or reported unschedulable",
        watch=sched,
    )
    bound = {
        p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")
    }
    assert len(bound) == 6
    devices = []
    for name, node in bound.items():
        claim = admin_client.get(f"{claims}/{name}").expect(200).json()
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == node
        devices.append((result["pool"], result["device"]))
    assert sorted(devices) == sorted((n, d) for n in nodes for d in ("gpu-0", "gpu-1"))
