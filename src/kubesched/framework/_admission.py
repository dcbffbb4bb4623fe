"""Which keys a per-shape cache keeps: those asked for a second time.

Keeping what was derived for a pod shape costs more than deriving it once (arrays over every
slot instead of the nodes asked about, then scatters and gathers through them). That pays when
the shape comes back, as pods of a workload do; it is pure cost for inputs where no two pods
are alike (what-if simulations). So a cache admits a key on its second use only: a shape seen
once is derived directly and remembered by its key alone (TinyLFU's "doorkeeper").
"""

from __future__ import annotations

from collections.abc import Hashable

#: Keys remembered as seen once; all are forgotten at this many (a shape is then derived
#: directly once more before it is kept).
_MAX_SEEN = 4096


class Doorkeeper:
    """Admits a key to a cache the second time it is asked about."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[Hashable] = set()

    def admit(self, key: Hashable) -> bool:
        """Whether ``key`` was asked about before (since the last reset); remembers it."""
        if key in self._seen:
            return True
        if len(self._seen) >= _MAX_SEEN:
            self._seen.clear()
        self._seen.add(key)
        return False
