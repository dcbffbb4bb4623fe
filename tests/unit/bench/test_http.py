"""The lean create client: keep-alive, Content-Length and chunked bodies, retries, conflicts,
and an end to retrying when the server refuses or does not answer for too long."""

from __future__ import annotations

import asyncio
import time

import pytest

from kubesched.bench._http import FastClient
from kubesched.bench._retry import APIUnavailableError


class Server:
    """A tiny HTTP/1.1 server answering POSTs from a script of (status, chunked, close)."""

    def __init__(self, script: list[tuple[int, bool, bool]]) -> None:
        self.script = script
        self.bodies: list[bytes] = []
        #: ``(path, body)`` of each request, in the order they came.
        self.requests: list[tuple[str, bytes]] = []
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                self.bodies.append(await reader.readexactly(length))
                self.requests.append((head.split(b" ")[1].decode(), self.bodies[-1]))
                status, chunked, close = self.script.pop(0) if self.script else (201, False, False)
                payload = b'{"kind":"Pod"}'
                extra = b"Connection: close\r\n" if close else b""
                if chunked:
                    writer.write(
                        b"HTTP/1.1 %d X\r\nTransfer-Encoding: chunked\r\n%s\r\n" % (status, extra)
                        + b"5\r\n"
                        + payload[:5]
                        + b"\r\n"
                        + b"%x\r\n" % (len(payload) - 5)
                        + payload[5:]
                        + b"\r\n0\r\n\r\n"
                    )
                else:
                    writer.write(
                        b"HTTP/1.1 %d X\r\nContent-Length: %d\r\n%s\r\n"
                        % (status, len(payload), extra)
                        + payload
                    )
                await writer.drain()
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def run(
    script: list[tuple[int, bool, bool]],
    bodies: list[bytes],
    connections: int,
    within: float = 30.0,
    path: str | list[str] = "/api/v1/x",
) -> tuple[Server, list[str], list[int]]:
    server = Server(script)
    srv = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    done: list[int] = []
    async with srv:
        client = FastClient("127.0.0.1", port, None)
        errors = await client.create_all(
            path,
            bodies,
            what="creating xs",
            within=within,
            connections=connections,
            on_done=done.append,
        )
    return server, errors, done


def test_creates_everything_over_kept_alive_connections() -> None:
    bodies = [b'{"n":%d}' % i for i in range(50)]
    server, errors, done = asyncio.run(run([(201, True, False), (200, False, False)], bodies, 4))
    assert errors == []
    assert sorted(server.bodies) == sorted(bodies)
    assert server.connections == 4
    assert done[-1] == 50


def test_each_body_to_its_own_path() -> None:
    bodies = [b'{"n":%d}' % i for i in range(12)]
    paths = [f"/api/v1/namespaces/ns-{i % 3}/pods" for i in range(12)]
    server, errors, _ = asyncio.run(run([], bodies, 4, path=paths))
    assert errors == []
    assert sorted(server.requests) == sorted(zip(paths, bodies, strict=True))
    with pytest.raises(ValueError, match="2 paths for 12 bodies"):
        asyncio.run(run([], bodies, 4, path=paths[:2]))


def test_retries_busy_server_and_reconnects_after_close() -> None:
    script = [(429, False, False), (503, False, True), (201, False, False)]
    server, errors, _ = asyncio.run(run(script, [b"{}"], 1))
    assert errors == []
    assert len(server.bodies) == 3
    assert server.connections == 2


def test_conflict_counts_as_created_and_bad_request_is_reported() -> None:
    _, errors, _ = asyncio.run(run([(409, False, False)], [b"{}"], 1))
    assert errors == []
    _, errors, _ = asyncio.run(run([(422, False, False)], [b"{}"], 1))
    assert len(errors) == 1
    assert "HTTP 422" in errors[0]


def test_a_server_refusing_everything_ends_the_call_after_within_seconds() -> None:
    script = [(429, False, False)] * 10_000
    start = time.monotonic()
    with pytest.raises(APIUnavailableError) as failed:
        asyncio.run(run(script, [b"{}"] * 20, 4, within=1.0))
    assert 1.0 <= time.monotonic() - start < 5.0
    message = str(failed.value)
    assert message.startswith("the API server refused or did not answer for 1 s while creating xs")
    assert "HTTP 429" in message


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    # Takes the request and never answers, like an API server that stopped.
    await reader.read()
    writer.close()


def test_a_server_that_never_answers_ends_the_call_after_within_seconds() -> None:
    async def main() -> None:
        srv = await asyncio.start_server(_silent, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        async with srv:
            await FastClient("127.0.0.1", port, None).create_all(
                "/api/v1/x", [b"{}"] * 5, what="creating xs", within=1.0, connections=2
            )

    start = time.monotonic()
    with pytest.raises(APIUnavailableError) as failed:
        asyncio.run(main())
    assert time.monotonic() - start < 5.0
    assert str(failed.value) == "the API server did not answer for 1 s while creating xs"
