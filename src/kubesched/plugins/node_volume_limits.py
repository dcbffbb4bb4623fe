"""NodeVolumeLimits: no more CSI volumes on a node than its drivers can attach.

A CSI driver reports on each node how many of its volumes the node can take: the CSINode named
after the node lists it as ``spec.drivers[].allocatable.count`` (a node's
``attachable-volumes-*`` allocatable, which older kube-schedulers read, is not: v1.34 reads
CSINodes only). For each driver with a limit, the volumes the node's pods already use plus the
new ones the pod brings must stay within it, else ``node(s) exceed max volume count``
(Unschedulable: preempting pods frees attachments).

A volume is counted once per node however many pods share it. It is known by its driver and
volume handle: a bound claim's PV tells both; an unbound claim counts as a new volume of its
storage class's provisioner; in-tree AWS EBS, GCE PD and Azure Disk volumes (in PVs or inline)
count under their CSI driver where the node's CSINode says the plugin has been migrated. A claim
of the new pod that does not exist makes the node unresolvable (``looking up PVC ns/name: ...``);
one of a running pod is not counted.

PreFilter Skips pods without such volumes. The vectorized Filter keeps every node's limits and
attached volumes as arrays (:class:`_Attachments`), brought up to date from what changed; the
per-node Filter (preemption's dry runs) counts the node it is given.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from kubesched import KubeschedError
from kubesched.api import (
    CSINode,
    CSINodeDriver,
    ObjectMeta,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
    VolumeAttachment,
    ephemeral_claim_name,
    ephemeral_volume_is_for_pod,
    persistent_volume_claim_class,
)
from kubesched.framework import (
    SKIP,
    ActionType,
    BoolArray,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins.helper import as_objects

NAME = "NodeVolumeLimits"

#: Attaching the pod's new volumes would exceed a driver's limit on the node.
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

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
VOLUME_ATTACHMENT = "storage.k8s.io/VolumeAttachment"

#: What a node's count was derived from, by kind and key: its CSINode and VolumeAttachments
#: (by the node's name), and each claim (by ``namespace/name``), volume and storage class its
#: pods' volumes and its attachments were looked up by.
CSI_NODE_REF = "CSINode"
VA_REF = "VolumeAttachment"
PVC_REF = "PersistentVolumeClaim"
PV_REF = "PersistentVolume"
SC_REF = "StorageClass"
_Ref = tuple[str, str]
_REF_KINDS: tuple[tuple[type[Any], str], ...] = (
    (CSINode, CSI_NODE_REF),
    (VolumeAttachment, VA_REF),
    (PersistentVolumeClaim, PVC_REF),
    (PersistentVolume, PV_REF),
    (StorageClass, SC_REF),
)


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


class _Attachments:
    """Each node's limits and attached volumes, kept across cycles for the vectorized Filter.

    Per limit key, the nodes' limits (-1: none) and their counts of attached volumes as arrays
    over the table's slots, and where each volume is attached. A node is derived again, from
    its NodeInfo, when its table row changes (its pods or its Node), when its CSINode changes,
    or when a claim, volume or storage class its pods' volumes were looked up by changes (the
    object store's change log says which); everything is derived again when a log no longer
    reaches back, or for another table.
    """

    def __init__(self, plugin: NodeVolumeLimits, table: object) -> None:
        self._plugin = plugin
        #: The table whose slots these are.
        self.table = table
        self._version = -1
        self._store_versions: dict[type[Any], int] = {}
        self.limit: dict[str, IntArray] = {}
        self.count: dict[str, IntArray] = {}
        self.has_limits: BoolArray = np.zeros(0, dtype=np.bool_)
        #: The node's CSINode's migrated-plugins annotation, as an index into :attr:`migrations`
        #: (0: none), and a CSINode of each (for looking up the pod's volumes as on that node).
        self.migration: IntArray = np.zeros(0, dtype=np.int64)
        self.migrations: list[str] = [""]
        self.migration_nodes: list[CSINode | None] = [None]
        #: Volume (``driver/handle``) -> the slots it is attached on.
        self.where: dict[str, set[int]] = {}
        #: Slot -> the error looking up its pods' volumes gave.
        self.errors: dict[int, Status] = {}
        self._attached: dict[int, dict[str, str]] = {}
        #: Slot -> the limit keys of the volumes attached there that no pod there uses.
        self._extra: dict[int, list[str]] = {}
        self._limits: dict[int, dict[str, int]] = {}
        self._refs: dict[int, set[_Ref]] = {}
        self._users: dict[_Ref, set[int]] = {}

    def update(self, snapshot: Snapshot) -> bool:
        """Bring every slot of the snapshot's table up to date; ``False`` when what changed
        since the last time can no longer be told (build anew then)."""
        table = snapshot.table
        store = snapshot.objects
        if self._version < 0:
            dirty: set[int] = set(range(table.capacity))
        else:
            rows = table.changed_rows_since(self._version)
            if rows is None:
                return False
            dirty = {*rows[0], *rows[1]}
            for kind, ref_kind in _REF_KINDS:
                changes = store.changes(kind, self._store_versions.get(kind, 0))
                if changes is None:
                    return False
                for old, new in changes:
                    obj = new if new is not None else old
                    assert obj is not None
                    dirty.update(self._users.get((ref_kind, _ref_key(obj)), ()))
        self._version = table.version
        self._store_versions = {kind: store.version(kind) for kind, _ in _REF_KINDS}
        self._grow(table.capacity)
        present = table.present
        for slot in sorted(dirty):
            self._forget(slot)
            if slot < len(present) and present[slot]:
                self._derive(slot, snapshot.at(slot), store.get(CSINode, table.names[slot]))
        return True

    def positions(self, slots: IntArray) -> IntArray:
        """Each slot's position in ``slots`` (-1: not there)."""
        out = np.full(len(self.has_limits), -1, dtype=np.int64)
        out[slots] = np.arange(len(slots))
        return out

    def _count_one(self, key: str, slot: int) -> None:
        column = self.count.get(key)
        if column is None:
            column = self.count[key] = np.zeros(len(self.has_limits), dtype=np.int64)
        column[slot] += 1

    def _grow(self, capacity: int) -> None:
        size = len(self.has_limits)
        if capacity <= size:
            return
        extra = capacity - size
        self.has_limits = np.concatenate([self.has_limits, np.zeros(extra, dtype=np.bool_)])
        self.migration = np.concatenate([self.migration, np.zeros(extra, dtype=np.int64)])
        for k, a in self.limit.items():
            self.limit[k] = np.concatenate([a, np.full(extra, -1, dtype=np.int64)])
        for k, a in self.count.items():
            self.count[k] = np.concatenate([a, np.zeros(extra, dtype=np.int64)])

    def _forget(self, slot: int) -> None:
        for key in self._limits.pop(slot, {}):
            self.limit[key][slot] = -1
        for unique, key in self._attached.pop(slot, {}).items():
            self.count[key][slot] -= 1
            where = self.where[unique]
            where.discard(slot)
            if not where:
                del self.where[unique]
        for key in self._extra.pop(slot, []):
            self.count[key][slot] -= 1
        for ref in self._refs.pop(slot, set()):
            users = self._users[ref]
            users.discard(slot)
            if not users:
                del self._users[ref]
        self.errors.pop(slot, None)
        self.has_limits[slot] = False
        self.migration[slot] = 0

    def _derive(self, slot: int, info: NodeInfo, csi_node: CSINode | None) -> None:
        plugin = self._plugin
        refs: set[_Ref] = {(CSI_NODE_REF, info.name), (VA_REF, info.name)}
        limits = plugin.volume_limits(csi_node)
        attached: dict[str, str] = {}
        try:
            attached = plugin.attached_volumes(info, csi_node, refs)
        except (ClaimNotFoundError, _VolumeError) as e:
            self.errors[slot] = Status.as_error(e)
        # Volumes still attached that no pod here uses: counted, but a new pod's volume among
        # them is attached again (not taken out of its new volumes).
        extra = [
            key
            for unique, key in plugin.volume_attachments(info.name, refs).items()
            if unique not in attached
        ]
        capacity = len(self.has_limits)
        for key, value in limits.items():
            column = self.limit.get(key)
            if column is None:
                column = self.limit[key] = np.full(capacity, -1, dtype=np.int64)
            column[slot] = value
        for unique, key in attached.items():
            self._count_one(key, slot)
            self.where.setdefault(unique, set()).add(slot)
        for key in extra:
            self._count_one(key, slot)
        for ref in refs:
            self._users.setdefault(ref, set()).add(slot)
        self._limits[slot] = limits
        self._attached[slot] = attached
        self._extra[slot] = extra
        self._refs[slot] = refs
        self.has_limits[slot] = bool(limits)
        migrated = "" if csi_node is None else _migrated(csi_node)
        if migrated:
            if migrated not in self.migrations:
                self.migrations.append(migrated)
                self.migration_nodes.append(csi_node)
            self.migration[slot] = self.migrations.index(migrated)


def _ref_key(obj: Any) -> str:
    """The key a node's refs name ``obj`` by: a VolumeAttachment by its node."""
    if isinstance(obj, VolumeAttachment):
        return obj.spec.node_name
    meta = obj.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


def _count(driver: CSINodeDriver) -> int:
    """A CSINode driver's attach limit, 0 when it gives none."""
    allocatable = driver.allocatable
    return 0 if allocatable is None or allocatable.count is None else allocatable.count


def _migrated(csi_node: CSINode) -> str:
    return csi_node.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION, "")


#: A CSINode on which every in-tree plugin has been migrated: volumes looked up as on it are
#: known by the names the nodes that count them know them by.
_ALL_MIGRATED = CSINode(
    metadata=ObjectMeta(annotations={MIGRATED_PLUGINS_ANNOTATION: ",".join(MIGRATED_DRIVERS)})
)


class NodeVolumeLimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Keeps pods off nodes where their new CSI volumes would exceed a driver's attach limit."""

    name = NAME
    # A node's verdict reads its pods and name, the CSINodes, claims, volumes and classes: kept
    # across cycles while :meth:`node_local_epoch` holds.
    node_local = True

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        #: Stands in for the unknown volume handle of an unbound claim.
        self._random_prefix = secrets.token_hex(16)
        self._attachments: _Attachments | None = None
        #: VolumeAttachments by node name, at the store's version of them.
        self._by_node: tuple[int, dict[str, list[VolumeAttachment]]] = (-1, {})
        #: Nominated pods' volumes by UID, with the PodInfo and epoch they were looked up at.
        self._nominated: dict[str, tuple[PodInfo, Hashable, frozenset[str]]] = {}

    def node_local_epoch(self) -> Hashable:
        store = self.handle.snapshot.objects
        return tuple(store.version(kind) for kind, _ in _REF_KINDS)

    def node_local_claims(self, pod: Pod) -> Hashable:
        # A volume that no other pod uses, on a node or nominated to one, is new on every node
        # whichever volume it is: read as its limit key and whether nodes that migrated no
        # in-tree plugin count it. A volume in use is read as itself (where it is decides).
        try:
            anywhere = self.attachable_volumes(pod, _ALL_MIGRATED, new_pod=True)
            unmigrated = self.attachable_volumes(pod, None, new_pod=True)
        except (ClaimNotFoundError, _VolumeError):
            return None  # the verdict names the claim, with limits or without
        if not anywhere or self.handle.snapshot.objects.count(CSINode) == 0:
            return ()
        where = self._kept().where
        nominated = self._nominated_volumes(pod.metadata.uid)
        if nominated is None:
            return None
        return tuple(
            sorted(
                ("", False, unique)
                if unique in where or unique in nominated
                else (key, unique in unmigrated, "")
                for unique, key in anywhere.items()
            )
        )

    def _kept(self) -> _Attachments:
        snapshot = self.handle.snapshot
        kept = self._attachments
        if kept is None or kept.table is not snapshot.table or not kept.update(snapshot):
            kept = self._attachments = _Attachments(self, snapshot.table)
            kept.update(snapshot)
        return kept

    def _nominated_volumes(self, uid: str) -> set[str] | None:
        """The volumes of the pods nominated to nodes, but the pod ``uid``; ``None`` when one
        cannot be looked up."""
        handle = self.handle
        epoch = self.node_local_epoch()
        known, self._nominated = self._nominated, {}
        out: set[str] = set()
        for node in handle.nominated_nodes():
            for info in handle.nominated_pods_for_node(node):
                entry = known.get(info.uid)
                if entry is None or entry[0] is not info or entry[1] != epoch:
                    try:
                        volumes = self.attachable_volumes(info.pod, _ALL_MIGRATED, new_pod=False)
                    except _VolumeError:
                        return None
                    entry = (info, epoch, frozenset(volumes))
                self._nominated[info.uid] = entry
                if info.uid != uid:
                    out |= entry[2]
        return out

    # -- counting ------------------------------------------------------------------------------

    def _driver_info(
        self, csi_node: CSINode | None, pvc: PersistentVolumeClaim, refs: set[_Ref] | None
    ) -> tuple[str, str] | None:
        """``getCSIDriverInfo``: the driver and volume handle of a claim's volume."""
        store = self.handle.snapshot.objects
        pv_name = pvc.spec.volume_name
        if pv_name and refs is not None:
            refs.add((PV_REF, pv_name))
        pv = store.get(PersistentVolume, pv_name) if pv_name else None
        if pv is None:
            return self._driver_info_from_class(csi_node, pvc, refs)
        if pv.spec.csi is not None:
            return pv.spec.csi.driver, pv.spec.csi.volume_handle
        in_tree = pv_in_tree(pv)
        if in_tree is None or not is_csi_migration_on(csi_node, in_tree[0]):
            return None
        return MIGRATED_DRIVERS[in_tree[0]], in_tree[1]

    def _driver_info_from_class(
        self, csi_node: CSINode | None, pvc: PersistentVolumeClaim, refs: set[_Ref] | None
    ) -> tuple[str, str] | None:
        """``getCSIDriverInfoFromSC``: an unbound claim counts as a volume of its provisioner."""
        class_name = persistent_volume_claim_class(pvc)
        if not class_name:
            return None
        if refs is not None:
            refs.add((SC_REF, class_name))
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
        self, pod: Pod, csi_node: CSINode | None, *, new_pod: bool, refs: set[_Ref] | None = None
    ) -> dict[str, str]:
        """``filterAttachableVolumes``: ``driver/handle`` -> limit key of each volume of ``pod``
        that counts. Raises :class:`ClaimNotFoundError` for a missing claim of a new pod and
        :class:`_VolumeError` for an ephemeral claim the pod does not own. ``refs`` collects
        the claims, volumes and classes read (present or not)."""
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
            if refs is not None:
                refs.add((PVC_REF, f"{ns}/{claim}"))
            pvc = store.get(PersistentVolumeClaim, claim, ns)
            if pvc is None:
                if new_pod:
                    raise ClaimNotFoundError(
                        f'looking up PVC {ns}/{claim}: persistentvolumeclaim "{claim}" not found'
                    )
                continue
            if ephemeral and (err := ephemeral_volume_is_for_pod(pod, pvc)) is not None:
                raise _VolumeError(err)
            info = self._driver_info(csi_node, pvc, refs)
            if info is None or not info[0] or not info[1]:
                continue
            out[f"{info[0]}/{info[1]}"] = csi_attach_limit_key(info[0])
        return out

    @staticmethod
    def volume_limits(csi_node: CSINode | None) -> dict[str, int]:
        """``getVolumeLimits``: the CSINode's per-driver counts, by limit key."""
        out: dict[str, int] = {}
        if csi_node is not None:
            for d in csi_node.spec.drivers:
                if d.allocatable is not None and d.allocatable.count is not None:
                    out[csi_attach_limit_key(d.name)] = d.allocatable.count
        return out

    def volume_attachments(self, node_name: str, refs: set[_Ref] | None = None) -> dict[str, str]:
        """``getNodeVolumeAttachmentInfo``: the CSI volumes VolumeAttachments attach to the node,
        by ``driver/handle`` -> limit key (an attachment without attacher or PV, or of a PV that
        is missing or not CSI, is left out)."""
        store = self.handle.snapshot.objects
        version = store.version(VolumeAttachment)
        if self._by_node[0] != version:
            index: dict[str, list[VolumeAttachment]] = {}
            for va in store.list(VolumeAttachment):
                index.setdefault(va.spec.node_name, []).append(va)
            self._by_node = (version, index)
        out: dict[str, str] = {}
        for va in self._by_node[1].get(node_name, ()):
            pv_name = va.spec.source.persistent_volume_name
            if not va.spec.attacher or pv_name is None:
                continue
            if refs is not None:
                refs.add((PV_REF, pv_name))
            pv = store.get(PersistentVolume, pv_name)
            if pv is None or pv.spec.csi is None:
                continue
            out[f"{va.spec.attacher}/{pv.spec.csi.volume_handle}"] = csi_attach_limit_key(
                va.spec.attacher
            )
        return out

    def attached_volumes(
        self, node: NodeInfo, csi_node: CSINode | None, refs: set[_Ref] | None = None
    ) -> dict[str, str]:
        """The volumes the node's pods use (:meth:`attachable_volumes` of each), by
        ``driver/handle``. Raises :class:`_VolumeError` as that does."""
        attached: dict[str, str] = {}
        for p in node.pods.values():
            attached.update(self.attachable_volumes(p.pod, csi_node, new_pod=False, refs=refs))
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
        limits = self.volume_limits(csi_node)
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
            attached = self.attached_volumes(node, csi_node)
        except (ClaimNotFoundError, _VolumeError) as e:
            return Status.as_error(e)
        attached_count: dict[str, int] = {}
        for unique, limit_key in attached.items():
            # A volume already attached for another pod is not attached again.
            new.pop(unique, None)
            attached_count[limit_key] = attached_count.get(limit_key, 0) + 1
        for unique, limit_key in self.volume_attachments(node.name).items():
            if unique not in attached:
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
        if self.handle.snapshot.objects.count(CSINode) == 0:
            return NodeStatuses.passing(n)  # limits come from CSINodes only
        kept = self._kept()
        slots = nodes.slots
        # Only nodes with a limit are checked (``getVolumeLimits`` empty: no check).
        checked = kept.has_limits[slots]
        exceeded = np.zeros(n, dtype=np.bool_)
        position: IntArray | None = None
        migration = kept.migration[slots]
        # Few distinct migrations (usually none at all): counted rather than sorted.
        groups: list[int] = (
            np.flatnonzero(np.bincount(migration)).tolist() if len(kept.migrations) > 1 else [0]
        )
        for m in groups:
            # The pod's volumes, looked up as on the nodes whose CSINode lists these migrations.
            new = self.attachable_volumes(pod, kept.migration_nodes[m], new_pod=True)
            in_group = checked & (migration == m) if len(kept.migrations) > 1 else checked
            if not new:
                checked &= ~in_group
                continue
            new_count: dict[str, int] = {}
            for key in new.values():
                new_count[key] = new_count.get(key, 0) + 1
            for key, count in new_count.items():
                limit = kept.limit.get(key)
                if limit is None:
                    continue  # no node has this limit
                # A new volume already attached on a node is not attached there again.
                needed = np.full(n, count, dtype=np.int64)
                for unique, k in new.items():
                    if k != key or unique not in kept.where:
                        continue
                    if position is None:
                        position = kept.positions(slots)
                    at = position[np.fromiter(kept.where[unique], np.int64)]
                    needed[at[at >= 0]] -= 1
                total = needed + kept.count[key][slots] if key in kept.count else needed
                limits = limit[slots]
                exceeded |= in_group & (limits >= 0) & (needed > 0) & (total > limits)
        ids = np.zeros(n, dtype=np.int32)
        statuses: list[Status | None] = [None]
        if exceeded.any():
            statuses.append(Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED))
            ids[exceeded] = 1
        if kept.errors:
            # Looking up a node's attached volumes failed: an error where the pod brings new
            # volumes and the node has limits, before any counting.
            if position is None:
                position = kept.positions(slots)
            for slot, error in kept.errors.items():
                i = int(position[slot])
                if i >= 0 and checked[i]:
                    ids[i] = len(statuses)
                    statuses.append(error)
        return NodeStatuses(ids, statuses)

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Any new CSINode may bring limits that let the pod fit (or none at all).
            ClusterEventWithHint(ClusterEvent(CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(
                ClusterEvent(CSI_NODE, ActionType.UPDATE),
                self.is_schedulable_after_csi_node_updated,
            ),
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE), self.is_schedulable_after_pod_deleted
            ),
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                self.is_schedulable_after_pvc_added,
            ),
            ClusterEventWithHint(
                ClusterEvent(VOLUME_ATTACHMENT, ActionType.DELETE),
                self.is_schedulable_after_volume_attachment_deleted,
            ),
        ]

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        try:
            deleted, _ = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None or not deleted.spec.volumes:
            return QueueingHint.SKIP
        # A pod nominated to a node counted there too.
        if not deleted.spec.node_name and not deleted.status.nominated_node_name:
            return QueueingHint.SKIP
        if any(counts_toward_limits(v) for v in deleted.spec.volumes):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_csi_node_updated(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A CSINode changed: queue ``pod`` when some driver's limit went up (a driver without
        a count, or not there before, counts as 0)."""
        try:
            before, after = as_objects(old, new, CSINode)
        except TypeError:
            return QueueingHint.QUEUE
        if before is None or after is None:
            return QueueingHint.QUEUE
        old_limits = {d.name: _count(d) for d in before.spec.drivers}
        if any(_count(d) > old_limits.get(d.name, 0) for d in after.spec.drivers):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_volume_attachment_deleted(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        """An attachment went away: queue ``pod`` if it has a claim, or a migratable inline
        volume of the attachment's driver."""
        try:
            deleted, _ = as_objects(old, new, VolumeAttachment)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None:
            return QueueingHint.QUEUE
        for v in pod.spec.volumes:
            if v.persistent_volume_claim is not None:
                return QueueingHint.QUEUE
            inline = inline_in_tree(v)
            if inline is not None and MIGRATED_DRIVERS[inline[0]] == deleted.spec.attacher:
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
