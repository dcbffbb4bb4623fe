"""The nominator: which pods preemption made room for on which node (kube-scheduler's
``nominator``)."""

from __future__ import annotations

from collections.abc import Callable

from kubesched.api import Pod
from kubesched.framework import PodInfo


class Nominator:
    """Nominated pods per node, in nomination order, keyed by UID."""

    def __init__(self, deleted: Callable[[str], bool]) -> None:
        """``deleted(uid)``: whether the pod is known to be gone (upstream asks its pod lister);
        such a pod is not nominated."""
        self._deleted = deleted
        # node -> UIDs in nomination order; UID -> node; UID -> the PodInfo last nominated
        self._pods: dict[str, dict[str, None]] = {}
        self._node: dict[str, str] = {}
        self._info: dict[str, PodInfo] = {}
        # node -> the count of changes to its nominations when it last changed
        self._stamps: dict[str, int] = {}
        self._changes = 0

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str | None) -> None:
        """Nominate the pod to ``node_name``; ``None`` takes the node from the pod's
        ``status.nominatedNodeName``, ``""`` clears the nomination. A bound or deleted pod is not
        nominated."""
        pod = pod_info.pod
        uid = pod.metadata.uid
        self.delete_nominated_pod_if_exists(uid)
        node = pod.status.nominated_node_name if node_name is None else node_name
        if not node or pod.spec.node_name or self._deleted(uid):
            return
        self._node[uid] = node
        self._info[uid] = pod_info
        self._pods.setdefault(node, {})[uid] = None
        self._changed(node)

    def update_nominated_pod(self, old: Pod, new: PodInfo) -> None:
        """``UpdateNominatedPod``: follow the pod's ``status.nominatedNodeName``, but keep a
        nomination made in memory when neither version carries one (the status update that
        records it may not have arrived yet)."""
        node: str | None = None
        if not old.status.nominated_node_name and not new.pod.status.nominated_node_name:
            node = self._node.get(old.metadata.uid)
        self.delete_nominated_pod_if_exists(old.metadata.uid)
        self.add_nominated_pod(new, node)

    def delete_nominated_pod_if_exists(self, uid: str) -> None:
        node = self._node.pop(uid, None)
        if node is None:
            return
        del self._info[uid]
        uids = self._pods[node]
        del uids[uid]
        if not uids:
            del self._pods[node]
        self._changed(node)

    def _changed(self, node: str) -> None:
        self._changes += 1
        self._stamps[node] = self._changes

    def stamp(self, node_name: str) -> int:
        """Changes whenever a pod is nominated to ``node_name`` or no longer is (an update is
        both); 0 for a node never nominated to."""
        return self._stamps.get(node_name, 0)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name``, in nomination order, as last nominated."""
        return [self._info[uid] for uid in self._pods.get(node_name, ())]

    def nominated_node(self, uid: str) -> str | None:
        return self._node.get(uid)

    def nominated_nodes(self) -> list[str]:
        """The nodes with at least one nominated pod."""
        return list(self._pods)
