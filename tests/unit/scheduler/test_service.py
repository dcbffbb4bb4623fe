"""What ``kubesched run``'s service does before its first cycle."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.config import load_config_from_dict
from kubesched.plugins import default_registry
from kubesched.plugins.dynamic_resources import DynamicResources
from kubesched.scheduler import SchedulerService
from unit.kube.kube_fakes import FakeAPI, close_servers, eventually, make_client, pod


async def test_every_profile_is_prepared_while_the_pods_list_is_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not when the service is built (its lists would wait on it), and before any pod is
    handed to the scheduler (its first cycle would)."""
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "leaderElection": {"leaderElect": False},
        }
    )
    # Every path lists one pod (a storage kind's list of a pod is skipped as undecodable).
    client = make_client(FakeAPI(objects=[pod("p", "5")]))
    prepared: list[tuple[str, bool]] = []
    service = SchedulerService(config, client, default_registry(), health_port=0)
    monkeypatch.setattr(
        DynamicResources,
        "prepare",
        lambda self: prepared.append((self.handle.profile_name, service.pods.has_synced)),
    )
    try:
        async with client:
            running = asyncio.create_task(service.run())
            await eventually(lambda: service.pods.has_synced)
            service.stop()
            assert await running == 0
    finally:
        close_servers()
    assert prepared == [("default-scheduler", False)]
    assert len(service.pods.store) == 1
