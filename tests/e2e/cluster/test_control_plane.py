"""The local control plane is a real kube-apiserver: nodes, pods, bindings, RBAC."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubesched import cluster
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

pytestmark = pytest.mark.e2e


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


def _pod(name: str, scheduler: str = "default-scheduler") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_version_and_readyz(control_plane: ClusterInfo, admin_client: AdminClient) -> None:
    version = admin_client.get("/version").expect(200).json()
    assert version["gitVersion"] == control_plane.version == "v1.34.4"
    assert admin_client.get("/readyz").expect(200).body == b"ok"


def test_node_status_is_kept_at_create_and_updated_through_the_status_subresource(
    admin_client: AdminClient,
) -> None:
    name = _unique("node")

    created = admin_client.post("/api/v1/nodes", _node(name)).expect(201).json()

    assert created["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "110"}
    assert created["status"]["conditions"][0]["type"] == "Ready"

    # A patch of the main resource ignores status; the /status subresource changes it.
    admin_client.patch(f"/api/v1/nodes/{name}", {"status": {"allocatable": {"pods": "5"}}})
    assert admin_client.get(f"/api/v1/nodes/{name}").json()["status"]["allocatable"]["pods"] == (
        "110"
    )
    admin_client.patch(
        f"/api/v1/nodes/{name}/status", {"status": {"allocatable": {"pods": "5"}}}
    ).expect(200)
    node = admin_client.get(f"/api/v1/nodes/{name}").expect(200).json()
    assert node["status"]["allocatable"] == {"cpu": "4", "memory": "8Gi", "pods": "5"}

    admin_client.delete(f"/api/v1/nodes/{name}").expect(200)


def test_a_pod_is_bound_through_the_binding_subresource(admin_client: AdminClient) -> None:
    node, pod = _unique("node"), _unique("pod")
    admin_client.post("/api/v1/nodes", _node(node)).expect(201)
    # Nothing schedules it: no scheduler serves this name.
    admin_client.post("/api/v1/namespaces/default/pods", _pod(pod, "nobody")).expect(201)

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod, "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    admin_client.post(f"/api/v1/namespaces/default/pods/{pod}/binding", binding).expect(201)

    bound = admin_client.get(f"/api/v1/namespaces/default/pods/{pod}").expect(200).json()
    assert bound["spec"]["nodeName"] == node
    scheduled = [c for c in bound["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert [c["status"] for c in scheduled] == ["True"]

    # A second binding is refused: a pod is bound once.
    admin_client.post(f"/api/v1/namespaces/default/pods/{pod}/binding", binding).expect(409)

    admin_client.delete(f"/api/v1/namespaces/default/pods/{pod}").expect(200)
    admin_client.delete(f"/api/v1/nodes/{node}").expect(200)


def test_kubeconfig_works_with_kubectl(control_plane: ClusterInfo) -> None:
    kubectl = cluster.ensure_binaries().kubectl
    ready = subprocess.run(
        [str(kubectl), "--kubeconfig", str(control_plane.kubeconfig), "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert ready.stdout.strip() == "ok"


def test_minted_identities_get_their_rbac_rights(control_plane: ClusterInfo) -> None:
    kubectl = str(cluster.ensure_binaries().kubectl)

    def can_i(kubeconfig: Path, *verb_resource: str) -> str:
        done = subprocess.run(
            [kubectl, "--kubeconfig", str(kubeconfig), "auth", "can-i", *verb_resource],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.stdout.strip()

    scheduler = control_plane.client_kubeconfig("system:kube-scheduler")
    assert can_i(scheduler, "create", "pods", "--subresource=binding") == "yes"
    assert can_i(scheduler, "delete", "nodes") == "no"
    nobody = control_plane.client_kubeconfig("someone", ["some-group"])
    assert can_i(nobody, "list", "pods") == "no"
    assert can_i(control_plane.kubeconfig, "delete", "nodes") == "yes"


def test_up_again_reuses_the_running_cluster(control_plane: ClusterInfo) -> None:
    lines: list[str] = []

    again = cluster.up(control_plane.name, progress=lines.append)

    assert again.reused
    assert (again.server, again.kubeconfig) == (control_plane.server, control_plane.kubeconfig)
    assert any("already running" in line for line in lines)
    [found] = [s for s in cluster.status() if s.name == control_plane.name]
    assert found.running
    assert found.server == control_plane.server


def test_kube_scheduler_component_schedules_a_pod(
    control_plane: ClusterInfo, admin_client: AdminClient
) -> None:
    node, pod = _unique("node"), _unique("pod")
    admin_client.post("/api/v1/nodes", _node(node)).expect(201)
    cluster.start_kube_scheduler(cluster=control_plane.name)
    try:
        admin_client.post("/api/v1/namespaces/default/pods", _pod(pod)).expect(201)
        deadline = time.monotonic() + 30
        node_name = None
        while node_name is None and time.monotonic() < deadline:
            spec = admin_client.get(f"/api/v1/namespaces/default/pods/{pod}").json()["spec"]
            node_name = spec.get("nodeName")
            time.sleep(0.2)
        assert node_name == node
        statuses = {s.name: s.running for s in _status(control_plane).components}
        assert statuses == {"kube-scheduler": True}
    finally:
        assert cluster.stop_component("kube-scheduler", cluster=control_plane.name)
        admin_client.delete(f"/api/v1/namespaces/default/pods/{pod}")
        admin_client.delete(f"/api/v1/nodes/{node}")
    assert _status(control_plane).components == ()


def _status(info: ClusterInfo) -> cluster.ClusterStatus:
    [found] = [s for s in cluster.status() if s.name == info.name]
    return found
