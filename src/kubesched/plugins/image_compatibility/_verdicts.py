"""Filter and Score results per (spec, node), kept until the node's features change.

Evaluating a spec's rules against a node's features is microseconds of Python per node; over
5,000 nodes, per pod, that is the whole cycle. Results are kept instead:

* :class:`FeatureIndex` groups the NodeFeature objects of the snapshot's object store by the
  node they describe (label ``nfd.node.kubernetes.io/node-name``) and gives every node a
  *features id* (``fid``) that changes when one of its objects is added, replaced or removed.
  Nodes without a NodeFeature share fid 0 (no features). It catches up from the store's change
  log (only the nodes changed are touched; everything is read again only when the log does not
  reach back far enough), and keeps a per-slot array of fids aligned with the NodeTable,
  updated in place for changed nodes and rebuilt when the table's node names change.
* :class:`SpecVerdicts` holds, per spec, a lookup table fid -> result id; Filter and Score
  gather it over the nodes' fids (one numpy gather) and evaluate only the fids not seen yet.

When the fid counter outgrows the nodes (many feature updates), fids are renumbered and every
table's results are dropped (:attr:`FeatureIndex.epoch`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kubesched.framework import IdArray, IntArray, NodeTable, ObjectStore
from kubesched.plugins.image_compatibility._nfd import (
    NODE_NAME_LABEL,
    Features,
    NodeFeature,
    node_features,
)
from kubesched.plugins.image_compatibility._spec import SpecResult

#: The fid of nodes without NodeFeature objects.
NO_FEATURES = 0
_UNKNOWN = -1
_RULE_LABEL = re.compile(r'rule "[^"]*"')


def _node_of(obj: NodeFeature | None) -> str:
    return "" if obj is None else obj.metadata.labels.get(NODE_NAME_LABEL, "")


def _key(obj: NodeFeature) -> tuple[str, str]:
    return obj.metadata.namespace, obj.metadata.name


class FeatureIndex:
    """Each node's NodeFeature objects, and an id that changes when they do."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store
        self._version = -1
        #: node -> its NodeFeature objects by (namespace, name).
        self._objects: dict[str, dict[tuple[str, str], NodeFeature]] = {}
        self._fid: dict[str, int] = {}
        self._node: dict[int, str] = {}
        self._features: dict[int, Features] = {}
        self._next = NO_FEATURES + 1
        #: Bumped when fids are renumbered: every result cached by fid is void.
        self.epoch = 0
        self._names: list[str] = []
        self._slot_of: dict[str, int] = {}
        self._slot_fids: IntArray = np.zeros(0, dtype=np.int64)
        #: Nodes whose fid changed since the slot array was last brought up to date.
        self._dirty: set[str] = set()

    @property
    def nodes(self) -> int:
        """How many nodes have NodeFeature objects."""
        self.refresh()
        return len(self._objects)

    def refresh(self) -> None:
        """Catch up with the object store's NodeFeatures: from its change log when it reaches
        back far enough (only the nodes changed are touched), else from every object."""
        version = self._store.version(NodeFeature)
        if version == self._version:
            return
        changes = self._store.changes(NodeFeature, self._version)
        self._version = version
        if changes is None:
            self._reload()
        else:
            for old, new in changes:
                self._apply(old, new)
        if self._next > 4 * len(self._objects) + 1024:
            self._renumber()

    def _apply(self, old: NodeFeature | None, new: NodeFeature | None) -> None:
        if old is not None and (node := _node_of(old)):
            mine = self._objects.get(node)
            if mine is not None and mine.pop(_key(old), None) is not None:
                if not mine:
                    del self._objects[node]
                self._changed(node)
        if new is not None and (node := _node_of(new)):
            self._objects.setdefault(node, {})[_key(new)] = new
            self._changed(node)

    def _reload(self) -> None:
        before = self._objects
        self._objects = {}
        for obj in self._store.list(NodeFeature):
            if node := _node_of(obj):
                self._objects.setdefault(node, {})[_key(obj)] = obj
        for node in before.keys() | self._objects.keys():
            old, new = before.get(node, {}), self._objects.get(node, {})
            if old.keys() != new.keys() or any(new[k] is not v for k, v in old.items()):
                self._changed(node)

    def _changed(self, node: str) -> None:
        fid = self._fid.pop(node, None)
        if fid is not None:
            self._node.pop(fid, None)
            self._features.pop(fid, None)
        if node in self._objects:
            fid = self._next
            self._next += 1
            self._fid[node] = fid
            self._node[fid] = node
        self._dirty.add(node)

    def _renumber(self) -> None:
        self._fid = {node: i for i, node in enumerate(sorted(self._objects), NO_FEATURES + 1)}
        self._node = {fid: node for node, fid in self._fid.items()}
        self._features.clear()
        self._next = len(self._fid) + 1
        self.epoch += 1
        self._names = []  # rebuild the slot array

    def slot_fids(self, table: NodeTable) -> IntArray:
        """The fid of every slot of ``table`` (0 for empty slots and featureless nodes)."""
        self.refresh()
        names = table.names
        fid = self._fid
        if names != self._names:
            self._slot_fids = np.fromiter(
                (fid.get(n, NO_FEATURES) for n in names), dtype=np.int64, count=len(names)
            )
            self._names = list(names)
            self._slot_of = {n: i for i, n in enumerate(names) if n}
        elif self._dirty:
            for node in self._dirty:
                slot = self._slot_of.get(node)
                if slot is not None:
                    self._slot_fids[slot] = fid.get(node, NO_FEATURES)
        self._dirty.clear()
        return self._slot_fids

    def size(self) -> int:
        """One more than the largest fid in use: the length a lookup table needs."""
        return self._next

    def node_of(self, fid: int) -> str:
        """The node a fid stands for (``""`` for :data:`NO_FEATURES`)."""
        return self._node.get(fid, "")

    def features(self, fid: int) -> Features:
        """The merged features of the node with ``fid`` (empty for :data:`NO_FEATURES`)."""
        found = self._features.get(fid)
        if found is None:
            node = self._node.get(fid, "")
            found = node_features(self._objects.get(node, {}).values(), node)
            self._features[fid] = found
        return found


def failed_rules(result: SpecResult) -> str:
    """The rules a node failed, as ``rule "a", rule "b"`` (the first failing rule of each set):
    the node-independent part of a result's reason. The node's values stay out, so that nodes
    failing alike share one message when kube-scheduler counts reasons across nodes."""
    labels = list(dict.fromkeys(_RULE_LABEL.findall(result.reason)))
    return ", ".join(labels) if labels else result.reason or "no compatibility set matched"


@dataclass(frozen=True, slots=True)
class Verdict:
    """A result as Filter and Score use it; nodes whose results differ only in the values
    the reasons quote share one."""

    compatible: bool
    weight: int
    #: For an incompatible node: the rules it failed (:func:`failed_rules`).
    failed: str
    #: One node's full result, for explanations and logs.
    example: SpecResult


class SpecVerdicts:
    """One spec's verdicts by fid: distinct verdicts once each, a lookup table fid -> verdict."""

    def __init__(self) -> None:
        self.results: list[Verdict] = []
        self._ids: dict[tuple[bool, int, str], int] = {}
        self._lut: IdArray = np.full(0, _UNKNOWN, dtype=np.int32)
        self._epoch = -1
        #: ``weights[i]``: the Score contribution of result ``i``.
        self.weights: IntArray = np.zeros(0, dtype=np.int64)
        #: Nodes evaluated (not served from the table), for tests and the benchmark.
        self.evaluated = 0

    def reset(self) -> None:
        self._lut = np.full(0, _UNKNOWN, dtype=np.int32)

    def ids(
        self, fids: IntArray, size: int, epoch: int, evaluate: Callable[[int], SpecResult]
    ) -> IdArray:
        """The result id of every fid in ``fids``, evaluating unseen fids with ``evaluate``."""
        if epoch != self._epoch:
            self._epoch = epoch
            self.reset()
        if len(self._lut) < size:
            grown = np.full(max(size, 2 * len(self._lut)), _UNKNOWN, dtype=np.int32)
            grown[: len(self._lut)] = self._lut
            self._lut = grown
        out = self._lut[fids]
        unknown = out == _UNKNOWN
        if unknown.any():
            for fid in np.unique(fids[unknown]).tolist():
                self._lut[fid] = self._intern(evaluate(fid))
                self.evaluated += 1
            out = self._lut[fids]
        return out

    def _intern(self, result: SpecResult) -> int:
        failed = "" if result.compatible else failed_rules(result)
        key = (result.compatible, result.weight, failed)
        rid = self._ids.get(key)
        if rid is None:
            rid = self._ids[key] = len(self.results)
            self.results.append(Verdict(result.compatible, result.weight, failed, result))
            self.weights = np.append(self.weights, result.weight if result.compatible else 0)
        return rid
