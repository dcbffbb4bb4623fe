"""deploy/extender on the real apiserver and kube-scheduler: the overlay is accepted, its
KubeSchedulerConfiguration is one kube-scheduler v1.34.4 runs with, every agent container
matches an extenders[] entry, and the RBAC it grants is enough for an agent."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pytest
import yaml
from ext_e2e import Extender, World, wait_for

from e2e.nfd import install_nfd_crds
from kubesched import cluster
from kubesched.cluster import ClusterInfo
from kubesched.config import load_config
from kubesched.extender import AGENTS

if TYPE_CHECKING:
    from conftest import AdminClient

OVERLAY = Path(__file__).parents[3] / "deploy" / "extender"
DEPLOYED = set(AGENTS)
NAMESPACE = "kube-system"
SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:kubesched-agents"
SA_GROUPS = ("system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}")
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def kubectl(control_plane: ClusterInfo) -> Kubectl:
    binary = str(cluster.ensure_binaries().kubectl)

    def run(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, f"--kubeconfig={control_plane.kubeconfig}", *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=60,
            check=False,
        )

    return run


@pytest.fixture(scope="module")
def rendered(kubectl: Kubectl) -> list[dict[str, Any]]:
    result = kubectl("kustomize", str(OVERLAY))
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def _scheduler_config(objects: list[dict[str, Any]]) -> str:
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    text: str = config_map["data"]["scheduler-config.yaml"]
    return text


def test_the_overlay_is_accepted_by_the_apiserver(kubectl: Kubectl) -> None:
    result = kubectl("apply", "--dry-run=server", "-k", str(OVERLAY))
    assert result.returncode == 0, result.stderr
    for kind_name in (
        "serviceaccount/kubesched-agents",
        "deployment.apps/kubesched-agents",
        "configmap/kubesched-agents-config-",
        "clusterrolebinding.rbac.authorization.k8s.io/kubesched-agents-as-kube-scheduler",
        "rolebinding.rbac.authorization.k8s.io/kubesched-agents-leader-election",
    ):
        assert kind_name in result.stdout
    assert result.stdout.count("(server dry run)") == 10


def test_kube_scheduler_accepts_the_configuration(
    tmp_path: Path, control_plane: ClusterInfo, rendered: list[dict[str, Any]]
) -> None:
    document = yaml.safe_load(_scheduler_config(rendered))
    document["clientConnection"] = {"kubeconfig": str(control_plane.kubeconfig)}
    config = tmp_path / "scheduler-config.yaml"
    config.write_text(yaml.safe_dump(document))
    written = tmp_path / "written.yaml"
    result = subprocess.run(
        [
            str(cluster.ensure_binaries().kube_scheduler),
            f"--config={config}",
            f"--write-config-to={written}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    effective = yaml.safe_load(written.read_text())
    assert [p["schedulerName"] for p in effective["profiles"]] == ["kubesched-agents"]
    assert len(effective["extenders"]) == len(DEPLOYED)
    # kubesched reads it alike.
    assert len(load_config(config).extenders) == len(DEPLOYED)


def test_every_agent_container_is_an_extenders_entry(rendered: list[dict[str, Any]]) -> None:
    document = yaml.safe_load(_scheduler_config(rendered))
    by_port = {urlsplit(e["urlPrefix"]).port: e for e in document["extenders"]}
    (deployment,) = [o for o in rendered if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    assert containers[0]["image"] == "registry.k8s.io/kube-scheduler:v1.34.4"
    agents = containers[1:]
    assert {c["name"] for c in agents} == DEPLOYED
    for c in agents:
        assert c["image"] == "kubesched:0.1.0"
        # 0.0.0.0 spelled out: the extender listens on 127.0.0.1 by default, and kubelet probes
        # the pod's IP.
        assert c["command"] == [
            "kubesched",
            "extender",
            f"--agents={c['name']}",
            "--bind-address=0.0.0.0",
        ]
        env = {e["name"]: e["value"] for e in c["env"]}
        port = int(env["HTTP_PORT"])
        assert env["LOG_LEVEL"] == "INFO"
        assert [p["containerPort"] for p in c["ports"]] == [port]
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}
        entry = by_port.pop(port)
        assert entry["nodeCacheCapable"] is True
        assert urlsplit(entry["urlPrefix"]).hostname == "127.0.0.1"
    assert by_port == {}
    assert pod["serviceAccountName"] == "kubesched-agents"


@pytest.fixture
def rbac_applied(kubectl: Kubectl, rendered: list[dict[str, Any]]) -> Iterator[None]:
    rbac = [o for o in rendered if o["kind"] in RBAC_KINDS]
    manifest = yaml.safe_dump_all(rbac)
    result = kubectl("apply", "-f", "-", input=manifest)
    assert result.returncode == 0, result.stderr
    try:
        yield
    finally:
        kubectl("delete", "--ignore-not-found", "-f", "-", input=manifest)


def test_an_agent_runs_with_the_rights_the_overlay_grants(
    rbac_applied: None,
    control_plane: ClusterInfo,
    world: World,
    extender: Callable[..., Extender],
) -> None:
    node = world.node("a")
    kubeconfig = control_plane.client_kubeconfig(SERVICE_ACCOUNT, SA_GROUPS)
    ext = extender(["--agents", "annotation-gate", "--kubeconfig", str(kubeconfig)])
    ext.wait_ready()  # nodes and pods listed and watched
    body = json.dumps({"Pod": {"metadata": {"name": "p"}}, "NodeNames": [node]}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{ext.url}/filter", data=body)) as r:
        assert json.loads(r.read())["NodeNames"] == [node]
    name = world.pod(f"bound-by-agent-{uuid.uuid4().hex[:4]}", schedulerName="nobody")
    uid = world.get_pod(name)["metadata"]["uid"]
    binding = {"PodName": name, "PodNamespace": world.namespace, "PodUID": uid, "Node": node}
    request = urllib.request.Request(f"{ext.url}/bind", data=json.dumps(binding).encode())
    with urllib.request.urlopen(request) as r:
        assert json.loads(r.read()) == {"Error": ""}
    assert wait_for(lambda: world.get_pod(name)["spec"].get("nodeName"), 10, "the binding") == node


def test_the_image_compatibility_agent_may_read_node_features_and_pull_secrets(
    rbac_applied: None, kubectl: Kubectl, admin_client: AdminClient
) -> None:
    install_nfd_crds(admin_client)  # for kubectl to know the resource
    for verb, resource in (
        ("list", "nodefeatures.nfd.k8s-sigs.io"),
        ("watch", "nodefeatures.nfd.k8s-sigs.io"),
        ("get", "secrets"),
    ):
        result = kubectl("auth", "can-i", verb, resource, "-A", f"--as={SERVICE_ACCOUNT}")
        assert result.stdout.strip() == "yes", (verb, resource, result.stdout, result.stderr)
    result = kubectl("auth", "can-i", "list", "secrets", "-A", f"--as={SERVICE_ACCOUNT}")
    assert result.stdout.strip() == "no"  # one secret at a time, by name
