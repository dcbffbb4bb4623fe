"""Errors from the API server, each class carrying its retry policy, and a bounded retry helper.

The taxonomy follows the API's ``Status`` object: ``status`` is the HTTP code, ``reason`` the
machine-readable ``StatusReason`` (``NotFound``, ``AlreadyExists``, ``Conflict``, ``Expired`` ...),
``message`` the human-readable text. Classes split by what a caller should do:

* :class:`TemporaryAPIError` and its subclasses (429, server timeouts, 5xx, connection errors) may
  succeed if repeated; ``retry_after`` is the server's hint in seconds when it gave one.
* :class:`Unauthorized` and :class:`Forbidden` are permanent: repeating will not help.
* :class:`NotFound`, :class:`Conflict`, :class:`AlreadyExists`, :class:`Gone`, :class:`Invalid`
  are answers about the object: the caller decides (re-read, re-list, give up).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import ClassVar, TypeVar

import msgspec

from kubesched import KubeschedError

__all__ = [
    "APIConnectionError",
    "APIError",
    "AlreadyExists",
    "Backoff",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "ServerTimeout",
    "Status",
    "StatusDetails",
    "TemporaryAPIError",
    "TooManyRequests",
    "Unauthorized",
    "error_from_response",
    "error_from_status",
    "with_retries",
]

log = logging.getLogger(__name__)

R = TypeVar("R")


class StatusCause(msgspec.Struct, rename="camel", omit_defaults=True):
    """One cause of a failure: which field, and why."""

    reason: str = ""
    message: str = ""
    field: str = ""


class StatusDetails(msgspec.Struct, rename="camel", omit_defaults=True):
    """Extra data a ``Status`` may carry about the object the failure concerns."""

    name: str = ""
    group: str = ""
    kind: str = ""
    uid: str = ""
    causes: list[StatusCause] = []
    retry_after_seconds: int = 0


class Status(msgspec.Struct, rename="camel", omit_defaults=True):
    """The API's ``meta/v1 Status``: the body of every error response and of watch ERROR events."""

    kind: str = "Status"
    api_version: str = "v1"
    status: str = ""
    message: str = ""
    reason: str = ""
    details: StatusDetails | None = None
    code: int = 0


_status_decoder = msgspec.json.Decoder(Status)


class APIError(KubeschedError):
    """A failed API call.

    ``status`` is the HTTP status code (0 when no response was received), ``reason`` the
    ``Status.reason`` (or the HTTP reason phrase when the body was not a ``Status``), ``message``
    the ``Status.message``. ``retryable`` says whether repeating the same call may succeed.
    """

    retryable: ClassVar[bool] = False

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        *,
        details: StatusDetails | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        super().__init__(status, reason, message)

    def __str__(self) -> str:
        # client-go's ``StatusError.Error()``: the API server's message alone, which is what
        # kube-scheduler's messages (a failed binding's condition and event) quote.
        if self.message:
            return self.message
        return f"{self.status} {self.reason}" if self.status else self.reason

    def describe(self) -> str:
        """The status code and reason before the message (``409 AlreadyExists: pods "a"
        already exists``)."""
        if self.status and self.message:
            return f"{self.status} {self.reason}: {self.message}"
        return str(self)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, reason={self.reason!r}, "
            f"message={self.message!r})"
        )


class BadRequest(APIError):  # noqa: N818  (the API's StatusReason names)
    """400: the request itself is malformed (bad selector, bad patch ...)."""


class Unauthorized(APIError):  # noqa: N818  (the API's StatusReason names)
    """401: the credentials were not accepted. Permanent."""


class Forbidden(APIError):  # noqa: N818  (the API's StatusReason names)
    """403: authenticated, but not allowed by RBAC (or an admission webhook). Permanent."""


class NotFound(APIError):  # noqa: N818  (the API's StatusReason names)
    """404: the object (or the resource type) does not exist."""


class Conflict(APIError):  # noqa: N818  (the API's StatusReason names)
    """409: a resourceVersion or UID precondition failed, or the object changed meanwhile."""


class AlreadyExists(Conflict):
    """409 with reason ``AlreadyExists``: a create found an object of the same name."""


class Gone(APIError):  # noqa: N818  (the API's StatusReason names)
    """410: the requested resourceVersion is too old (compacted); a watch must re-list."""


class Invalid(APIError):  # noqa: N818  (the API's StatusReason names)
    """422: the object failed validation."""


class TemporaryAPIError(APIError):
    """A failure that may go away: repeat the call later, after ``retry_after`` if given."""

    retryable: ClassVar[bool] = True

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        *,
        details: StatusDetails | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, reason, message, details=details)
        self.retry_after = retry_after


class TooManyRequests(TemporaryAPIError):  # noqa: N818  (the API's StatusReason names)
    """429: API priority and fairness (or an eviction budget) asks the client to slow down."""


class ServerTimeout(TemporaryAPIError):  # noqa: N818  (the API's StatusReason names)
    """The server could not finish in time (reason ``ServerTimeout`` or ``Timeout``, or 504)."""


class ServerError(TemporaryAPIError):
    """Any other 5xx: internal error, service unavailable ..."""


class APIConnectionError(TemporaryAPIError):
    """No usable response: connection refused or reset, TLS failure, client-side timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionError", message)


_BY_STATUS: Mapping[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
    504: ServerTimeout,
}


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: the API server never sends one
    return seconds if seconds >= 0 else None


def error_from_status(
    status: Status, *, http_status: int | None = None, retry_after_header: str | None = None
) -> APIError:
    """The :class:`APIError` subclass instance for a decoded ``Status``.

    ``http_status`` wins over ``status.code`` when both are known (they agree in practice).
    """
    code = http_status if http_status is not None else status.code
    reason = status.reason
    retry_after = _parse_retry_after(retry_after_header)
    if retry_after is None and status.details is not None and status.details.retry_after_seconds:
        retry_after = float(status.details.retry_after_seconds)
    cls: type[APIError]
    if reason == "AlreadyExists":
        cls = AlreadyExists
    elif reason in ("ServerTimeout", "Timeout"):
        cls = ServerTimeout
    elif reason in ("Expired", "Gone") or code == 410:
        cls = Gone
    elif code in _BY_STATUS:
        cls = _BY_STATUS[code]
    elif code >= 500:
        cls = ServerError
    elif reason == "TooManyRequests":
        cls = TooManyRequests
    else:
        cls = APIError
    if issubclass(cls, TemporaryAPIError):
        return cls(code, reason, status.message, details=status.details, retry_after=retry_after)
    return cls(code, reason, status.message, details=status.details)


def error_from_response(
    http_status: int, body: bytes, headers: Mapping[str, str] | None = None
) -> APIError:
    """The :class:`APIError` for an HTTP error response; the body is decoded as a ``Status``.

    A body that is not a ``Status`` (a proxy's HTML page, an empty 503) keeps its first 512
    bytes as the message.
    """
    try:
        status = _status_decoder.decode(body)
    except msgspec.DecodeError:
        status = Status(message=body[:512].decode("utf-8", "replace").strip())
    if not status.reason:
        status = msgspec.structs.replace(status, reason=_REASON_PHRASES.get(http_status, ""))
    retry_after = None
    if headers is not None:
        retry_after = headers.get("retry-after") or headers.get("Retry-After")
    return error_from_status(status, http_status=http_status, retry_after_header=retry_after)


_REASON_PHRASES: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class Backoff:
    """Exponential backoff with jitter: ``initial`` doubling (``factor``) up to ``cap``.

    Each delay is multiplied by a random factor in ``[1, 1 + jitter]`` (client-go's ``Jitter``).
    """

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        *,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        if initial <= 0 or cap < initial or factor < 1:
            raise ValueError("backoff needs 0 < initial <= cap and factor >= 1")
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._next = initial

    def next(self) -> float:
        """The next delay in seconds; the base grows for the call after."""
        base = self._next
        self._next = min(self.cap, base * self.factor)
        delay = base * (1.0 + self.jitter * self._rng.random()) if self.jitter > 0 else base
        return min(delay, self.cap * (1.0 + self.jitter))

    def reset(self) -> None:
        """Start again from ``initial``."""
        self._next = self.initial


async def with_retries(
    fn: Callable[[], Awaitable[R]],
    *,
    attempts: int = 5,
    initial_delay: float = 0.1,
    max_delay: float = 10.0,
    factor: float = 2.0,
    jitter: float = 0.2,
    retry_on: tuple[type[BaseException], ...] = (TemporaryAPIError,),
) -> R:
    """Call ``fn`` (an idempotent request) until it succeeds, at most ``attempts`` times.

    Only exceptions in ``retry_on`` are retried (by default the temporary API errors); the delay
    starts at ``initial_delay``, grows by ``factor`` with ``jitter`` and never exceeds
    ``max_delay``. A ``retry_after`` hint from the server is honoured (also capped by
    ``max_delay``). The last error is raised when the attempts run out.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    backoff = Backoff(initial_delay, max(initial_delay, max_delay), factor=factor, jitter=jitter)
    for attempt in range(1, attempts + 1):
        try:
            return await fn()
        except retry_on as exc:
            if attempt == attempts:
                raise
            delay = backoff.next()
            hint = getattr(exc, "retry_after", None)
            if isinstance(hint, int | float) and hint > delay:
                delay = float(hint)
            delay = min(delay, max_delay)
            log.debug("attempt %d/%d failed (%s); retrying in %.2fs", attempt, attempts, exc, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
