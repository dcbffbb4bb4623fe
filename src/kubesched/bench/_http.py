"""Creating many objects fast, on kept-alive HTTP/1.1 connections.

The benchmark must create pods faster than any scheduler binds them, on the same machine as the
API server and the scheduler. A general-purpose async HTTP client costs about 3 ms of CPU per
request here; the API client's own HTTP/1.1 pool (:mod:`kubesched.kube._http1`) writes the
request bytes on kept-alive TLS connections and reads the answer by its Content-Length (or
chunks), about 0.3 ms.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence

from kubesched.bench._errors import BenchError
from kubesched.kube._http1 import ConnectionPool, TransportError

#: Statuses worth retrying: throttled, or the server is busy or starting.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
ALREADY_EXISTS = 409


class HTTPError(BenchError):
    def __init__(self, status: int, body: bytes) -> None:
        super().__init__(f"HTTP {status}: {body[:300].decode(errors='replace')}")
        self.status = status
        self.body = body


class FastClient:
    """``connections`` kept-alive HTTP/1.1 connections to one API server, used by workers."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self._host = host
        self._port = port
        self._context = context

    async def create_all(
        self,
        path: str,
        bodies: Sequence[bytes],
        *,
        connections: int = 64,
        attempts: int = 8,
        on_done: Callable[[int], None] | None = None,
    ) -> list[str]:
        """POST every body to ``path`` over ``connections`` connections at once; an object that
        already exists counts as created. The errors of bodies that could not be created."""
        errors: list[str] = []
        position = 0
        done = 0
        pool = ConnectionPool(
            self._host,
            self._port,
            ssl_context=self._context,
            user_agent="kubesched-bench",
            max_connections=max(1, connections),
            timeout=120.0,
        )

        async def worker() -> None:
            nonlocal position, done
            while position < len(bodies):
                body = bodies[position]
                position += 1
                error = await self._create(pool, path, body, attempts)
                if error is not None:
                    errors.append(error)
                done += 1
                if on_done is not None:
                    on_done(done)

        try:
            await asyncio.gather(*(worker() for _ in range(max(1, connections))))
        finally:
            await pool.aclose()
        return errors

    async def _create(
        self, pool: ConnectionPool, path: str, body: bytes, attempts: int
    ) -> str | None:
        delay = 0.05
        last = ""
        for _ in range(attempts):
            try:
                response = await pool.request("POST", path, body=body)
            except TransportError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if response.status in (200, 201, 202, ALREADY_EXISTS):
                    return None
                last = str(HTTPError(response.status, response.body))
                if response.status not in RETRY_STATUSES:
                    return f"POST {path}: {last}"
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)
        return f"POST {path}: {last}"


__all__ = ["FastClient", "HTTPError"]
