"""The client-side token bucket."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from kubesched.kube import TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_qps() -> None:
    clock = Clock()
    bucket = TokenBucket(2.0, 3, clock=clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    # Reservations queue up behind each other, half a second apart at 2 qps.
    assert bucket.reserve() == pytest.approx(0.5)
    assert bucket.reserve() == pytest.approx(1.0)
    clock.now += 1.0
    assert bucket.tokens == pytest.approx(0.0)
    assert not bucket.try_acquire()
    clock.now += 10.0
    # Refill stops at burst.
    assert bucket.tokens == pytest.approx(3.0)
    assert bucket.try_acquire()


@pytest.mark.parametrize("qps", [0.0, -1.0, 1e6, 1e12, math.inf, math.nan])
def test_unlimited(qps: float) -> None:
    bucket = TokenBucket(qps, 1)
    assert bucket.unlimited
    assert all(bucket.reserve() == 0.0 for _ in range(1000))
    assert bucket.try_acquire()


def test_burst_below_one_is_one() -> None:
    clock = Clock()
    bucket = TokenBucket(10.0, 0, clock=clock)
    assert bucket.burst == 1
    assert bucket.reserve() == 0.0
    assert bucket.reserve() == pytest.approx(0.1)


def test_cancelled_reservation_gives_the_token_back() -> None:
    clock = Clock()
    bucket = TokenBucket(1.0, 1, clock=clock)
    bucket.reserve()
    assert bucket.reserve() == pytest.approx(1.0)
    bucket.cancel_reservation()
    assert bucket.reserve() == pytest.approx(1.0)


async def test_acquire_paces_requests() -> None:
    bucket = TokenBucket(100.0, 5)
    start = time.monotonic()
    for _ in range(25):
        await bucket.acquire()
    elapsed = time.monotonic() - start
    # 5 at once, then 20 at 100 per second.
    assert 0.18 <= elapsed < 0.6


async def test_cancelled_acquire_returns_token() -> None:
    bucket = TokenBucket(1.0, 1)
    await bucket.acquire()
    task = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.tokens == pytest.approx(0.0, abs=0.05)
