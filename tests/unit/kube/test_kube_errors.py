"""The error taxonomy: HTTP status and Status.reason → class → retry policy."""

from __future__ import annotations

import asyncio
import json

import pytest

from kubesched.kube import (
    AlreadyExists,
    APIConnectionError,
    APIError,
    Backoff,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    ServerTimeout,
    Status,
    TemporaryAPIError,
    TooManyRequests,
    Unauthorized,
    error_from_response,
    error_from_status,
    with_retries,
)


def _body(code: int, reason: str, message: str = "m", **details: object) -> bytes:
    status: dict[str, object] = {"kind": "Status", "code": code, "reason": reason}
    status["message"] = message
    if details:
        status["details"] = details
    return json.dumps(status).encode()


@pytest.mark.parametrize(
    ("code", "reason", "cls", "retryable"),
    [
        (400, "BadRequest", BadRequest, False),
        (401, "Unauthorized", Unauthorized, False),
        (403, "Forbidden", Forbidden, False),
        (404, "NotFound", NotFound, False),
        (409, "Conflict", Conflict, False),
        (409, "AlreadyExists", AlreadyExists, False),
        (410, "Expired", Gone, False),
        (410, "Gone", Gone, False),
        (422, "Invalid", Invalid, False),
        (429, "TooManyRequests", TooManyRequests, True),
        (500, "InternalError", ServerError, True),
        (500, "ServerTimeout", ServerTimeout, True),
        (503, "ServiceUnavailable", ServerError, True),
        (504, "Timeout", ServerTimeout, True),
        (418, "", APIError, False),
    ],
)
def test_status_maps_to_class(code: int, reason: str, cls: type[APIError], retryable: bool) -> None:
    err = error_from_response(code, _body(code, reason, "the message"))
    assert type(err) is cls
    assert err.status == code
    assert err.message == "the message"
    assert err.retryable is retryable
    assert isinstance(err, TemporaryAPIError) is retryable


def test_already_exists_is_a_conflict() -> None:
    assert issubclass(AlreadyExists, Conflict)
    err = error_from_response(409, _body(409, "AlreadyExists", 'pods "a" already exists'))
    assert isinstance(err, Conflict)
    # As client-go's StatusError reads, which kube-scheduler's messages quote.
    assert str(err) == 'pods "a" already exists'
    assert err.describe() == '409 AlreadyExists: pods "a" already exists'


def test_retry_after_from_header_or_details() -> None:
    err = error_from_response(429, _body(429, "TooManyRequests"), {"retry-after": "3"})
    assert isinstance(err, TooManyRequests)
    assert err.retry_after == 3.0
    err = error_from_response(500, _body(500, "ServerTimeout", retryAfterSeconds=2))
    assert isinstance(err, ServerTimeout)
    assert err.retry_after == 2.0
    assert err.details is not None
    err = error_from_response(503, _body(503, "ServiceUnavailable"))
    assert isinstance(err, ServerError)
    assert err.retry_after is None


def test_body_that_is_not_a_status() -> None:
    err = error_from_response(502, b"<html>bad gateway</html>")
    assert isinstance(err, ServerError)
    assert err.reason == ""
    assert "bad gateway" in err.message
    err = error_from_response(404, b"")
    assert isinstance(err, NotFound)
    assert err.reason == "NotFound"


def test_watch_error_event_status() -> None:
    status = Status(
        status="Failure", message="too old resource version: 1 (5)", reason="Expired", code=410
    )
    err = error_from_status(status)
    assert isinstance(err, Gone)
    assert err.status == 410


def test_connection_error_is_temporary() -> None:
    err = APIConnectionError("refused")
    assert isinstance(err, TemporaryAPIError)
    assert err.status == 0
    assert err.retryable


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    recorded: list[float] = []

    async def fake_sleep(delay: float) -> None:
        recorded.append(delay)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    return recorded


async def test_with_retries_retries_temporary_errors(sleeps: list[float]) -> None:
    calls = 0

    async def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ServerError(503, "ServiceUnavailable", "busy")
        return "done"

    assert await with_retries(flaky, initial_delay=0.1, jitter=0) == "done"
    assert calls == 3
    assert sleeps == [0.1, 0.2]


async def test_with_retries_gives_up_after_attempts(sleeps: list[float]) -> None:
    calls = 0

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise APIConnectionError("refused")

    with pytest.raises(APIConnectionError):
        await with_retries(down, attempts=4, initial_delay=1, max_delay=2, jitter=0)
    assert calls == 4
    assert sleeps == [1, 2, 2]


async def test_with_retries_honours_retry_after_within_bound(sleeps: list[float]) -> None:
    calls = 0

    async def throttled() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TooManyRequests(429, "TooManyRequests", retry_after=5)
        if calls == 2:
            raise TooManyRequests(429, "TooManyRequests", retry_after=500)
        return calls

    assert await with_retries(throttled, initial_delay=0.1, max_delay=10, jitter=0) == 3
    assert sleeps == [5, 10]


async def test_with_retries_does_not_retry_permanent_errors(sleeps: list[float]) -> None:
    calls = 0

    async def forbidden() -> None:
        nonlocal calls
        calls += 1
        raise Forbidden(403, "Forbidden", "no")

    with pytest.raises(Forbidden):
        await with_retries(forbidden)
    assert calls == 1
    assert sleeps == []


def test_backoff_doubles_to_cap_and_resets() -> None:
    backoff = Backoff(0.8, 30.0, jitter=0)
    delays = [backoff.next() for _ in range(8)]
    assert delays == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]
    backoff.reset()
    assert backoff.next() == 0.8


def test_backoff_jitter_stays_within_factor() -> None:
    backoff = Backoff(1.0, 4.0, jitter=1.0)
    for base in (1.0, 2.0, 4.0, 4.0):
        delay = backoff.next()
        assert base <= delay <= 2 * base
