"""Storage objects the volume plugins read: PersistentVolumes, PersistentVolumeClaims,
StorageClasses, CSINodes and VolumeAttachments, with the small rules Kubernetes' storage
helpers apply to them.

As in :mod:`kubesched.api._objects`, only the fields a scheduler looks at are declared. Writing
one of these back to the API server must therefore be a patch of the fields meant to change,
never a replacement of the whole object (which would drop the undeclared fields).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from kubesched.api._objects import (
    AWSElasticBlockStoreVolumeSource,
    AzureDiskVolumeSource,
    GCEPersistentDiskVolumeSource,
    LabelSelector,
    NodeSelector,
    NullList,
    ObjectMeta,
    Pod,
    Volume,
)
from kubesched.api._selectors import node_selector_matches

#: ``v1.BetaStorageClassAnnotation``: read before ``storageClassName`` on PVs and PVCs.
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
#: Set by the scheduler on a PVC to be provisioned for the node it chose.
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
#: Set on a PVC once its binding to a PV is complete.
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: Set on a PV or PVC whose binding the controller (not the user) made.
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: A provisioner name that means "this class provisions nothing".
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"

VOLUME_BINDING_IMMEDIATE = "Immediate"
VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"

READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_AVAILABLE = "Available"
VOLUME_BOUND = "Bound"
CLAIM_BOUND = "Bound"
CLAIM_LOST = "Lost"
PERSISTENT_VOLUME_FILESYSTEM = "Filesystem"
RESOURCE_STORAGE = "storage"


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """As :mod:`kubesched.api._objects`' base: camelCase, defaults left out, untracked by GC."""


class ObjectReference(_Obj):
    """``v1.ObjectReference``, as a PV's ``claimRef``."""

    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""


class CSIPersistentVolumeSource(_Obj):
    driver: str = ""
    volume_handle: str = ""
    read_only: bool = False
    fs_type: str = ""


class VolumeNodeAffinity(_Obj):
    required: NodeSelector | None = None


class PersistentVolumeSpec(_Obj):
    capacity: dict[str, str] = {}
    access_modes: list[str] = []
    storage_class_name: str = ""
    volume_mode: str | None = None
    claim_ref: ObjectReference | None = None
    node_affinity: VolumeNodeAffinity | None = None
    persistent_volume_reclaim_policy: str = ""
    volume_attributes_class_name: str | None = None
    csi: CSIPersistentVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    azure_disk: AzureDiskVolumeSource | None = None


class PersistentVolumeStatus(_Obj):
    phase: str = ""


class PersistentVolume(_Obj, kw_only=True):
    api_version: str = "v1"
    kind: str = "PersistentVolume"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PersistentVolumeSpec = msgspec.field(default_factory=PersistentVolumeSpec)
    status: PersistentVolumeStatus = msgspec.field(default_factory=PersistentVolumeStatus)


class VolumeResourceRequirements(_Obj):
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}


class PersistentVolumeClaimSpec(_Obj):
    access_modes: list[str] = []
    selector: LabelSelector | None = None
    resources: VolumeResourceRequirements = msgspec.field(
        default_factory=VolumeResourceRequirements
    )
    volume_name: str = ""
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_attributes_class_name: str | None = None


class PersistentVolumeClaimStatus(_Obj):
    phase: str = ""


class PersistentVolumeClaim(_Obj, kw_only=True):
    api_version: str = "v1"
    kind: str = "PersistentVolumeClaim"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec = msgspec.field(default_factory=PersistentVolumeClaimSpec)
    status: PersistentVolumeClaimStatus = msgspec.field(default_factory=PersistentVolumeClaimStatus)


class TopologySelectorLabelRequirement(_Obj):
    key: str
    values: NullList[str] = []

    def __post_init__(self) -> None:
        if self.values is None:
            self.values = []


class TopologySelectorTerm(_Obj):
    match_label_expressions: list[TopologySelectorLabelRequirement] = []


class StorageClass(_Obj, kw_only=True):
    """``storage.k8s.io/v1`` StorageClass: its fields are top-level."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "StorageClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    provisioner: str = ""
    volume_binding_mode: str | None = None
    allowed_topologies: list[TopologySelectorTerm] = []
    reclaim_policy: str | None = None


class VolumeNodeResources(_Obj):
    count: int | None = None


class CSINodeDriver(_Obj):
    name: str
    node_id: str = msgspec.field(default="", name="nodeID")
    topology_keys: NullList[str] = []
    allocatable: VolumeNodeResources | None = None

    def __post_init__(self) -> None:
        if self.topology_keys is None:
            self.topology_keys = []


class CSINodeSpec(_Obj):
    drivers: NullList[CSINodeDriver] = []

    def __post_init__(self) -> None:
        if self.drivers is None:
            self.drivers = []


class CSINode(_Obj, kw_only=True):
    """``storage.k8s.io/v1`` CSINode: the CSI drivers on a node (same name as the Node)."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "CSINode"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: CSINodeSpec = msgspec.field(default_factory=CSINodeSpec)


class VolumeAttachmentSource(_Obj):
    persistent_volume_name: str | None = None


class VolumeAttachmentSpec(_Obj):
    attacher: str = ""
    node_name: str = ""
    source: VolumeAttachmentSource = msgspec.field(default_factory=VolumeAttachmentSource)


class VolumeAttachment(_Obj, kw_only=True):
    """``storage.k8s.io/v1`` VolumeAttachment: a volume a CSI driver (``attacher``) attaches to
    a node, which counts toward the node's limit until it is deleted."""

    api_version: str = "storage.k8s.io/v1"
    kind: str = "VolumeAttachment"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: VolumeAttachmentSpec = msgspec.field(default_factory=VolumeAttachmentSpec)


# --- storage helpers (k8s.io/component-helpers/storage) ----------------------------------------


def persistent_volume_claim_class(pvc: PersistentVolumeClaim) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation first, then ``storageClassName``;
    ``""`` if the claim names no class."""
    annotations = pvc.metadata.annotations
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return pvc.spec.storage_class_name or ""


def persistent_volume_class(pv: PersistentVolume) -> str:
    """``GetPersistentVolumeClass``: the beta annotation first, then ``storageClassName``."""
    annotations = pv.metadata.annotations
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return annotations[BETA_STORAGE_CLASS_ANNOTATION]
    return pv.spec.storage_class_name


def volume_node_affinity_matches(pv: PersistentVolume, labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: whether a node with ``labels`` satisfies the PV's required node
    affinity. The node is known by its labels only, so ``matchFields`` see an empty name."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return True
    return node_selector_matches(affinity.required, labels, "")


def topology_selector_terms_match(
    terms: Sequence[TopologySelectorTerm], labels: Mapping[str, str]
) -> bool:
    """``MatchTopologySelectorTerms``: no terms match every node; otherwise some term must have
    every one of its label requirements satisfied (a requirement without values never is)."""
    if not terms:
        return True
    for term in terms:
        if all(r.values and labels.get(r.key) in r.values for r in term.match_label_expressions):
            return True
    return False


def is_volume_bound_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names the claim (and its UID, if set)."""
    ref = pv.spec.claim_ref
    if ref is None:
        return False
    if ref.name != pvc.metadata.name or ref.namespace != pvc.metadata.namespace:
        return False
    return not ref.uid or ref.uid == pvc.metadata.uid


def claim_reference(pvc: PersistentVolumeClaim) -> ObjectReference:
    """The ``claimRef`` a PV bound to ``pvc`` carries (``reference.GetReference``)."""
    meta = pvc.metadata
    return ObjectReference(
        api_version="v1",
        kind="PersistentVolumeClaim",
        namespace=meta.namespace,
        name=meta.name,
        uid=meta.uid,
        resource_version=meta.resource_version,
    )


def ephemeral_claim_name(pod: Pod, volume: Volume) -> str:
    """``ephemeral.VolumeClaimName``: the PVC of a generic ephemeral volume."""
    return f"{pod.metadata.name}-{volume.name}"


def ephemeral_volume_is_for_pod(pod: Pod, pvc: PersistentVolumeClaim) -> str | None:
    """``ephemeral.VolumeIsForPod``: ``None`` if the pod controls the claim, else the error."""
    controlled = pvc.metadata.namespace == pod.metadata.namespace and any(
        ref.controller and ref.uid == pod.metadata.uid for ref in pvc.metadata.owner_references
    )
    if controlled:
        return None
    return (
        f"PVC {pvc.metadata.namespace}/{pvc.metadata.name} was not created for pod "
        f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
    )


def pod_claim_names(pod: Pod) -> list[tuple[str, bool]]:
    """The PVCs the pod's volumes use, in order: ``(claim name, is ephemeral)``."""
    out: list[tuple[str, bool]] = []
    for v in pod.spec.volumes:
        if v.persistent_volume_claim is not None:
            out.append((v.persistent_volume_claim.claim_name, False))
        elif v.ephemeral is not None:
            out.append((ephemeral_claim_name(pod, v), True))
    return out
