"""The VolumeBinding plugin (see the package docstring)."""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from kubesched.api import (
    CLAIM_LOST,
    CSINode,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    ephemeral_volume_is_for_pod,
    pod_claim_names,
)
from kubesched.config import VolumeBindingArgs
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
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreBindPlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ReservePlugin,
    ScorePlugin,
    Status,
    StorageAPIClient,
)
from kubesched.plugins.helper import as_objects
from kubesched.plugins.volume_binding._binder import (
    Finder,
    PodVolumes,
    VolumeBindingError,
    assume_pod_volumes,
    bind_pod_volumes,
    get_pod_volume_claims,
    is_pvc_fully_bound,
    revert,
)
from kubesched.plugins.volume_binding._cache import AssumeCache, AssumeError
from kubesched.plugins.volume_binding._scorer import scale_shape, static_binding_scores

log = logging.getLogger(__name__)

NAME = "VolumeBinding"
STATE_KEY = NAME

_encode = msgspec.json.Encoder().encode

#: PreFilter: a claim with Immediate binding (or prebound to a PV) is not bound yet.
ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

#: kube-scheduler's names of the resources whose events VolumeBinding registers.
PERSISTENT_VOLUME = "PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
STORAGE_CLASS = "storage.k8s.io/StorageClass"
CSI_NODE = "storage.k8s.io/CSINode"
#: ``v1.MigratedPluginsAnnotationKey`` on CSINodes: in-tree plugins now served by CSI drivers.
MIGRATED_PLUGINS_ANNOTATION = "storage.alpha.kubernetes.io/migrated-plugins"


@dataclass(slots=True, eq=False)
class _State:
    """``stateData``: shared by the cycle's clones, as upstream."""

    #: ``None`` when the pod uses no PVC.
    finder: Finder | None = None
    all_bound: bool = False
    reserved: PodVolumes | None = None


def _pod_claim_missing(name: str, ephemeral: bool) -> str:
    if ephemeral:
        return (
            f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"'
        )
    return f'persistentvolumeclaim "{name}" not found'


class VolumeBinding(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    """Binds a pod's PersistentVolumeClaims: bound claims must have their PV in reach of the
    node; unbound WaitForFirstConsumer claims get a matching PV there, or are provisioned for it;
    unbound Immediate claims keep the pod out until the PV controller binds them."""

    name = NAME
    args_type = VolumeBindingArgs
    # A node's verdict and score read its labels and name, the claims, volumes and classes, and
    # the assumptions Reserve made: kept across cycles while :meth:`node_local_epoch` holds.
    node_local = True
    node_local_reads_pods = False

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        a = args if isinstance(args, VolumeBindingArgs) else VolumeBindingArgs()
        self.bind_timeout = float(a.bind_timeout_seconds)
        #: Set only with the StorageCapacityScoring gate (which defaults ``shape``).
        self.shape = scale_shape([(p.utilization, p.score) for p in a.shape]) if a.shape else None
        self.cache = AssumeCache(handle.snapshot.objects)

    def node_local_epoch(self) -> Hashable:
        return self.cache.version()

    def node_local_claims(self, pod: Pod) -> Hashable:
        # A fully bound claim is read for its volume's node affinity alone; any other for
        # itself (volumes prebound to it, the node chosen for it) and for what Reserve binds.
        ns = pod.metadata.namespace
        out: list[bytes | None] = []
        for name, _ in pod_claim_names(pod):
            pvc = self.cache.pvcs.get(name, ns)
            if pvc is None or not is_pvc_fully_bound(pvc):
                return None
            pv = self.cache.pvs.get(pvc.spec.volume_name)
            out.append(None if pv is None else _encode(pv.spec.node_affinity))
        return tuple(out)

    # -- PreFilter / Filter ------------------------------------------------------------------

    def _state(self, state: CycleState) -> _State:
        return state.read(STATE_KEY, _State)

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        claims = pod_claim_names(pod) if pod.spec.volumes else []
        if not claims:
            state.write(STATE_KEY, _State())
            return None, SKIP
        store = self.handle.snapshot.objects
        ns = pod.metadata.namespace
        for name, ephemeral in claims:
            pvc = store.get(PersistentVolumeClaim, name, ns)
            message = None
            if pvc is None:
                message = _pod_claim_missing(name, ephemeral)
            elif pvc.status.phase == CLAIM_LOST:
                message = (
                    f'persistentvolumeclaim "{pvc.metadata.name}" bound to non-existent '
                    f'persistentvolume "{pvc.spec.volume_name}"'
                )
            elif pvc.metadata.deletion_timestamp is not None:
                message = f'persistentvolumeclaim "{pvc.metadata.name}" is being deleted'
            elif ephemeral:
                message = ephemeral_volume_is_for_pod(pod, pvc)
            if message is not None:
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)
        try:
            pod_claims = get_pod_volume_claims(pod, self.cache, self.handle.snapshot)
        except VolumeBindingError as e:
            return None, Status.as_error(e)
        if pod_claims.immediate:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNBOUND_IMMEDIATE)
        state.write(STATE_KEY, _State(finder=Finder(self.handle.snapshot, self.cache, pod_claims)))
        return None, None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        finder = self._state(state).finder
        if finder is None:
            return NodeStatuses.passing(len(nodes))
        return finder.find(nodes)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        one = Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        verdict = self.filter_nodes(state, pod, one)
        return verdict.statuses[int(verdict.ids[0])]

    # -- PreScore / Score ------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        if self.shape is None:
            return SKIP
        return None

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        finder = self._state(state).finder
        if self.shape is None or finder is None:
            return np.zeros(len(nodes), dtype=np.int64), None
        finder.find_kept(nodes)
        return static_binding_scores(self.shape, finder, nodes), None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        one = Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        scores, status = self.score_nodes(state, pod, one)
        return int(scores[0]), status

    # -- Reserve / Unreserve / PreBind -----------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s = self._state(state)
        volumes = None
        if s.finder is not None:
            slot = self.handle.snapshot.slot_of(node_name)
            if slot is not None:
                s.finder.find_kept(Nodes(self.handle.snapshot, np.array([slot], dtype=np.int64)))
                volumes = s.finder.pod_volumes(slot)
                if volumes is None and s.finder.delay:
                    return Status(Code.ERROR, f'no pod volumes found for node "{node_name}"')
        if volumes is None:
            # The pod uses no PVC (or the node was never filtered for it).
            s.all_bound = True
            return None
        try:
            s.all_bound = assume_pod_volumes(pod, node_name, volumes, self.cache)
        except AssumeError as e:
            return Status.as_error(e)
        s.reserved = volumes
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if isinstance(s, _State) and s.reserved is not None:
            revert(self.cache, s.reserved)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s = self._state(state)
        if s.all_bound:
            return None
        if s.reserved is None:
            return Status(Code.ERROR, f'no pod volumes found for node "{node_name}"')
        client = self.handle.client
        if not isinstance(client, StorageAPIClient):
            return Status(Code.ERROR, "binding volumes: the front end cannot write volumes")
        log.debug("binding volumes of pod %s on node %s", pod.key, node_name)
        try:
            await bind_pod_volumes(
                client, self.handle.snapshot, self.cache, node_name, s.reserved, self.bind_timeout
            )
        except Exception as e:
            log.debug("binding volumes of pod %s failed: %s", pod.key, e)
            return Status.as_error(e)
        return None

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A missing or mis-configured class (allowedTopologies).
            ClusterEventWithHint(
                ClusterEvent(STORAGE_CLASS, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_storage_class_change,
            ),
            # Claims and volumes being bound or created.
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_persistent_volume_claim_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(PERSISTENT_VOLUME, ActionType.ADD | ActionType.UPDATE)
            ),
            # Node labels against PV node affinity and allowed topologies.
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
            ),
            ClusterEventWithHint(
                ClusterEvent(CSI_NODE, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_csi_node_change,
            ),
        ]

    def is_schedulable_after_storage_class_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        """A new class, or a change of its allowedTopologies (its binding mode is immutable)."""
        try:
            original, modified = as_objects(old, new, StorageClass)
        except TypeError:
            return QueueingHint.QUEUE
        if original is None or modified is None:
            return QueueingHint.QUEUE
        if original.allowed_topologies != modified.allowed_topologies:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP

    def is_schedulable_after_persistent_volume_claim_change(
        self, pod: Pod, old: Any, new: Any
    ) -> QueueingHint:
        """Any change to a claim of the pod (same namespace and name)."""
        try:
            _, modified = as_objects(old, new, PersistentVolumeClaim)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.namespace != pod.metadata.namespace:
            return QueueingHint.SKIP
        names = {name for name, _ in pod_claim_names(pod)}
        return QueueingHint.QUEUE if modified.metadata.name in names else QueueingHint.SKIP

    def is_schedulable_after_csi_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A new CSINode, or one whose migrated-plugins annotation changed."""
        try:
            original, modified = as_objects(old, new, CSINode)
        except TypeError:
            return QueueingHint.QUEUE
        if original is None or modified is None:
            return QueueingHint.QUEUE
        before = original.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION)
        after = modified.metadata.annotations.get(MIGRATED_PLUGINS_ANNOTATION)
        return QueueingHint.QUEUE if before != after else QueueingHint.SKIP
