"""Fixtures for kubesched.kube against the real kube-apiserver of the session's control plane."""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient


@pytest.fixture
def kubeconfig(control_plane: ClusterInfo) -> Path:
    """The cluster admin's kubeconfig."""
    return control_plane.kubeconfig


@pytest.fixture
def namespace(admin_client: AdminClient) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards."""
    name = f"kube-e2e-{uuid.uuid4().hex[:8]}"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
    yield name
    admin_client.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def compact_etcd(control_plane: ClusterInfo) -> Callable[[], int]:
    """Compact etcd's history up to its current revision; returns that revision.

    Watches the API server does not serve from its watch cache (events.k8s.io Events) then
    answer 410 Gone for any older resourceVersion.
    """

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            control_plane.etcd_endpoint + path, data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            result: dict[str, Any] = json.load(response)
        return result

    def compact() -> int:
        revision = int(post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    return compact
