"""deploy/base on the real apiserver: the manifests are accepted, and its RBAC is enough.

The RBAC test runs ``kubesched run`` as the Deployment would: as the service account
``kubesched-system:kubesched`` (a client certificate minted for that identity and its groups),
with the configuration from the generated ConfigMap, leader election on.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from sched_e2e import (
    NOT_HELPFUL,
    REPO,
    condition,
    create_pod,
    events_about,
    eventually,
    fit_error,
    get_pod,
    list_events,
    node_manifest,
    occurrences,
    pod_manifest,
)

from kubesched import cluster
from kubesched.cluster import ClusterInfo
from kubesched.config import load_config

if TYPE_CHECKING:
    from sched_e2e import Client, MakeNodes, StartScheduler

BASE = REPO / "deploy" / "base"
CRDS = REPO / "deploy" / "crds"
NAMESPACE = "kubesched-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:kubesched"
SA_GROUPS = (
    "system:serviceaccounts",
    f"system:serviceaccounts:{NAMESPACE}",
    "system:authenticated",
)
RBAC_KINDS = {
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
}

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(control_plane: ClusterInfo) -> Kubectl:
    """kubectl as the cluster admin (unless ``--kubeconfig`` is given again)."""
    binary = str(cluster.ensure_binaries().kubectl)

    def run(
        *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [binary, f"--kubeconfig={control_plane.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if check and done.returncode != 0:
            pytest.fail(f"kubectl {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done

    return run


@pytest.fixture(scope="module")
def rendered(kubectl: Kubectl) -> list[dict[str, Any]]:
    """deploy/base as kustomize renders it."""
    out = kubectl("kustomize", str(BASE)).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


@pytest.fixture(scope="module")
def rbac_applied(kubectl: Kubectl, rendered: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """deploy/base's namespace, service account, roles and bindings, applied for real, and the
    CRDs of deploy/crds (kubectl resolves a custom resource's group through them)."""
    objects = [d for d in rendered if d["kind"] in RBAC_KINDS]
    kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))
    kubectl("apply", "-f", str(CRDS))
    return objects


def test_base_is_accepted_by_the_apiserver(
    kubectl: Kubectl, rbac_applied: list[dict[str, Any]], admin_client: Client
) -> None:
    """Every object passes the apiserver's validation and admission (strict field checks)."""
    done = kubectl("apply", "--dry-run=server", "--validate=strict", "-k", str(BASE))

    lines = done.stdout.splitlines()
    assert len(lines) == 8, done.stdout
    assert all("(server dry run)" in line for line in lines), done.stdout
    assert any(line.startswith("deployment.apps/kubesched ") for line in lines)
    assert any(line.startswith("configmap/kubesched-config-") for line in lines)
    # A dry run: nothing of it was made.
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/kubesched"
    assert admin_client.get(path).status == 404


def test_deployment_runs_two_replicas_with_probes_on_the_health_listener(
    rendered: list[dict[str, Any]],
) -> None:
    deployment = _one(rendered, "Deployment")
    config_map = _one(rendered, "ConfigMap")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    [port] = container["ports"]

    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == "kubesched"
    assert args[0] == "run"
    assert "--bind-address=0.0.0.0" in args
    assert f"--port={port['containerPort']}" in args
    assert container["livenessProbe"]["httpGet"] == {
        "path": "/healthz",
        "port": port["name"],
        "scheme": "HTTP",
    }
    assert container["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": port["name"],
        "scheme": "HTTP",
    }
    [volume] = pod["volumes"]
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    [mount] = container["volumeMounts"]
    assert f"--config={mount['mountPath']}/config.yaml" in args


def test_configmap_holds_a_valid_configuration_for_the_lease_the_role_allows(
    rendered: list[dict[str, Any]], tmp_path: Path
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(_one(rendered, "ConfigMap")["data"]["config.yaml"])
    config = load_config(path)
    role = _one(rendered, "Role")

    assert [p.scheduler_name for p in config.profiles] == ["kubesched"]
    le = config.leader_election
    assert le.leader_elect
    assert le.resource_namespace == NAMESPACE == role["metadata"]["namespace"]
    named = [r for r in role["rules"] if r.get("resourceNames")]
    assert [r["resourceNames"] for r in named] == [[le.resource_name]]


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane: ClusterInfo, rbac_applied: list[dict[str, Any]]) -> Path:
    return control_plane.client_kubeconfig(SERVICE_ACCOUNT, SA_GROUPS)


@pytest.mark.parametrize(
    ("verb", "resource", "namespace", "allowed"),
    [
        ("list", "nodes", None, True),
        ("watch", "nodes", None, True),
        ("list", "pods", None, True),
        ("watch", "pods", None, True),
        ("delete", "pods", "default", True),
        ("list", "poddisruptionbudgets.policy", None, True),
        ("watch", "poddisruptionbudgets.policy", None, True),
        ("watch", "namespaces", None, True),
        ("watch", "services", None, True),
        ("watch", "replicasets.apps", None, True),
        ("watch", "statefulsets.apps", None, True),
        ("watch", "resourceclaims.resource.k8s.io", None, True),
        ("watch", "deviceclasses.resource.k8s.io", None, True),
        ("watch", "resourceslices.resource.k8s.io", None, True),
        ("patch", "resourceclaims.resource.k8s.io", "default", True),
        ("patch", "resourceclaims.resource.k8s.io --subresource=status", "default", True),
        ("create", "pods --subresource=binding", "default", True),
        ("patch", "pods --subresource=status", "default", True),
        ("create", "events.events.k8s.io", "default", True),
        ("patch", "events.events.k8s.io", "default", True),
        ("watch", "podgroups.scheduling.x-k8s.io", None, True),
        ("patch", "podgroups.scheduling.x-k8s.io --subresource=status", "default", True),
        ("create", "leases.coordination.k8s.io", NAMESPACE, True),
        ("get", "leases.coordination.k8s.io/kubesched", NAMESPACE, True),
        ("update", "leases.coordination.k8s.io/kubesched", NAMESPACE, True),
        # Least privilege: nothing beyond what kubesched does.
        ("update", "leases.coordination.k8s.io/kube-scheduler", NAMESPACE, False),
        ("create", "leases.coordination.k8s.io", "kube-system", False),
        ("create", "pods", "default", False),
        ("update", "pods", "default", False),
        ("update", "pods --subresource=status", "default", False),
        ("patch", "nodes", None, False),
        ("update", "podgroups.scheduling.x-k8s.io", "default", False),
        ("get", "secrets", NAMESPACE, False),
        ("list", "configmaps", NAMESPACE, False),
        ("watch", "deployments.apps", None, False),
        ("create", "events", "default", False),
        ("delete", "resourceclaims.resource.k8s.io", "default", False),
        ("patch", "resourceslices.resource.k8s.io", None, False),
    ],
)
def test_service_account_may_do_what_kubesched_does_and_no_more(
    kubectl: Kubectl,
    sa_kubeconfig: Path,
    verb: str,
    resource: str,
    namespace: str | None,
    allowed: bool,
) -> None:
    where = [f"--namespace={namespace}"] if namespace else []
    answer = kubectl(
        f"--kubeconfig={sa_kubeconfig}",
        "auth",
        "can-i",
        verb,
        *resource.split(),
        *where,
        check=False,
    ).stdout.strip()
    assert answer == ("yes" if allowed else "no")


@pytest.fixture
def deployed_config(rendered: list[dict[str, Any]], tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(_one(rendered, "ConfigMap")["data"]["config.yaml"])
    return path


@pytest.mark.usefixtures("only_our_nodes")
def test_kubesched_schedules_with_the_deployed_rbac_and_config(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    sa_kubeconfig: Path,
    deployed_config: Path,
) -> None:
    lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/kubesched"
    make_nodes([node_manifest("rbac-1", cpu="2"), node_manifest("rbac-2", cpu="2")])
    sched = kubesched(deployed_config, kubeconfig=sa_kubeconfig, identity="kubesched-e2e-rbac")
    pods = [pod_manifest(f"fits-{i}", namespace, "kubesched", cpu="500m") for i in range(4)]
    for pod in pods:
        create_pod(admin_client, pod)
    create_pod(admin_client, pod_manifest("too-big", namespace, "kubesched", cpu="3"))

    def scheduled() -> list[dict[str, Any]]:
        return [get_pod(admin_client, namespace, p["metadata"]["name"]) for p in pods]

    eventually(
        scheduled,
        lambda ps: all(p["spec"].get("nodeName") for p in ps),
        timeout=60,
        what="the pods bound",
        watch=sched,
    )
    # A node with room, but tainted: NodeResourcesFit lets the pod try again (a new message,
    # so a new condition). Then changes to that node's allocatable make it try again with the
    # same outcome: those repeats are folded into one event's series (a patch of the event).
    # Events are keyed as client-go keys them (the note is not part of the key, the pod's
    # resourceVersion is), so a retry that runs before the new condition is observed folds into
    # the first event: only a series on the second message proves the folding.
    make_nodes(
        [
            node_manifest(
                "rbac-3",
                cpu="4",
                taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}],
            )
        ]
    )
    first = fit_error(2, {"Insufficient cpu": 2}, {NOT_HELPFUL: 2})
    expected = fit_error(
        3, {"node(s) had untolerated taint(s)": 1, "Insufficient cpu": 2}, {NOT_HELPFUL: 3}
    )
    eventually(
        lambda: condition(get_pod(admin_client, namespace, "too-big"), "PodScheduled") or {},
        lambda c: c.get("message") == expected,
        timeout=30,
        what="the condition of the second failure",
        watch=sched,
    )
    cpus = iter(range(5, 100))

    def failures() -> list[Mapping[str, Any]]:
        node_status = {"status": {"allocatable": {"cpu": str(next(cpus))}}}
        admin_client.patch("/api/v1/nodes/rbac-3/status", node_status).expect(200)
        return events_about(list_events(admin_client, namespace), "too-big", "FailedScheduling")

    events = eventually(
        failures,
        lambda es: any(e["note"] == expected and occurrences(e) >= 2 for e in es),
        timeout=60,
        interval=1.0,
        what="a FailedScheduling event with a series",
        watch=sched,
    )
    eventually(
        lambda: list_events(admin_client, namespace),
        lambda es: all(events_about(es, p["metadata"]["name"], "Scheduled") for p in pods),
        timeout=30,
        what="a Scheduled event for each bound pod",
    )
    too_big = get_pod(admin_client, namespace, "too-big")
    lease = admin_client.get(lease_path).expect(200).json()

    cond = condition(too_big, "PodScheduled")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", expected)
    assert {e["note"] for e in events} >= {first, expected}
    assert lease["spec"]["holderIdentity"] == "kubesched-e2e-rbac"
    assert sched.stop() == 0
    # Released on the way out (an update of the Lease).
    released = admin_client.get(lease_path).expect(200).json()
    assert not released["spec"].get("holderIdentity")
    log = sched.log()
    # An API error reads as the server's message ('pods is forbidden: User ...').
    assert "forbidden" not in log.lower()
    # An HTTP 403 anywhere, but not the milliseconds of a timestamp ("12:00:08,403").
    assert not re.search(r"(?<![\d,])403(?!\d)", log)
