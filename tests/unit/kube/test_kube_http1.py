"""The HTTP/1.1 transport against a small asyncio HTTP server on loopback."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from kubesched.kube._client import query_string
from kubesched.kube._credentials import Credentials, ExecToken
from kubesched.kube._http1 import ConnectionPool, TransportError, _Connection

#: The bytes of an answer, or pieces of it written one after the other (a streamed body).
Answer = Callable[["Seen"], Awaitable[bytes | list[bytes]]]


@dataclass
class Seen:
    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Server:
    answer: Answer
    requests: list[Seen] = field(default_factory=list)
    connections: int = 0
    inside: int = 0
    peak: int = 0
    port: int = 0
    hang_up: bool = False

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                seen = Seen(method, target, headers, body)
                self.requests.append(seen)
                self.inside += 1
                self.peak = max(self.peak, self.inside)
                try:
                    answer = await self.answer(seen)
                finally:
                    self.inside -= 1
                if not answer:
                    return  # hang up without answering
                pieces = answer if isinstance(answer, list) else [answer]
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if self.hang_up or b"Connection: close" in pieces[0]:
                    return
        finally:
            writer.close()


def reply(status: int, body: bytes = b"{}", *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> Server:
        state = Server(answer)
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
        servers.append(server)
        state.port = server.sockets[0].getsockname()[1]
        return state

    yield start
    for server in servers:
        server.close()


def pool_for(server: Server, **kwargs: object) -> ConnectionPool:
    return ConnectionPool(
        "127.0.0.1",
        server.port,
        ssl_context=None,
        user_agent="test",
        **kwargs,  # type: ignore[arg-type]
    )


async def test_requests_share_kept_alive_connections(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(201, b'{"echo":"' + seen.body + b'"}')

    server = await serve(answer)
    pool = pool_for(server, path_prefix="/prefix/")
    for i in range(5):
        response = await pool.request(
            "POST", "/api/v1/x", query="a=b", body=str(i).encode(), content_type="text/plain"
        )
        assert response.status == 201
        assert response.body == b'{"echo":"' + str(i).encode() + b'"}'
    await pool.aclose()
    assert server.connections == 1
    first = server.requests[0]
    assert first.target == "/prefix/api/v1/x?a=b"
    assert first.headers["host"] == f"127.0.0.1:{server.port}"
    assert first.headers["content-type"] == "text/plain"
    assert first.headers["user-agent"] == "test"
    assert "authorization" not in first.headers


async def test_at_most_max_connections_in_flight(serve: Callable[..., Awaitable[Server]]) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        await asyncio.sleep(0.01)
        return reply(200)

    server = await serve(answer)
    pool = pool_for(server, max_connections=3)
    results = await asyncio.gather(*(pool.request("GET", f"/{i}") for i in range(20)))
    await pool.aclose()
    assert [r.status for r in results] == [200] * 20
    assert server.peak == 3
    assert server.connections == 3


async def test_chunked_answers_and_error_headers(serve: Callable[..., Awaitable[Server]]) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return (
            b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n"
            b"Retry-After: 3\r\n\r\n4\r\nab\r\n\r\n3;x=y\r\ncde\r\n0\r\nTrailer: 1\r\n\r\n"
        )

    server = await serve(answer)
    pool = pool_for(server)
    response = await pool.request("GET", "/x")
    again = await pool.request("GET", "/y")
    await pool.aclose()
    assert response.status == 429
    assert response.body == b"ab\r\ncde"
    assert response.headers["retry-after"] == "3"
    assert again.body == b"ab\r\ncde"
    assert server.connections == 1


async def test_connection_close_opens_a_new_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(200, b"{}", "Connection: close")

    server = await serve(answer)
    pool = pool_for(server)
    for _ in range(3):
        assert (await pool.request("DELETE", "/x")).status == 200
    await pool.aclose()
    assert server.connections == 3


async def test_a_connection_the_server_closed_is_not_reused(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(200)

    server = await serve(answer)
    server.hang_up = True  # closes each connection after answering, without saying so
    pool = pool_for(server)
    assert (await pool.request("GET", "/x")).status == 200
    await asyncio.sleep(0.05)  # the FIN arrives while the connection is idle
    assert (await pool.request("GET", "/y")).status == 200
    await pool.aclose()
    assert server.connections == 2


async def test_repeated_header_fields_are_kept(serve: Callable[..., Awaitable[Server]]) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(200, b"{}", 'Warning: 299 - "first"', 'Warning: 299 - "second"')

    server = await serve(answer)
    pool = pool_for(server)
    response = await pool.request("GET", "/x")
    await pool.aclose()
    assert response.headers.get_all("Warning") == ['299 - "first"', '299 - "second"']
    assert response.headers["warning"] == '299 - "first", 299 - "second"'
    assert response.headers["content-length"] == "2"


@pytest.mark.parametrize(("method", "retried"), [("GET", True), ("POST", False)])
async def test_a_kept_alive_connection_closed_before_answering(
    serve: Callable[..., Awaitable[Server]], method: str, retried: bool
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        # The second request finds the server closing its idle connection.
        return b"" if len(server.requests) == 2 else reply(200)

    server = await serve(answer)
    pool = pool_for(server)
    assert (await pool.request(method, "/1")).status == 200
    if retried:
        # Nothing of the answer came: a GET is sent again, on a new connection.
        assert (await pool.request(method, "/2")).status == 200
        assert [s.target for s in server.requests] == ["/1", "/2", "/2"]
    else:
        # A POST may have been applied: the failure is the caller's to judge.
        with pytest.raises(TransportError):
            await pool.request(method, "/2")
        assert [s.target for s in server.requests] == ["/1", "/2"]
    await pool.aclose()
    assert server.connections == (2 if retried else 1)


async def test_a_fresh_connection_closed_before_answering_is_not_retried(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return b""

    server = await serve(answer)
    pool = pool_for(server)
    with pytest.raises(TransportError, match="EOFError"):
        await pool.request("GET", "/x")
    await pool.aclose()
    assert len(server.requests) == 1


async def test_a_write_waits_for_the_socket_to_drain() -> None:
    received = 0
    reading = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal received
        await reading.wait()
        while data := await reader.read(1 << 20):
            received += len(data)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    _, conn = await loop.create_connection(lambda: _Connection(loop), "127.0.0.1", port)
    payload = b"x" * (64 << 20)
    sending = asyncio.create_task(conn._send(payload))
    await asyncio.sleep(0.2)
    assert not sending.done()  # more than the kernel takes: waiting for the reader
    reading.set()
    await asyncio.wait_for(sending, 10)
    conn.close()
    await eventually_equal(lambda: received, len(payload))
    server.close()


async def eventually_equal(value: Callable[[], int], expected: int) -> None:
    for _ in range(500):
        if value() == expected:
            return
        await asyncio.sleep(0.01)
    assert value() == expected


async def test_broken_answers_raise_and_free_the_slot(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    calls = 0

    async def answer(seen: Seen) -> bytes | list[bytes]:
        nonlocal calls
        calls += 1
        return b"garbage\r\n\r\n" if calls == 1 else reply(200)

    server = await serve(answer)
    pool = pool_for(server, max_connections=1)
    with pytest.raises(TransportError):
        await pool.request("POST", "/x", body=b"{}")
    assert (await pool.request("POST", "/x", body=b"{}")).status == 200
    await pool.aclose()


async def test_timeout_closes_the_connection(serve: Callable[..., Awaitable[Server]]) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        if seen.target == "/slow":
            await asyncio.sleep(1)
        return reply(200)

    server = await serve(answer)
    pool = pool_for(server, max_connections=1, timeout=0.1)
    with pytest.raises(TransportError, match="no answer within"):
        await pool.request("GET", "/slow")
    assert (await pool.request("GET", "/fast", timeout=5)).status == 200
    await pool.aclose()
    assert server.connections == 2


async def test_cancelled_waiter_passes_its_turn_on(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        await asyncio.sleep(0.05)
        return reply(200)

    server = await serve(answer)
    pool = pool_for(server, max_connections=1)
    first = asyncio.create_task(pool.request("GET", "/1"))
    waiting = asyncio.create_task(pool.request("GET", "/2"))
    third = asyncio.create_task(pool.request("GET", "/3"))
    await asyncio.sleep(0.01)
    waiting.cancel()
    assert (await first).status == 200
    assert (await third).status == 200
    await pool.aclose()
    assert [s.target for s in server.requests] == ["/1", "/3"]


async def test_token_file_is_read_again_on_401(
    serve: Callable[..., Awaitable[Server]], tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")

    async def answer(seen: Seen) -> bytes | list[bytes]:
        if seen.headers.get("authorization") == "Bearer new":
            return reply(200)
        token.write_text("new")
        return reply(401)

    server = await serve(answer)
    pool = pool_for(server, credentials=Credentials(token_file=str(token)))
    assert (await pool.request("POST", "/x", body=b"{}")).status == 200
    await pool.aclose()
    assert [s.headers["authorization"] for s in server.requests] == ["Bearer old", "Bearer new"]


async def test_401_with_a_fixed_token_is_not_repeated(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(401)

    server = await serve(answer)
    pool = pool_for(server, credentials=Credentials("Bearer abc"))
    assert (await pool.request("GET", "/x")).status == 401
    await pool.aclose()
    assert len(server.requests) == 1


async def test_exec_token_is_kept_until_it_expires_and_renewed_on_401(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    runs = 0

    async def plugin() -> ExecToken:
        nonlocal runs
        runs += 1
        return ExecToken(f"t{runs}", now + datetime.timedelta(minutes=10))

    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(401 if seen.headers["authorization"] == "Bearer t2" else 200)

    server = await serve(answer)
    clock = [now]
    credentials = Credentials(exec_plugin=plugin, now=lambda: clock[0])
    pool = pool_for(server, credentials=credentials)
    assert (await pool.request("GET", "/a")).status == 200
    assert (await pool.request("GET", "/b")).status == 200
    assert runs == 1  # cached
    clock[0] = now + datetime.timedelta(minutes=10)
    # Expired: run again (t2), refused: run again (t3) and repeat.
    assert (await pool.request("POST", "/c", body=b"{}")).status == 200
    assert runs == 3
    await pool.aclose()
    assert [s.headers["authorization"] for s in server.requests] == [
        "Bearer t1",
        "Bearer t1",
        "Bearer t2",
        "Bearer t3",
    ]


async def test_closed_pool_refuses_requests(serve: Callable[..., Awaitable[Server]]) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return reply(200)

    server = await serve(answer)
    pool = pool_for(server)
    await pool.aclose()
    with pytest.raises(TransportError, match="closed"):
        await pool.request("GET", "/x")


async def test_connection_refused_is_a_transport_error() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, user_agent="t")
    with pytest.raises(TransportError):
        await pool.request("GET", "/x")


WATCH_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def test_stream_reads_chunks_as_they_come_on_a_connection_of_its_own(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        if seen.target.startswith("/watch"):
            return [WATCH_HEAD, chunk(b'{"a":1}\n'), chunk(b'{"b":'), chunk(b"2}\n"), b"0\r\n\r\n"]
        return reply(200)

    server = await serve(answer)
    pool = pool_for(server)
    await pool.request("GET", "/x")
    stream = await pool.open_stream("/watch", query="watch=true", read_timeout=5)
    assert stream.status == 200
    pieces = [piece async for piece in stream.chunks()]
    stream.close()
    await pool.request("GET", "/y")
    await pool.aclose()
    assert b"".join(pieces) == b'{"a":1}\n{"b":2}\n'
    assert len(pieces) == 3
    assert server.connections == 2  # the watch did not take the pool's connection
    assert server.requests[1].target == "/watch?watch=true"


async def test_stream_read_timeout_and_error_bodies(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        if seen.target == "/silent":
            return [WATCH_HEAD, chunk(b"x\n"), *[b""] * 50]  # then nothing for 0.5 s
        return reply(410, b'{"kind":"Status","code":410}')

    server = await serve(answer)
    pool = pool_for(server)
    gone = await pool.open_stream("/gone")
    assert (gone.status, await gone.read()) == (410, b'{"kind":"Status","code":410}')
    gone.close()
    silent = await pool.open_stream("/silent", read_timeout=0.2)
    got = []

    async def slow_reader() -> None:
        async for piece in silent.chunks():
            got.append(piece)
            await asyncio.sleep(0.3)  # the reader's own time does not count

    with pytest.raises(TransportError, match=r"nothing read for 0\.2 s"):
        await slow_reader()
    silent.close()
    await pool.aclose()
    assert got == [b"x\n"]


def test_query_string_as_httpx_encodes_it() -> None:
    assert query_string(None) == ""
    assert (
        query_string({"watch": True, "x": None, "limit": 5, "f": ["a=b", "c d"], "g": False})
        == "watch=true&limit=5&f=a%3Db&f=c+d&g=false"
    )


async def test_a_stream_read_slowly_stops_reading_the_socket(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    piece = b"y" * 65535 + b"\n"
    count = 64  # 4 MiB

    async def answer(seen: Seen) -> bytes | list[bytes]:
        return [WATCH_HEAD + b"".join(chunk(piece) for _ in range(count)) + b"0\r\n\r\n"]

    server = await serve(answer)
    pool = pool_for(server)
    stream = await pool.open_stream("/watch")
    await asyncio.sleep(0.3)  # nobody reads
    buffered = stream._conn._buffered
    got = await stream.read()
    stream.close()
    await pool.aclose()
    assert buffered <= 2 << 20  # held at about a MiB, the rest left to the kernel and the server
    assert got == piece * count


async def test_a_body_delimited_by_the_end_of_the_connection(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    async def answer(seen: Seen) -> bytes | list[bytes]:
        return [b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b'{"a":', b"1}"]

    server = await serve(answer)
    server.hang_up = True
    pool = pool_for(server)
    first = await pool.request("GET", "/x")
    second = await pool.request("GET", "/y")
    await pool.aclose()
    assert first.body == second.body == b'{"a":1}'
    assert server.connections == 2


async def test_requests_refused_together_run_the_exec_plugin_once(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    runs = 0

    async def plugin() -> ExecToken:
        nonlocal runs
        runs += 1
        await asyncio.sleep(0.05)
        return ExecToken(f"t{runs}", None)

    async def answer(seen: Seen) -> bytes | list[bytes]:
        await asyncio.sleep(0.02)
        return reply(401 if seen.headers["authorization"] == "Bearer t1" else 200)

    server = await serve(answer)
    pool = pool_for(server, credentials=Credentials(exec_plugin=plugin))
    # All five wait for the first token (t1), are refused, and wait for the second.
    results = await asyncio.gather(*(pool.request("GET", f"/{i}") for i in range(5)))
    await pool.aclose()
    assert [r.status for r in results] == [200] * 5
    assert runs == 2
    assert (
        sorted(s.headers["authorization"] for s in server.requests)
        == ["Bearer t1"] * 5 + ["Bearer t2"] * 5
    )
