"""What the extender knows of the cluster: snapshots fed by informers and by request bodies.

Two snapshots, each with its own frameworks:

* the **cluster** snapshot holds the nodes and assigned pods the informers deliver; it serves
  requests that name nodes (``NodeNames``, a ``nodeCacheCapable`` extender) and preemption;
* the **body** snapshot holds the nodes of the ``NodeList`` bodies kube-scheduler sends when the
  extender is not ``nodeCacheCapable``, plus the same assigned pods. A node is decoded again
  only when its ``uid`` or ``resourceVersion`` changes, so a steady cluster costs one cheap peek
  per node per request. Nodes that stop appearing in bodies are forgotten after a while.

Informer callbacks run on the event loop while plugins run on the extender's worker thread, so
callbacks only queue their change; the worker applies queued changes before every request it
serves (and on its own when changes arrive between requests). Nothing else touches a snapshot.
"""

from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

import msgspec
import numpy as np

from kubesched.api import Node, Pod
from kubesched.extender._protocol import peek_decoder
from kubesched.framework import IntArray, PodInfo, Snapshot
from kubesched.kube import ResourceEventHandler

__all__ = ["BadNodeError", "BodyNodes", "ClusterCache", "NodeHandler", "PodHandler"]

_node_decoder: Final = msgspec.json.Decoder(Node)

#: Pods in these phases hold nothing on their node.
_TERMINAL: Final = frozenset({"Succeeded", "Failed"})

_Op = tuple[str, object]

#: The start of a Node as Go's encoder writes it: ``metadata`` first, and in it ``name``, the
#: optional ``generateName``/``namespace``/``selfLink``, ``uid``, ``resourceVersion``, in that
#: order, all plain strings. Matching it reads a node's identity without parsing the node; any
#: other spelling (escapes, another field order, whitespace) falls back to a real decode.
_GO_NODE_PREFIX: Final = re.compile(
    rb'\{"metadata":\{"name":"([^"\\]+)",'
    rb'(?:"(?:generateName|namespace|selfLink)":"[^"\\]*",)*'
    rb'"uid":"([^"\\]*)","resourceVersion":"([^"\\]*)"'
)


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
        self._queue(("node", node))

    def remove_node(self, node: Node) -> None:
        self._queue(("node-", node.metadata.name))

    def set_pod(self, pod: Pod) -> None:
        if _counts(pod):
            self._queue(("pod", pod))
        else:
            self._queue(("pod-", pod.metadata.uid))

    def remove_pod(self, pod: Pod) -> None:
        self._queue(("pod-", pod.metadata.uid))

    # -- worker side -------------------------------------------------------------------------

    def flush(self) -> int:
        """Apply every queued change to both snapshots; returns how many were applied."""
        with self._lock:
            self._flush_scheduled = False
        applied = 0
        cluster, body = self.cluster, self.body
        while True:
            try:
                kind, value = self._pending.popleft()
            except IndexError:
                return applied
            applied += 1
            if kind == "node":
                assert isinstance(value, Node)
                name = value.metadata.name
                slot = cluster.set_node(value).slot
                if self.cluster_slots.get(name) != slot:
                    self.cluster_slots[name] = slot
                    self.slots_version += 1
            elif kind == "node-":
                assert isinstance(value, str)
                cluster.remove_node(value)
                if self.cluster_slots.pop(value, None) is not None:
                    self.slots_version += 1
            elif kind == "pod":
                assert isinstance(value, Pod)
                info = PodInfo.of(value)
                cluster.add_pod(info, value.spec.node_name)
                body.add_pod(info, value.spec.node_name)
            else:
                assert isinstance(value, str)
                cluster.remove_pod(value)
                body.remove_pod(value)


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


class BadNodeError(ValueError):
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
