"""bind() against the real kube-apiserver, including the UID precondition and many in flight."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from kube_e2e import node_manifest, pod_manifest

from kubesched.api import ObjectList, Pod
from kubesched.kube import APIClient, Conflict, NotFound, api_path, bind

if TYPE_CHECKING:
    from conftest import AdminClient

pytestmark = pytest.mark.e2e


@pytest.fixture
def node(admin_client: AdminClient) -> Iterator[str]:
    name = f"kube-e2e-node-{uuid.uuid4().hex[:6]}"
    admin_client.post("/api/v1/nodes", node_manifest(name)).expect(201)
    yield name
    admin_client.delete(f"/api/v1/nodes/{name}")


async def test_bind(kubeconfig: Path, namespace: str, node: str) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pod = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("p", namespace), type=Pod
        )
        await bind(client, namespace, "p", pod.metadata.uid, node)
        bound = await client.get(api_path("pods", namespace=namespace, name="p"), type=Pod)
    assert bound.spec.node_name == node
    conditions = {c.type: c.status for c in bound.status.conditions}
    assert conditions.get("PodScheduled") == "True"


async def test_bind_with_wrong_uid_is_a_conflict(
    kubeconfig: Path, namespace: str, node: str
) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        await client.post(api_path("pods", namespace=namespace), pod_manifest("p", namespace))
        with pytest.raises(Conflict) as conflict:
            await bind(client, namespace, "p", "00000000-0000-0000-0000-000000000000", node)
        assert conflict.value.status == 409
        assert "UID" in conflict.value.message
        assert not conflict.value.retryable
        unbound = await client.get(api_path("pods", namespace=namespace, name="p"), type=Pod)
        assert unbound.spec.node_name == ""


async def test_bind_twice_and_bind_missing(kubeconfig: Path, namespace: str, node: str) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pod = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("p", namespace), type=Pod
        )
        await bind(client, namespace, "p", pod.metadata.uid, node)
        with pytest.raises(Conflict, match="already assigned"):
            await bind(client, namespace, "p", pod.metadata.uid, "elsewhere")
        with pytest.raises(NotFound):
            await bind(client, namespace, "ghost", "", node)


async def test_many_binds_in_flight(kubeconfig: Path, namespace: str, node: str) -> None:
    count = 200
    async with APIClient.from_kubeconfig(kubeconfig, qps=0) as client:
        pods_path = api_path("pods", namespace=namespace)
        created = await asyncio.gather(
            *(
                client.post(pods_path, pod_manifest(f"p{i}", namespace), type=Pod)
                for i in range(count)
            )
        )
        start = time.monotonic()
        await asyncio.gather(
            *(bind(client, namespace, p.metadata.name, p.metadata.uid, node) for p in created)
        )
        elapsed = time.monotonic() - start
        listed = await client.list(pods_path, type=ObjectList[Pod])
    assert all(p.spec.node_name == node for p in listed.items)
    assert len(listed.items) == count
    print(f"{count} binds in {elapsed:.2f}s: {count / elapsed:.0f}/s")
