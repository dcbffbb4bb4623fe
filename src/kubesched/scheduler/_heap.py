"""The heap activeQ and backoffQ keep their pods in (kube-scheduler's ``heap.Heap``).

Pods are keyed by UID. Removal marks an entry dead and the heap drops it when it surfaces, so
that a delete costs a dict lookup instead of a search of the heap (docs/queue.md).
"""

from __future__ import annotations

import copy
import heapq
from collections.abc import Callable, Iterable
from typing import Any

from kubesched.framework import QueuedPodInfo, SortKeyFn

#: ``(a, b) -> bool``: whether ``a`` is popped before ``b`` (``LessFunc``).
LessFn = Callable[[QueuedPodInfo, QueuedPodInfo], bool]

#: Dead entries tolerated before the heap is rebuilt (and never more than live ones).
_COMPACT_AFTER = 64


class _Entry:
    """A heap entry; removal marks it dead.

    The heap holds tuples ending in the entry (:meth:`item`): the fields of the entry's sort key
    before it when the heap has a key, so that the heap compares keys without calling back into
    Python, or else the entry alone, which compares through ``less``. The key's fields are spread
    into the item rather than nested, which halves the cost of a pop. Equal keys fall through to
    the entries and so to ``less``.
    """

    __slots__ = ("alive", "key", "less", "qpi")

    def __init__(
        self, qpi: QueuedPodInfo, less: LessFn, key: tuple[int | float, ...] | None
    ) -> None:
        self.qpi = qpi
        self.less = less
        self.key = key
        self.alive = True

    def __lt__(self, other: _Entry) -> bool:
        return self.less(self.qpi, other.qpi)

    def __eq__(self, other: object) -> bool:
        # Tuples test the entries of equal keys for equality before ordering them: object's own
        # answer, a quarter cheaper here than object's, which Python reaches through ``__lt__``.
        return self is other

    __hash__ = object.__hash__

    def item(self) -> _Item:
        return (self,) if self.key is None else (*self.key, self)


#: A heap item: ``(*key, entry)`` or ``(entry,)`` (see :class:`_Entry`).
_Item = tuple[Any, ...]


class Heap:
    """Queued pods keyed by UID, popped by ``sort_key`` and, among equal keys, by ``less``.

    Without a ``sort_key`` the order is ``less`` alone. A pod ``less`` does not order against
    another (a tie) may come out before or after it. ``sort_key`` is called once each time a pod
    is added or updated.
    """

    def __init__(self, less: LessFn, sort_key: SortKeyFn | None) -> None:
        self._less = less
        self._sort_key = sort_key
        self._entries: dict[str, _Entry] = {}
        #: How many pods are in the heap, and whether one is (by UID): the dict's own methods,
        #: cheaper than ones of this class on the hot path.
        self.size: Callable[[], int] = self._entries.__len__
        self.has: Callable[[str], bool] = self._entries.__contains__
        self._items: list[_Item] = []
        self._dead = 0

    def add(self, qpi: QueuedPodInfo) -> None:
        """Put the pod in the heap, or sort it again if it is there (``AddOrUpdate``)."""
        # Through pod_info rather than the pod property: a call less on the hot path.
        uid = qpi.pod_info.pod.metadata.uid
        if uid in self._entries:
            self.delete(uid)
        key = None if self._sort_key is None else self._sort_key(qpi)
        entry = _Entry(qpi, self._less, key)
        self._entries[uid] = entry
        # entry.item() written out: a call less on every add.
        heapq.heappush(self._items, (entry,) if key is None else (*key, entry))

    def delete(self, uid: str) -> bool:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return False
        entry.alive = False
        # The dead entry stays in the heap until it surfaces, compared through ``less``: it
        # must keep comparing as it did, whatever becomes of the pod's QueuedPodInfo.
        entry.qpi = copy.copy(entry.qpi)
        self._dead += 1
        if self._dead > _COMPACT_AFTER and self._dead > len(self._entries):
            self._items = [e.item() for e in self._entries.values()]
            heapq.heapify(self._items)
            self._dead = 0
        return True

    def get(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.get(uid)
        return None if entry is None else entry.qpi

    def pod_infos(self) -> Iterable[QueuedPodInfo]:
        return (e.qpi for e in self._entries.values())

    def pop(self) -> QueuedPodInfo | None:
        """The head, out of the heap; ``None`` if the heap is empty."""
        items = self._items
        while items:
            entry: _Entry = heapq.heappop(items)[-1]
            if entry.alive:
                del self._entries[entry.qpi.pod_info.pod.metadata.uid]
                return entry.qpi
            self._dead -= 1
        return None

    def pop_below(self, bound: tuple[int | float, ...]) -> list[QueuedPodInfo]:
        """The pods whose sort key is below ``bound``, out of the heap in order (keys compare as
        tuples: ``(t,)`` is above every key that starts with ``t``). The heap has a sort key."""
        items, out = self._items, []
        while items:
            entry: _Entry = items[0][-1]
            if entry.alive:
                assert entry.key is not None  # only a heap with a sort key has keys to bound
                if entry.key >= bound:
                    break
                del self._entries[entry.qpi.pod_info.pod.metadata.uid]
                out.append(entry.qpi)
            else:
                self._dead -= 1
            heapq.heappop(items)
        return out
