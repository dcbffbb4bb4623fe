"""Run a command in a network namespace of its own, which has only a loopback interface.

A server that takes only a port (nfd-master's health and metrics server, for one) listens on
every interface. Started this way it has no interface but its own ``lo``: nothing outside the
machine, nor anything else on it, can reach it except through the ports chosen here::

    python netns.py --reach 6443 --publish 8080 -- nfd-master -port=8080 ...

``--reach PORT`` makes the host's ``127.0.0.1:PORT`` (the apiserver, say) answer at the same
address inside, so a kubeconfig and the server certificate it checks stay valid as they are.
``--publish PORT`` makes the command's ``127.0.0.1:PORT`` answer on the host's ``127.0.0.1:PORT``
(its health endpoint, for a readiness probe).

The namespaces share the filesystem, so a Unix socket in a private directory is reachable from
both. Two forwarders bridge each port: this process, on the host, between the host's loopback
and the socket; a second copy of it, inside (started with ``unshare --net``, after bringing
``lo`` up), between the socket and the inside loopback. The inside copy runs the command. Each
process waits for its child, passes SIGTERM and SIGINT on to it, and exits with its status, so
stopping this process group stops all three. Forwarding problems are written to stderr, once
per kind (a readiness probe that comes too early would otherwise repeat them every time).

Needs root (CAP_SYS_ADMIN) for ``unshare --net``; anyone else gets a user namespace too
(``--map-root-user``) when the kernel allows it. ``ip`` comes from iproute2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

LOOPBACK = "127.0.0.1"
_CHUNK = 64 * 1024
_SCRIPT = Path(__file__).resolve()

Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]

_reported: set[str] = set()


def _report(message: str) -> None:
    """Write ``message`` to stderr the first time it comes up."""
    if message not in _reported:
        _reported.add(message)
        print(f"netns[{os.getpid()}]: {message}", file=sys.stderr, flush=True)


def _reach_socket(sockets: Path, port: int) -> Path:
    """The socket that leads to the host's ``127.0.0.1:port``."""
    return sockets / f"reach-{port}.sock"


def _publish_socket(sockets: Path, port: int) -> Path:
    """The socket that leads to the namespace's ``127.0.0.1:port``."""
    return sockets / f"publish-{port}.sock"


async def _pipe(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, back: asyncio.StreamWriter
) -> None:
    """Copy ``source`` to ``sink`` until end of file, then half-close ``sink``.

    On an error both connections are closed (``back`` is the writer of ``source``'s own
    connection), so the other direction's read ends too instead of waiting for ever.
    """
    try:
        while data := await source.read(_CHUNK):
            sink.write(data)
            await sink.drain()
        if sink.can_write_eof():
            sink.write_eof()
    except OSError:
        sink.close()
        back.close()


def _bridge(
    connect: Connect, to: str
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A connection handler that forwards each accepted connection to what ``connect`` opens."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await connect()
        except OSError as err:
            _report(f"cannot connect to {to}: {err}")
            writer.close()
            return
        try:
            await asyncio.gather(
                _pipe(reader, upstream_writer, writer),
                _pipe(upstream_reader, writer, upstream_writer),
            )
        finally:
            writer.close()
            upstream_writer.close()

    return handle


def _to_tcp(port: int) -> Connect:
    return lambda: asyncio.open_connection(LOOPBACK, port)


def _to_unix(path: Path) -> Connect:
    return lambda: asyncio.open_unix_connection(str(path))


async def _tcp_server(port: int, connect: Connect, to: str) -> asyncio.Server:
    return await asyncio.start_server(_bridge(connect, to), LOOPBACK, port)


async def _unix_server(path: Path, connect: Connect, to: str) -> asyncio.Server:
    return await asyncio.start_unix_server(_bridge(connect, to), str(path))


async def _run_child(argv: Sequence[str]) -> int:
    """Run ``argv`` with our stdout and stderr, passing SIGTERM and SIGINT on; its exit code
    (128 + the signal number if a signal ended it, as a shell reports it)."""
    child = await asyncio.create_subprocess_exec(*argv, stdin=subprocess.DEVNULL)
    loop = asyncio.get_running_loop()

    def forward(signum: int) -> None:
        if child.returncode is None:
            child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, forward, signum)
    code = await child.wait()
    return 128 - code if code < 0 else code


async def _host(
    sockets: Path, reach: Sequence[int], publish: Sequence[int], inside: Sequence[str]
) -> int:
    """Listen on the host's side, then run the ``inside`` copy under ``unshare --net``."""
    servers = [
        *[
            await _unix_server(_reach_socket(sockets, p), _to_tcp(p), f"{LOOPBACK}:{p}")
            for p in reach
        ],
        *[
            await _tcp_server(p, _to_unix(_publish_socket(sockets, p)), f"namespace's port {p}")
            for p in publish
        ],
    ]
    try:
        return await _run_child([*_unshare(), "--", *inside])
    finally:
        for server in servers:
            server.close()


def _ip() -> str:
    """iproute2's ``ip``, also where root's PATH has it when ours lacks sbin."""
    found = shutil.which(
        "ip", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    )
    if found is None:
        raise SystemExit("netns: `ip` not found; install iproute2 (apt-get install iproute2)")
    return found


async def _inside(
    sockets: Path, reach: Sequence[int], publish: Sequence[int], command: Sequence[str]
) -> int:
    """In the new namespace (``lo`` up): listen on the inside's side, run the command."""
    servers = [
        *[
            await _tcp_server(p, _to_unix(_reach_socket(sockets, p)), f"host's {LOOPBACK}:{p}")
            for p in reach
        ],
        *[
            await _unix_server(_publish_socket(sockets, p), _to_tcp(p), f"{LOOPBACK}:{p}")
            for p in publish
        ],
    ]
    try:
        return await _run_child(command)
    finally:
        for server in servers:
            server.close()


def _unshare() -> list[str]:
    unshare = ["unshare", "--net"]
    if os.geteuid() != 0:
        unshare.append("--map-root-user")
    return unshare


def isolated(
    command: Sequence[str],
    *,
    reach: Sequence[int] = (),
    publish: Sequence[int] = (),
    sockets: Path | None = None,
) -> list[str]:
    """The command line that runs ``command`` in a namespace of its own (see the module).

    With ``sockets``, the inside copy's: it bridges through the sockets in that directory.
    """
    inside = [] if sockets is None else ["--inside", f"--sockets={sockets}"]
    return [
        sys.executable,
        str(_SCRIPT),
        *inside,
        *[f"--reach={p}" for p in reach],
        *[f"--publish={p}" for p in publish],
        "--",
        *command,
    ]


def _parse(args: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="netns.py",
        description="Run a command in a network namespace with only a loopback interface.",
    )
    parser.add_argument(
        "--reach",
        type=int,
        action="append",
        default=[],
        metavar="PORT",
        help="make the host's 127.0.0.1:PORT answer at 127.0.0.1:PORT inside",
    )
    parser.add_argument(
        "--publish",
        type=int,
        action="append",
        default=[],
        metavar="PORT",
        help="make the command's 127.0.0.1:PORT answer at the host's 127.0.0.1:PORT",
    )
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sockets", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="+", help="the command and its arguments, after --")
    return parser.parse_args(args)


def main(args: Sequence[str] | None = None) -> int:
    options = _parse(sys.argv[1:] if args is None else args)
    if options.inside:
        # A new network namespace's lo is down: nothing could listen on 127.0.0.1 yet.
        subprocess.run([_ip(), "link", "set", "lo", "up"], check=True)
        return asyncio.run(
            _inside(options.sockets, options.reach, options.publish, options.command)
        )
    # Private to this user: only we may connect to the host's side through these sockets.
    sockets = Path(tempfile.mkdtemp(prefix="netns-"))
    try:
        inside = isolated(
            options.command, reach=options.reach, publish=options.publish, sockets=sockets
        )
        return asyncio.run(_host(sockets, options.reach, options.publish, inside))
    finally:
        shutil.rmtree(sockets, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
