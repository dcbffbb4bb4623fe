"""Storage in a simulation: the manifests' PVs, PVCs, StorageClasses and CSINodes in the
snapshot's object store, and the writes VolumeBinding makes to them (and DynamicResources to
ResourceClaims).

A write is applied to the stored object at once, as the API server would and as the informer
would then report it. A claim VolumeBinding chose to provision on a node is provisioned right
away, since no provisioner or PV controller runs here: a PV named ``pvc-<claim uid>`` appears,
of the claim's class, requested size and access modes, reachable only from that node
(``kubernetes.io/hostname``, as local and topology-bound storage is), and the two are bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from kubesched.api import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    CLAIM_BOUND,
    RESOURCE_STORAGE,
    VOLUME_BOUND,
    PersistentVolume,
    PersistentVolumeClaim,
    ResourceClaim,
    claim_reference,
    persistent_volume_claim_class,
    workload_selector,
)
from kubesched.framework import Snapshot
from kubesched.kube import Conflict, Invalid, NotFound
from kubesched.simulate._objects import ClusterObjects

T = TypeVar("T", PersistentVolume, PersistentVolumeClaim, ResourceClaim)

HOSTNAME_LABEL = "kubernetes.io/hostname"


def merge_patch(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """RFC 7386 JSON merge patch, in place: ``None`` deletes, objects merge, the rest replaces."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = msgspec.to_builtins(value)


def feed(snapshot: Snapshot, objects: ClusterObjects) -> None:
    """Put the storage objects and PodDisruptionBudgets of the input into the snapshot's store
    (DefaultPreemption reads the budgets there, with their ``status`` as given: a live
    cluster's disruption controller computed it; a budget without one allows no disruption),
    and the workloads' pod selectors into its workload selectors."""
    for kind in (
        objects.storage_classes,
        objects.csi_nodes,
        objects.volume_attachments,
        objects.persistent_volumes,
        objects.persistent_volume_claims,
        objects.pod_disruption_budgets,
    ):
        for obj in kind.values():
            snapshot.objects.set(obj)
    for obj in objects.watched.values():
        snapshot.objects.set(obj)
    for key, workload in objects.workloads.items():
        selector = workload_selector(workload)
        if selector is not None:  # a Service without a selector selects no pod
            meta = workload.metadata
            workload_kind = key.partition("/")[0]
            snapshot.set_workload_selector(workload_kind, meta.namespace, meta.name, selector)


class MemoryStorage:
    """``StorageAPIClient``'s writes, on the snapshot's store."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._version = 0

    def _apply(self, current: T, patch: Mapping[str, Any]) -> T:
        wanted = patch.get("metadata", {}).get("resourceVersion")
        if wanted is not None and wanted != current.metadata.resource_version:
            raise Conflict(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {current.kind} "{current.metadata.name}": '
                "the object has been modified; please apply your changes to the latest version "
                "and try again",
            )
        raw = msgspec.to_builtins(current)
        merge_patch(raw, patch)
        self._version += 1
        raw.setdefault("metadata", {})["resourceVersion"] = f"sim-{self._version}"
        updated = msgspec.convert(raw, type(current))
        self.snapshot.objects.set(updated)
        return updated

    async def patch_persistent_volume(
        self, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolume:
        current = self.snapshot.objects.get(PersistentVolume, name)
        if current is None:
            raise NotFound(404, "NotFound", f'persistentvolumes "{name}" not found')
        return self._apply(current, patch)

    async def patch_persistent_volume_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolumeClaim:
        current = self.snapshot.objects.get(PersistentVolumeClaim, name, namespace)
        if current is None:
            raise NotFound(404, "NotFound", f'persistentvolumeclaims "{name}" not found')
        updated = self._apply(current, patch)
        node = updated.metadata.annotations.get(ANN_SELECTED_NODE)
        if node and not updated.spec.volume_name and not status:
            updated = self._provision(updated, node)
        return updated

    async def patch_resource_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> ResourceClaim:
        return self._apply(self._claim(namespace, name), patch)

    async def get_resource_claim(self, namespace: str, name: str) -> ResourceClaim:
        return self._claim(namespace, name)

    def _claim(self, namespace: str, name: str) -> ResourceClaim:
        current = self.snapshot.objects.get(ResourceClaim, name, namespace)
        if current is None:
            raise NotFound(404, "NotFound", f'resourceclaims.resource.k8s.io "{name}" not found')
        return current

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> ResourceClaim:
        current = self._claim(namespace, name)
        if current.metadata.uid != claim_uid:
            # As the API server answers a strategic merge patch naming another UID.
            raise Invalid(
                422,
                "Invalid",
                f'ResourceClaim "{name}" is invalid: metadata.uid: Invalid value: '
                f'"{claim_uid}": field is immutable',
            )
        kept = [msgspec.to_builtins(r) for r in current.status.reserved_for if r.uid != pod_uid]
        return self._apply(current, {"status": {"reservedFor": kept or None}})

    @staticmethod
    def is_conflict(error: BaseException) -> bool:
        return isinstance(error, Conflict)

    def _provision(self, pvc: PersistentVolumeClaim, node: str) -> PersistentVolumeClaim:
        """What a provisioner and the PV controller would do for a claim selected for ``node``."""
        info = self.snapshot.get(node)
        hostname = node
        if info is not None and info.node is not None:
            hostname = info.node.metadata.labels.get(HOSTNAME_LABEL, node)
        self._version += 1
        name = f"pvc-{pvc.metadata.uid or pvc.metadata.name}"
        request = pvc.spec.resources.requests.get(RESOURCE_STORAGE, "0")
        pv = msgspec.convert(
            {
                "metadata": {
                    "name": name,
                    "resourceVersion": f"sim-{self._version}",
                    "annotations": {ANN_BOUND_BY_CONTROLLER: "yes"},
                },
                "spec": {
                    "capacity": {RESOURCE_STORAGE: request},
                    "accessModes": list(pvc.spec.access_modes),
                    "storageClassName": persistent_volume_claim_class(pvc),
                    "claimRef": msgspec.to_builtins(claim_reference(pvc)),
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": HOSTNAME_LABEL,
                                            "operator": "In",
                                            "values": [hostname],
                                        }
                                    ]
                                }
                            ]
                        }
                    },
                },
                "status": {"phase": VOLUME_BOUND},
            },
            PersistentVolume,
        )
        self.snapshot.objects.set(pv)
        return self._apply(
            pvc,
            {
                "metadata": {
                    "annotations": {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
                },
                "spec": {"volumeName": name},
                "status": {"phase": CLAIM_BOUND, "capacity": {RESOURCE_STORAGE: request}},
            },
        )
