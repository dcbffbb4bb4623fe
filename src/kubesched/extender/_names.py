"""A ``NodeNames`` list resolved once and answered many times.

kube-scheduler sends the same list of node names, in the same order, for pod after pod (every
feasible node, then the nodes that passed the filters). A :class:`NameList` holds what the
extender derives from one list: the slots of its nodes in the cluster snapshot, the names it
does not know and, built on first use, the JSON of each name, so that an answer is assembled
from ready-made bytes instead of touching thousands of strings per request. The answer that
keeps every node is the request's own list, byte for byte.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Final

import numpy as np

from kubesched.extender._protocol import encoder
from kubesched.framework import IntArray

__all__ = ["NameList"]

#: ``<score>}`` for every prioritize score.
_SCORE_TAILS: Final = [b"%d}" % s for s in range(11)]


class NameList:
    """One ``NodeNames`` list (its raw JSON ``raw``) resolved against ``slots_by_name``."""

    __slots__ = ("_heads", "_index", "_quoted", "known", "names", "raw", "slots", "unknown")

    def __init__(self, raw: bytes, names: list[str], slots_by_name: Mapping[str, int]) -> None:
        self.raw = raw
        self.names = names
        get = slots_by_name.get
        found = [get(name, -1) for name in names]
        slots = np.array(found, dtype=np.int64)
        #: Positions in ``names`` of the nodes the snapshot knows (``None``: all of them).
        self.known: IntArray | None = None
        #: The names the snapshot does not know.
        self.unknown: list[str] = []
        if len(slots) and slots.min() < 0:
            self.unknown = [n for n, s in zip(names, found, strict=True) if s < 0]
            self.known = np.flatnonzero(slots >= 0)
            slots = slots[self.known]
        slots.flags.writeable = False  # shared by every request with this list
        #: Slots of the known nodes, in request order.
        self.slots: IntArray = slots
        self._index: IntArray | None = None
        self._quoted: list[bytes] | None = None
        self._heads: list[bytes] | None = None

    def positions(self, kept: IntArray) -> IntArray | None:
        """Positions in :attr:`names` of ``kept``, slots taken from :attr:`slots` in order;
        ``None`` when a name appears twice (positions would be ambiguous)."""
        if self._index is None:
            if len(np.unique(self.slots)) != len(self.slots):
                return None
            index = np.full(int(self.slots.max(initial=-1)) + 1, -1, dtype=np.int64)
            index[self.slots] = np.arange(len(self.slots), dtype=np.int64)
            self._index = index
        at = self._index[kept]
        return at if self.known is None else self.known[at]

    def _quote(self) -> list[bytes]:
        if self._quoted is None:
            self._quoted = [encoder.encode(name) for name in self.names]
        return self._quoted

    def names_json(self, positions: IntArray) -> bytes:
        """The JSON list of the names at ``positions`` (ascending)."""
        if len(positions) == len(self.names):
            return self.raw
        quoted = self._quote()
        return b"[" + b",".join([quoted[i] for i in positions.tolist()]) + b"]"

    def priorities_json(self, scores: IntArray) -> bytes:
        """The ``HostPriorityList`` JSON for ``scores`` (0..10, aligned with :attr:`names`)."""
        if not self.names:
            return b"[]"
        if self._heads is None:
            quoted = self._quote()
            self._heads = [b'[{"Host":' + quoted[0] + b',"Score":'] + [
                b',{"Host":' + q + b',"Score":' for q in quoted[1:]
            ]
        tails = [_SCORE_TAILS[s] for s in scores.tolist()]
        return b"".join(itertools.chain.from_iterable(zip(self._heads, tails, strict=True))) + b"]"
