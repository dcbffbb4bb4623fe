"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import contextlib
import socket

LOOPBACK = "127.0.0.1"


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports nobody listens on right now.

    The kernel picks them (bind to port 0); all sockets stay open until every port is picked, so
    the ports differ. Another process may still take one before our server binds it: callers
    retry on "address already in use".
    """
    with contextlib.ExitStack() as stack:
        ports: list[int] = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            sock.bind((host, 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def free_port(host: str = LOOPBACK) -> int:
    """One port nobody listens on right now."""
    return free_ports(1, host)[0]


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
