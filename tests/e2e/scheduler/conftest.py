"""Fixtures for the end-to-end tests of ``kubesched run`` on the session's kube-apiserver.

``kubesched`` starts the real command as a subprocess with a given configuration, waits for its
``/readyz`` and stops it after the test; its log is printed at teardown, which pytest shows
when the test failed. ``namespace`` and ``make_nodes`` give each test its own pods and nodes and
delete them afterwards, so tests see only their own nodes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sched_e2e import (
    OWNER,
    OWNER_LABEL,
    Client,
    MakeNodes,
    Runner,
    StartScheduler,
    create_all,
    create_node,
    delete_node,
    delete_pods,
    list_nodes,
)

from kubesched import cluster
from kubesched.cluster import ClusterInfo


@pytest.fixture
def profile() -> str:
    """A profile (schedulerName) of this test's own: other tests' pods are not ours."""
    return f"e2e-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def namespace(admin_client: Client) -> Iterator[str]:
    """A namespace of this test's own; its pods are deleted afterwards."""
    name = f"sched-e2e-{uuid.uuid4().hex[:8]}"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
    try:
        yield name
    finally:
        delete_pods(admin_client, name)
        # Without a controller-manager the namespace stays Terminating: harmless and empty.
        admin_client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture(scope="package", autouse=True)
def _no_leftover_nodes(admin_client: Client) -> None:
    """Nodes an interrupted run of these tests left behind would take pods."""
    for node in list_nodes(admin_client, labelSelector=f"{OWNER_LABEL}={OWNER}"):
        delete_node(admin_client, node["metadata"]["name"])


@pytest.fixture
def make_nodes(admin_client: Client) -> Iterator[MakeNodes]:
    """Create node manifests now; delete them after the test."""
    created: list[str] = []

    def make(manifests: list[dict[str, Any]]) -> None:
        created.extend(m["metadata"]["name"] for m in manifests)
        create_all(admin_client, create_node, manifests)

    try:
        yield make
    finally:
        for name in created:
            delete_node(admin_client, name)


@pytest.fixture
def kubesched(
    tmp_path: Path,
    control_plane: ClusterInfo,
    namespace: str,
    make_nodes: MakeNodes,
) -> Iterator[StartScheduler]:
    """Start ``kubesched run`` (admin kubeconfig unless told otherwise) for this test.

    It depends on ``namespace`` and ``make_nodes`` so that the schedulers stop before the
    test's pods and nodes are deleted.
    """
    runner = Runner(tmp_path / "kubesched", control_plane.kubeconfig)
    try:
        yield runner
    finally:
        runner.close()


@pytest.fixture
def only_our_nodes(admin_client: Client) -> None:
    """Tests that count nodes (``0/N nodes are available``) need a cluster with none yet."""
    others = [n["metadata"]["name"] for n in list_nodes(admin_client)]
    if others:
        pytest.fail(f"the cluster already has nodes this test did not make: {others}")


@pytest.fixture(scope="module")
def dynamics_cluster(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """A control plane of the module's own for the dynamics scenarios, which empty the cluster
    between them."""
    name = f"e2e-{request.module.__name__.rpartition('.')[2]}-{os.getpid()}".replace("_", "-")
    info = cluster.up(name)
    try:
        yield info
    finally:
        cluster.down(name)
