"""End-to-end fixtures: a real etcd + kube-apiserver for the whole test session.

``control_plane`` starts a cluster named ``e2e-<pid>`` (building the binaries on first use, with
progress shown live) and stops it at the end of the session, also after failures, Ctrl-C or
SIGTERM. Set ``KUBESCHED_E2E_CLUSTER=<name>`` to run against that cluster instead (started if
needed, left running afterwards), which saves the start-up while iterating.

``admin_client`` is a small synchronous HTTP client authenticated as the cluster admin.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import ssl
import sys
import urllib.parse
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from kubesched import cluster
from kubesched.cluster import ClusterInfo

_E2E_DIR = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e is an e2e test (``-m 'not e2e'`` skips them)."""
    for item in items:
        if _E2E_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    headers: Mapping[str, str]

    def json(self) -> Any:
        return json.loads(self.body)

    def expect(self, *statuses: int) -> Response:
        """This response, if its status is one of ``statuses``; fail the test otherwise."""
        if self.status not in statuses:
            pytest.fail(f"expected HTTP {statuses}, got {self.status}: {self.body[:2000]!r}")
        return self


class AdminClient:
    """Requests to the test apiserver as ``kubesched-admin`` (system:masters)."""

    def __init__(self, server: str, context: ssl.SSLContext, timeout: float = 30.0) -> None:
        parts = urllib.parse.urlsplit(server)
        self.server = server
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port
        self._context = context
        self._timeout = timeout

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Response:
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        connection = http.client.HTTPSConnection(
            self._host, self._port, timeout=self._timeout, context=self._context
        )
        try:
            connection.request(method, target, body=data, headers=headers)
            answer = connection.getresponse()
            return Response(answer.status, answer.read(), dict(answer.getheaders()))
        finally:
            connection.close()

    def get(self, path: str, **params: str) -> Response:
        return self.request("GET", path, params=params or None)

    def post(self, path: str, body: Any) -> Response:
        return self.request("POST", path, body)

    def put(self, path: str, body: Any) -> Response:
        return self.request("PUT", path, body)

    def patch(self, path: str, body: Any) -> Response:
        """A JSON merge patch."""
        return self.request("PATCH", path, body, content_type="application/merge-patch+json")

    def delete(self, path: str) -> Response:
        return self.request("DELETE", path)


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Let SIGTERM unwind like Ctrl-C, so the session's teardown still stops the cluster."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ClusterInfo]:
    """A running etcd + kube-apiserver, shared by the session."""
    shared = os.environ.get("KUBESCHED_E2E_CLUSTER", "")
    name = shared or f"e2e-{os.getpid()}"
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def progress(message: str) -> None:
        sys.stderr.write(f"[{name}] {message}\n")
        sys.stderr.flush()

    with _sigterm_as_interrupt():
        try:
            live = capture.global_and_fixture_disabled() if capture else contextlib.nullcontext()
            with live:
                info = cluster.up(name, progress=progress)
            yield info
        finally:
            if not shared:
                cluster.down(name)


@pytest.fixture(scope="session")
def admin_client(control_plane: ClusterInfo) -> AdminClient:
    """A synchronous HTTP client authenticated as the cluster admin."""
    return AdminClient(control_plane.server, control_plane.ssl_context())
