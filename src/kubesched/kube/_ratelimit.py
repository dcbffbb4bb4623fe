"""Client-side rate limiting: a token bucket like client-go's ``flowcontrol`` limiter."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

__all__ = ["UNLIMITED_QPS", "TokenBucket"]

#: A ``qps`` at or above this is treated as "no limit" (as is any value <= 0).
UNLIMITED_QPS = 1e6


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; the bucket starts full.

    :meth:`acquire` reserves a token and sleeps until it is due, so waiters are served in the
    order they arrived without a lock (Go's ``rate.Limiter`` reservation scheme). A ``qps`` that
    is not positive, infinite or at least :data:`UNLIMITED_QPS` disables limiting; a ``burst``
    below 1 is taken as 1.
    """

    def __init__(
        self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.unlimited = not (0 < qps < UNLIMITED_QPS) or math.isnan(qps)
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()

    def _advance(self) -> None:
        now = self._clock()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now

    def reserve(self) -> float:
        """Take one token now; the number of seconds to wait before using it (0 if none)."""
        if self.unlimited:
            return 0.0
        self._advance()
        self._tokens -= 1.0
        return -self._tokens / self.qps if self._tokens < 0 else 0.0

    def try_acquire(self) -> bool:
        """Take a token only if one is available right now."""
        if self.unlimited:
            return True
        self._advance()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def cancel_reservation(self) -> None:
        """Give back a token reserved by :meth:`reserve` but not used."""
        if not self.unlimited:
            self._tokens = min(float(self.burst), self._tokens + 1.0)

    async def acquire(self) -> None:
        """Wait for a token."""
        delay = self.reserve()
        if delay <= 0:
            return
        try:
            await asyncio.sleep(delay)
        except asyncio.CancelledError:
            self.cancel_reservation()
            raise

    @property
    def tokens(self) -> float:
        """Tokens available now (negative while reservations are waiting)."""
        if self.unlimited:
            return math.inf
        self._advance()
        return self._tokens
