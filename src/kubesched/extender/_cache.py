"""What the extender knows of the cluster: snapshots fed by informers and by request bodies.

Two snapshots, each with its own frameworks:

* the **cluster** snapshot holds the nodes and assigned pods the informers deliver; it serves
  requests that name nodes (``NodeNames``, a ``nodeCacheCapable`` extender) and preemption;
* the **body** snapshot holds the nodes of the ``NodeList`` bodies kube-scheduler sends when the
  extender is not ``nodeCacheCapable``, plus the same assigned pods.

Both also get the labels of Namespaces and the pod selectors of Services, ReplicationControllers,
ReplicaSets and StatefulSets when a profile has a plugin that reads them (InterPodAffinity,
PodTopologySpread), and the objects of the kinds plugins declare
(:attr:`~kubesched.framework.Plugin.watched_kinds`) in their object stores. A node is decoded again
  only when its ``uid`` or ``resourceVersion`` changes, so a steady cluster costs one cheap peek
  per node per request. Nodes that stop appearing in bodies are forgotten after a while.

Informer callbacks run on the event loop while plugins run on the extender's worker thread, so
callbacks only queue their change; the worker applies queued changes before every request it
serves (and on its own when changes arrive between requests). Nothing else touches a snapshot.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, Final

import msgspec
import numpy as np

from kubesched.api import LabelSelector, Node, ObjectMeta, Pod
from kubesched.extender._errors import ExtenderError
from kubesched.extender._protocol import peek_decoder
from kubesched.framework import IntArray, PodInfo, Snapshot, StoredObject
from kubesched.kube import ResourceEventHandler

__all__ = [
    "WORKLOAD_PATHS",
    "BadNodeError",
    "BodyNodes",
    "ClusterCache",
    "MapWorkload",
    "Namespace",
    "NamespaceHandler",
    "NodeHandler",
    "ObjectHandler",
    "PodHandler",
    "SelectorWorkload",
    "Workload",
    "WorkloadHandler",
]

log = logging.getLogger(__name__)

_node_decoder: Final = msgspec.json.Decoder(Node)

#: Pods in these phases hold nothing on their node.
_TERMINAL: Final = frozenset({"Succeeded", "Failed"})

_Op = Callable[[], None]

#: The start of a Node as Go's encoder writes it: ``metadata`` first, and in it ``name``, the
#: optional ``generateName``/``namespace``/``selfLink``, ``uid``, ``resourceVersion``, in that
#: order, all plain strings. Matching it reads a node's identity without parsing the node; any
#: other spelling (escapes, another field order, whitespace) falls back to a real decode.
_GO_NODE_PREFIX: Final = re.compile(
    rb'\{"metadata":\{"name":"([^"\\]+)",'
    rb'(?:"(?:generateName|namespace|selfLink)":"[^"\\]*",)*'
    rb'"uid":"([^"\\]*)","resourceVersion":"([^"\\]*)"'
)


class Namespace(msgspec.Struct, kw_only=True):
    """The part of a Namespace the plugins read: its labels (InterPodAffinity's
    ``namespaceSelector``)."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class _MapSpec(msgspec.Struct):
    selector: dict[str, str] | None = None


class _SelectorSpec(msgspec.Struct):
    selector: LabelSelector | None = None


class MapWorkload(msgspec.Struct, kw_only=True):
    """A Service or ReplicationController: its pod selector, a map."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: _MapSpec = msgspec.field(default_factory=_MapSpec)

    def selector(self) -> LabelSelector | None:
        """The selector, or ``None`` when it selects no pod (a Service without one)."""
        s = self.spec.selector
        return LabelSelector(match_labels=s) if s else None


class SelectorWorkload(msgspec.Struct, kw_only=True):
    """A ReplicaSet or StatefulSet: its pod selector, a LabelSelector."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: _SelectorSpec = msgspec.field(default_factory=_SelectorSpec)

    def selector(self) -> LabelSelector | None:
        return self.spec.selector


#: A workload whose pod selector PodTopologySpread's default constraints read.
Workload = MapWorkload | SelectorWorkload

#: Where each workload kind is listed and watched, and what it decodes into.
WORKLOAD_PATHS: Final[dict[str, tuple[str, type[MapWorkload] | type[SelectorWorkload]]]] = {
    "Service": ("/api/v1/services", MapWorkload),
    "ReplicationController": ("/api/v1/replicationcontrollers", MapWorkload),
    "ReplicaSet": ("/apis/apps/v1/replicasets", SelectorWorkload),
    "StatefulSet": ("/apis/apps/v1/statefulsets", SelectorWorkload),
}


def _counts(pod: Pod) -> bool:
    return bool(pod.spec.node_name) and pod.status.phase not in _TERMINAL


class ClusterCache:
    """The cluster snapshot, the body snapshot, and the queue of informer changes for both."""

    def __init__(self) -> None:
        self.cluster = Snapshot()
        #: Name -> slot of every node of the cluster snapshot (``NodeNames`` lookups).
        self.cluster_slots: dict[str, int] = {}
        #: Bumped whenever :attr:`cluster_slots` changes (a node added, removed or moved).
        self.slots_version = 0
        self.body = Snapshot()
        self.body_nodes = BodyNodes(self.body)
        self._pending: deque[_Op] = deque()
        self._flush_scheduled = False
        self._lock = threading.Lock()
        #: Called (on the event loop) when changes are queued and no flush is scheduled yet.
        self.on_pending: Callable[[], None] | None = None

    # -- event loop side ---------------------------------------------------------------------

    def _queue(self, op: _Op) -> None:
        self._pending.append(op)
        with self._lock:
            if self._flush_scheduled:
                return
            self._flush_scheduled = True
        if self.on_pending is not None:
            self.on_pending()

    def set_node(self, node: Node) -> None:
        self._queue(partial(self._set_node, node))

    def remove_node(self, node: Node) -> None:
        self._queue(partial(self._remove_node, node.metadata.name))

    def set_pod(self, pod: Pod) -> None:
        if _counts(pod):
            self._queue(partial(self._set_pod, pod))
        else:
            self._queue(partial(self._remove_pod, pod.metadata.uid))

    def remove_pod(self, pod: Pod) -> None:
        self._queue(partial(self._remove_pod, pod.metadata.uid))

    def set_namespace(self, namespace: Namespace) -> None:
        meta = namespace.metadata
        self._queue(partial(self._set_namespace, meta.name, meta.labels))

    def remove_namespace(self, namespace: Namespace) -> None:
        self._queue(partial(self._remove_namespace, namespace.metadata.name))

    def set_workload(self, kind: str, workload: Workload) -> None:
        meta = workload.metadata
        self._queue(
            partial(self._set_workload, kind, meta.namespace, meta.name, workload.selector())
        )

    def remove_workload(self, kind: str, workload: Workload) -> None:
        meta = workload.metadata
        self._queue(partial(self._set_workload, kind, meta.namespace, meta.name, None))

    def set_object(self, obj: StoredObject) -> None:
        self._queue(partial(self._set_object, obj))

    def remove_object(self, obj: StoredObject) -> None:
        self._queue(partial(self._remove_object, obj))

    # -- worker side -------------------------------------------------------------------------

    def flush(self) -> int:
        """Apply every queued change to both snapshots; returns how many were applied.

        A change that fails is logged and skipped: one bad object must not keep the others out.
        """
        with self._lock:
            self._flush_scheduled = False
        applied = 0
        while True:
            try:
                op = self._pending.popleft()
            except IndexError:
                return applied
            applied += 1
            try:
                op()
            except Exception:
                log.exception("applying an informer change failed")

    def _set_node(self, node: Node) -> None:
        name = node.metadata.name
        slot = self.cluster.set_node(node).slot
        if self.cluster_slots.get(name) != slot:
            self.cluster_slots[name] = slot
            self.slots_version += 1

    def _remove_node(self, name: str) -> None:
        self.cluster.remove_node(name)
        if self.cluster_slots.pop(name, None) is not None:
            self.slots_version += 1

    def _set_pod(self, pod: Pod) -> None:
        info = PodInfo.of(pod)
        self.cluster.add_pod(info, pod.spec.node_name)
        self.body.add_pod(info, pod.spec.node_name)

    def _remove_pod(self, uid: str) -> None:
        self.cluster.remove_pod(uid)
        self.body.remove_pod(uid)

    def _set_namespace(self, name: str, labels: Mapping[str, str]) -> None:
        self.cluster.set_namespace(name, labels)
        self.body.set_namespace(name, labels)

    def _remove_namespace(self, name: str) -> None:
        self.cluster.remove_namespace(name)
        self.body.remove_namespace(name)

    def _set_workload(
        self, kind: str, namespace: str, name: str, selector: LabelSelector | None
    ) -> None:
        for snapshot in (self.cluster, self.body):
            if selector is None:
                snapshot.remove_workload_selector(kind, namespace, name)
            else:
                snapshot.set_workload_selector(kind, namespace, name, selector)

    def _set_object(self, obj: StoredObject) -> None:
        self.cluster.objects.set(obj)
        self.body.objects.set(obj)

    def _remove_object(self, obj: StoredObject) -> None:
        meta = obj.metadata
        self.cluster.objects.delete(type(obj), meta.name, meta.namespace)
        self.body.objects.delete(type(obj), meta.name, meta.namespace)


class NodeHandler(ResourceEventHandler[Node]):
    """The node informer's handler: every change goes to the cluster snapshot."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    def on_add(self, obj: Node) -> None:
        self._cache.set_node(obj)

    def on_update(self, old: Node, new: Node) -> None:
        self._cache.set_node(new)

    def on_delete(self, obj: Node) -> None:
        self._cache.remove_node(obj)


class PodHandler(ResourceEventHandler[Pod]):
    """The pod informer's handler: assigned, non-terminal pods count on their node."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    def on_add(self, obj: Pod) -> None:
        self._cache.set_pod(obj)

    def on_update(self, old: Pod, new: Pod) -> None:
        self._cache.set_pod(new)

    def on_delete(self, obj: Pod) -> None:
        self._cache.remove_pod(obj)


class NamespaceHandler(ResourceEventHandler[Namespace]):
    """The namespace informer's handler (labels, for ``namespaceSelector``)."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    def on_add(self, obj: Namespace) -> None:
        self._cache.set_namespace(obj)

    def on_update(self, old: Namespace, new: Namespace) -> None:
        self._cache.set_namespace(new)

    def on_delete(self, obj: Namespace) -> None:
        self._cache.remove_namespace(obj)


class WorkloadHandler(ResourceEventHandler[Any]):
    """The handler of one workload kind's informer (selectors, for default spreading)."""

    def __init__(self, cache: ClusterCache, kind: str) -> None:
        self._cache = cache
        self._kind = kind

    def on_add(self, obj: Workload) -> None:
        self._cache.set_workload(self._kind, obj)

    def on_update(self, old: Workload, new: Workload) -> None:
        self._cache.set_workload(self._kind, new)

    def on_delete(self, obj: Workload) -> None:
        self._cache.remove_workload(self._kind, obj)


class ObjectHandler(ResourceEventHandler[Any]):
    """The handler of the informer of a kind plugins watch: into both object stores."""

    def __init__(self, cache: ClusterCache) -> None:
        self._cache = cache

    def on_add(self, obj: StoredObject) -> None:
        self._cache.set_object(obj)

    def on_update(self, old: StoredObject, new: StoredObject) -> None:
        self._cache.set_object(new)

    def on_delete(self, obj: StoredObject) -> None:
        self._cache.remove_object(obj)


class BadNodeError(ExtenderError, ValueError):
    """A ``NodeList`` item that is not a usable Node; the message names it."""


class BodyNodes:
    """Keeps the body snapshot's nodes in step with the ``NodeList`` bodies of requests."""

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        forget_after: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.snapshot = snapshot
        self.forget_after = forget_after
        self._clock = clock
        #: node name -> (uid, resourceVersion) of the Node object in the snapshot.
        self._versions: dict[str, tuple[bytes, bytes]] = {}
        self._last_seen: dict[str, float] = {}
        self._next_sweep = clock() + forget_after
        #: Full decodes so far (tests and the benchmark read it).
        self.decoded = 0

    def update(self, items: Sequence[msgspec.Raw]) -> tuple[list[str], IntArray]:
        """Bring the snapshot up to date with ``items``; their names and slots, in order.

        Raises :class:`BadNodeError` for an item that does not decode or has no name.
        """
        snapshot = self.snapshot
        versions = self._versions
        names: list[str] = []
        slots = np.empty(len(items), dtype=np.int64)
        for i, raw in enumerate(items):
            match = _GO_NODE_PREFIX.match(raw)
            if match is not None:
                name_bytes, uid, rv = match.groups()
                name = name_bytes.decode()
            else:
                try:
                    meta = peek_decoder.decode(raw).metadata
                except msgspec.DecodeError as e:
                    raise BadNodeError(f"Nodes.items[{i}]: {e}") from None
                name, uid, rv = meta.name, meta.uid.encode(), meta.resource_version.encode()
                if not name:
                    raise BadNodeError(f"Nodes.items[{i}]: metadata.name is required")
            key = (uid, rv)
            info = snapshot.get(name)
            if info is None or not rv or versions.get(name) != key:
                try:
                    node = _node_decoder.decode(raw)
                except msgspec.DecodeError as e:
                    raise BadNodeError(f"Nodes.items[{i}] ({name}): {e}") from None
                info = snapshot.set_node(node)
                versions[name] = key
                self.decoded += 1
            names.append(name)
            slots[i] = info.slot
        now = self._clock()
        last_seen = self._last_seen
        for name in names:
            last_seen[name] = now
        if now >= self._next_sweep:
            self._sweep(now)
        return names, slots

    def _sweep(self, now: float) -> None:
        cutoff = now - self.forget_after
        for name in [n for n, t in self._last_seen.items() if t < cutoff]:
            del self._last_seen[name]
            self._versions.pop(name, None)
            self.snapshot.remove_node(name)
        self._next_sweep = now + self.forget_after
