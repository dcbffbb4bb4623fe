"""Helpers for the kubesched.kube end-to-end tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


async def eventually(
    predicate: Callable[[], bool], within: float = 10.0, step: float = 0.02
) -> None:
    """Wait until ``predicate()`` holds, polling; ``TimeoutError`` after ``within`` seconds."""
    for _ in range(int(within / step) + 1):
        if predicate():
            return
        await asyncio.sleep(step)
    raise TimeoutError(f"condition not met within {within}s")


def pod_manifest(
    name: str, namespace: str, *, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    """A minimal pod that no kubelet will run (no nodes exist unless a test makes one)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {
            "schedulerName": "kubesched-e2e-nobody",
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
            **spec,
        },
    }


def node_manifest(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {
            "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        },
    }


class ConnectProxy:
    """An HTTP proxy on loopback that only tunnels (CONNECT), as corporate proxies do for
    HTTPS; ``requests`` holds each request line and its header fields (lower-case names)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ConnectProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in head[1:] if line)
        self.requests.append((head[0], {k.lower(): v.strip() for k, _, v in fields}))
        host, _, port = head[0].split(" ")[1].rpartition(":")
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()
