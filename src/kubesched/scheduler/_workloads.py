"""Informers for what plugins read besides nodes and pods: Namespaces and pod-selecting
workloads (Services, ReplicationControllers, ReplicaSets, StatefulSets), fed into the snapshot."""

from __future__ import annotations

from typing import Any

from kubesched.api import (
    Namespace,
    ReplicaSet,
    ReplicationController,
    Service,
    StatefulSet,
    Workload,
    workload_selector,
)
from kubesched.framework import Snapshot
from kubesched.kube import APIClient, Reflector, ResourceEventHandler

_WORKLOADS: tuple[tuple[str, str, type[Workload]], ...] = (
    ("Service", "/api/v1/services", Service),
    ("ReplicationController", "/api/v1/replicationcontrollers", ReplicationController),
    ("ReplicaSet", "/apis/apps/v1/replicasets", ReplicaSet),
    ("StatefulSet", "/apis/apps/v1/statefulsets", StatefulSet),
)


class _Namespaces(ResourceEventHandler[Namespace]):
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def on_add(self, obj: Namespace) -> None:
        self.snapshot.set_namespace(obj.metadata.name, obj.metadata.labels)

    def on_update(self, old: Namespace, new: Namespace) -> None:
        self.on_add(new)

    def on_delete(self, obj: Namespace) -> None:
        self.snapshot.remove_namespace(obj.metadata.name)


class _Workloads(ResourceEventHandler[Workload]):
    def __init__(self, snapshot: Snapshot, kind: str) -> None:
        self.snapshot = snapshot
        self.kind = kind

    def on_add(self, obj: Workload) -> None:
        meta = obj.metadata
        selector = workload_selector(obj)
        if selector is None:
            self.snapshot.remove_workload_selector(self.kind, meta.namespace, meta.name)
        else:
            self.snapshot.set_workload_selector(self.kind, meta.namespace, meta.name, selector)

    def on_update(self, old: Workload, new: Workload) -> None:
        self.on_add(new)

    def on_delete(self, obj: Workload) -> None:
        meta = obj.metadata
        self.snapshot.remove_workload_selector(self.kind, meta.namespace, meta.name)


def context_reflectors(client: APIClient, snapshot: Snapshot) -> list[Reflector[Any]]:
    """Reflectors keeping the snapshot's Namespace labels and workload selectors current."""
    out: list[Reflector[Any]] = [
        Reflector(client, "/api/v1/namespaces", Namespace, _Namespaces(snapshot)),
    ]
    for kind, path, cls in _WORKLOADS:
        out.append(Reflector(client, path, cls, _Workloads(snapshot, kind)))
    return out
