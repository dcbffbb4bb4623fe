"""The HTTP/1.1 transport of all API traffic: ordinary requests and watches.

A pool of kept-alive connections, one request on each at a time; answers are parsed by llhttp
(Node.js's parser, through ``httptools``). Why this and not a general-purpose client:
docs/dependencies.md. It speaks what kube-apiserver answers to JSON requests: no compression,
redirects, upgrades or ``Expect: 100-continue``; an HTTP proxy is tunnelled through (CONNECT).
A watch gets a connection of its own (:meth:`ConnectionPool.open_stream`), closed when the
watch ends so the server stops sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Final, NamedTuple

import httptools

from kubesched import KubeschedError
from kubesched.kube._credentials import Credentials

__all__ = ["BodyStream", "ConnectionPool", "HTTPResponse", "Headers", "Proxy", "TransportError"]

#: A connection idle longer than this is closed instead of reused: well inside the idle
#: timeout of Go's HTTP servers (kube-apiserver's is 90 s).
IDLE_TIMEOUT: Final = 30.0
#: Bytes of a streamed body read ahead of its reader before the socket stops being read.
_STREAM_BUFFER: Final = 1 << 20
#: Requests Go's transport repeats on a new connection when a kept-alive one was closed by the
#: server before answering (``Request.isReplayable``); client-go retries only GETs on top.
_REPLAYABLE: Final = frozenset({"GET", "OPTIONS", "TRACE"})
#: Failures of the socket or of the answer's framing (an upgrade nobody asked for is one).
_FAILURES: Final = (OSError, EOFError, httptools.HttpParserError, httptools.HttpParserUpgrade)


class TransportError(KubeschedError):
    """The request could not be sent or its answer not read (it may have been applied)."""


class Headers(Mapping[str, str]):
    """An answer's header fields by lower-case name, repeated fields kept (kube-apiserver sends
    one ``Warning`` field per warning): ``headers[name]`` joins a repeated field's values with
    ``", "`` (RFC 9110, 5.3); :meth:`get_all` lists them."""

    __slots__ = ("_fields",)

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> str:
        values = self.get_all(name)
        if not values:
            raise KeyError(name)
        return values[0] if len(values) == 1 else ", ".join(values)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(name for name, _ in self._fields))

    def __len__(self) -> int:
        return len(dict.fromkeys(name for name, _ in self._fields))

    def get_all(self, name: str) -> list[str]:
        """Every value of the field ``name``, in the order received."""
        name = name.lower()
        return [value for field, value in self._fields if field == name]

    def __repr__(self) -> str:
        return f"Headers({self._fields!r})"


class Proxy(NamedTuple):
    """An HTTP proxy that connections are tunnelled through (CONNECT)."""

    host: str
    port: int
    authorization: str | None = None  # the Proxy-Authorization header


class HTTPResponse:
    """Status, body and header fields of an answer."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: Headers) -> None:
        self.status = status
        self.body = body
        self.headers = headers


class _Connection(asyncio.Protocol):
    """One connection and the answer being read on it, fed to llhttp as bytes arrive."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.idle_since = 0.0
        self.reused = False  # has carried an answer before
        self.received = False  # a byte of the current answer has arrived
        self.keep_alive = False
        self._awaiting = False  # a request was sent whose answer has not ended
        self._lost = False
        self._writable: asyncio.Future[None] | None = None
        self._streaming = False
        self._fields: list[tuple[str, str]] = []
        self._body: list[bytes] = []
        self._head: asyncio.Future[int] | None = None
        self._done: asyncio.Future[HTTPResponse] | None = None
        self._informational = False
        # A streamed body: its chunks, and the reader waiting for the next one.
        self._chunks: deque[bytes | BaseException | None] = deque()
        self._buffered = 0
        self._reading_paused = False
        self._wakeup: asyncio.Future[None] | None = None

    # --- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self._awaiting:
            # Nothing asked: a server closing an idle connection may say why (408); the
            # connection cannot carry a request any more.
            self.close()
            return
        self.received = True
        try:
            self._parser.feed_data(data)
        except (httptools.HttpParserError, httptools.HttpParserUpgrade) as exc:
            self._fail(exc)
            self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self._writable is not None and not self._writable.done():
            self._writable.set_exception(exc or ConnectionResetError("connection lost"))
        head = self._head
        if self._awaiting and head is not None and head.done() and not self._length_known():
            # A body delimited by the end of the connection.
            self.keep_alive = False
            self.on_message_complete()
            return
        self._fail(exc or EOFError("the connection ended before the answer did"))

    def pause_writing(self) -> None:
        self._writable = self._loop.create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # --- llhttp callbacks --------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self._fields = []
        self._body = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self._fields.append((name.decode("latin-1").lower(), value.decode("latin-1").strip()))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        # Informational answers (100 Continue) precede the real one.
        self._informational = 100 <= status < 200 and status != 101
        if not self._informational and self._head is not None and not self._head.done():
            self._head.set_result(status)

    def on_body(self, body: bytes) -> None:
        if not self._streaming:
            self._body.append(body)
            return
        self._push(body)
        self._buffered += len(body)
        if self._buffered > _STREAM_BUFFER and not self._reading_paused and self.transport:
            self._reading_paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._informational:
            return
        self._awaiting = False
        if not self._lost:
            self.keep_alive = self._parser.should_keep_alive()
        if self._streaming:
            self._push(None)
        elif self._done is not None and self._head is not None and not self._done.done():
            response = HTTPResponse(
                self._head.result(), b"".join(self._body), Headers(self._fields)
            )
            self._done.set_result(response)

    # --- requests ----------------------------------------------------------------------------

    def usable(self, now: float) -> bool:
        transport = self.transport
        return (
            not self._lost
            and transport is not None
            and not transport.is_closing()
            and now - self.idle_since < IDLE_TIMEOUT
        )

    async def exchange(self, payload: bytes) -> HTTPResponse:
        """Send a request and read its answer whole."""
        _, done = self._begin(streaming=False)
        await self._send(payload)
        return await done

    async def open(self, payload: bytes) -> tuple[int, Headers]:
        """Send a request; its answer's status and header fields once they are in."""
        head, _ = self._begin(streaming=True)
        await self._send(payload)
        status = await head
        return status, Headers(self._fields)

    async def next_chunk(self) -> bytes | None:
        """The body's bytes that arrived since the last call (waiting for some if none did);
        ``None`` at its end."""
        chunks = self._chunks
        while not chunks:
            self._wakeup = self._loop.create_future()
            try:
                await self._wakeup
            finally:
                self._wakeup = None
        item = chunks.popleft()
        if isinstance(item, BaseException):
            raise item
        if item is None:
            return None
        if chunks and isinstance(chunks[0], bytes):
            pieces = [item]
            while chunks and isinstance(chunks[0], bytes):
                pieces.append(chunks.popleft())  # type: ignore[arg-type]
            item = b"".join(pieces)
        self._buffered -= len(item)
        if self._reading_paused and self._buffered <= _STREAM_BUFFER and self.transport:
            self._reading_paused = False
            self.transport.resume_reading()
        return item

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def _begin(
        self, *, streaming: bool
    ) -> tuple[asyncio.Future[int], asyncio.Future[HTTPResponse]]:
        self.received = False
        self.keep_alive = False
        self._streaming = streaming
        self._awaiting = True
        head = self._head = self._loop.create_future()
        done = self._done = self._loop.create_future()
        return head, done

    async def _send(self, payload: bytes) -> None:
        if self._lost or self.transport is None:
            raise ConnectionResetError("the connection was closed")
        self.transport.write(payload)
        if self._writable is not None:  # drain: the kernel's buffer is full
            await asyncio.shield(self._writable)

    def _length_known(self) -> bool:
        for name, value in self._fields:
            if name == "content-length" or (name == "transfer-encoding" and "chunked" in value):
                return True
        return False

    def _fail(self, exc: BaseException) -> None:
        for future in (self._head, self._done):
            if future is not None and not future.done():
                future.set_exception(exc)
                # Retrieved by whoever awaits it; a stream's _done is never awaited.
                future.exception()
        if self._streaming:
            self._push(exc)

    def _push(self, item: bytes | BaseException | None) -> None:
        self._chunks.append(item)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)


class BodyStream:
    """An answer whose body is read as it arrives, on a connection of its own; :meth:`close`
    it when done."""

    def __init__(
        self, status: int, headers: Headers, conn: _Connection, read_timeout: float | None
    ) -> None:
        self.status = status
        self.headers = headers
        self._conn = conn
        self._read_timeout = read_timeout

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they come; ``TransportError`` when the connection fails or
        nothing arrives for ``read_timeout`` seconds."""
        while True:
            try:
                async with asyncio.timeout(self._read_timeout):
                    data = await self._conn.next_chunk()
            except TimeoutError as exc:
                raise TransportError(f"nothing read for {self._read_timeout} s") from exc
            except _FAILURES as exc:
                raise TransportError(_describe(exc)) from exc
            if data is None:
                return
            yield data

    async def read(self) -> bytes:
        """The rest of the body."""
        return b"".join([chunk async for chunk in self.chunks()])

    def close(self) -> None:
        self._conn.close()


class ConnectionPool:
    """Up to ``max_connections`` kept-alive HTTP/1.1 connections to one server, one request on
    each at a time; requests beyond that wait in arrival order for a connection to come back.

    ``path_prefix`` is the path of the server URL (``https://host/prefix``), put before every
    request path. ``timeout`` bounds a whole request (connect, write, answer); a request that
    fails or times out closes its connection, the others are kept for the next request. A GET
    that finds its kept-alive connection closed by the server before any answer (an idle
    timeout crossing the request) is sent again on another, as Go's transport does.
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
        proxy: Proxy | None = None,
    ) -> None:
        self._host = host
        self._proxy = proxy
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
        self._authority = f"{authority}:{port}"
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

    @property
    def credentials(self) -> Credentials:
        return self._credentials

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

        ``timeout`` (default: the pool's) bounds the whole exchange. A 401 renews the
        credentials (a token file read again, an exec plugin run again) and, if they changed,
        sends the request once more (a 401 applied nothing). Transport failures and timeouts
        raise :class:`TransportError`.
        """
        if method == "HEAD":
            raise ValueError("HEAD requests are not supported")
        target = f"{self._prefix}{path}?{query}" if query else f"{self._prefix}{path}"
        limit = self.timeout if timeout is None else timeout
        used = await self._authorization()
        payload = self._head(method, target, body, content_type)
        response = await self._exchange(method, payload, limit)
        if response.status == 401 and await self._renew(used):
            payload = self._head(method, target, body, content_type)
            response = await self._exchange(method, payload, limit)
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
        each read within ``read_timeout``. A 401 renews the credentials and asks again once,
        as :meth:`request` does."""
        target = f"{self._prefix}{path}?{query}" if query else f"{self._prefix}{path}"
        limit = self.timeout if timeout is None else timeout
        used = await self._authorization()
        stream = await self._open_stream(self._head("GET", target, None, ""), limit, read_timeout)
        if stream.status == 401 and await self._renew(used):
            stream.close()
            payload = self._head("GET", target, None, "")
            stream = await self._open_stream(payload, limit, read_timeout)
        return stream

    async def _authorization(self) -> str | None:
        """The ``Authorization`` header :meth:`_head` puts in the request built next."""
        try:
            return await self._credentials.authorization()
        except (OSError, ValueError) as exc:
            raise TransportError(f"no credentials: {exc}") from exc

    async def _renew(self, used: str | None) -> bool:
        try:
            return await self._credentials.renew(used)
        except (OSError, ValueError) as exc:
            raise TransportError(f"no credentials: {exc}") from exc

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

    def _head(self, method: str, target: str, body: bytes | None, content_type: str) -> bytes:
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._common_headers()
        if body is not None:
            head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode(
                "latin-1"
            )
            return head + body
        if method in ("POST", "PUT", "PATCH"):
            return head + b"Content-Length: 0\r\n\r\n"
        return head + b"\r\n"

    async def _open_stream(
        self, payload: bytes, limit: float | None, read_timeout: float | None
    ) -> BodyStream:
        if self._closed:
            raise TransportError("the connection pool is closed")
        conn = None
        try:
            async with asyncio.timeout(limit):
                conn = await self._connect()
                status, headers = await conn.open(payload)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, TimeoutError):
                raise TransportError(f"no answer within {limit} s") from exc
            if isinstance(exc, _FAILURES):
                raise TransportError(_describe(exc)) from exc
            raise
        return BodyStream(status, headers, conn, read_timeout)

    async def _exchange(self, method: str, payload: bytes, limit: float | None) -> HTTPResponse:
        try:
            async with asyncio.timeout(limit):
                while True:
                    conn = await self._acquire()
                    try:
                        response = await conn.exchange(payload)
                    except BaseException as exc:
                        # Failed or cancelled midway: the connection's state is unknown.
                        self._drop(conn)
                        if (
                            isinstance(exc, _FAILURES)
                            and conn.reused
                            and not conn.received
                            and method in _REPLAYABLE
                        ):
                            continue  # a stale kept-alive connection: once more on another
                        raise
                    conn.reused = True
                    if conn.keep_alive:
                        self._release(conn)
                    else:
                        self._drop(conn)
                    return response
        except TimeoutError as exc:
            raise TransportError(f"no answer within {limit} s") from exc
        except _FAILURES as exc:
            raise TransportError(_describe(exc)) from exc

    # --- the pool ----------------------------------------------------------------------------

    async def _acquire(self) -> _Connection:
        if self._closed:
            raise TransportError("the connection pool is closed")
        now = self._clock()
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to be stale
            if conn.usable(now):
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
        loop = asyncio.get_running_loop()
        if self._proxy is None:
            _, conn = await loop.create_connection(
                lambda: _Connection(loop),
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._server_hostname,
            )
        else:
            conn = await self._tunnel(loop, self._proxy)
        self.connections_opened += 1
        return conn

    async def _tunnel(self, loop: asyncio.AbstractEventLoop, proxy: Proxy) -> _Connection:
        """A connection through ``proxy`` (CONNECT), TLS on top if the server speaks it."""
        _, tunnel = await loop.create_connection(lambda: _Connection(loop), proxy.host, proxy.port)
        try:
            lines = [f"CONNECT {self._authority} HTTP/1.1", f"Host: {self._authority}"]
            if proxy.authorization:
                lines.append(f"Proxy-Authorization: {proxy.authorization}")
            status, _ = await tunnel.open(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            if status != 200:
                raise TransportError(
                    f"proxy {proxy.host}:{proxy.port} answered CONNECT with {status}"
                )
            transport = tunnel.transport
            assert transport is not None
            conn = _Connection(loop)
            if self._ssl is None:
                transport.set_protocol(conn)
                conn.connection_made(transport)
                return conn
            secure = await loop.start_tls(
                transport, conn, self._ssl, server_hostname=self._server_hostname
            )
            assert secure is not None
            conn.connection_made(secure)
            return conn
        except BaseException:
            tunnel.close()
            raise

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


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        # "[Errno 111] Connect call failed (...)": say what happened in the system's words.
        return f"{type(exc).__name__}: {os.strerror(exc.errno).lower()}: {exc}"
    return f"{type(exc).__name__}: {exc}"
