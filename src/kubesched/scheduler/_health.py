"""``/healthz``, ``/readyz`` and ``/metrics`` on one small HTTP listener, and debug endpoints
(JSON, read-only) when asked for.

Three GET endpoints do not justify a web framework: this speaks just enough HTTP/1.1 for kubelet
probes and Prometheus scrapes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

Check = Callable[[], str | None]
"""A readiness check: ``None`` when fine, else why not."""

Debug = Callable[[], bytes]
"""A debug endpoint: its JSON body."""


class HealthServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        host: str = "127.0.0.1",
        port: int = 10259,
        ready_checks: dict[str, Check] | None = None,
        live_checks: dict[str, Check] | None = None,
        debug: dict[str, Debug] | None = None,
    ) -> None:
        self._registry = registry
        self._host = host
        self._port = port
        self.ready_checks = ready_checks or {}
        self.live_checks = live_checks or {}
        #: Path -> endpoint; none unless the caller turned them on.
        self.debug = debug or {}
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self._host, self._port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def _probe(self, checks: dict[str, Check]) -> tuple[int, bytes]:
        failed = []
        lines = []
        for name, check in checks.items():
            why = check()
            lines.append(
                f"[{'+' if why is None else '-'}]{name} {'ok' if why is None else 'failed: ' + why}"
            )
            if why is not None:
                failed.append(name)
        if failed:
            return 500, ("\n".join(lines) + "\nhealthz check failed\n").encode()
        return 200, b"ok"

    def _metrics(self) -> bytes:
        # The scheduler's own registry, plus the process-wide default one where plugins and
        # the Python runtime register theirs.
        body = generate_latest(self._registry)
        if self._registry is not REGISTRY:
            body += generate_latest(REGISTRY)
        return body

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, _, rest = request.partition(b" ")
            path = rest.partition(b" ")[0].decode(errors="replace").split("?")[0]
            ctype = "text/plain; charset=utf-8"
            if method != b"GET":
                code, body = 405, b"method not allowed"
            elif path in ("/healthz", "/livez"):
                code, body = self._probe(self.live_checks)
            elif path == "/readyz":
                code, body = self._probe({**self.live_checks, **self.ready_checks})
            elif path == "/metrics":
                code, body, ctype = 200, self._metrics(), CONTENT_TYPE_LATEST
            elif path in self.debug:
                code, body, ctype = 200, self.debug[path](), "application/json"
            else:
                code, body = 404, b"not found"
            reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed"}.get(code, "Error")
            writer.write(
                f"HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
            ConnectionError,
        ):
            pass
        finally:
            writer.close()
