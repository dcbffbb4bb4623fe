"""The volume plugins in ``kubesched run`` on the real apiserver (no controller-manager runs).

- A WaitForFirstConsumer claim and a local PV reachable from one of two nodes: the pod lands on
  that node although the other one would score higher, and the PV and the claim end bound to
  each other (claimRef with the claim's UID, volumeName, bind-completed, Bound phases).
- An unbound claim of an Immediate class keeps the pod Pending with kube-scheduler's message.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.scheduler.sched_e2e import (
    Runner,
    condition,
    create_node,
    create_pod,
    delete_node,
    delete_pods,
    eventually,
    get_pod,
    list_nodes,
    node_manifest,
    pod_manifest,
    scheduler_config,
)
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

STORAGE = "/apis/storage.k8s.io/v1/storageclasses"
PVS = "/api/v1/persistentvolumes"


@pytest.fixture
def suffix() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def namespace(admin_client: AdminClient, suffix: str) -> Iterator[str]:
    name = f"vol-e2e-{suffix}"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
    try:
        yield name
    finally:
        delete_pods(admin_client, name)
        claims = f"/api/v1/namespaces/{name}/persistentvolumeclaims"
        for item in admin_client.get(claims).json().get("items", []):
            _force_delete(admin_client, f"{claims}/{item['metadata']['name']}")
        # Without a controller-manager the namespace stays Terminating: harmless and empty.
        admin_client.delete(f"/api/v1/namespaces/{name}")


def _force_delete(client: AdminClient, path: str) -> None:
    """Delete an object whose protection finalizer no controller-manager would ever remove."""
    client.patch(path, {"metadata": {"finalizers": None}})
    client.delete(path)


@pytest.fixture
def cluster_objects(admin_client: AdminClient) -> Iterator[Callable[[str, dict[str, Any]], None]]:
    """Create cluster-scoped objects (nodes, PVs, StorageClasses); delete them afterwards."""
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
                _force_delete(admin_client, f"{collection}/{name}")


@pytest.fixture
def kubesched(tmp_path: Path, control_plane: ClusterInfo, namespace: str) -> Iterator[Runner]:
    runner = Runner(tmp_path / "kubesched", control_plane.kubeconfig)
    try:
        yield runner
    finally:
        runner.close()


def storage_class(
    name: str, mode: str, provisioner: str = "kubernetes.io/no-provisioner"
) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def claim(name: str, namespace: str, storage_class_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class_name,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def claim_pod(name: str, namespace: str, profile: str, claim_name: str) -> dict[str, Any]:
    return pod_manifest(
        name,
        namespace,
        profile,
        cpu="100m",
        spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]},
    )


def test_wait_for_first_consumer_claim_binds_to_the_local_volume_on_the_chosen_node(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    namespace: str,
    suffix: str,
) -> None:
    profile = f"vol-{suffix}"
    big, small = f"vol-{suffix}-big", f"vol-{suffix}-small"
    # Without VolumeBinding the pod would go to the big node (more room, higher score).
    cluster_objects("/api/v1/nodes", node_manifest(big, cpu="16", memory="64Gi"))
    cluster_objects("/api/v1/nodes", node_manifest(small, cpu="2", memory="4Gi"))
    sc = f"local-{suffix}"
    cluster_objects(STORAGE, storage_class(sc, "WaitForFirstConsumer"))
    pv_name = f"local-{suffix}"
    cluster_objects(
        PVS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv_name},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc,
                "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/disks/vol1"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/hostname",
                                        "operator": "In",
                                        "values": [small],
                                    }
                                ]
                            }
                        ]
                    }
                },
            },
        },
    )
    # Available, as the PV controller would have made it.
    admin_client.patch(f"{PVS}/{pv_name}/status", {"status": {"phase": "Available"}}).expect(200)
    admin_client.post(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("data", namespace, sc)
    ).expect(201)
    sched = kubesched(scheduler_config(profile))
    create_pod(admin_client, claim_pod("web", namespace, profile, "data"))

    pod = eventually(
        lambda: get_pod(admin_client, namespace, "web"),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=60,
        what="the pod bound",
        watch=sched,
    )
    assert pod["spec"]["nodeName"] == small

    pvc = (
        admin_client.get(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/data")
        .expect(200)
        .json()
    )
    pv = admin_client.get(f"{PVS}/{pv_name}").expect(200).json()
    ref = pv["spec"]["claimRef"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == (
        namespace,
        "data",
        pvc["metadata"]["uid"],
    )
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert pvc["spec"]["volumeName"] == pv_name
    assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
    assert pv["status"]["phase"] == "Bound"
    assert pvc["status"]["phase"] == "Bound"
    assert pvc["status"]["capacity"] == {"storage": "5Gi"}
    # The claim was bound before the pod: the selected-node annotation is for provisioning only.
    assert "volume.kubernetes.io/selected-node" not in pvc["metadata"].get("annotations", {})


def test_unbound_immediate_claim_keeps_the_pod_pending(
    admin_client: AdminClient,
    kubesched: Runner,
    cluster_objects: Callable[[str, dict[str, Any]], None],
    namespace: str,
    suffix: str,
) -> None:
    profile = f"vol-{suffix}"
    cluster_objects("/api/v1/nodes", node_manifest(f"vol-{suffix}-a"))
    cluster_objects("/api/v1/nodes", node_manifest(f"vol-{suffix}-b"))
    sc = f"immediate-{suffix}"
    cluster_objects(STORAGE, storage_class(sc, "Immediate", "example.com/nobody"))
    admin_client.post(
        f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim("data", namespace, sc)
    ).expect(201)
    sched = kubesched(scheduler_config(profile))
    create_pod(admin_client, claim_pod("web", namespace, profile, "data"))

    pod = eventually(
        lambda: get_pod(admin_client, namespace, "web"),
        lambda p: condition(p, "PodScheduled") is not None,
        timeout=60,
        what="the PodScheduled condition",
        watch=sched,
    )
    nodes = len(list_nodes(admin_client))
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
    # As kube-scheduler v1.34.4 writes it (tests/conformance/scenarios/default-profile): the
    # rejection at VolumeBinding's PreFilter comes before DynamicResources' PreFilter, whose
    # PostFilter then fails to read its state, and that error ends the message.
    assert cond["message"] == (
        f"0/{nodes} nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "not found"
    )
    assert not get_pod(admin_client, namespace, "web")["spec"].get("nodeName")
