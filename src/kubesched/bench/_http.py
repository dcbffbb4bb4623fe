"""Creating many objects fast, on kept-alive HTTP/1.1 connections.

The benchmark must create pods faster than any scheduler binds them, on the same machine as the
API server and the scheduler. A general-purpose async HTTP client costs about 3 ms of CPU per
request here; the API client's own HTTP/1.1 pool (:class:`kubesched.kube.ConnectionPool`) writes the
request bytes on kept-alive TLS connections and reads the answer by its Content-Length (or
chunks), about 0.3 ms.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable, Sequence

from kubesched.bench._errors import BenchError
from kubesched.bench._retry import APIUnavailableError, backoff
from kubesched.kube import ConnectionPool, TransportError

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
        path: str | Sequence[str],
        bodies: Sequence[bytes],
        *,
        what: str,
        within: float,
        connections: int = 64,
        on_done: Callable[[int], None] | None = None,
    ) -> list[str]:
        """POST every body to ``path`` (or each to its own, ``path[i]``: objects of several
        namespaces); an object that already exists counts as created. See :meth:`send_all`."""
        return await self.send_all(
            "POST",
            path,
            bodies,
            what=what,
            within=within,
            connections=connections,
            on_done=on_done,
        )

    async def send_all(
        self,
        method: str,
        path: str | Sequence[str],
        bodies: Sequence[bytes],
        *,
        what: str,
        within: float,
        content_type: str = "application/json",
        connections: int = 64,
        on_done: Callable[[int], None] | None = None,
    ) -> list[str]:
        """Send every body to ``path`` (or each to its own, ``path[i]``) with ``method``, over
        ``connections`` connections at once. The errors of bodies the API server turned away
        (invalid, forbidden ...; a POST of an object that already exists is no error). A body
        refused as busy (429, 5xx) or not answered is sent again with backoff; after
        ``within`` seconds of that, :class:`APIUnavailableError` (naming ``what``) ends the
        whole call."""
        if not isinstance(path, str) and len(path) != len(bodies):
            raise ValueError(f"{len(path)} paths for {len(bodies)} bodies")
        errors: list[str] = []
        position = 0
        done = 0
        pool = ConnectionPool(
            self._host,
            self._port,
            ssl_context=self._context,
            user_agent="kubesched-bench",
            max_connections=max(1, connections),
            timeout=within,
        )

        async def worker() -> None:
            nonlocal position, done
            while position < len(bodies):
                body = bodies[position]
                to = path if isinstance(path, str) else path[position]
                position += 1
                error = await self._send(pool, method, to, body, content_type, what, within)
                if error is not None:
                    errors.append(error)
                done += 1
                if on_done is not None:
                    on_done(done)

        workers = [asyncio.create_task(worker()) for _ in range(max(1, connections))]
        try:
            await asyncio.gather(*workers)
        finally:
            # One worker giving up ends the others: the API server is not answering any.
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await pool.aclose()
        return errors

    async def _send(
        self,
        pool: ConnectionPool,
        method: str,
        path: str,
        body: bytes,
        content_type: str,
        what: str,
        within: float,
    ) -> str | None:
        deadline = time.monotonic() + within
        waits = backoff()
        last = ""
        done = (200, 201, 202, ALREADY_EXISTS) if method == "POST" else (200, 201, 202)
        while (left := deadline - time.monotonic()) > 0:
            try:
                response = await pool.request(
                    method, path, body=body, content_type=content_type, timeout=left
                )
            except TransportError as e:
                if time.monotonic() >= deadline:
                    break  # cut off by the deadline: no answer, not a refusal
                last = f"{method} {path}: {type(e).__name__}: {e}"
            else:
                if response.status in done:
                    return None
                error = f"{method} {path}: {HTTPError(response.status, response.body)}"
                if response.status not in RETRY_STATUSES:
                    return error
                last = error
            await asyncio.sleep(min(waits.next(), max(0.0, deadline - time.monotonic())))
        raise APIUnavailableError(what, within, last)


__all__ = ["FastClient", "HTTPError"]
