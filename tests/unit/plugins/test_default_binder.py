"""DefaultBinder: binds through the handle's API client; Error without a client or on failure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from builders import make_pod
from kubesched.framework import APIClient, Code, CycleState, Snapshot, Status, WaitingPod
from kubesched.plugins.default_binder import DefaultBinder


@dataclass
class RecordingClient:
    calls: list[tuple[str, str, str, str]] = field(default_factory=list)
    fail: BaseException | None = None

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        self.calls.append((namespace, name, uid, node))
        if self.fail is not None:
            raise self.fail


@dataclass
class FakeHandle:
    client: APIClient | None
    snapshot: Snapshot = field(default_factory=Snapshot)
    profile_name: str = "default-scheduler"

    def waiting_pods(self) -> Iterable[WaitingPod]:
        return []

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        return None


async def test_binds_with_namespace_name_uid_and_node() -> None:
    client = RecordingClient()
    pod = make_pod("web-0", namespace="shop")
    status = await DefaultBinder(FakeHandle(client)).bind(CycleState(), pod, "node-3")
    assert status is None
    assert client.calls == [("shop", "web-0", pod.metadata.uid, "node-3")]


async def test_no_client_is_an_error() -> None:
    status = await DefaultBinder(FakeHandle(None)).bind(CycleState(), make_pod("p"), "n")
    assert status == Status(Code.ERROR, "no API client to bind pods with")


async def test_a_failing_call_is_an_error_carrying_the_exception() -> None:
    boom = RuntimeError('pods "p" not found')
    client = RecordingClient(fail=boom)
    status = await DefaultBinder(FakeHandle(client)).bind(CycleState(), make_pod("p"), "n")
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == 'pods "p" not found'
    assert status.error is boom
    assert len(client.calls) == 1


def test_is_a_bind_plugin_named_as_upstream() -> None:
    from kubesched.framework import extension_points_of

    assert DefaultBinder.name == "DefaultBinder"
    assert extension_points_of(DefaultBinder) == ["bind"]
    _: Any = DefaultBinder
