"""The cluster as one scheduling cycle sees it: NodeInfos plus the NodeTable over them.

kube-scheduler copies its cache into a snapshot at the start of each cycle because informer
goroutines keep changing the cache. Here the scheduling cycle runs without yielding the event
loop, so no event can land mid-cycle and the live structure serves as the snapshot: the cache
mutates it between cycles through the methods below, which keep rows and NodeInfos in step.

Besides nodes and pods, a snapshot holds the few other objects plugins read, as the front end
feeds them: Namespace labels (inter-pod affinity's ``namespaceSelector``) and the selectors of the
Services, ReplicationControllers, ReplicaSets and StatefulSets (PodTopologySpread's default
constraints). Other kinds (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes
for the volume plugins) go into :attr:`Snapshot.objects`, an :class:`ObjectStore` by kind and
name. A front end that does not feed them leaves those features inert.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

from kubesched.api import LabelSelector, Node, node_allocatable
from kubesched.framework._node_info import NodeInfo, PodInfo
from kubesched.framework._pods import PodTable
from kubesched.framework._store import ObjectStore
from kubesched.framework._table import IntArray, NodeTable

#: The kinds :meth:`Snapshot.set_workload_selector` takes.
WORKLOAD_KINDS = ("Service", "ReplicationController", "ReplicaSet", "StatefulSet")


class Snapshot:
    """Nodes and the pods that count on them, with the column view plugins vectorize over."""

    def __init__(self) -> None:
        self.table = NodeTable()
        #: The pods counted on nodes, as rows (see :class:`PodTable`).
        self.pods = PodTable()
        #: PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes ... by kind.
        self.objects = ObjectStore()
        #: ``namespace/claim`` -> how many counted pods use that PVC (``PVCRefCounts``).
        self._pvc_refs: dict[str, int] = {}
        self._namespaces: dict[str, Mapping[str, str]] = {}
        #: Bumped whenever a Namespace comes, goes or is relabelled.
        self.namespaces_version = 0
        self._workloads: dict[str, dict[str, dict[str, LabelSelector]]] = {
            k: {} for k in WORKLOAD_KINDS
        }
        self._infos: dict[str, NodeInfo] = {}
        self._by_slot: list[NodeInfo | None] = []
        self._free: list[int] = []
        self._pod_node: dict[str, str] = {}
        #: UID -> the PodInfo counted, kept beside its node's: read for each of up to
        #: thousands of waiting preemptors on every victim's deletion.
        self._pod_infos: dict[str, PodInfo] = {}
        self._num_nodes = 0
        #: Bumped on every change; readers cache derived data against it.
        self.generation = 0

    # -- reading --------------------------------------------------------------------------

    def get(self, name: str) -> NodeInfo | None:
        """The NodeInfo of a node with a Node object, else ``None``."""
        info = self._infos.get(name)
        return info if info is not None and info.node is not None else None

    def at(self, slot: int) -> NodeInfo:
        info = self._by_slot[slot]
        assert info is not None
        return info

    def __len__(self) -> int:
        """How many nodes have a Node object (``NumNodes``)."""
        return self._num_nodes

    def node_infos(self) -> Iterator[NodeInfo]:
        """Every NodeInfo with a Node object, in slot order."""
        for info in self._by_slot:
            if info is not None and info.node is not None:
                yield info

    def present_slots(self) -> IntArray:
        """The slots of the nodes with a Node object, ascending: the same read-only array until
        a node is added or removed."""
        return self.table.present_slots()

    def slot_of(self, name: str) -> int | None:
        info = self.get(name)
        return None if info is None else info.slot

    def node_of_pod(self, uid: str) -> str | None:
        """The node a pod is assigned or assumed to, if the snapshot holds it."""
        return self._pod_node.get(uid)

    def pod_info(self, uid: str) -> PodInfo | None:
        """The pod as counted, if the snapshot holds it (as :meth:`node_of_pod`, a trial's
        changes are not seen)."""
        return self._pod_infos.get(uid)

    def is_pvc_used_by_pods(self, namespace: str, claim: str) -> bool:
        """Whether a counted pod (bound or assumed) uses PVC ``namespace/claim`` through a
        ``persistentVolumeClaim`` volume (``StorageInfos().IsPVCUsedByPods``)."""
        return f"{namespace}/{claim}" in self._pvc_refs

    # -- what-if evaluations ------------------------------------------------------------------

    @contextlib.contextmanager
    def trial(self, node_name: str, *, rows: bool = True) -> Iterator[NodeTrial]:
        """Change the pods of one node for the length of a ``with`` block.

        kube-scheduler evaluates "what if these pods were gone, or those were there" (preemption
        victims, nominated pods) on a copy of one NodeInfo. Here vectorized plugins read the
        shared table too, so the change is made on the node's NodeInfo and table row and undone,
        in reverse order, when the block ends (also on an exception): the node's pods, their
        order and its row are as before. The scheduling cycle does not yield meanwhile, so
        nobody else sees the change. Without ``rows`` the table row is left alone: for callers
        whose plugins all judge a node by its NodeInfo.
        """
        info = self.get(node_name)
        if info is None:
            raise KeyError(f"node {node_name!r} is not in the snapshot")
        trial = NodeTrial(self, info, rows=rows)
        try:
            yield trial
        finally:
            trial.undo()

    @contextlib.contextmanager
    def trials(self, nodes: Iterable[NodeInfo]) -> Iterator[list[NodeTrial]]:
        """:meth:`trial` on several nodes at once, table rows included: what-if changes of
        different nodes that one vectorized Filter pass then judges together."""
        started: list[NodeTrial] = []
        try:
            for info in nodes:
                started.append(NodeTrial(self, info, rows=True))
            yield started
        finally:
            for t in reversed(started):
                t.undo()

    # -- nodes ------------------------------------------------------------------------------

    def _info_for(self, name: str) -> NodeInfo:
        info = self._infos.get(name)
        if info is None:
            slot = self._free.pop() if self._free else len(self._by_slot)
            if slot == len(self._by_slot):
                self._by_slot.append(None)
                self.table.ensure_capacity(slot + 1)
            info = NodeInfo(name=name, slot=slot)
            self._by_slot[slot] = info
            self._infos[name] = info
            self.table.names[slot] = name
        return info

    def set_node(self, node: Node) -> NodeInfo:
        """Add or update a node."""
        name = node.metadata.name
        info = self._info_for(name)
        old = info.node
        if old is None:
            self._num_nodes += 1
        info.node = node
        info.allocatable = node_allocatable(node)
        info.changed()
        t, slot = self.table, info.slot
        t.set_present(slot, True)
        t.set_allocatable(slot, info.allocatable)
        t.unschedulable[slot] = node.spec.unschedulable
        t.taints.set(slot, tuple(node.spec.taints))
        t.set_labels(slot, old.metadata.labels if old else {}, node.metadata.labels)
        self._set_images(slot, old, node)
        self._sync_pods_row(info, pods_only=False)
        self.generation += 1
        return info

    def remove_node(self, name: str) -> None:
        """Forget the Node object; its NodeInfo stays while pods still count there."""
        info = self._infos.get(name)
        if info is None or info.node is None:
            return
        t, slot = self.table, info.slot
        self._set_images(slot, info.node, None)
        t.set_labels(slot, info.node.metadata.labels, {})
        t.taints.set(slot, ())
        t.set_present(slot, False)
        t.touch(slot)
        info.node = None
        info.changed()
        self._num_nodes -= 1
        self._release_if_empty(info)
        self.generation += 1

    def _release_if_empty(self, info: NodeInfo) -> None:
        if info.node is None and not info.pods:
            del self._infos[info.name]
            self._by_slot[info.slot] = None
            self.table.names[info.slot] = ""
            self._free.append(info.slot)

    def _set_images(self, slot: int, old: Node | None, new: Node | None) -> None:
        if old is not None and new is not None and old.status.images == new.status.images:
            return
        self.table.images_version += 1
        images = self.table.images
        if old is not None:
            for image in old.status.images:
                for n in image.names:
                    holders = images.get(n)
                    if holders is not None:
                        holders.pop(slot, None)
                        if not holders:
                            del images[n]
        if new is not None:
            for image in new.status.images:
                for n in image.names:
                    images.setdefault(n, {})[slot] = image.size_bytes

    # -- pods -------------------------------------------------------------------------------

    def add_pod(self, pod: PodInfo, node_name: str) -> None:
        """Count ``pod`` on ``node_name`` (bound, or assumed by the scheduler)."""
        previous = self._pod_node.get(pod.uid)
        if previous is not None:
            self.remove_pod(pod.uid)
        info = self._info_for(node_name)
        info.add_pod(pod)
        self._pod_node[pod.uid] = node_name
        self._pod_infos[pod.uid] = pod
        self.pods.add(pod.uid, pod.pod, info.slot)
        self._count_pvcs(pod, 1)
        self._sync_pods_row(info)
        self.generation += 1

    def replace_pod(self, pod: PodInfo) -> None:
        """Put a newer version of a counted pod in place of the old one, on the same node.

        For a version that counts exactly as the old one (same requests, ports, labels,
        affinity, volumes, termination): only the object changes, so the node's row is not
        touched and nothing derived from it needs deriving again. The pod moves to the end of
        its node's pods, as removing and adding it would.
        """
        info = self._infos[self._pod_node[pod.uid]]
        del info.pods[pod.uid]
        info.pods[pod.uid] = pod
        self._pod_infos[pod.uid] = pod
        info.changed()
        self.generation += 1

    def remove_pod(self, uid: str) -> PodInfo | None:
        node_name = self._pod_node.pop(uid, None)
        if node_name is None:
            return None
        del self._pod_infos[uid]
        info = self._infos[node_name]
        removed = info.remove_pod(uid)
        self.pods.remove(uid)
        if removed is not None:
            self._count_pvcs(removed, -1)
        self._sync_pods_row(info)
        self._release_if_empty(info)
        self.generation += 1
        return removed

    def _count_pvcs(self, pod: PodInfo, sign: int) -> None:
        p = pod.pod
        for v in p.spec.volumes:
            if v.persistent_volume_claim is None:
                continue
            key = f"{p.metadata.namespace}/{v.persistent_volume_claim.claim_name}"
            n = self._pvc_refs.get(key, 0) + sign
            if n > 0:
                self._pvc_refs[key] = n
            else:
                self._pvc_refs.pop(key, None)

    def _sync_pods_row(self, info: NodeInfo, *, pods_only: bool = True) -> None:
        """Bring the node's table row in step with the pods its NodeInfo counts."""
        t, slot = self.table, info.slot
        t.set_requested(slot, info.requested)
        t.non_zero_requested[slot] = (info.non_zero_cpu, info.non_zero_memory)
        t.has_host_ports[slot] = bool(info.used_ports)
        t.touch(slot, pods_only=pods_only)

    # -- namespaces and workload selectors (fed by the front end) -------------------------------

    def set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        """Add or update a Namespace's labels."""
        self._namespaces[name] = dict(labels)
        self.namespaces_version += 1

    def remove_namespace(self, name: str) -> None:
        if self._namespaces.pop(name, None) is not None:
            self.namespaces_version += 1

    def namespace_labels(self, name: str) -> Mapping[str, str] | None:
        """The labels of Namespace ``name``, or ``None`` if the snapshot does not know it."""
        return self._namespaces.get(name)

    def namespaces(self) -> Mapping[str, Mapping[str, str]]:
        """Every known Namespace: name -> labels."""
        return self._namespaces

    def set_workload_selector(
        self, kind: str, namespace: str, name: str, selector: LabelSelector
    ) -> None:
        """Record the pod selector of a Service, ReplicationController, ReplicaSet or
        StatefulSet (``kind``). For Services and ReplicationControllers, whose
        ``spec.selector`` is a map, pass it as ``LabelSelector(match_labels=...)``; a Service
        without a selector selects no pod and must not be recorded."""
        self._workloads[kind].setdefault(namespace, {})[name] = selector

    def remove_workload_selector(self, kind: str, namespace: str, name: str) -> None:
        by_name = self._workloads[kind].get(namespace)
        if by_name is not None:
            by_name.pop(name, None)
            if not by_name:
                del self._workloads[kind][namespace]

    def workload_selectors(self, kind: str, namespace: str) -> Mapping[str, LabelSelector]:
        """The recorded selectors of ``kind`` objects in ``namespace``: name -> selector."""
        return self._workloads[kind].get(namespace, {})


class NodeTrial:
    """Pods taken off or put on one node by :meth:`Snapshot.trial`; undone when it ends.

    As kube-scheduler's dry runs change a copy of the NodeInfo and nothing else, a trial changes
    the node's NodeInfo and its table row (which vectorized plugins read) only: which node
    counts each pod, the pods index and the PVCs in use stay as the cluster has them."""

    __slots__ = ("_generation", "_journal", "_order", "_rows", "_snapshot", "node")

    def __init__(self, snapshot: Snapshot, node: NodeInfo, *, rows: bool = True) -> None:
        self._snapshot = snapshot
        self._rows = rows
        #: The node's NodeInfo: it reflects the changes while the trial lasts.
        self.node = node
        self._journal: list[tuple[bool, PodInfo]] = []
        #: The node's pods in their order before the trial, and its generation, restored by
        #: :meth:`undo`: what was derived from the node before holds again after.
        self._order = list(node.pods)
        self._generation = node.generation

    def remove_pod(self, pod: PodInfo) -> None:
        """Stop counting ``pod`` (which must be counted on this node)."""
        self.remove_pods((pod,))

    def remove_pods(self, pods: Iterable[PodInfo]) -> None:
        """Stop counting each of ``pods`` (each must be counted on this node); the table row
        follows once."""
        node = self.node
        for pod in pods:
            if pod.uid not in node.pods:
                raise ValueError(f"pod {pod.key} is not counted on node {node.name}")
            node.remove_pod(pod.uid)
            self._journal.append((False, pod))
        if self._rows:
            self._snapshot._sync_pods_row(node)

    def add_pod(self, pod: PodInfo) -> None:
        """Count ``pod`` on this node (it must not be counted anywhere else)."""
        elsewhere = self._snapshot.node_of_pod(pod.uid)
        if pod.uid in self.node.pods or elsewhere not in (None, self.node.name):
            raise ValueError(f"pod {pod.key} is already counted on a node")
        self.node.add_pod(pod)
        if self._rows:
            self._snapshot._sync_pods_row(self.node)
        self._journal.append((True, pod))

    def undo(self) -> None:
        """Revert every change, last first, and restore the node's pod order."""
        if not self._journal:
            return
        node = self.node
        while self._journal:
            added, pod = self._journal.pop()
            if added:
                node.remove_pod(pod.uid)
            else:
                node.add_pod(pod)
        pods, order = node.pods, self._order
        if list(pods) != order:
            kept = [(uid, pods[uid]) for uid in order]
            pods.clear()
            pods.update(kept)
        node.generation = self._generation
        if self._rows:
            self._snapshot._sync_pods_row(node)
