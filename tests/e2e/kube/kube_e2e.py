"""Helpers for the kubesched.kube end-to-end tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def eventually(
    predicate: Callable[[], bool], within: float = 10.0, step: float = 0.02
) -> None:
    """Wait until ``predicate()`` holds, polling; ``TimeoutError`` after ``within`` seconds."""
    for _ in range(int(within / step) + 1):
        if predicate():
            return
        await asyncio.sleep(step)
    raise TimeoutError(f"condition not met within {within}s")


def pod_manifest(
    name: str, namespace: str, *, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A minimal pod that no kubelet will run (no nodes exist unless a test makes one)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "schedulerName": "kubesched-e2e-nobody",
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            **spec,
        },
    }


def node_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }
