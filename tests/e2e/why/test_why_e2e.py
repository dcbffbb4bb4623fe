"""``kubesched why`` and ``kubesched kubectl`` against a real kube-apiserver."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from kubesched.cli import main
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient


class Fixture:
    def __init__(self, ns: str, pool: str, nodes: dict[str, str]) -> None:
        self.ns = ns
        self.pool = pool
        #: role -> node name: "small" (room for 1 CPU), "tainted", "cordoned".
        self.nodes = nodes


def _pod(name: str, pool: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"e2e-pool": pool},
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
            **spec,
        },
    }


@pytest.fixture
def stuck(admin_client: AdminClient) -> Iterator[Fixture]:
    """Three nodes of a pool of our own, each keeping out the pending pod ``stuck`` (3 CPUs,
    priority 100) another way: one is full of a priority 10 pod, one tainted, one cordoned."""
    suffix = uuid.uuid4().hex[:6]
    ns, pool = f"why-e2e-{suffix}", f"pool-{suffix}"
    nodes = {role: f"why-{suffix}-{role}" for role in ("small", "tainted", "cordoned")}
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": ns}}).expect(201)
    for name, value in ((f"why-{suffix}-low", 10), (f"why-{suffix}-high", 100)):
        admin_client.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"metadata": {"name": name}, "value": value},
        ).expect(201)
    spec: dict[str, dict[str, Any]] = {
        "small": {},
        "tainted": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "cordoned": {"unschedulable": True},
    }
    for role, name in nodes.items():
        allocatable = {"cpu": "4", "memory": "8Gi", "pods": "110"}
        body = {
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/hostname": name, "e2e-pool": pool},
            },
            "spec": spec[role],
            "status": {"capacity": allocatable, "allocatable": allocatable},
        }
        created = admin_client.post("/api/v1/nodes", body).expect(201).json()
        created["status"] = {**created.get("status", {}), **body["status"]}
        admin_client.put(f"/api/v1/nodes/{name}/status", created).expect(200)
    running = _pod(
        "running", pool, "3", nodeName=nodes["small"], priorityClassName=f"why-{suffix}-low"
    )
    admin_client.post(f"/api/v1/namespaces/{ns}/pods", running).expect(201)
    pending = _pod("stuck", pool, "3", priorityClassName=f"why-{suffix}-high")
    # The tainted node is short of CPU too: a toleration alone is no way out.
    admin_client.post(
        f"/api/v1/namespaces/{ns}/pods",
        _pod("filler", pool, "2", nodeName=nodes["tainted"], tolerations=[{"operator": "Exists"}]),
    ).expect(201)
    admin_client.post(f"/api/v1/namespaces/{ns}/pods", pending).expect(201)
    yield Fixture(ns, pool, nodes)
    for name in ("running", "filler", "stuck"):
        admin_client.request(
            "DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", params={"gracePeriodSeconds": "0"}
        )
    for name in nodes.values():
        admin_client.delete(f"/api/v1/nodes/{name}")
    for name in (f"why-{suffix}-low", f"why-{suffix}-high"):
        admin_client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
    admin_client.delete(f"/api/v1/namespaces/{ns}")


def _state(admin_client: AdminClient, fx: Fixture) -> dict[str, Any]:
    """What why must not change: resourceVersions of our pods and nodes, and the events."""
    pods = admin_client.get(f"/api/v1/namespaces/{fx.ns}/pods").expect(200).json()["items"]
    events = admin_client.get(f"/api/v1/namespaces/{fx.ns}/events").expect(200).json()["items"]
    return {
        "pods": {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in pods},
        "nodes": {
            n: admin_client.get(f"/api/v1/nodes/{n}")
            .expect(200)
            .json()["metadata"]["resourceVersion"]
            for n in fx.nodes.values()
        },
        "events": len(events),
    }


def test_why_reads_the_cluster_and_checks_each_way_out(
    control_plane: ClusterInfo, admin_client: AdminClient, stuck: Fixture
) -> None:
    before = _state(admin_client, stuck)
    args = ["why", "stuck", "-n", stuck.ns, "--kubeconfig", str(control_plane.kubeconfig)]
    result = CliRunner().invoke(main, [*args, "-o", "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["reason"] == "Unschedulable"
    small, tainted, cordoned = (stuck.nodes[r] for r in ("small", "tainted", "cordoned"))
    closest = {c["node"]: list(c["blockedBy"]) for c in doc["closest"]}
    assert closest[small] == ["NodeResourcesFit"]
    assert closest[tainted] == ["TaintToleration", "NodeResourcesFit"]
    assert closest[cordoned] == ["NodeUnschedulable"]
    ways = {w["kind"]: w for w in doc["waysOut"]}
    assert set(ways) == {"smallerRequest", "uncordon", "preemption"}
    assert ways["smallerRequest"]["detail"] == {"node": small, "requests": {"cpu": "1"}}
    assert ways["uncordon"]["nodes"] == [cordoned]
    assert ways["preemption"]["detail"] == {
        "node": small,
        "victims": [{"pod": f"{stuck.ns}/running", "priority": 10}],
    }
    table = CliRunner().invoke(main, args, catch_exceptions=False)
    assert table.exit_code == 0, table.stderr
    assert "(priority 10 < 100), then it fits there" in table.stdout
    assert _state(admin_client, stuck) == before


def test_kubectl_passes_through_to_the_built_binary(
    control_plane: ClusterInfo, stuck: Fixture
) -> None:
    kubesched = Path(sys.executable).parent / "kubesched"
    kubectl = [str(kubesched), "kubectl", "--kubeconfig", str(control_plane.kubeconfig)]
    done = subprocess.run(
        [*kubectl, "get", "pods", "-n", stuck.ns, "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    names = sorted(p["metadata"]["name"] for p in json.loads(done.stdout)["items"])
    assert names == ["filler", "running", "stuck"]
    # kubectl's own exit code and stderr come through.
    bad = subprocess.run(
        [*kubectl, "get", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 1
    assert 'the server doesn\'t have a resource type "nope"' in bad.stderr


def test_why_a_pod_of_a_file_on_the_live_cluster(
    control_plane: ClusterInfo, stuck: Fixture, tmp_path: Path
) -> None:
    """Would this new pod fit? The cluster's nodes and running pods, the pod from the file."""
    manifest = tmp_path / "new.json"
    newcomer = _pod("newcomer", stuck.pool, "1")
    newcomer["metadata"]["namespace"] = stuck.ns
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", **newcomer}))
    args = ["why", "newcomer", "-n", stuck.ns, "-f", str(manifest), "--from-cluster"]
    args += ["--kubeconfig", str(control_plane.kubeconfig), "-o", "json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    # The small node has 1 CPU left beside the running pod; the cluster's pending pod is not
    # on it.
    assert (doc["reason"], doc["node"]) == ("Scheduled", stuck.nodes["small"])
