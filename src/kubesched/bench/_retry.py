"""The bench's own requests to the API server, retried for a bounded time.

A run's bookkeeping (creating objects, watching and listing pods, counting events) must neither
hang on an API server that stopped answering nor end the whole command on one refused request:
a throttled (429), failing (5xx) or unreachable server is asked again with backoff until it has
refused or not answered for ``within`` seconds; then the run fails with an error that says
what it was doing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from kubesched.bench._errors import BenchError
from kubesched.kube import APIError, Backoff, TemporaryAPIError

T = TypeVar("T")

#: First wait after a refused request, and the most any wait grows to.
INITIAL_DELAY_S = 0.05
MAX_DELAY_S = 2.0


class APIUnavailableError(BenchError):
    """The API server refused or did not answer the bench's requests for too long."""

    def __init__(self, what: str, within: float, last: str = "") -> None:
        # ``last`` is the last refusal; none means no answer came at all.
        if last:
            text = f"refused or did not answer for {within:g} s while {what} (last: {last})"
        else:
            text = f"did not answer for {within:g} s while {what}"
        super().__init__(f"the API server {text}")


def backoff() -> Backoff:
    """The waits between attempts: doubling from :data:`INITIAL_DELAY_S` to
    :data:`MAX_DELAY_S`, with a little jitter so that many callers do not retry in step."""
    return Backoff(INITIAL_DELAY_S, MAX_DELAY_S, jitter=0.2)


async def patiently(call: Callable[[], Awaitable[T]], *, what: str, within: float) -> T:
    """``call()`` (an idempotent request) until it succeeds, each attempt cut off at the time
    left; temporary API errors (429, 5xx, connection failures, timeouts) are retried with
    :func:`backoff` for ``within`` seconds, then :class:`APIUnavailableError` names ``what``.
    Any other API error is the API server's answer: a :class:`BenchError` at once."""
    deadline = time.monotonic() + within
    waits = backoff()
    last = ""
    while (left := deadline - time.monotonic()) > 0:
        try:
            async with asyncio.timeout(left):
                return await call()
        except TimeoutError:
            break
        except TemporaryAPIError as err:
            last = err.describe()
        except APIError as err:
            raise BenchError(f"the API server answered {err.describe()} while {what}") from err
        await asyncio.sleep(min(waits.next(), max(0.0, deadline - time.monotonic())))
    raise APIUnavailableError(what, within, last)


__all__ = ["APIUnavailableError", "backoff", "patiently"]
