"""Node Feature Discovery in the test control plane: its CRDs and a real nfd-master.

``install_nfd_crds(admin_client)`` applies NFD's ``NodeFeature``, ``NodeFeatureGroup`` and
``NodeFeatureRule`` CRDs exactly as NFD ships them (``deployment/base/nfd-crds/nfd-api-crds.yaml``
in the module ``sigs.k8s.io/node-feature-discovery``) and waits until the apiserver serves them.
It uses server-side apply, so calling it again (another test module, a reused cluster) is a no-op.

The ``nfd_master`` fixture (``nfd_master_fixture``, which the image-compatibility tests'
conftest imports: import it in one conftest only, a second copy would start a second one) runs
nfd-master, built from ``hack/nfd`` at the version pinned there, against the test apiserver for
the whole session: it evaluates ``NodeFeatureGroup`` objects in :data:`NFD_NAMESPACE` over the
``NodeFeature`` objects of existing Nodes and writes ``status.nodes``. It runs as a component of
the cluster (so ``kubesched cluster down`` stops it too), its log in :attr:`NfdMaster.log`.

nfd-master takes a port for its health and metrics server but no address, so it would listen on
every interface. It runs in a network namespace of its own with only a loopback interface
(tests/netns.py): there it reaches the apiserver at the same 127.0.0.1 address, and its port is
published on the host's 127.0.0.1 (:attr:`NfdMaster.port`), where the readiness probe asks.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from kubesched import cluster
from kubesched.cluster import NFD_MASTER, ClusterInfo
from kubesched.cluster._gotools import pinned
from netns import isolated

if TYPE_CHECKING:
    from conftest import AdminClient

NFD_MODULE = NFD_MASTER.module
#: The version ``hack/nfd/go.mod`` pins: the CRDs and nfd-master always come from the same one.
NFD_VERSION = pinned(NFD_MASTER).version
#: Where nfd-master evaluates NodeFeatureGroups (it reads and writes them only in its own one).
NFD_NAMESPACE = "node-feature-discovery"
NFD_GROUP = "nfd.k8s-sigs.io"
NFD_API_VERSION = "v1alpha1"
#: The CRD manifest inside the module.
CRDS_PATH = "deployment/base/nfd-crds/nfd-api-crds.yaml"

_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_FIELD_MANAGER = "kubesched-e2e"
_ESTABLISH_TIMEOUT = 60.0


def nfd_module_dir(version: str = NFD_VERSION) -> Path:
    """The NFD module's source directory in the Go module cache (downloaded if missing)."""
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{NFD_MODULE}@{version}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"cannot run `go mod download {NFD_MODULE}@{version}`: {err}") from err
    try:
        info = json.loads(done.stdout)
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir", "")
    if done.returncode != 0 or not directory:
        raise RuntimeError(
            f"`go mod download -json {NFD_MODULE}@{version}` failed "
            f"(exit {done.returncode}): {info.get('Error') or done.stderr.strip()}"
        )
    return Path(directory)


def nfd_crds(version: str = NFD_VERSION) -> list[dict[str, Any]]:
    """NFD's CustomResourceDefinition objects, parsed from the module's manifest."""
    path = nfd_module_dir(version) / CRDS_PATH
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    crds = [doc for doc in documents if doc.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise RuntimeError(f"{path} holds no CustomResourceDefinition")
    return crds


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_nfd_crds(admin_client: AdminClient, version: str = NFD_VERSION) -> None:
    """Apply NFD's CRDs and wait until each is Established and its resource is served."""
    crds = nfd_crds(version)
    for crd in crds:
        name = crd["metadata"]["name"]
        admin_client.request(
            "PATCH",
            f"{_CRDS}/{name}",
            crd,
            content_type="application/apply-patch+yaml",
            params={"fieldManager": _FIELD_MANAGER, "force": "true"},
        ).expect(200, 201)
    deadline = time.monotonic() + _ESTABLISH_TIMEOUT
    for crd in crds:
        name = crd["metadata"]["name"]
        group = crd["spec"]["group"]
        plural = crd["spec"]["names"]["plural"]
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        while True:
            current = admin_client.get(f"{_CRDS}/{name}")
            # Established says the CRD is accepted; a LIST proves the handler is in place too.
            if (
                current.status == 200
                and _established(current.json())
                and all(
                    admin_client.get(f"/apis/{group}/{v}/{plural}", limit="1").status == 200
                    for v in served
                )
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"CRD {name} not established and served after {_ESTABLISH_TIMEOUT:.0f}s: "
                    f"HTTP {current.status} {current.body[:500]!r}"
                )
            time.sleep(0.2)


@dataclass(frozen=True)
class NfdMaster:
    """A running nfd-master: ``argv`` runs it in its own network namespace, ``port`` is its
    health and metrics port, published on the host's 127.0.0.1."""

    namespace: str
    binary: Path
    argv: tuple[str, ...]
    log: Path
    port: int | None

    def log_tail(self, lines: int = 60) -> str:
        """The end of its log, for failure messages."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as err:
            return f"(no log: {err})"


def nfd_master_argv(binary: Path, kubeconfig: Path, namespace: str, port: int) -> list[str]:
    """How nfd-master runs with no cluster around it: no Pod, no Node of its own, no peers.

    nfd-master reads its namespace from ``KUBERNETES_NAMESPACE`` (the service account's file
    otherwise). ``-no-publish`` keeps it from labelling Nodes, and from looking up the Node it
    would run on at start-up. Leader election is off by default (``-enable-leader-election``);
    nfd-master v0.19 serves no webhook and no gRPC. ``-config=`` skips the config file. The
    NodeFeatureGroup API is alpha, off by default.
    """
    return [
        "/usr/bin/env",
        f"KUBERNETES_NAMESPACE={namespace}",
        str(binary),
        f"-kubeconfig={kubeconfig}",
        "-config=",
        "-no-publish",
        "-feature-gates=NodeFeatureGroupAPI=true",
        f"-port={port}",
        "-v=2",
    ]


def start_nfd_master(
    control_plane: ClusterInfo,
    admin_client: AdminClient,
    *,
    namespace: str = NFD_NAMESPACE,
    name: str = "nfd-master",
) -> NfdMaster:
    """Install the CRDs, create ``namespace`` and start nfd-master (ready once /healthz is 200).

    It runs with the admin kubeconfig as it is (inside the namespace the apiserver answers at
    the same 127.0.0.1 address, which its serving certificate names): its RBAC (nodes,
    nodefeatures, nodefeaturegroups/status, leases) is that of the Helm chart's ClusterRole,
    which the test apiserver does not have.
    """
    binary = cluster.ensure_tool(NFD_MASTER)
    install_nfd_crds(admin_client)
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": namespace}}).expect(201, 409)
    argv: list[str] = []

    def argv_for(port: int) -> list[str]:
        argv[:] = isolated(
            nfd_master_argv(binary, control_plane.kubeconfig, namespace, port),
            reach=[control_plane.apiserver_port],
            publish=[port],
        )
        return argv

    # One left running by an interrupted session on a reused cluster would hold the name.
    cluster.stop_component(name, cluster=control_plane.name)
    component = cluster.start_component(
        name,
        argv_for,
        cluster=control_plane.name,
        health_path="/healthz",
        health_scheme="http",
    )
    return NfdMaster(namespace, binary, tuple(argv), component.log, component.port)


@pytest.fixture(scope="session", name="nfd_master")
def nfd_master_fixture(
    control_plane: ClusterInfo, admin_client: AdminClient
) -> Iterator[NfdMaster]:
    """nfd-master for the session, stopped at teardown."""
    master = start_nfd_master(control_plane, admin_client)
    try:
        yield master
    finally:
        cluster.stop_component("nfd-master", cluster=control_plane.name)
