"""A lean HTTP/1.1 transport for the API client's ordinary requests.

A scheduler's requests are small and many: per pod a Binding POST and a Scheduled Event POST,
each a few hundred bytes with a small answer. Through the general-purpose client (httpx2 over
HTTP/2: h2 framing, HPACK, anyio) each cost about 2.5 ms of CPU here, more than deciding where
the pod goes, and all of them queued on one multiplexed connection. This transport writes the
request bytes itself on a pool of kept-alive HTTP/1.1 connections (TLS through the standard
library, client certificates and CA from the kubeconfig) and reads the answer by its
``Content-Length`` or its chunks: a tenth of that CPU, and one request per connection, so a
binding never waits behind another request's bytes.

It speaks only what kube-apiserver answers to JSON requests: no compression, no redirects, no
proxies, no ``Expect: 100-continue``. A watch gets a connection of its own
(:meth:`ConnectionPool.open_stream`), read chunk by chunk as events arrive and closed when the
watch ends, so the server stops sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Final

__all__ = ["BodyStream", "ConnectionPool", "Credentials", "HTTPResponse", "TransportError"]

#: Longest status line plus headers accepted in an answer.
_HEADER_LIMIT: Final = 1 << 20
#: A connection idle longer than this is closed instead of reused: well inside the idle
#: timeout of Go's HTTP servers (kube-apiserver's is 90 s), so the server never closes a
#: connection just as a request is written on it.
IDLE_TIMEOUT: Final = 30.0


class TransportError(Exception):
    """The request could not be sent or its answer not read (it may have been applied)."""


class HTTPResponse:
    """Status, body, and the headers (lower-case names) of an answer."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.status = status
        self.body = body
        self.headers = headers


class BodyStream:
    """An answer whose body is read as it arrives, on a connection of its own; :meth:`close`
    it when done (a body not read to its end cannot leave the connection reusable anyway)."""

    def __init__(
        self,
        status: int,
        headers: dict[str, str],
        conn: _Connection,
        read_timeout: float | None,
    ) -> None:
        self.status = status
        self.headers = headers
        self._conn = conn
        self._read_timeout = read_timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they come; ``TransportError`` when the connection fails or
        nothing arrives for ``read_timeout`` seconds."""
        reader = self._conn.reader
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        length = self.headers.get("content-length")
        remaining = -1 if chunked or length is None else int(length)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(None) as deadline:
                while remaining:
                    if self._read_timeout is not None:
                        deadline.reschedule(loop.time() + self._read_timeout)
                    if chunked:
                        data = await _read_chunk(reader)
                        if data is None:
                            return
                    else:
                        data = await reader.read(65536 if remaining < 0 else min(remaining, 65536))
                        if not data:
                            if remaining > 0:
                                raise EOFError("the connection ended before the body did")
                            return
                        if remaining > 0:
                            remaining -= len(data)
                    # No deadline while the reader has the data: it is the reading that is timed.
                    deadline.reschedule(None)
                    yield data
        except TimeoutError as exc:
            raise TransportError(f"nothing read for {self._read_timeout} s") from exc
        except (OSError, EOFError, ValueError, asyncio.LimitOverrunError) as exc:
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc

    async def read(self) -> bytes:
        """The rest of the body."""
        return b"".join([chunk async for chunk in self.chunks()])

    def close(self) -> None:
        self._conn.close()


class Credentials:
    """The ``Authorization`` header of every request: none (client certificates do it), fixed
    (a bearer token, basic auth), or a bearer token read from a file and read again when the
    server answers 401 (a rotated service-account token, as client-go's ``tokenFileAuth``)."""

    def __init__(self, header: str | None = None, *, token_file: str | None = None) -> None:
        self._token_file = token_file
        self.header = header
        if token_file is not None:
            self.reload()

    def reload(self) -> bool:
        """Read the token file again; whether the header changed (never, without a file)."""
        if self._token_file is None:
            return False
        try:
            token = Path(self._token_file).read_text().strip()
        except OSError as exc:
            raise TransportError(f"cannot read token file {self._token_file}: {exc}") from exc
        header, self.header = self.header, f"Bearer {token}"
        return header != self.header


class _Connection:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        # The server's FIN (or an error) shows as EOF once the loop has read it.
        return (
            not self.reader.at_eof()
            and not self.writer.is_closing()
            and now - self.idle_since < IDLE_TIMEOUT
        )

    def close(self) -> None:
        self.writer.close()


class ConnectionPool:
    """Up to ``max_connections`` kept-alive HTTP/1.1 connections to one server, one request on
    each at a time; requests beyond that wait in arrival order for a connection to come back.

    ``path_prefix`` is the path of the server URL (``https://host/prefix``), put before every
    request path. ``timeout`` bounds a whole request (connect, write, answer); a request that
    fails or times out closes its connection, the others are kept for the next request.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        path_prefix: str = "",
        user_agent: str,
        credentials: Credentials | None = None,
        max_connections: int = 100,
        timeout: float | None = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._host = host
        self._port = port
        self._ssl = ssl_context
        self._server_hostname = server_hostname if ssl_context is not None else None
        self._prefix = path_prefix.rstrip("/")
        self._credentials = credentials or Credentials()
        self._max = max(1, max_connections)
        self.timeout = timeout
        self._clock = clock
        authority = host if ":" not in host else f"[{host}]"
        default_port = 443 if ssl_context is not None else 80
        self._host_header = authority if port == default_port else f"{authority}:{port}"
        self._user_agent = user_agent
        self._head_tail = b""
        self._auth_header: str | None = ""  # forces the first _common_headers build
        self._idle: list[_Connection] = []
        self._open = 0  # connections open or being opened
        self._waiters: deque[asyncio.Future[_Connection | None]] = deque()
        self._closed = False
        self.connections_opened = 0

    @property
    def url(self) -> str:
        scheme = "https" if self._ssl is not None else "http"
        return f"{scheme}://{self._host_header}{self._prefix}"

    def _common_headers(self) -> bytes:
        header = self._credentials.header
        if header != self._auth_header or not self._head_tail:
            self._auth_header = header
            lines = [
                f"Host: {self._host_header}",
                "Accept: application/json",
                f"User-Agent: {self._user_agent}",
            ]
            if header:
                lines.append(f"Authorization: {header}")
            self._head_tail = ("\r\n".join(lines) + "\r\n").encode("latin-1")
        return self._head_tail

    async def aclose(self) -> None:
        """Close the idle connections now and the others as their requests end."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        self._open -= len(idle)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(TransportError("the connection pool is closed"))

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: str = "",
        body: bytes | None = None,
        content_type: str = "application/json",
        timeout: float | None = None,  # noqa: ASYNC109  (covers the whole exchange)
    ) -> HTTPResponse:
        """Send one request and read its answer.

        ``timeout`` (default: the pool's) bounds the whole exchange. A 401 with a token file
        re-reads it and, if the token changed, sends the request once more (a 401 applied
        nothing). Transport failures and timeouts raise :class:`TransportError`.
        """
        target = f"{self._prefix}{path}?{query}" if query else f"{self._prefix}{path}"
        limit = self.timeout if timeout is None else timeout
        response = await self._exchange(method, target, body, content_type, limit)
        if response.status == 401 and self._credentials.reload():
            response = await self._exchange(method, target, body, content_type, limit)
        return response

    async def open_stream(
        self,
        path: str,
        *,
        query: str = "",
        timeout: float | None = None,  # noqa: ASYNC109  (until the answer's headers)
        read_timeout: float | None = None,
    ) -> BodyStream:
        """GET ``path`` on a new connection of its own and return once the answer's headers are
        in (within ``timeout``, default the pool's); the body is read from the returned stream,
        each read within ``read_timeout``. A 401 with a token file re-reads it and asks again
        once, as :meth:`request` does."""
        target = f"{self._prefix}{path}?{query}" if query else f"{self._prefix}{path}"
        limit = self.timeout if timeout is None else timeout
        stream = await self._open_stream(target, limit, read_timeout)
        if stream.status == 401 and self._credentials.reload():
            stream.close()
            stream = await self._open_stream(target, limit, read_timeout)
        return stream

    async def _open_stream(
        self, target: str, limit: float | None, read_timeout: float | None
    ) -> BodyStream:
        if self._closed:
            raise TransportError("the connection pool is closed")
        conn = None
        try:
            async with asyncio.timeout(limit):
                conn = await self._connect()
                conn.writer.write(self._head("GET", target, None, ""))
                status, headers, _ = await _read_head(conn.reader)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, TimeoutError):
                raise TransportError(f"no answer within {limit} s") from exc
            if isinstance(exc, OSError | EOFError | ValueError | asyncio.LimitOverrunError):
                raise TransportError(f"{type(exc).__name__}: {exc}") from exc
            raise
        return BodyStream(status, headers, conn, read_timeout)

    def _head(self, method: str, target: str, body: bytes | None, content_type: str) -> bytes:
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._common_headers()
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode(
                "latin-1"
            )
            payload = head + body
        elif method in ("POST", "PUT", "PATCH"):
            payload = head + b"Content-Length: 0\r\n\r\n"
        else:
            payload = head + b"\r\n"
        return payload

    async def _exchange(
        self, method: str, target: str, body: bytes | None, content_type: str, limit: float | None
    ) -> HTTPResponse:
        payload = self._head(method, target, body, content_type)
        conn = None
        try:
            async with asyncio.timeout(limit):
                conn = await self._acquire()
                conn.writer.write(payload)
                response, keep = await _read_response(conn.reader, head_only=method == "HEAD")
        except (OSError, EOFError, ValueError, asyncio.LimitOverrunError, TimeoutError) as exc:
            if conn is not None:
                self._drop(conn)
            if isinstance(exc, TimeoutError):
                raise TransportError(f"no answer within {limit} s") from exc
            raise TransportError(f"{type(exc).__name__}: {exc}") from exc
        except BaseException:
            # Cancelled midway: the connection's state is unknown.
            if conn is not None:
                self._drop(conn)
            raise
        if keep:
            self._release(conn)
        else:
            self._drop(conn)
        return response

    # --- the pool ----------------------------------------------------------------------------

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise TransportError("the connection pool is closed")
        now = self._clock()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if conn.reusable(now):
                return conn
            conn.close()
            self._open -= 1
        if self._open >= self._max:
            waiter: asyncio.Future[_Connection | None] = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled():
                    # Handed a connection (or a slot) just as we were cancelled: pass it on.
                    given = waiter.result()
                    if given is None:
                        self._give_slot()
                    else:
                        self._release(given)
                else:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
                raise
            if handed is not None:
                return handed
        else:
            self._open += 1
        try:
            return await self._connect()
        except BaseException:
            self._give_slot()
            raise

    async def _connect(self) -> _Connection:
        reader, writer = await asyncio.open_connection(
            self._host,
            self._port,
            ssl=self._ssl,
            server_hostname=self._server_hostname,
            limit=_HEADER_LIMIT,
        )
        self.connections_opened += 1
        return _Connection(reader, writer)

    def _next_waiter(self) -> asyncio.Future[_Connection | None] | None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                return waiter
        return None

    def _release(self, conn: _Connection) -> None:
        if self._closed:
            conn.close()
            self._open -= 1
            return
        waiter = self._next_waiter()
        if waiter is not None:
            waiter.set_result(conn)
            return
        conn.idle_since = self._clock()
        self._idle.append(conn)

    def _drop(self, conn: _Connection) -> None:
        conn.close()
        self._give_slot()

    def _give_slot(self) -> None:
        """A connection is gone: a waiter may open a new one in its place."""
        waiter = None if self._closed else self._next_waiter()
        if waiter is not None:
            waiter.set_result(None)
        else:
            self._open -= 1


async def _read_response(
    reader: asyncio.StreamReader, *, head_only: bool
) -> tuple[HTTPResponse, bool]:
    """One answer: the response and whether the connection may carry another request."""
    status, headers, keep = await _read_head(reader)
    if head_only or status in (204, 304):
        body = b""
    elif "chunked" in headers.get("transfer-encoding", "").lower():
        parts = []
        while (chunk := await _read_chunk(reader)) is not None:
            parts.append(chunk)
        body = b"".join(parts)
    elif (length := headers.get("content-length")) is not None:
        body = await reader.readexactly(int(length))
    else:
        body = await reader.read()  # delimited by the end of the connection
        keep = False
    return HTTPResponse(status, body, headers), keep


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bool]:
    """Status line and headers: the status, the headers (lower-case names), and whether the
    connection may carry another request once the body is read."""
    while True:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw[:-4].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        status = int(rest[:3])
        if not version.startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        if status >= 200 or status == 101:
            break  # informational answers (100 Continue) precede the real one
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    keep = version == b"HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return status, headers, keep


async def _read_chunk(reader: asyncio.StreamReader) -> bytes | None:
    """The next chunk of a chunked body; ``None`` after the last one (and its trailers)."""
    size_line = await reader.readuntil(b"\r\n")
    size = int(size_line.split(b";", 1)[0], 16)
    if size == 0:
        # Trailers, if any, end with an empty line.
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return None
    chunk = await reader.readexactly(size + 2)
    return chunk[:-2]
