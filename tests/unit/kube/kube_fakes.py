"""Fakes at the HTTP boundary for kubesched.kube unit tests: a scripted API server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

from builders import PodWrapper
from kubesched.kube import APIClient

Handler = Callable[[httpx2.Request], Awaitable[httpx2.Response] | httpx2.Response]


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


def json_response(code: int, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    return httpx2.Response(code, content=json.dumps(body).encode(), headers=headers)


def error_response(code: int, reason: str, message: str = "") -> httpx2.Response:
    return json_response(code, status_body(code, reason, message))


def make_client(handler: Handler, *, qps: float = 0, burst: int = 1) -> APIClient:
    http = httpx2.AsyncClient(
        transport=httpx2.MockTransport(handler), base_url="https://apiserver.test"
    )
    return APIClient(http, qps=qps, burst=burst)


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
    requests: list[httpx2.Request] = field(default_factory=list)
    list_errors: list[httpx2.Response] = field(default_factory=list)
    watch_started: asyncio.Event = field(default_factory=asyncio.Event)

    def lists(self) -> list[httpx2.Request]:
        return [r for r in self.requests if r.url.params.get("watch") != "true"]

    def watch_requests(self) -> list[httpx2.Request]:
        return [r for r in self.requests if r.url.params.get("watch") == "true"]

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        params = request.url.params
        if params.get("watch") == "true":
            self.watch_started.set()
            script = self.watches.pop(0) if self.watches else Watch([], hang=True)
            return httpx2.Response(200, content=self._stream(script))
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
            raise httpx2.ReadError("connection reset")
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
