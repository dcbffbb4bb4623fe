"""VolumeZone: a pod goes where its bound volumes' zones are.

A PersistentVolume may carry zone and region labels (``topology.kubernetes.io/zone`` and
``/region``, or their ``failure-domain.beta.kubernetes.io`` predecessors); a value may list
several zones separated by ``__``. A node that has any of these labels must, for each such label
of each PV the pod's claims are bound to, carry one of its values (a PV's beta label may be
matched by the node's GA label). A node with none of them passes: a single-zone cluster need
not label its nodes. A node that fails reads ``node(s) had no available volume zone``.

Only claims already bound to a PV count; an unbound claim of a WaitForFirstConsumer class is
left to VolumeBinding. PreFilter collects the PVs' zone sets once and Skips pods without any;
Filter compares them with the node table's label columns, once per distinct label value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kubesched.api import (
    VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
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
    IdArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    Status,
    node_for,
)
from kubesched.plugins.helper import as_objects

NAME = "VolumeZone"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME

#: A PV's zone or region label has no value the node's label has.
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

LABEL_FAILURE_DOMAIN_BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
LABEL_FAILURE_DOMAIN_BETA_REGION = "failure-domain.beta.kubernetes.io/region"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
LABEL_TOPOLOGY_REGION = "topology.kubernetes.io/region"
#: In this order, as upstream.
TOPOLOGY_LABELS = (
    LABEL_FAILURE_DOMAIN_BETA_ZONE,
    LABEL_FAILURE_DOMAIN_BETA_REGION,
    LABEL_TOPOLOGY_ZONE,
    LABEL_TOPOLOGY_REGION,
)
#: ``LabelMultiZoneDelimiter``: a volume label listing several zones.
MULTI_ZONE_DELIMITER = "__"

_TO_GA = {
    LABEL_FAILURE_DOMAIN_BETA_ZONE: LABEL_TOPOLOGY_ZONE,
    LABEL_FAILURE_DOMAIN_BETA_REGION: LABEL_TOPOLOGY_REGION,
}

STORAGE_CLASS = "storage.k8s.io/StorageClass"
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"


@dataclass(frozen=True, slots=True)
class PVTopology:
    """One zone or region label of a PV: its key and the values it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


def translate_to_ga_label(label: str) -> str:
    return _TO_GA.get(label, label)


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: the zones of a ``__``-separated value; ``None`` if one is empty."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    if any(not z for z in zones):
        return None
    return frozenset(zones)


def pv_topologies(pv: PersistentVolume) -> list[PVTopology]:
    """``getPVTopologies``: the PV's zone and region labels (unparsable values ignored)."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.metadata.labels.get(key)
        if value is None:
            continue
        zones = label_zones_to_set(value)
        if zones is not None:
            out.append(PVTopology(pv.metadata.name, key, zones))
    return out


def pod_claim_names(pod: Pod) -> list[str]:
    """The claims of the pod's ``persistentVolumeClaim`` volumes (ephemeral ones excluded)."""
    return [
        v.persistent_volume_claim.claim_name
        for v in pod.spec.volumes
        if v.persistent_volume_claim is not None
    ]


class _PreFilterState:
    __slots__ = ("topologies",)

    def __init__(self, topologies: list[PVTopology]) -> None:
        self.topologies = topologies


def node_fits(topologies: list[PVTopology], labels: Mapping[str, str]) -> bool:
    """The per-node rule of Filter."""
    if not any(k in labels for k in TOPOLOGY_LABELS):
        return True
    for t in topologies:
        v = labels.get(t.key)
        if v is None:
            v = labels.get(translate_to_ga_label(t.key))
        if v is None or v not in t.values:
            return False
    return True


def _values(nodes: Nodes, key: str) -> tuple[list[str | None], IdArray]:
    """The distinct values of label ``key`` (``None`` first: absent) and each node's id."""
    column = nodes.table.labels.get(key)
    if column is None:
        return [None], np.zeros(len(nodes), dtype=np.int32)
    ids: IdArray = nodes.gather(column.ids)
    return column.values, ids


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Filters out nodes in other zones or regions than the pod's bound PVs."""

    name = NAME

    def _topologies(self, pod: Pod) -> tuple[list[PVTopology], Status | None]:
        """``getPVbyPod``."""
        store = self.handle.snapshot.objects
        ns = pod.metadata.namespace
        out: list[PVTopology] = []
        for claim in pod_claim_names(pod):
            if not claim:
                return [], _unresolvable("PersistentVolumeClaim had no name")
            pvc = store.get(PersistentVolumeClaim, claim, ns)
            if pvc is None:
                return [], _unresolvable(f'persistentvolumeclaim "{claim}" not found')
            pv_name = pvc.spec.volume_name
            if not pv_name:
                sc_name = persistent_volume_claim_class(pvc)
                if not sc_name:
                    return [], _unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name"
                    )
                sc = store.get(StorageClass, sc_name)
                if sc is None:
                    return [], _unresolvable(f'storageclass.storage.k8s.io "{sc_name}" not found')
                if sc.volume_binding_mode is None:
                    return [], _unresolvable(
                        f'VolumeBindingMode not set for StorageClass "{sc_name}"'
                    )
                if sc.volume_binding_mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER:
                    continue  # unbound: VolumeBinding's business
                return [], _unresolvable("PersistentVolume had no name")
            pv = store.get(PersistentVolume, pv_name)
            if pv is None:
                return [], _unresolvable(f'persistentvolume "{pv_name}" not found')
            out.extend(pv_topologies(pv))
        return out, None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.spec.volumes:
            return None, SKIP
        topologies, status = self._topologies(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, SKIP
        state.write(PRE_FILTER_STATE_KEY, _PreFilterState(topologies))
        return None, None

    def _state_topologies(
        self, state: CycleState, pod: Pod
    ) -> tuple[list[PVTopology], Status | None]:
        s = state.get(PRE_FILTER_STATE_KEY)
        if isinstance(s, _PreFilterState):
            return s.topologies, None
        return self._topologies(pod)  # PreFilter did not run: work it out here

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        if not pod.spec.volumes:
            return None
        topologies, status = self._state_topologies(state, pod)
        if status is not None:
            return status
        if node_fits(topologies, node_for(node).metadata.labels):
            return None
        return _unresolvable(ERR_REASON_CONFLICT)

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        if not pod.spec.volumes:
            return NodeStatuses.passing(len(nodes))
        topologies, status = self._state_topologies(state, pod)
        if status is not None:
            return NodeStatuses.from_mask(np.ones(len(nodes), dtype=np.bool_), status)
        constrained = np.zeros(len(nodes), dtype=np.bool_)
        for key in TOPOLOGY_LABELS:
            _, ids = _values(nodes, key)
            constrained |= ids != 0  # id 0 is the absent label
        fits = np.ones(len(nodes), dtype=np.bool_)
        for t in topologies:
            fits &= self._fits(t, nodes)
        return NodeStatuses.from_mask(constrained & ~fits, _unresolvable(ERR_REASON_CONFLICT))

    @staticmethod
    def _fits(t: PVTopology, nodes: Nodes) -> BoolArray:
        own_values, own_ids = _values(nodes, t.key)
        own = np.array([v is not None and v in t.values for v in own_values], dtype=np.bool_)
        absent = own_ids == 0
        ga = translate_to_ga_label(t.key)
        if ga == t.key:
            out: BoolArray = own[own_ids]
            return out
        ga_values, ga_ids = _values(nodes, ga)
        ga_ok = np.array([v is not None and v in t.values for v in ga_values], dtype=np.bool_)
        result: BoolArray = np.where(absent, ga_ok[ga_ids], own[own_ids])
        return result

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A WaitForFirstConsumer class created (binding modes never change).
            ClusterEventWithHint(
                ClusterEvent(STORAGE_CLASS, ActionType.ADD),
                self.is_schedulable_after_storage_class_added,
            ),
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
            ),
            # A claim of the pod created, or bound.
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_persistent_volume_claim_change,
            ),
            # A PV created, or its zone labels changed.
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_persistent_volume_change,
            ),
        ]

    def is_schedulable_after_persistent_volume_claim_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        try:
            _, modified = as_objects(old, new, PersistentVolumeClaim)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        if modified.metadata.name in pod_claim_names(pod):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_storage_class_added(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        try:
            _, added = as_objects(None, new, StorageClass)
        except TypeError:
            return QueueingHint.QUEUE
        if added is None or added.volume_binding_mode != VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_persistent_volume_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        try:
            original, modified = as_objects(old, new, PersistentVolume)
        except TypeError:
            return QueueingHint.QUEUE
        if original is None or modified is None:
            return QueueingHint.QUEUE
        if pv_topologies(original) != pv_topologies(modified):
            return QueueingHint.QUEUE
        return QueueingHint.SKIP


def _unresolvable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


__all__ = [
    "ERR_REASON_CONFLICT",
    "NAME",
    "TOPOLOGY_LABELS",
    "PVTopology",
    "VolumeZone",
    "label_zones_to_set",
    "node_fits",
    "pv_topologies",
]
