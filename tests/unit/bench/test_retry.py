"""The bench's own requests: retried while the API server refuses them, for a bounded time."""

from __future__ import annotations

import asyncio
import time

import pytest

from kubesched.bench import BenchError
from kubesched.bench._retry import APIUnavailableError, patiently
from kubesched.kube import APIConnectionError, Forbidden, ServerError, TooManyRequests


class Script:
    """A request that fails with each of ``failures`` in turn, then answers ``"ok"``."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def test_throttled_failing_and_unreachable_are_retried_until_an_answer() -> None:
    call = Script(
        TooManyRequests(429, "TooManyRequests", "slow down"),
        ServerError(503, "ServiceUnavailable"),
        APIConnectionError("GET /x: connection refused"),
    )
    assert asyncio.run(patiently(call, what="counting", within=10.0)) == "ok"
    assert call.calls == 4


def test_refused_for_within_seconds_fails_naming_what_and_the_last_refusal() -> None:
    call = Script(*(TooManyRequests(429, "TooManyRequests", "slow down") for _ in range(10_000)))
    start = time.monotonic()
    with pytest.raises(APIUnavailableError) as failed:
        asyncio.run(patiently(call, what="counting the Scheduled events", within=0.5))
    assert 0.5 <= time.monotonic() - start < 2.0
    assert str(failed.value) == (
        "the API server refused or did not answer for 0.5 s while counting the Scheduled events "
        "(last: 429 TooManyRequests: slow down)"
    )
    # Backed off: a few attempts in half a second, not thousands.
    assert 3 <= call.calls < 20


def test_no_answer_at_all_is_cut_off_after_within_seconds() -> None:
    async def hangs() -> str:
        await asyncio.sleep(3600)
        return "never"

    start = time.monotonic()
    with pytest.raises(APIUnavailableError) as failed:
        asyncio.run(patiently(hangs, what="listing the pods", within=1.0))
    assert time.monotonic() - start < 2.0
    assert str(failed.value) == "the API server did not answer for 1 s while listing the pods"


def test_an_answer_that_is_not_temporary_fails_at_once() -> None:
    call = Script(Forbidden(403, "Forbidden", "no"))
    with pytest.raises(BenchError) as failed:
        asyncio.run(patiently(call, what="listing the nodes", within=10.0))
    assert not isinstance(failed.value, APIUnavailableError)
    assert str(failed.value) == "the API server answered 403 Forbidden: no while listing the nodes"
    assert call.calls == 1
