"""The cluster objects besides Nodes and Pods that a simulation keeps, typed.

Namespaces and PriorityClasses are used while loading (defaults, priority resolution).
PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, VolumeAttachments,
PodDisruptionBudgets and the dynamic resource allocation kinds (the structs of
:mod:`kubesched.api`) go into the snapshot's object store, where the volume plugins and
preemption read them. The pod selectors of Services, ReplicationControllers, ReplicaSets and
StatefulSets go into the snapshot's workload selectors, where PodTopologySpread
finds the selector of its default constraints. Only the fields those uses read are declared; the
rest of each object is ignored on decode, as in :mod:`kubesched.api`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubesched.api import (
    CSINode,
    DeviceClass,
    ObjectMeta,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    ReplicaSet,
    ReplicationController,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Service,
    StatefulSet,
    StorageClass,
    VolumeAttachment,
    Workload,
)
from kubesched.framework import StoredObject


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True):
    """camelCase on the wire, defaults left out on encode."""


class Namespace(_Obj, kw_only=True):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class PriorityClass(_Obj, kw_only=True):
    """``scheduling.k8s.io/v1`` PriorityClass: ``value`` and ``globalDefault`` are top-level."""

    api_version: str = "scheduling.k8s.io/v1"
    kind: str = "PriorityClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    value: int = 0
    global_default: bool = False
    preemption_policy: str | None = None
    description: str = ""


#: The PriorityClasses every cluster has (``scheduling.SystemPriorityClasses``).
SYSTEM_PRIORITY_CLASSES: dict[str, int] = {
    "system-node-critical": 2000001000,
    "system-cluster-critical": 2000000000,
}


@dataclass
class ClusterObjects:
    """Everything a simulation read besides Nodes and Pods, by name (``namespace/name`` for
    namespaced kinds)."""

    namespaces: dict[str, Namespace] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    persistent_volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    persistent_volume_claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csi_nodes: dict[str, CSINode] = field(default_factory=dict)
    volume_attachments: dict[str, VolumeAttachment] = field(default_factory=dict)
    pod_disruption_budgets: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    #: Services, ReplicationControllers, ReplicaSets and StatefulSets by ``kind/namespace/name``.
    workloads: dict[str, Workload] = field(default_factory=dict)
    #: Objects of the kinds plugins read (``WatchedKind``), by ``kind/namespace/name``.
    watched: dict[str, Any] = field(default_factory=dict)

    def add_watched(self, kind: str, obj: StoredObject) -> None:
        """Keep an object of a kind a plugin reads (a later one of the same name replaces)."""
        meta = obj.metadata
        self.watched[f"{kind}/{meta.namespace}/{meta.name}"] = obj

    def add(self, obj: ClusterObject) -> None:
        """Keep ``obj`` (a later object of the same kind and name replaces an earlier one)."""
        meta = obj.metadata
        if isinstance(obj, Namespace):
            self.namespaces[meta.name] = obj
        elif isinstance(obj, PriorityClass):
            self.priority_classes[meta.name] = obj
        elif isinstance(obj, PersistentVolume):
            self.persistent_volumes[meta.name] = obj
        elif isinstance(obj, PersistentVolumeClaim):
            self.persistent_volume_claims[f"{meta.namespace}/{meta.name}"] = obj
        elif isinstance(obj, StorageClass):
            self.storage_classes[meta.name] = obj
        elif isinstance(obj, CSINode):
            self.csi_nodes[meta.name] = obj
        elif isinstance(obj, VolumeAttachment):
            self.volume_attachments[meta.name] = obj
        elif isinstance(obj, PodDisruptionBudget):
            self.pod_disruption_budgets[f"{meta.namespace}/{meta.name}"] = obj
        elif isinstance(obj, _DRA_TYPES):
            self.add_watched(obj.kind, obj)
        else:
            self.workloads[f"{type(obj).__name__}/{meta.namespace}/{meta.name}"] = obj

    def priority_class(self, name: str) -> PriorityClass | None:
        """A PriorityClass by name, the built-in ``system-*`` ones included."""
        found = self.priority_classes.get(name)
        if found is None and name in SYSTEM_PRIORITY_CLASSES:
            found = PriorityClass(
                metadata=ObjectMeta(name=name), value=SYSTEM_PRIORITY_CLASSES[name]
            )
        return found

    def global_default_priority_class(self) -> PriorityClass | None:
        """The class with ``globalDefault: true`` (the lowest value if several claim it, as the
        Priority admission plugin picks)."""
        defaults = [c for c in self.priority_classes.values() if c.global_default]
        return min(defaults, key=lambda c: c.value) if defaults else None

    def counts(self) -> dict[str, int]:
        return {
            "Namespace": len(self.namespaces),
            "PriorityClass": len(self.priority_classes),
            "PersistentVolume": len(self.persistent_volumes),
            "PersistentVolumeClaim": len(self.persistent_volume_claims),
            "StorageClass": len(self.storage_classes),
            "CSINode": len(self.csi_nodes),
            "VolumeAttachment": len(self.volume_attachments),
            "PodDisruptionBudget": len(self.pod_disruption_budgets),
            **self._counts_by_kind(self.workloads),
            **self._counts_by_kind(self.watched),
        }

    @staticmethod
    def _counts_by_kind(keyed: dict[str, Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for key in keyed:
            kind = key.partition("/")[0]
            out[kind] = out.get(kind, 0) + 1
        return out


ClusterObject = (
    Namespace
    | PriorityClass
    | PersistentVolume
    | PersistentVolumeClaim
    | StorageClass
    | CSINode
    | VolumeAttachment
    | PodDisruptionBudget
    | Workload
    | ResourceClaim
    | ResourceClaimTemplate
    | DeviceClass
    | ResourceSlice
)

#: Dynamic resource allocation kinds: kept with the kinds plugins read (DynamicResources reads
#: all but the templates, from which claims are made for the pods, as the resourceclaim
#: controller would).
_DRA_TYPES = (ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice)

#: kind -> (its API group, its type, whether it is namespaced, its list path).
KINDS: dict[str, tuple[str, type[ClusterObject], bool, str]] = {
    "Namespace": ("", Namespace, False, "/api/v1/namespaces"),
    "PriorityClass": (
        "scheduling.k8s.io",
        PriorityClass,
        False,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
    ),
    "PersistentVolume": ("", PersistentVolume, False, "/api/v1/persistentvolumes"),
    "PersistentVolumeClaim": (
        "",
        PersistentVolumeClaim,
        True,
        "/api/v1/persistentvolumeclaims",
    ),
    "StorageClass": (
        "storage.k8s.io",
        StorageClass,
        False,
        "/apis/storage.k8s.io/v1/storageclasses",
    ),
    "CSINode": ("storage.k8s.io", CSINode, False, "/apis/storage.k8s.io/v1/csinodes"),
    "VolumeAttachment": (
        "storage.k8s.io",
        VolumeAttachment,
        False,
        "/apis/storage.k8s.io/v1/volumeattachments",
    ),
    "PodDisruptionBudget": (
        "policy",
        PodDisruptionBudget,
        True,
        "/apis/policy/v1/poddisruptionbudgets",
    ),
    "Service": ("", Service, True, "/api/v1/services"),
    "ReplicationController": (
        "",
        ReplicationController,
        True,
        "/api/v1/replicationcontrollers",
    ),
    "ReplicaSet": ("apps", ReplicaSet, True, "/apis/apps/v1/replicasets"),
    "StatefulSet": ("apps", StatefulSet, True, "/apis/apps/v1/statefulsets"),
    "ResourceClaim": (
        "resource.k8s.io",
        ResourceClaim,
        True,
        "/apis/resource.k8s.io/v1/resourceclaims",
    ),
    "ResourceClaimTemplate": (
        "resource.k8s.io",
        ResourceClaimTemplate,
        True,
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
    ),
    "DeviceClass": (
        "resource.k8s.io",
        DeviceClass,
        False,
        "/apis/resource.k8s.io/v1/deviceclasses",
    ),
    "ResourceSlice": (
        "resource.k8s.io",
        ResourceSlice,
        False,
        "/apis/resource.k8s.io/v1/resourceslices",
    ),
}
