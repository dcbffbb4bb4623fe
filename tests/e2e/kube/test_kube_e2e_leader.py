"""Leader election between two candidates on a real Lease."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kube_e2e import eventually

from kubesched.kube import APIClient, LeaderElector, api_path

pytestmark = pytest.mark.e2e


def _elector(
    client: APIClient, namespace: str, name: str, identity: str, **kwargs: Any
) -> LeaderElector:
    return LeaderElector(
        client,
        namespace=namespace,
        name=name,
        identity=identity,
        lease_duration=3.0,
        renew_deadline=2.0,
        retry_period=0.5,
        **kwargs,
    )


async def _lease(client: APIClient, namespace: str, name: str) -> dict[str, Any]:
    path = api_path(
        "leases", group_version="coordination.k8s.io/v1", namespace=namespace, name=name
    )
    spec: dict[str, Any] = json.loads(await client.get(path))["spec"]
    return spec


async def test_one_leader_then_takeover(kubeconfig: Path, namespace: str) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    log: list[str] = []
    async with APIClient.from_kubeconfig(kubeconfig) as client:

        def elector(identity: str) -> LeaderElector:
            return _elector(
                client,
                namespace,
                name,
                identity,
                on_started_leading=lambda: log.append(f"{identity} started"),
                on_stopped_leading=lambda: log.append(f"{identity} stopped"),
            )

        a, b = elector("a"), elector("b")
        task_a = asyncio.create_task(a.run())
        await eventually(lambda: a.is_leader)
        task_b = asyncio.create_task(b.run())
        try:
            await eventually(lambda: b.leader == "a")
            # b keeps observing a renewing and stays a follower.
            await asyncio.sleep(4.0)
            assert a.is_leader
            assert not b.is_leader
            spec = await _lease(client, namespace, name)
            assert spec["holderIdentity"] == "a"
            assert spec["leaseDurationSeconds"] == 3
            assert spec["leaseTransitions"] == 0
            # a dies without releasing: b takes over once the lease expires by b's clock.
            task_a.cancel()
            stopped_at = time.monotonic()
            with pytest.raises(asyncio.CancelledError):
                await task_a
            await eventually(lambda: b.is_leader, within=10)
            takeover = time.monotonic() - stopped_at
            spec = await _lease(client, namespace, name)
        finally:
            task_b.cancel()
            await asyncio.gather(task_b, return_exceptions=True)
    assert spec["holderIdentity"] == "b"
    assert spec["leaseTransitions"] == 1
    assert spec["acquireTime"] <= spec["renewTime"]
    # Not before the lease duration, and within duration + a couple of retry periods.
    assert 2.0 <= takeover <= 6.0
    assert log == ["a started", "a stopped", "b started", "b stopped"]


async def test_release_on_cancel_hands_over_at_once(kubeconfig: Path, namespace: str) -> None:
    name = f"lease-{uuid.uuid4().hex[:6]}"
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        a = _elector(client, namespace, name, "a", release_on_cancel=True)
        b = _elector(client, namespace, name, "b")
        task_a = asyncio.create_task(a.run())
        await eventually(lambda: a.is_leader)
        task_b = asyncio.create_task(b.run())
        try:
            await eventually(lambda: b.leader == "a")
            task_a.cancel()
            await asyncio.gather(task_a, return_exceptions=True)
            released_at = time.monotonic()
            assert (await _lease(client, namespace, name))["holderIdentity"] == ""
            await eventually(lambda: b.is_leader, within=10)
            handover = time.monotonic() - released_at
        finally:
            task_b.cancel()
            await asyncio.gather(task_b, return_exceptions=True)
    # b sees the released record change and takes it on its next try (lease duration 1 s).
    assert handover < 3.0
