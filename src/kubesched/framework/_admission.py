"""Which keys a per-shape cache keeps: those asked for again soon enough to be found there.

Keeping what was derived for a pod shape costs more than deriving it once (arrays over every
slot instead of the nodes asked about, then scatters and gathers through them). That pays when
the shape comes back before the cache has dropped it, as pods of a workload do one after
another; it is pure cost for a shape no other pod has (what-if simulations) or one that comes
back only after many others (a mix of more shapes than the cache holds). So a cache admits a key
when it was last asked about at most ``window`` questions ago; the first time, or after longer,
the caller derives directly (a "doorkeeper" in the manner of TinyLFU's, with recency).
"""

from __future__ import annotations

from collections.abc import Hashable

#: Keys remembered; all are forgotten at this many (each is then derived directly once more).
_MAX_SEEN = 4096


class Doorkeeper:
    """Admits a key to a cache when it was asked about within the last ``window`` questions."""

    __slots__ = ("_asked", "_last", "_window")

    def __init__(self, window: int) -> None:
        self._window = window
        self._asked = 0
        self._last: dict[Hashable, int] = {}

    def admit(self, key: Hashable) -> bool:
        """Whether ``key`` was asked about recently; remembers that it is now."""
        self._asked += 1
        last = self._last.get(key)
        if last is None and len(self._last) >= _MAX_SEEN:
            self._last.clear()
        self._last[key] = self._asked
        return last is not None and self._asked - last <= self._window
