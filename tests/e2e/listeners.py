"""The TCP sockets a tree of processes listens on, and which of them another machine could reach.

Every server the tests start must listen on a loopback address only. A server that takes no
address (nfd-master) runs in a network namespace whose only interface is ``lo`` instead
(tests/netns.py): whatever it listens on there, nothing outside can reach it.

Read from procfs: ``/proc/<pid>/fd`` names the socket inodes a process holds, and
``/proc/<pid>/net/tcp`` and ``tcp6`` list the sockets of that process's network namespace with
their state (``0A`` is LISTEN), local address and inode.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")
_LISTEN = "0A"


@dataclass(frozen=True)
class Listener:
    """A listening TCP socket and the process that holds it."""

    pid: int
    command: str
    address: str
    port: int
    #: In a network namespace whose only interface is ``lo``.
    isolated: bool

    @property
    def reachable_from_outside(self) -> bool:
        """Not bound to a loopback address, and in a namespace with more than ``lo``."""
        return not (self.isolated or ipaddress.ip_address(self.address).is_loopback)

    def __str__(self) -> str:
        where = " (in a loopback-only namespace)" if self.isolated else ""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.command}[{self.pid}] on {host}:{self.port}{where}"


def process_tree(roots: Iterable[int]) -> set[int]:
    """``roots`` and all their descendants that are alive."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Field 4 is the parent's pid; field 2, the command, may hold spaces: split after it.
        parent = int(stat[stat.rfind(")") + 2 :].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    pending = [pid for pid in roots if (_PROC / str(pid)).exists()]
    while pending:
        pid = pending.pop()
        if pid not in found:
            found.add(pid)
            pending.extend(children.get(pid, []))
    return found


def _address(hex_address: str) -> tuple[str, int]:
    """``0100007F:1F90`` (IPv4) or 32 hex digits and a port (IPv6), as the kernel writes them:
    the address in 32-bit words of host byte order, the port in hex."""
    address, port = hex_address.split(":")
    raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8))
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw), int(port, 16)
    ip = ipaddress.IPv6Address(raw)
    # An IPv4 address on an IPv6 socket (::ffff:127.0.0.1) is the IPv4 one.
    return str(ip.ipv4_mapped or ip), int(port, 16)


def _listening(pid: int) -> dict[str, tuple[str, int]]:
    """The listening sockets of ``pid``'s network namespace, by inode."""
    found: dict[str, tuple[str, int]] = {}
    for table in ("tcp", "tcp6"):
        try:
            lines = (_PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN:
                found[fields[9]] = _address(fields[1])
    return found


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    try:
        descriptors = os.listdir(_PROC / str(pid) / "fd")
    except OSError:
        return inodes
    for fd in descriptors:
        try:
            target = os.readlink(_PROC / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _isolated(pid: int) -> bool:
    """Whether ``pid`` is in another network namespace than ours, with ``lo`` its only
    interface (``/proc/<pid>/net/dev``: two header lines, then one line per interface)."""
    try:
        if os.readlink(_PROC / str(pid) / "ns" / "net") == os.readlink("/proc/self/ns/net"):
            return False
        lines = (_PROC / str(pid) / "net" / "dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return [line.split(":")[0].strip() for line in lines] == ["lo"]


def listeners(pids: Iterable[int]) -> list[Listener]:
    """The listening TCP sockets the processes ``pids`` hold (a socket shared by a parent and
    its child counts for each)."""
    found: list[Listener] = []
    for pid in sorted(pids):
        listening = _listening(pid)
        try:
            command = (_PROC / str(pid) / "comm").read_text().strip()
        except OSError:
            continue
        isolated = _isolated(pid)
        for inode in sorted(_socket_inodes(pid) & listening.keys()):
            address, port = listening[inode]
            found.append(Listener(pid, command, address, port, isolated))
    return found


def reachable_from_outside(found: Iterable[Listener]) -> list[str]:
    """The listeners another machine could connect to, described (empty when none)."""
    return [str(listener) for listener in found if listener.reachable_from_outside]
