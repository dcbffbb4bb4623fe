"""A ``NodeNames`` list resolved once and answered many times.

kube-scheduler sends the same list of node names, in the same order, for pod after pod (every
feasible node, then the nodes that passed the filters). A :class:`NameList` holds what the
extender derives from one list: the slots of its nodes in the cluster snapshot, the names it
does not know and, built on first use, the JSON of each name, so that an answer is assembled
from ready-made bytes instead of touching thousands of strings per request:

* the filter's ``NodeNames``: the kept names' JSON joined by commas, or, when most are kept, the
  bytes of all the names with the others cut out (the answer that keeps every node is the
  request's own list, byte for byte);
* the filter's ``FailedNodes`` maps: the names' JSON joined by ``:<reason>,``, one join per
  reason, since a reason is shared by many nodes;
* prioritize's ``HostPriorityList``: one template with two bytes per score, filled for all nodes
  at once with numpy. A score of 0..9 is written with a space before it (``"Score": 7}``); JSON
  allows white space around a value, and Go's decoder reads it as ``7``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Final

import numpy as np
import numpy.typing as npt

from kubesched.extender._protocol import MAX_EXTENDER_PRIORITY, encoder
from kubesched.framework import IntArray

__all__ = ["NameList"]

#: The two bytes a score (0..10) takes in the prioritize template: tens (or a space), then units.
_TENS: Final = np.frombuffer(b" " * MAX_EXTENDER_PRIORITY + b"1", dtype=np.uint8)
_UNITS: Final = np.frombuffer(b"0123456789" + b"0", dtype=np.uint8)
#: Below one name in this many, a filter answer joins the kept names' JSON; above, it cuts the
#: others out of the whole list's bytes with numpy (half the time with 4,000 of 5,000 kept).
_FEW: Final = 8


class NameList:
    """One ``NodeNames`` list (its raw JSON ``raw``) resolved against ``slots_by_name``."""

    __slots__ = (
        "_index",
        "_quoted",
        "_score_at",
        "_segment_lengths",
        "_segments",
        "_template",
        "known",
        "names",
        "raw",
        "slots",
        "unknown",
        "unknown_at",
    )

    def __init__(self, raw: bytes, names: list[str], slots_by_name: Mapping[str, int]) -> None:
        self.raw = raw
        self.names = names
        get = slots_by_name.get
        found = [get(name, -1) for name in names]
        slots = np.array(found, dtype=np.int64)
        #: Positions in ``names`` of the nodes the snapshot knows (``None``: all of them).
        self.known: IntArray | None = None
        #: The names the snapshot does not know, and their positions in ``names``.
        self.unknown: list[str] = []
        self.unknown_at: IntArray = np.zeros(0, dtype=np.int64)
        if len(slots) and slots.min() < 0:
            self.unknown = [n for n, s in zip(names, found, strict=True) if s < 0]
            self.unknown_at = np.flatnonzero(slots < 0)
            self.known = np.flatnonzero(slots >= 0)
            slots = slots[self.known]
        slots.flags.writeable = False  # shared by every request with this list
        #: Slots of the known nodes, in request order.
        self.slots: IntArray = slots
        self._index: IntArray | None = None
        self._quoted: list[bytes] | None = None
        self._template: npt.NDArray[np.uint8] | None = None
        self._score_at: IntArray | None = None
        self._segments: npt.NDArray[np.uint8] | None = None
        self._segment_lengths: IntArray = np.zeros(0, dtype=np.int64)

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

    def _pick(self, positions: IntArray) -> Sequence[bytes]:
        """The quoted names at ``positions`` (at least one)."""
        quoted = self._quote()
        if len(positions) == 1:
            return [quoted[int(positions[0])]]
        picked: tuple[bytes, ...] = itemgetter(*positions.tolist())(quoted)
        return picked

    def names_json(self, positions: IntArray) -> bytes:
        """The JSON list of the names at ``positions`` (ascending)."""
        if len(positions) == len(self.names):
            return self.raw
        if len(positions) * _FEW < len(self.names):
            return b"[" + b",".join(self._pick(positions)) + b"]" if len(positions) else b"[]"
        # Most names are kept: cut the others out of all the names' bytes, ``,"name"`` each.
        if self._segments is None:
            quoted = self._quote()
            self._segments = np.frombuffer(b"".join(b"," + q for q in quoted), dtype=np.uint8)
            self._segment_lengths = np.array([len(q) + 1 for q in quoted], dtype=np.int64)
        keep = np.zeros(len(self.names), dtype=np.bool_)
        keep[positions] = True
        kept = self._segments[np.repeat(keep, self._segment_lengths)]
        return b"[" + kept[1:].tobytes() + b"]"

    def reasons_json(self, groups: Iterable[tuple[IntArray, str]]) -> bytes:
        """The JSON object mapping the names at each group's positions to its reason; a name in
        more than one group maps to the reason of the last."""
        parts = []
        for positions, reason in groups:
            if len(positions):
                value = b":" + encoder.encode(reason)
                parts.append((value + b",").join(self._pick(positions)) + value)
        return b"{" + b",".join(parts) + b"}"

    def priorities_json(self, scores: IntArray) -> bytes:
        """The ``HostPriorityList`` JSON for ``scores`` (0..10, aligned with :attr:`names`)."""
        if not self.names:
            return b"[]"
        if self._template is None:
            quoted = self._quote()
            entries = b",".join(b'{"Host":' + q + b',"Score":  }' for q in quoted)
            self._template = np.frombuffer(b"[" + entries + b"]", dtype=np.uint8)
            # Each entry ends with the two score bytes and "}"; the first entry starts at 1.
            ends = np.cumsum([len(q) + len(b'{"Host":,"Score":  },') for q in quoted])
            self._score_at = ends - 4 + 1
        assert self._score_at is not None
        out = self._template.copy()
        out[self._score_at] = _TENS[scores]
        out[self._score_at + 1] = _UNITS[scores]
        return out.tobytes()
