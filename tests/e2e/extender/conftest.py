"""Fixtures for the extender's end-to-end tests: the real kube-scheduler v1.34.4 calling
``kubesched extender`` processes on the session's control plane.

``world`` gives a test its own namespace, tainted nodes and pods (deleted afterwards);
``extender`` and ``kube_scheduler`` start processes that are stopped after the test, with their
logs printed (pytest shows them when the test failed).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from ext_e2e import OWNER, OWNER_LABEL, Extender, KubeScheduler, World

from kubesched.cluster import ClusterInfo


@pytest.fixture(scope="package", autouse=True)
def _no_leftover_nodes(admin_client: Any) -> None:
    """Nodes an interrupted run left behind would take pods of later runs."""
    nodes = admin_client.get("/api/v1/nodes", labelSelector=f"{OWNER_LABEL}={OWNER}").json()
    for node in nodes.get("items", []):
        admin_client.delete(f"/api/v1/nodes/{node['metadata']['name']}")


@pytest.fixture
def world(admin_client: Any) -> Iterator[World]:
    namespace = f"ext-e2e-{uuid.uuid4().hex[:8]}"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": namespace}}).expect(201)
    w = World(admin_client, namespace, profile=f"ext-{uuid.uuid4().hex[:8]}")
    try:
        yield w
    finally:
        w.delete_all()
        admin_client.delete(f"/api/v1/namespaces/{namespace}")


@pytest.fixture
def extender(tmp_path: Path, world: World) -> Iterator[Callable[..., Extender]]:
    started: list[Extender] = []

    def start(args: Sequence[str], *, env: dict[str, str] | None = None) -> Extender:
        e = Extender(args, tmp_path / f"extender-{len(started)}.log", env=env)
        started.append(e)
        return e

    try:
        yield start
    finally:
        for e in started:
            e.stop()
            print(f"--- {e.log.name} ({' '.join(e.args)}):\n{e.log.read_text(errors='replace')}")


@pytest.fixture
def kube_scheduler(
    tmp_path: Path, control_plane: ClusterInfo, world: World
) -> Iterator[Callable[[dict[str, Any]], KubeScheduler]]:
    started: list[KubeScheduler] = []

    def start(document: dict[str, Any]) -> KubeScheduler:
        ks = KubeScheduler(control_plane, document, tmp_path)
        started.append(ks)
        return ks

    try:
        yield start
    finally:
        for ks in started:
            ks.stop()
            lines = ks.log().splitlines()
            print(f"--- {ks.name} (last 60 lines):\n" + "\n".join(lines[-60:]))
