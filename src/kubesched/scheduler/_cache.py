"""The scheduler cache: kube-scheduler's ``cacheImpl`` over the live :class:`Snapshot`.

The scheduling cycle never yields the event loop, so no informer callback runs in the middle of
one: the cache writes straight into the snapshot the framework reads, where kube-scheduler copies
the changed NodeInfos into a snapshot every cycle. What it adds is the life cycle of a pod the
scheduler placed itself: assumed on its node the moment the node is chosen (so no node is
over-committed while binding is in flight), confirmed when the informer reports it bound,
forgotten when binding fails, and, with a TTL > 0, expired when never confirmed. kube-scheduler
v1.34 runs with a TTL of 0: expiring a pod whose bind was merely slow double-counted it (#106361).
Pods and assumed pods are keyed by UID.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec

from kubesched import KubeschedError
from kubesched.api import Node, Pod
from kubesched.framework import NodeInfo, PodInfo, Snapshot

log = logging.getLogger(__name__)

#: How often expired assumed pods are cleaned up (and cache metrics refreshed).
CLEANUP_PERIOD = 1.0


class CacheError(KubeschedError):
    """An operation inconsistent with the cache's state (kube-scheduler's cache errors)."""


@dataclass(slots=True)
class _PodState:
    info: PodInfo
    node: str
    assumed: bool = False
    binding_finished: bool = False
    #: Clock seconds after which a finished, unconfirmed assumed pod expires; ``None``: never.
    deadline: float | None = None


@dataclass(slots=True)
class NodeDump:
    """One node as the cache sees it (see :meth:`Cache.dump`)."""

    name: str
    #: ``False`` for a node whose Node object is gone (or not yet seen) but which still has pods.
    has_node: bool
    allocatable: dict[str, int]
    requested: dict[str, int]
    #: ``namespace/name`` of the pods counted on the node, assumed ones marked ``(assumed)``.
    pods: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CacheDump:
    """The cache's content, for debugging and ``explain``."""

    nodes: dict[str, NodeDump]
    #: Assumed pod UID -> the node it is assumed on.
    assumed_pods: dict[str, str]


class Cache:
    """Nodes and the pods that count on them (bound or assumed), written into a snapshot."""

    def __init__(
        self,
        snapshot: Snapshot | None = None,
        *,
        assumed_pod_ttl: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        size_metric: Callable[[dict[str, int]], None] | None = None,
    ) -> None:
        """``assumed_pod_ttl`` > 0 expires assumed pods that long after their binding finished;
        0 (kube-scheduler v1.34's value) never does. ``size_metric`` receives
        ``scheduler_cache_size`` values (``assumed_pods``, ``pods``, ``nodes``) from :meth:`run`.
        """
        self._snapshot = snapshot if snapshot is not None else Snapshot()
        self._ttl = assumed_pod_ttl
        self._clock = clock
        self._size_metric = size_metric
        self._pods: dict[str, _PodState] = {}
        self._assumed: set[str] = set()
        self._stop = asyncio.Event()

    @property
    def snapshot(self) -> Snapshot:
        """The live snapshot the framework schedules on."""
        return self._snapshot

    # -- nodes ---------------------------------------------------------------------------------

    def add_node(self, node: Node) -> NodeInfo:
        return self._snapshot.set_node(node)

    def update_node(self, old: Node | None, new: Node) -> NodeInfo:
        return self._snapshot.set_node(new)

    def remove_node(self, node: Node | str) -> None:
        """The Node object is gone. Its pods keep counting (on a node that is no candidate) until
        their own deletions arrive, as the two watches are not ordered."""
        name = node if isinstance(node, str) else node.metadata.name
        if self._snapshot.get(name) is None:
            raise CacheError(f"node {name} is not found")
        self._snapshot.remove_node(name)

    # -- pods from the informer ----------------------------------------------------------------

    def add_pod(self, pod: Pod) -> None:
        """A bound pod the informer reports.

        If the scheduler assumed it, the assumption is confirmed, moving the pod to the node the
        informer says if that differs. A pod already added is an error.
        """
        uid, node = pod.metadata.uid, pod.spec.node_name
        if not node:
            raise CacheError(f"pod {_name(pod)} is not assigned to a node")
        state = self._pods.get(uid)
        if state is not None and not state.assumed:
            raise CacheError(f"pod {_name(pod)} was already in added state")
        if state is not None and state.node != node:
            log.info(
                "Pod was added to a different node than it was assumed pod=%s assumedNode=%s "
                "currentNode=%s",
                pod.key,
                state.node,
                node,
            )
        elif state is not None and _counts_alike(state.info.pod, pod):
            # The confirmation of our own binding: the informer's pod differs from the assumed
            # one only in what the cache does not count (resourceVersion, status ...), so the
            # assumed PodInfo and the node's row stand.
            info = state.info
            info = PodInfo(
                pod=pod,
                requests=info.requests,
                non_zero_cpu=info.non_zero_cpu,
                non_zero_memory=info.non_zero_memory,
                host_ports=info.host_ports,
            )
            self._snapshot.replace_pod(info)
            state.info = info
            state.assumed = state.binding_finished = False
            state.deadline = None
            self._assumed.discard(uid)
            return
        self._put(PodInfo.of(pod), node, assumed=False)

    def update_pod(self, old: Pod, new: Pod) -> None:
        """A bound pod changed (labels, requests after an in-place resize ...).

        ``old`` unbound means the pod was just bound: that is an :meth:`add_pod`, as the
        informer's filter for assigned pods presents it to kube-scheduler.
        """
        if not old.spec.node_name:
            self.add_pod(new)
            return
        uid = old.metadata.uid
        state = self._pods.get(uid)
        if state is None:
            raise CacheError(
                f"pod {_name(old)} is not added to scheduler cache, so cannot be updated"
            )
        if state.assumed:
            raise CacheError(f"assumed pod {_name(old)} should not be updated")
        if state.node != new.spec.node_name:
            raise CacheError(
                f"pod {_name(old)} updated on a different node than previously added to "
                f"({new.spec.node_name}, was {state.node}): the scheduler cache is corrupted"
            )
        self._put(PodInfo.of(new), new.spec.node_name, assumed=False)

    def remove_pod(self, pod: Pod) -> None:
        """The pod is gone. An assumed pod deleted before it was bound (``pod`` has no node) is
        removed too."""
        uid = pod.metadata.uid
        state = self._pods.get(uid)
        if state is None:
            raise CacheError(
                f"pod {_name(pod)} is not found in scheduler cache, so cannot be removed from it"
            )
        if pod.spec.node_name and state.node != pod.spec.node_name:
            raise CacheError(
                f"pod {_name(pod)} was added to {state.node} but removed from "
                f"{pod.spec.node_name}: the scheduler cache is corrupted"
            )
        self._remove(uid)

    # -- the scheduler's own pods ----------------------------------------------------------------

    def assume_pod(self, pod_info: PodInfo, node_name: str) -> PodInfo:
        """Count the pod on ``node_name`` from now on, before it is bound.

        Returns the assumed PodInfo, whose pod has ``spec.nodeName`` set to ``node_name``.
        """
        pod = pod_info.pod
        uid = pod.metadata.uid
        if uid in self._pods:
            raise CacheError(f"pod {_name(pod)} is in the cache, so can't be assumed")
        if pod.spec.node_name != node_name:
            spec = msgspec.structs.replace(pod.spec, node_name=node_name)
            pod_info = PodInfo(
                pod=msgspec.structs.replace(pod, spec=spec),
                requests=pod_info.requests,
                non_zero_cpu=pod_info.non_zero_cpu,
                non_zero_memory=pod_info.non_zero_memory,
                host_ports=pod_info.host_ports,
            )
        self._put(pod_info, node_name, assumed=True)
        return pod_info

    def finish_binding(self, uid: str) -> None:
        """The binding call for an assumed pod returned: with a TTL, its expiry clock starts."""
        state = self._pods.get(uid)
        if state is None or not state.assumed:
            return
        state.binding_finished = True
        state.deadline = self._clock() + self._ttl if self._ttl > 0 else None

    def forget_pod(self, uid: str, node_name: str | None = None) -> None:
        """Undo :meth:`assume_pod` (binding failed). A pod no longer in the cache is ignored.

        With ``node_name``, a pod assumed on another node is an error.
        """
        state = self._pods.get(uid)
        if state is None:
            return
        if node_name is not None and state.node != node_name:
            raise CacheError(
                f"pod {uid}({state.info.key}) was assumed on {node_name} but assigned to "
                f"{state.node}"
            )
        if not state.assumed:
            raise CacheError(
                f"pod {uid}({state.info.key}) is not assumed, so it cannot be removed or forgotten"
            )
        self._remove(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    def cleanup_assumed_pods(self) -> list[str]:
        """Expire assumed pods whose binding finished more than the TTL ago; their UIDs.

        Pods still binding never expire, and with a TTL of 0 nothing does.
        """
        if self._ttl <= 0:
            return []
        now = self._clock()
        # Only finish_binding sets a deadline: a pod still binding has none.
        expired = [
            uid
            for uid in self._assumed
            if (deadline := self._pods[uid].deadline) is not None and now > deadline
        ]
        for uid in expired:
            log.info("Pod expired pod=%s node=%s", self._pods[uid].info.key, self._pods[uid].node)
            self._remove(uid)
        return expired

    async def run(self, period: float = CLEANUP_PERIOD) -> None:
        """Every ``period``: expire assumed pods (with a TTL) and report sizes, until
        :meth:`stop`."""
        while not self._stop.is_set():
            self.cleanup_assumed_pods()
            if self._size_metric is not None:
                self._size_metric(self.sizes())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=period)

    def stop(self) -> None:
        self._stop.set()

    # -- reading -------------------------------------------------------------------------------

    def get_pod(self, uid: str) -> Pod | None:
        """The cached pod (bound or assumed), even on a node whose Node object is gone."""
        state = self._pods.get(uid)
        return None if state is None else state.info.pod

    def node_of(self, uid: str) -> str | None:
        state = self._pods.get(uid)
        return None if state is None else state.node

    @property
    def node_count(self) -> int:
        """Nodes with a Node object."""
        return len(self._snapshot)

    @property
    def pod_count(self) -> int:
        """Pods counted on nodes, assumed ones included."""
        return len(self._pods)

    @property
    def assumed_count(self) -> int:
        return len(self._assumed)

    def sizes(self) -> dict[str, int]:
        """``scheduler_cache_size`` by type."""
        return {
            "assumed_pods": len(self._assumed),
            "pods": len(self._pods),
            "nodes": self.node_count,
        }

    def dump(self) -> CacheDump:
        """Every node with pods or a Node object, and the assumed pods."""
        nodes: dict[str, NodeDump] = {}
        for state in self._pods.values():
            if state.node not in nodes:
                nodes[state.node] = self._dump_node(state.node)
        for info in self._snapshot.node_infos():
            if info.name not in nodes:
                nodes[info.name] = self._dump_node(info.name)
        return CacheDump(
            nodes=dict(sorted(nodes.items())),
            assumed_pods={uid: self._pods[uid].node for uid in sorted(self._assumed)},
        )

    # -- internals -----------------------------------------------------------------------------

    def _dump_node(self, name: str) -> NodeDump:
        uids = [uid for uid, s in self._pods.items() if s.node == name]
        info = self._snapshot.get(name)
        has_node = info is not None
        if info is None:
            info = self._ghost(name)
        pods = sorted(
            self._pods[uid].info.key + (" (assumed)" if uid in self._assumed else "")
            for uid in uids
        )
        return NodeDump(
            name=name,
            has_node=has_node,
            allocatable=dict(info.allocatable) if info is not None and has_node else {},
            requested=dict(info.requested) if info is not None else {},
            pods=pods,
        )

    def _ghost(self, name: str) -> NodeInfo | None:
        """The NodeInfo of a node known only through its pods (no Node object)."""
        names = self._snapshot.table.names
        for slot, n in enumerate(names):
            if n == name:
                return self._snapshot.at(slot)
        return None

    def _put(self, info: PodInfo, node: str, *, assumed: bool) -> None:
        uid = info.uid
        self._snapshot.add_pod(info, node)
        self._pods[uid] = _PodState(info=info, node=node, assumed=assumed)
        if assumed:
            self._assumed.add(uid)
        else:
            self._assumed.discard(uid)

    def _remove(self, uid: str) -> None:
        self._snapshot.remove_pod(uid)
        del self._pods[uid]
        self._assumed.discard(uid)


def _counts_alike(old: Pod, new: Pod) -> bool:
    """Whether the cache would count ``new`` exactly as ``old``: everything PodInfo, the node's
    row and the pod table derive from a pod (spec, namespace, labels, termination) is equal."""
    om, nm = old.metadata, new.metadata
    return (
        om.namespace == nm.namespace
        and om.deletion_timestamp == nm.deletion_timestamp
        and om.labels == nm.labels
        and old.spec == new.spec
    )


def _name(pod: Pod) -> str:
    """``uid(namespace/name)``, as kube-scheduler names a pod in cache errors."""
    return f"{pod.metadata.uid}({pod.key})"
