"""Fakes at the HTTP boundary for kubesched.kube unit tests: a scripted API server.

The client under test talks to it over loopback with the transport production uses; the
server (aiohttp's) hands each request to a handler that answers with a :class:`Response`.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from builders import PodWrapper
from kubesched.kube import APIClient
from kubesched.kube._client import DEFAULT_MAX_IN_FLIGHT
from kubesched.kube._http1 import ConnectionPool


@dataclass
class URL:
    path: str
    params: Mapping[str, str]


@dataclass
class Request:
    """What the fake server received."""

    method: str
    url: URL
    headers: Mapping[str, str]
    content: bytes


@dataclass
class Response:
    """What the fake server answers: a body whole, or streamed piece by piece (chunked)."""

    status_code: int
    content: bytes | AsyncIterator[bytes] = b""
    headers: Mapping[str, str] | None = None


class ReadError(Exception):
    """Raised by a streamed body: the server drops the connection there."""


Handler = Callable[[Request], Awaitable[Response] | Response]

#: Servers started for the current test (closed after it, by conftest.py).
servers: list[asyncio.base_events.Server] = []
#: Servers being started (a reference keeps the task alive).
_starting: set[asyncio.Task[None]] = set()


def close_servers() -> None:
    """Close the servers started so far (conftest.py does after each test here; a test
    elsewhere, importing this module under another name, does it itself)."""
    while servers:
        servers.pop().close()


async def _serve(handler: Handler, request: web.BaseRequest) -> web.StreamResponse:
    seen = Request(
        request.method,
        URL(request.path, request.rel_url.query),
        request.headers,
        await request.read(),
    )
    answer = handler(seen)
    response = await answer if inspect.isawaitable(answer) else answer
    if isinstance(response.content, bytes):
        return web.Response(
            status=response.status_code, body=response.content, headers=response.headers
        )
    stream = web.StreamResponse(status=response.status_code, headers=response.headers)
    stream.enable_chunked_encoding()
    await stream.prepare(request)
    try:
        async for piece in response.content:
            await stream.write(piece)
    except ReadError:
        assert request.transport is not None
        request.transport.abort()
        return stream
    await stream.write_eof()
    return stream


def serve(handler: Handler) -> int:
    """Serve ``handler`` on a loopback port, the port (connections made before the server is
    up wait in the socket's backlog; without a running loop, as in a synchronous test, the port
    is held and nothing answers)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = int(sock.getsockname()[1])
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        sock.close()
        return port

    async def start() -> None:
        server = web.Server(lambda request: _serve(handler, request), handler_cancellation=True)
        servers.append(await loop.create_server(server, sock=sock))

    task = loop.create_task(start())
    _starting.add(task)
    task.add_done_callback(_starting.discard)
    return port


def make_client(
    handler: Handler,
    *,
    qps: float = 0,
    burst: int = 1,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> APIClient:
    pool = ConnectionPool(
        "127.0.0.1",
        serve(handler),
        ssl_context=None,
        user_agent="kubesched/test",
        max_connections=max_in_flight,
    )
    return APIClient(pool, qps=qps, burst=burst)


def status_body(code: int, reason: str, message: str = "", **details: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return body


def json_response(code: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(code, content=json.dumps(body).encode(), headers=headers)


def error_response(code: int, reason: str, message: str = "") -> Response:
    return json_response(code, status_body(code, reason, message))


def pod(
    name: str, rv: str, *, namespace: str = "ns", uid: str | None = None, **spec: Any
) -> dict[str, Any]:
    return (
        PodWrapper(name)
        .namespace(namespace)
        .uid(uid or f"uid-{name}")
        .resource_version(rv)
        .container("c", image="busybox")
        .spec(spec)
        .manifest()
    )


def event_line(kind: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode() + b"\n"


@dataclass
class Watch:
    """One scripted watch response: lines to send, then end (or hang until cancelled)."""

    lines: list[bytes]
    hang: bool = False
    chunk: int = 0  # split the body into chunks of this many bytes (0: one chunk per line)
    fail_after: bool = False  # raise a read error after the lines


@dataclass
class FakeAPI:
    """Answers list and watch requests for one collection path from scripted state.

    ``objects`` is the current list; ``list_rv`` its resourceVersion. Watches are served from
    ``watches`` in order; when they run out, a watch hangs until cancelled.
    """

    objects: list[dict[str, Any]] = field(default_factory=list)
    list_rv: str = "10"
    page_size_seen: list[str | None] = field(default_factory=list)
    watches: list[Watch] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    list_errors: list[Response] = field(default_factory=list)
    watch_started: asyncio.Event = field(default_factory=asyncio.Event)

    def lists(self) -> list[Request]:
        return [r for r in self.requests if r.url.params.get("watch") != "true"]

    def watch_requests(self) -> list[Request]:
        return [r for r in self.requests if r.url.params.get("watch") == "true"]

    async def __call__(self, request: Request) -> Response:
        self.requests.append(request)
        params = request.url.params
        if params.get("watch") == "true":
            self.watch_started.set()
            script = self.watches.pop(0) if self.watches else Watch([], hang=True)
            return Response(200, content=self._stream(script))
        if self.list_errors:
            return self.list_errors.pop(0)
        limit = int(params["limit"]) if "limit" in params else 0
        start = int(params.get("continue") or 0)
        items = self.objects[start : start + limit] if limit else self.objects[start:]
        end = start + len(items)
        meta: dict[str, Any] = {"resourceVersion": self.list_rv}
        if limit and end < len(self.objects):
            meta["continue"] = str(end)
        # Items of a list have no apiVersion/kind, as from the real server.
        bare = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]
        body = {"apiVersion": "v1", "kind": "PodList", "metadata": meta, "items": bare}
        return json_response(200, body)

    async def _stream(self, script: Watch) -> AsyncIterator[bytes]:
        if script.chunk:
            data = b"".join(script.lines)
            for i in range(0, len(data), script.chunk):
                yield data[i : i + script.chunk]
        else:
            for line in script.lines:
                yield line
        if script.fail_after:
            raise ReadError("connection reset")
        if script.hang:
            await asyncio.Event().wait()


async def eventually(
    predicate: Callable[[], bool], within: float = 2.0, step: float = 0.005
) -> None:
    """Wait until ``predicate()`` holds, polling; ``TimeoutError`` after ``within`` seconds."""
    for _ in range(int(within / step) + 1):
        if predicate():
            return
        await asyncio.sleep(step)
    raise TimeoutError(f"condition not met within {within}s")
