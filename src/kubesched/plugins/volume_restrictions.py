"""VolumeRestrictions: volumes that only one pod, or one node, may use.

Two rules, as kube-scheduler v1.34 applies them:

- **ReadWriteOncePod**: a PVC with that access mode may be used by one pod in the whole cluster.
  If a pod already counted (bound or assumed) uses such a claim of the pod, every node fails with
  ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already
  in-use by another pod``, as Unschedulable: preempting that pod would free the claim
  (PreFilterExtensions keep the count right during preemption's what-ifs).
- **in-tree disks** mounted inline: the same GCE persistent disk (unless every pod mounts it
  read-only), AWS EBS volume, RBD image (sharing a monitor, pool and image, unless all read-only)
  or iSCSI IQN (unless all read-only) cannot be used by two pods on one node:
  ``node(s) had no available disk``.

PreFilter looks the pod's claims up (a missing one: ``persistentvolumeclaim "x" not found``) and
Skips pods with neither kind of volume, which is nearly all of them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.api import (
    READ_WRITE_ONCE_POD,
    PersistentVolumeClaim,
    Pod,
    Volume,
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
    NodeInfo,
    Nodes,
    NodeStatuses,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
)
from kubesched.plugins.helper import as_objects

NAME = "VolumeRestrictions"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME

#: An in-tree disk of the pod is already used on the node.
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
#: A ReadWriteOncePod claim of the pod is already used by another pod.
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
    "in-use by another pod"
)

PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"


def needs_restrictions_check(v: Volume) -> bool:
    """The volume is an inline disk whose sharing is restricted."""
    return (
        v.gce_persistent_disk is not None
        or v.aws_elastic_block_store is not None
        or v.rbd is not None
        or v.iscsi is not None
    )


def _overlap(a: list[str], b: list[str]) -> bool:
    return not set(a).isdisjoint(b)


def is_volume_conflict(volume: Volume, pod: Pod) -> bool:
    """``isVolumeConflict``: ``volume`` cannot be used next to ``pod``'s volumes."""
    for existing in pod.spec.volumes:
        gce, egce = volume.gce_persistent_disk, existing.gce_persistent_disk
        if (
            gce is not None
            and egce is not None
            and gce.pd_name == egce.pd_name
            and not (gce.read_only and egce.read_only)
        ):
            return True
        ebs, eebs = volume.aws_elastic_block_store, existing.aws_elastic_block_store
        if ebs is not None and eebs is not None and ebs.volume_id == eebs.volume_id:
            return True
        iscsi, eiscsi = volume.iscsi, existing.iscsi
        if (
            iscsi is not None
            and eiscsi is not None
            and iscsi.iqn == eiscsi.iqn
            and not (iscsi.read_only and eiscsi.read_only)
        ):
            return True
        rbd, erbd = volume.rbd, existing.rbd
        if (
            rbd is not None
            and erbd is not None
            and _overlap(rbd.monitors, erbd.monitors)
            and rbd.pool == erbd.pool
            and rbd.image == erbd.image
            and not (rbd.read_only and erbd.read_only)
        ):
            return True
    return False


def satisfy_volume_conflicts(pod: Pod, existing: list[Pod]) -> bool:
    """No restricted volume of ``pod`` conflicts with the pods already on the node."""
    for v in pod.spec.volumes:
        if not needs_restrictions_check(v):
            continue
        for other in existing:
            if is_volume_conflict(v, other):
                return False
    return True


class _PreFilterState:
    """The pod's ReadWriteOncePod claims, and how many uses of them counted pods make."""

    __slots__ = ("conflicting_pvc_ref_count", "read_write_once_pod_pvcs")

    def __init__(self, pvcs: frozenset[str], count: int) -> None:
        self.read_write_once_pod_pvcs = pvcs
        self.conflicting_pvc_ref_count = count

    def update_with_pod(self, pod: Pod, multiplier: int) -> None:
        self.conflicting_pvc_ref_count += multiplier * sum(
            1
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None
            and v.persistent_volume_claim.claim_name in self.read_write_once_pod_pvcs
        )

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.read_write_once_pod_pvcs, self.conflicting_pvc_ref_count)


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """ReadWriteOncePod claims and inline in-tree disks are not shared."""

    name = NAME

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        volumes = pod.spec.volumes
        needs_check = has_claim = False
        for v in volumes:
            if v.persistent_volume_claim is not None:
                has_claim = True
            elif needs_restrictions_check(v):
                needs_check = True
        if not needs_check and not has_claim:
            return None, SKIP
        store = self.handle.snapshot.objects
        ns = pod.metadata.namespace
        rwop: set[str] = set()
        for v in volumes:
            if v.persistent_volume_claim is None:
                continue
            claim = v.persistent_volume_claim.claim_name
            pvc = store.get(PersistentVolumeClaim, claim, ns)
            if pvc is None:
                return None, Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                    f'persistentvolumeclaim "{claim}" not found',
                )
            if READ_WRITE_ONCE_POD in pvc.spec.access_modes:
                rwop.add(pvc.metadata.name)
        snapshot = self.handle.snapshot
        count = sum(1 for c in rwop if snapshot.is_pvc_used_by_pods(ns, c))
        if not needs_check and count == 0:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(frozenset(rwop), count))
        return None, None

    def add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status(Code.ERROR, f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState')
        s.update_with_pod(to_add.pod, 1)
        return None

    def remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status(Code.ERROR, f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState')
        s.update_with_pod(to_remove.pod, -1)
        return None

    def _state(self, state: CycleState) -> _PreFilterState | Status:
        s = state.get(PRE_FILTER_STATE_KEY)
        if not isinstance(s, _PreFilterState):
            return Status(Code.ERROR, f'cannot read "{PRE_FILTER_STATE_KEY}" from cycleState')
        return s

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not satisfy_volume_conflicts(pod, [p.pod for p in node.pods.values()]):
            return Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT)
        s = self._state(state)
        if isinstance(s, Status):
            return s
        if s.conflicting_pvc_ref_count > 0:
            return Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        n = len(nodes)
        ids = np.zeros(n, dtype=np.int32)
        if any(needs_restrictions_check(v) for v in pod.spec.volumes):
            # Only pods with restricted disks of their own can conflict.
            for i, info in enumerate(nodes.infos()):
                existing = [
                    p.pod
                    for p in info.pods.values()
                    if any(needs_restrictions_check(v) for v in p.pod.spec.volumes)
                ]
                if existing and not satisfy_volume_conflicts(pod, existing):
                    ids[i] = 1
        s = self._state(state)
        if isinstance(s, Status):
            ids[ids == 0] = 3
        elif s.conflicting_pvc_ref_count > 0:
            ids[ids == 0] = 2
        return NodeStatuses(
            ids,
            [
                None,
                Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT),
                Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT),
                s if isinstance(s, Status) else None,
            ],
        )

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # The pod holding a disk or claim goes away (a pod's volumes never change).
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE), self.is_schedulable_after_pod_deleted
            ),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD)),
            # The claim whose access modes PreFilter needs appears.
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD),
                self.is_schedulable_after_persistent_volume_claim_added,
            ),
        ]

    def is_schedulable_after_persistent_volume_claim_added(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        try:
            _, added = as_objects(old, new, PersistentVolumeClaim)
        except TypeError:
            return QueueingHint.QUEUE
        if added is None or added.metadata.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        for v in pod.spec.volumes:
            if (
                v.persistent_volume_claim is not None
                and v.persistent_volume_claim.claim_name == added.metadata.name
            ):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_pod_deleted(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        try:
            deleted, _ = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if deleted is None or deleted.metadata.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        if not satisfy_volume_conflicts(pod, [deleted]):
            return QueueingHint.QUEUE
        claims = {
            v.persistent_volume_claim.claim_name
            for v in pod.spec.volumes
            if v.persistent_volume_claim is not None
        }
        for v in deleted.spec.volumes:
            if (
                v.persistent_volume_claim is not None
                and v.persistent_volume_claim.claim_name in claims
            ):
                return QueueingHint.QUEUE
        return QueueingHint.SKIP
