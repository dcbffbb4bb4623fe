"""``kubesched simulate --from-cluster`` against a real kube-apiserver: read-only, and right."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from builders import NodeWrapper, PodWrapper
from kubesched.cli import main
from kubesched.cluster import ClusterInfo
from kubesched.kube import APIClient
from kubesched.simulate import load

if TYPE_CHECKING:
    from conftest import AdminClient


def _node(name: str, pool: str, cpu: str) -> dict[str, Any]:
    labels = {"kubernetes.io/hostname": name, "e2e-pool": pool}
    capacity = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return NodeWrapper(name).labels(labels).capacity(capacity).manifest()


def _pod(name: str, ns: str, pool: str, cpu: str, node: str = "", **spec: Any) -> dict[str, Any]:
    pod = (
        PodWrapper(name)
        .namespace(ns)
        .node_selector({"e2e-pool": pool})
        .pause(requests={"cpu": cpu})
    )
    if node:
        pod.node(node)
    return pod.spec(spec).manifest()


class Fixture:
    def __init__(self, ns: str, pool: str, nodes: list[str]) -> None:
        self.ns = ns
        self.pool = pool
        self.nodes = nodes


@pytest.fixture
def small_cluster(admin_client: AdminClient) -> Iterator[Fixture]:
    """Two nodes of a pool of our own, a pod running on the first, two pending pods."""
    suffix = uuid.uuid4().hex[:6]
    ns, pool = f"sim-e2e-{suffix}", f"pool-{suffix}"
    nodes = [f"sim-{suffix}-a", f"sim-{suffix}-b"]
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": ns}}).expect(201)
    admin_client.post(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {"metadata": {"name": f"sim-{suffix}"}, "value": 50},
    ).expect(201)
    for name, cpu in zip(nodes, ("4", "2"), strict=True):
        body = _node(name, pool, cpu)
        created = admin_client.post("/api/v1/nodes", body).expect(201).json()
        created["status"] = {**created.get("status", {}), **body["status"]}
        admin_client.put(f"/api/v1/nodes/{name}/status", created).expect(200)
    admin_client.post(
        f"/api/v1/namespaces/{ns}/pods", _pod("running", ns, pool, "3", node=nodes[0])
    ).expect(201)
    admin_client.post(f"/api/v1/namespaces/{ns}/pods", _pod("pending-1", ns, pool, "1")).expect(201)
    admin_client.post(
        f"/api/v1/namespaces/{ns}/pods",
        _pod("pending-2", ns, pool, "2", priorityClassName=f"sim-{suffix}"),
    ).expect(201)
    yield Fixture(ns, pool, nodes)
    for name in ("running", "pending-1", "pending-2"):
        admin_client.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"}
        )
    for name in nodes:
        admin_client.delete(f"/api/v1/nodes/{name}")
    admin_client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/sim-{suffix}")
    admin_client.delete(f"/api/v1/namespaces/{ns}")


def _state(admin_client: AdminClient, fx: Fixture) -> dict[str, Any]:
    """What simulate must not change: our objects' resourceVersions and nodeNames, and events."""
    pods = admin_client.get(f"/api/v1/namespaces/{fx.ns}/pods").expect(200).json()["items"]
    events = admin_client.get(f"/api/v1/namespaces/{fx.ns}/events").expect(200).json()["items"]
    nodes = {
        n: admin_client.get(f"/api/v1/nodes/{n}").expect(200).json()["metadata"]["resourceVersion"]
        for n in fx.nodes
    }
    return {
        "pods": {
            p["metadata"]["name"]: (p["metadata"]["resourceVersion"], p["spec"].get("nodeName"))
            for p in pods
        },
        "nodes": nodes,
        "events": len(events),
    }


def _ours(doc: dict[str, Any], ns: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in doc["pods"] if p["namespace"] == ns}


def test_pending_pods_of_the_cluster(
    control_plane: ClusterInfo, admin_client: AdminClient, small_cluster: Fixture
) -> None:
    before = _state(admin_client, small_cluster)
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--from-cluster",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "-o",
            "json",
            "--seed",
            "1",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    pods = _ours(json.loads(result.stdout), small_cluster.ns)
    a, b = small_cluster.nodes
    # pending-2 has the higher priority: it goes first and takes b (a has 1 CPU left);
    # pending-1 then fits only on a.
    assert list(pods) == ["pending-2", "pending-1"]
    assert pods["pending-2"]["node"] == b
    assert pods["pending-1"]["node"] == a
    assert "running" not in pods
    assert _state(admin_client, small_cluster) == before


def test_files_on_top_of_the_cluster(
    control_plane: ClusterInfo,
    admin_client: AdminClient,
    small_cluster: Fixture,
    tmp_path: Path,
) -> None:
    manifests = tmp_path / "new.yaml"
    manifests.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [
                    _pod("new-big", small_cluster.ns, small_cluster.pool, "2"),
                    _pod("new-huge", small_cluster.ns, small_cluster.pool, "3"),
                ],
            }
        )
    )
    before = _state(admin_client, small_cluster)
    result = CliRunner().invoke(
        main,
        [
            "simulate",
            "--from-cluster",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "-f",
            str(manifests),
            "-o",
            "json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    pods = _ours(json.loads(result.stdout), small_cluster.ns)
    # Only the files' pods are simulated; the cluster's pending pods are not.
    assert list(pods) == ["new-big", "new-huge"]
    assert pods["new-big"]["node"] == small_cluster.nodes[1]
    assert pods["new-huge"]["node"] is None
    assert pods["new-huge"]["message"].startswith("0/")
    assert _state(admin_client, small_cluster) == before


def test_only_list_calls(
    control_plane: ClusterInfo, small_cluster: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str]] = []
    original = APIClient.request

    async def spy(self: APIClient, method: str, path: str, **kwargs: Any) -> bytes:
        calls.append((method, path))
        return await original(self, method, path, **kwargs)

    monkeypatch.setattr(APIClient, "request", spy)
    inputs = load([], from_cluster=True, kubeconfig=str(control_plane.kubeconfig))
    assert {m for m, _ in calls} == {"GET"}
    paths = {p for _, p in calls}
    assert "/api/v1/nodes" in paths
    assert "/api/v1/pods" in paths
    assert "/apis/scheduling.k8s.io/v1/priorityclasses" in paths
    names = {n.metadata.name for n in inputs.nodes}
    assert set(small_cluster.nodes) <= names
    ours = {p.metadata.name: p for p in inputs.pods if p.metadata.namespace == small_cluster.ns}
    assert set(ours) == {"running", "pending-1", "pending-2"}
    assert ours["pending-2"].spec.priority == 50
    assert small_cluster.ns in inputs.objects.namespaces
