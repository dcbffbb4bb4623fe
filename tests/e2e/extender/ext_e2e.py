"""Helpers for the extender's end-to-end tests: the real ``kubesched extender`` process, the real
kube-scheduler configured with extenders, and nodes and pods that only these tests use."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from kubesched import cluster
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

#: Every node and pod of these tests carries it, so leftovers can be found.
OWNER_LABEL = "kubesched.io/e2e"
OWNER = "extender"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], Any], within: float, what: str, step: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``within`` seconds."""
    deadline = time.monotonic() + within
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g}s waiting for {what}")
        time.sleep(step)


class Extender:
    """``kubesched extender`` as a subprocess on a free loopback port."""

    def __init__(self, args: Sequence[str], log: Path, *, env: dict[str, str] | None = None):
        self.port = free_port()
        self.log = log
        self.args = list(args)
        self._handle = log.open("wb")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from kubesched.cli import main; main()",
                "extender",
                *args,
                "--bind-address=127.0.0.1",
                f"--port={self.port}",
            ],
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, "LOG_LEVEL": "DEBUG", **(env or {})},
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self, within: float = 30.0, scheme: str = "http", context: Any = None) -> None:
        url = f"{scheme}://127.0.0.1:{self.port}/readyz"

        def ready() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"extender exited:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(url, timeout=2, context=context) as r:
                    return bool(r.status == 200)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_for(ready, within, f"the extender at {url}")

    def call(self, verb: str, body: Any) -> Any:
        """POST ``body`` (as JSON) to ``verb`` as kube-scheduler would; the decoded answer."""
        request = urllib.request.Request(
            f"{self.url}/{verb}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as r:
            return json.loads(r.read())

    def answers(self, verb: str) -> list[Any]:
        """Every 200 answer to ``verb`` so far, decoded from the log (``LOG_LEVEL=TRACE`` logs
        each answer's first 4 KiB as a bytes literal)."""
        pattern = re.compile(rf"TRACE \S+: POST /{re.escape(verb)} -> 200 in \S+: (b'.*')$")
        return [
            json.loads(ast.literal_eval(m.group(1)))
            for line in self.log.read_text(errors="replace").splitlines()
            if (m := pattern.search(line))
        ]

    def metric(self, name: str, **labels: str) -> float:
        """The value of one sample of ``/metrics`` (0 when absent)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as r:
            text = r.read().decode()
        for line in text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            if all(f'{k}="{v}"' in line for k, v in labels.items()):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._handle.close()


class KubeScheduler:
    """The real kube-scheduler on the session's cluster with a given configuration."""

    def __init__(self, control_plane: ClusterInfo, document: dict[str, Any], directory: Path):
        self.name = f"ks-ext-{uuid.uuid4().hex[:6]}"
        self.cluster = control_plane.name
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        self.info = cluster.start_kube_scheduler(path, cluster=self.cluster, name=self.name)

    def log(self) -> str:
        return self.info.log.read_text(errors="replace")

    def stop(self) -> None:
        cluster.stop_component(self.name, cluster=self.cluster)


def scheduler_kubeconfig(control_plane: ClusterInfo) -> str:
    """kube-scheduler's own identity: the extender needs no more rights than it."""
    return str(control_plane.client_kubeconfig("system:kube-scheduler"))


def scheduler_config(profile: str, extenders: list[dict[str, Any]]) -> dict[str, Any]:
    """kube-scheduler's default plugins under ``profile``, with ``extenders``; no leader
    election (every test runs a scheduler of its own)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": profile}],
        "extenders": extenders,
    }


class World:
    """Nodes and pods of one test: labelled with its run id and tainted, so that only its pods
    (which select and tolerate them) land there, whatever else shares the cluster."""

    def __init__(self, client: AdminClient, namespace: str, profile: str):
        self.client = client
        self.namespace = namespace
        self.profile = profile
        self.run = uuid.uuid4().hex[:8]
        self.nodes: list[str] = []

    def node(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
        pods: str = "110",
        cpu: str = "4",
    ) -> str:
        full = f"ext-{self.run}-{name}"
        allocatable = {"cpu": cpu, "memory": "8Gi", "pods": pods}
        manifest = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": full,
                "annotations": annotations or {},
                "labels": {
                    "kubernetes.io/hostname": full,
                    OWNER_LABEL: OWNER,
                    "ext-run": self.run,
                    **(labels or {}),
                },
            },
            "spec": {"taints": [{"key": "ext-run", "value": self.run, "effect": "NoSchedule"}]},
            "status": {
                "capacity": allocatable,
                "allocatable": allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": "2025-01-01T00:00:00Z",
                        "lastTransitionTime": "2025-01-01T00:00:00Z",
                    }
                ],
            },
        }
        self.client.post("/api/v1/nodes", manifest).expect(201)
        self.nodes.append(full)
        return full

    def annotate_node(self, name: str, annotations: dict[str, str]) -> None:
        body = {"metadata": {"annotations": annotations}}
        self.client.patch(f"/api/v1/nodes/{name}", body).expect(200)

    def pod(self, name: str, **options: Any) -> str:
        """Create the pod :meth:`pod_manifest` describes."""
        manifest = self.pod_manifest(name, **options)
        self.client.post(f"/api/v1/namespaces/{self.namespace}/pods", manifest).expect(201)
        return name

    def pod_manifest(
        self,
        name: str,
        *,
        annotations: dict[str, str] | None = None,
        priority_class: str | None = None,
        cpu: str = "100m",
        **spec: Any,
    ) -> dict[str, Any]:
        """The pod :meth:`pod` creates: selecting and tolerating this test's nodes only."""
        manifest: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {OWNER_LABEL: OWNER},
                "annotations": annotations or {},
            },
            "spec": {
                "schedulerName": self.profile,
                "nodeSelector": {"ext-run": self.run},
                "tolerations": [
                    {
                        "key": "ext-run",
                        "operator": "Equal",
                        "value": self.run,
                        "effect": "NoSchedule",
                    }
                ],
                "containers": [
                    {
                        "name": "app",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                    }
                ],
                **spec,
            },
        }
        if priority_class:
            manifest["spec"]["priorityClassName"] = priority_class
        return manifest

    def get_pod(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = (
            self.client.get(f"/api/v1/namespaces/{self.namespace}/pods/{name}").expect(200).json()
        )
        return data

    def wait_bound(self, name: str, within: float = 30.0) -> str:
        node: str = wait_for(
            lambda: self.get_pod(name)["spec"].get("nodeName"), within, f"pod {name} bound"
        )
        return node

    def scheduled_condition(self, name: str) -> dict[str, Any] | None:
        for c in self.get_pod(name).get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled":
                return dict(c)
        return None

    def wait_unschedulable(self, name: str, within: float = 30.0) -> str:
        """The message of the pod's ``PodScheduled=False`` condition once it has one."""

        def failed() -> str:
            c = self.scheduled_condition(name)
            return c["message"] if c and c["status"] == "False" and c.get("message") else ""

        message: str = wait_for(failed, within, f"pod {name} to be found unschedulable")
        return message

    def events(self, name: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = (
            self.client.get(
                f"/api/v1/namespaces/{self.namespace}/events",
                fieldSelector=f"involvedObject.name={name}",
            )
            .expect(200)
            .json()["items"]
        )
        return items

    def delete_all(self) -> None:
        pods = self.client.get(
            f"/api/v1/namespaces/{self.namespace}/pods", labelSelector=f"{OWNER_LABEL}={OWNER}"
        ).json()
        for pod in pods.get("items", []):
            path = f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}"
            with contextlib.suppress(Exception):
                self.client.request("DELETE", path, params={"gracePeriodSeconds": "0"})
        for node in self.nodes:
            with contextlib.suppress(Exception):
                self.client.delete(f"/api/v1/nodes/{node}")


def dump(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True)


@contextlib.contextmanager
def stopping(*things: Extender | KubeScheduler) -> Iterator[None]:
    try:
        yield
    finally:
        for thing in things:
            thing.stop()
