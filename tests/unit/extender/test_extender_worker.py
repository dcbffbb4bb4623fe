"""The extender's worker thread: calls run in order, off the loop, and their outcome comes back."""

from __future__ import annotations

import asyncio
import threading

import pytest

from kubesched.extender._engine import _Worker


async def test_calls_run_in_order_on_the_thread_and_return_or_raise() -> None:
    worker = _Worker("test-worker")
    seen: list[tuple[int, str]] = []

    def record(i: int) -> int:
        seen.append((i, threading.current_thread().name))
        return i * 10

    try:
        worker.call(lambda: record(0))
        assert await asyncio.gather(*(worker.run(lambda i=i: record(i)) for i in (1, 2, 3))) == [
            10,
            20,
            30,
        ]
        assert seen == [(i, "test-worker") for i in range(4)]
        with pytest.raises(ZeroDivisionError):
            await worker.run(lambda: 1 // 0)
        worker.call(lambda: 1 // 0)  # logged; the thread goes on
        assert await worker.run(lambda: "still here") == "still here"
    finally:
        worker.close()


async def test_a_call_nobody_waits_for_any_more_is_not_started() -> None:
    worker = _Worker("test-worker")
    gate = threading.Event()
    ran: list[str] = []
    try:
        worker.call(lambda: gate.wait(5))
        waiting = asyncio.ensure_future(worker.run(lambda: ran.append("cancelled")))
        await asyncio.sleep(0.05)
        waiting.cancel()
        gate.set()
        assert await worker.run(lambda: ran.append("next")) is None
        assert ran == ["next"]
    finally:
        worker.close()


async def test_after_close_queued_calls_are_dropped() -> None:
    worker = _Worker("test-worker")
    gate = threading.Event()
    ran: list[int] = []
    worker.call(lambda: gate.wait(5))
    worker.call(lambda: ran.append(1))
    worker.close()
    gate.set()
    await asyncio.sleep(0.1)
    assert ran == []
