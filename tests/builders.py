"""Small builders for Nodes and Pods in tests (the API's own structs, filled in briefly)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from kubesched.api import Node, Pod

_uids = itertools.count(1)


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    images: Sequence[tuple[Sequence[str], int]] = (),
    extra: Mapping[str, str] | None = None,
) -> Node:
    """A Ready node with allocatable = capacity."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return msgspec.convert(
        {
            "metadata": {"name": name, "uid": f"node-{name}", "labels": dict(labels or {})},
            "spec": {"unschedulable": unschedulable, "taints": [dict(t) for t in taints]},
            "status": {
                "capacity": allocatable,
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": [{"names": list(n), "sizeBytes": size} for n, size in images],
            },
        },
        Node,
    )


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str = "registry.k8s.io/pause:3.10",
    spec: Mapping[str, Any] | None = None,
    priority: int | None = None,
) -> Pod:
    """A pod with one container; ``spec`` entries are merged into the pod's spec as JSON."""
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    raw_spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": requests}}],
        "nodeName": node_name,
    }
    if priority is not None:
        raw_spec["priority"] = priority
    raw_spec.update(spec or {})
    return msgspec.convert(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": f"uid-{next(_uids)}",
                "labels": dict(labels or {}),
                "annotations": dict(annotations or {}),
            },
            "spec": raw_spec,
        },
        Pod,
    )
