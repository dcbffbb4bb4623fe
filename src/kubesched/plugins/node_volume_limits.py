"""NodeVolumeLimits: no more CSI volumes on a node than its drivers can attach.

A CSI driver reports on each node how many of its volumes the node can take: the CSINode named
after the node lists it as ``spec.drivers[].allocatable.count`` (older clusters put
``attachable-volumes-csi-<driver>`` in the node's allocatable, which counts too). For each driver
with a limit, the volumes the node's pods already use plus the new ones the pod brings must stay
within it, else ``node(s) exceed max volume count`` (Unschedulable: preempting pods frees
attachments).

A volume is counted once per node however many pods share it. It is known by its driver and
volume handle: a bound claim's PV tells both; an unbound claim counts as a new volume of its
storage class's provisioner; in-tree AWS EBS, GCE PD and Azure Disk volumes (in PVs or inline)
count under their CSI driver where the node's CSINode says the plugin has been migrated. A claim
of the new pod that does not exist makes the node unresolvable (``looking up PVC ns/name: ...``);
one of a running pod is not counted.

PreFilter Skips pods without such volumes. Filter looks only at the nodes that report a limit,
and keeps each node's count of attached volumes until its pods, the CSINode or the storage
objects change.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np

from kubesched import KubeschedError
from kubesched.api import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
    ephemeral_claim_name,
    ephemeral_volume_is_for_pod,
    persistent_volume_claim_class,
)
from kubesched.framework import (
    SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
)
from kubesched.plugins.helper import as_objects

NAME = "NodeVolumeLimits"

#: Attaching the pod's new volumes would exceed a driver's limit on the node.
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

ATTACHABLE_VOLUMES_PREFIX = "attachable-volumes-"
CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
#: Resource names are at most this long: longer limit keys are shortened with a hash.
RESOURCE_NAME_LENGTH_LIMIT = 63
#: ``v1.MigratedPluginsAnnotationKey`` on CSINodes.
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"

AWS_EBS_IN_TREE = "kubernetes.io/aws-ebs"
GCE_PD_IN_TREE = "kubernetes.io/gce-pd"
AZURE_DISK_IN_TREE = "kubernetes.io/azure-disk"
CINDER_IN_TREE = "kubernetes.io/cinder"
#: In-tree plugin -> the CSI driver that replaced it (the migrations GA in v1.34).
MIGRATED_DRIVERS: Mapping[str, str] = {
    AWS_EBS_IN_TREE: "ebs.csi.aws.com",
    GCE_PD_IN_TREE: "pd.csi.storage.gke.io",
    AZURE_DISK_IN_TREE: "disk.csi.azure.com",
    CINDER_IN_TREE: "cinder.csi.openstack.org",
}
_UNSPECIFIED = "UNSPECIFIED"
_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")

CSI_NODE = "storage.k8s.io/CSINode"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"


def csi_attach_limit_key(driver: str) -> str:
    """``GetCSIAttachLimitKey``: the allocatable name of a driver's limit."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= RESOURCE_NAME_LENGTH_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def is_csi_migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """``isCSIMigrationOn``: the plugin is migratable and the node lists it as migrated."""
    if csi_node is None or plugin not in MIGRATED_DRIVERS:
        return False
    migrated = csi_node.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION, "")
    return plugin in migrated.split(",")


def _ebs_volume_id(volume_id: str) -> str:
    # aws://<zone>/<volume id> or the bare id.
    if volume_id.startswith("aws://"):
        return volume_id.rsplit("/", 1)[-1]
    return volume_id


def inline_in_tree(volume: Volume) -> tuple[str, str] | None:
    """A migratable inline volume's in-tree plugin and CSI volume handle."""
    if volume.aws_elastic_block_store is not None:
        return AWS_EBS_IN_TREE, _ebs_volume_id(volume.aws_elastic_block_store.volume_id)
    if volume.gce_persistent_disk is not None:
        pd = volume.gce_persistent_disk.pd_name
        return GCE_PD_IN_TREE, f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pd}"
    if volume.azure_disk is not None:
        return AZURE_DISK_IN_TREE, volume.azure_disk.disk_uri
    return None


def pv_in_tree(pv: PersistentVolume) -> tuple[str, str] | None:
    """A migratable in-tree PV's plugin and CSI volume handle."""
    spec = pv.spec
    if spec.aws_elastic_block_store is not None:
        return AWS_EBS_IN_TREE, _ebs_volume_id(spec.aws_elastic_block_store.volume_id)
    if spec.gce_persistent_disk is not None:
        zone = next((pv.metadata.labels[k] for k in _ZONE_LABELS if k in pv.metadata.labels), "")
        zone = zone or _UNSPECIFIED
        pd = spec.gce_persistent_disk.pd_name
        return GCE_PD_IN_TREE, f"projects/{_UNSPECIFIED}/zones/{zone}/disks/{pd}"
    if spec.azure_disk is not None:
        return AZURE_DISK_IN_TREE, spec.azure_disk.disk_uri
    return None


def counts_toward_limits(volume: Volume) -> bool:
    """The PreFilter test: a claim, an ephemeral volume, or a migratable inline volume."""
    return (
        volume.persistent_volume_claim is not None
        or volume.ephemeral is not None
        or volume.aws_elastic_block_store is not None
        or volume.gce_persistent_disk is not None
        or volume.azure_disk is not None
    )


class ClaimNotFoundError(KubeschedError):
    """A claim of the pod being scheduled does not exist."""


class _VolumeError(Exception):
    """Any other reason the pod's volumes cannot be counted."""


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Keeps pods off nodes where their new CSI volumes would exceed a driver's attach limit."""

    name = NAME

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        #: Stands in for the unknown volume handle of an unbound claim.
        self._random_prefix = secrets.token_hex(16)
        #: Node name -> (what the counts depend on, unique volume name -> limit key).
        self._attached: dict[str, tuple[tuple[Any, ...], dict[str, str]]] = {}

    # -- counting ------------------------------------------------------------------------------

    def _driver_info(
        self, csi_node: CSINode | None, pvc: PersistentVolumeClaim
    ) -> tuple[str, str] | None:
        """``getCSIDriverInfo``: the driver and volume handle of a claim's volume."""
        store = self.handle.snapshot.objects
        pv_name = pvc.spec.volume_name
        pv = store.get(PersistentVolume, pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(csi_node, pvc)
        if pv.spec.csi is not None:
            return pv.spec.csi.driver, pv.spec.csi.volume_handle
        in_tree = pv_in_tree(pv)
        if in_tree is None or not is_csi_migration_on(csi_node, in_tree[0]):
            return None
        return MIGRATED_DRIVERS[in_tree[0]], in_tree[1]

    def _driver_info_from_class(
        self, csi_node: CSINode | None, pvc: PersistentVolumeClaim
    ) -> tuple[str, str] | None:
        """``getCSIDriverInfoFromSC``: an unbound claim counts as a volume of its provisioner."""
        class_name = persistent_volume_claim_class(pvc)
        if not class_name:
            return None
        sc = self.handle.snapshot.objects.get(StorageClass, class_name)
        if sc is None:
            return None
        handle = f"{self._random_prefix}-{pvc.metadata.namespace}/{pvc.metadata.name}"
        provisioner = sc.provisioner
        if provisioner in MIGRATED_DRIVERS:
            if not is_csi_migration_on(csi_node, provisioner):
                return None
            return MIGRATED_DRIVERS[provisioner], handle
        return provisioner, handle

    def attachable_volumes(
        self, pod: Pod, csi_node: CSINode | None, *, new_pod: bool
    ) -> dict[str, str]:
        """``filterAttachableVolumes``: ``driver/handle`` -> limit key of each volume of ``pod``
        that counts. Raises :class:`ClaimNotFoundError` for a missing claim of a new pod and
        :class:`_VolumeError` for an ephemeral claim the pod does not own."""
        out: dict[str, str] = {}
        store = self.handle.snapshot.objects
        ns = pod.metadata.namespace
        for v in pod.spec.volumes:
            ephemeral = False
            if v.persistent_volume_claim is not None:
                claim = v.persistent_volume_claim.claim_name
            elif v.ephemeral is not None:
                claim = ephemeral_claim_name(pod, v)
                ephemeral = True
            else:
                inline = inline_in_tree(v)
                if inline is not None and is_csi_migration_on(csi_node, inline[0]):
                    driver = MIGRATED_DRIVERS[inline[0]]
                    out[f"{driver}/{inline[1]}"] = csi_attach_limit_key(driver)
                continue
            if not claim:
                raise _VolumeError("PersistentVolumeClaim had no name")
            pvc = store.get(PersistentVolumeClaim, claim, ns)
            if pvc is None:
                if new_pod:
                    raise ClaimNotFoundError(
                        f'looking up PVC {ns}/{claim}: persistentvolumeclaim "{claim}" not found'
                    )
                continue
            if ephemeral and (err := ephemeral_volume_is_for_pod(pod, pvc)) is not None:
                raise _VolumeError(err)
            info = self._driver_info(csi_node, pvc)
            if info is None or not info[0] or not info[1]:
                continue
            out[f"{info[0]}/{info[1]}"] = csi_attach_limit_key(info[0])
        return out

    @staticmethod
    def volume_limits(node: NodeInfo, csi_node: CSINode | None) -> dict[str, int]:
        """``getVolumeLimits``: the node's attachable-volumes allocatable, overridden by its
        CSINode's per-driver counts."""
        out = {k: v for k, v in node.allocatable.items() if k.startswith(ATTACHABLE_VOLUMES_PREFIX)}
        if csi_node is not None:
            for d in csi_node.spec.drivers:
                if d.allocatable is not None and d.allocatable.count is not None:
                    out[csi_attach_limit_key(d.name)] = d.allocatable.count
        return out

    def _attached_on(self, node: NodeInfo, csi_node: CSINode | None) -> dict[str, str]:
        """The volumes the node's pods use, kept until something they depend on changes."""
        store = self.handle.snapshot.objects
        key = (
            node.generation,
            store.version(CSINode),
            store.version(PersistentVolumeClaim),
            store.version(PersistentVolume),
            store.version(StorageClass),
        )
        cached = self._attached.get(node.name)
        if cached is not None and cached[0] == key:
            return cached[1]
        attached: dict[str, str] = {}
        for p in node.pods.values():
            attached.update(self.attachable_volumes(p.pod, csi_node, new_pod=False))
        self._attached[node.name] = (key, attached)
        return attached

    # -- PreFilter / Filter --------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        for v in pod.spec.volumes:
            if counts_toward_limits(v):
                return None, None
        return None, SKIP

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.spec.volumes:
            return None
        csi_node = self.handle.snapshot.objects.get(CSINode, node.name)
        limits = self.volume_limits(node, csi_node)
        return self._check(pod, node, csi_node, limits)

    def _check(
        self, pod: Pod, node: NodeInfo, csi_node: CSINode | None, limits: Mapping[str, int]
    ) -> Status | None:
        try:
            new = self.attachable_volumes(pod, csi_node, new_pod=True)
        except ClaimNotFoundError as e:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(e))
        except _VolumeError as e:
            return Status.as_error(e)
        if not new or not limits:
            return None
        try:
            attached = self._attached_on(node, csi_node)
        except (ClaimNotFoundError, _VolumeError) as e:
            return Status.as_error(e)
        attached_count: dict[str, int] = {}
        for unique, limit_key in attached.items():
            # A volume already attached for another pod is not attached again.
            new.pop(unique, None)
            attached_count[limit_key] = attached_count.get(limit_key, 0) + 1
        new_count: dict[str, int] = {}
        for limit_key in new.values():
            new_count[limit_key] = new_count.get(limit_key, 0) + 1
        for limit_key, count in new_count.items():
            limit = limits.get(limit_key)
            if limit is not None and attached_count.get(limit_key, 0) + count > limit:
                return Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        n = len(nodes)
        if not pod.spec.volumes:
            return NodeStatuses.passing(n)
        # Whether the pod's claims can be looked up does not depend on the node.
        try:
            self.attachable_volumes(pod, None, new_pod=True)
        except ClaimNotFoundError as e:
            status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, str(e))
            return NodeStatuses.from_mask(np.ones(n, dtype=np.bool_), status)
        except _VolumeError as e:
            return NodeStatuses.from_mask(np.ones(n, dtype=np.bool_), Status.as_error(e))
        store = self.handle.snapshot.objects
        table = nodes.table
        # Nodes without a CSINode can only have limits in their allocatable.
        any_allocatable = any(k.startswith(ATTACHABLE_VOLUMES_PREFIX) for k in table.resource_index)
        with_csi_node = store.count(CSINode) > 0
        ids = np.zeros(n, dtype=np.int32)
        if not with_csi_node and not any_allocatable:
            return NodeStatuses(ids, [None])
        interned: dict[Status, int] = {}
        statuses: list[Status | None] = [None]
        names = table.names
        for i, slot in enumerate(nodes.slots.tolist()):
            csi_node = store.get(CSINode, names[slot]) if with_csi_node else None
            if csi_node is None and not any_allocatable:
                continue
            info = nodes.snapshot.at(slot)
            limits = self.volume_limits(info, csi_node)
            if not limits:
                continue
            s = self._check(pod, info, csi_node, limits)
            if s is None:
                continue
            k = interned.get(s)
            if k is None:
                k = interned[s] = len(statuses)
                statuses.append(s)
            ids[i] = k
        return NodeStatuses(ids, statuses)

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Any new CSINode may bring limits that let the pod fit (or none at all).
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE), self.is_schedulable_after_pod_deleted
            ),
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                self.is_schedulable_after_pvc_added,
            ),
        ]

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        try:
            deleted, _ = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None or not deleted.spec.volumes or not deleted.spec.node_name:
            return QueueingHint.SKIP
        if any(counts_toward_limits(v) for v in deleted.spec.volumes):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pvc_added(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        try:
            _, added = as_objects(old, new, PersistentVolumeClaim)
        except TypeError:
            return QueueingHint.QUEUE
        if added is None or added.metadata.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        for v in pod.spec.volumes:
            if v.persistent_volume_claim is not None:
                claim = v.persistent_volume_claim.claim_name
            elif v.ephemeral is not None:
                claim = ephemeral_claim_name(pod, v)
            else:
                continue
            if claim == added.metadata.name:
                return QueueingHint.QUEUE
        return QueueingHint.SKIP
