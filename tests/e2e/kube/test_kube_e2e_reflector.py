"""Reflector against the real kube-apiserver: events, selectors, bookmarks, 410 Gone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from kube_e2e import eventually, pod_manifest

from kubesched.api import ObjectMeta, Pod
from kubesched.kube import (
    APIClient,
    EventRecorder,
    ObjectReference,
    Reflector,
    ResourceEventHandler,
    api_path,
)

pytestmark = pytest.mark.e2e

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"


class Recorder(ResourceEventHandler[Pod]):
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.synced = 0

    def on_add(self, obj: Pod) -> None:
        self.calls.append(("add", obj.metadata.name))

    def on_update(self, old: Pod, new: Pod) -> None:
        assert old.metadata.resource_version != new.metadata.resource_version
        self.calls.append(("update", new.metadata.name))

    def on_delete(self, obj: Pod) -> None:
        self.calls.append(("delete", obj.metadata.name))

    def on_synced(self) -> None:
        self.synced += 1


async def test_pods_add_update_delete(kubeconfig: Path, namespace: str) -> None:
    pods = api_path("pods", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        await client.post(pods, pod_manifest("before", namespace, labels={"app": "web"}))
        handler = Recorder()
        reflector = Reflector(
            client, pods, Pod, handler, label_selector="app=web", field_selector=ACTIVE_PODS
        )
        reflector.start()
        try:
            async with asyncio.timeout(10):
                await reflector.wait_synced()
            assert handler.synced == 1
            # The first list is served from the watch cache (resourceVersion=0, as client-go's),
            # which may not hold "before" yet: then the watch brings it.
            await eventually(lambda: handler.calls == [("add", "before")])
            await client.post(pods, pod_manifest("after", namespace, labels={"app": "web"}))
            await client.post(pods, pod_manifest("other", namespace, labels={"app": "db"}))
            await client.patch(
                api_path("pods", namespace=namespace, name="before"),
                {"metadata": {"annotations": {"touched": "yes"}}},
            )
            await eventually(lambda: ("update", "before") in handler.calls)
            stored = reflector.get(f"{namespace}/before")
            assert stored is not None
            assert stored.metadata.annotations == {"touched": "yes"}
            # Leaving the field selector (phase Succeeded) is seen as a delete.
            await client.patch(
                api_path("pods", namespace=namespace, name="after", subresource="status"),
                {"status": {"phase": "Succeeded"}},
            )
            await eventually(lambda: ("delete", "after") in handler.calls)
            await client.delete(
                api_path("pods", namespace=namespace, name="before"),
                params={"gracePeriodSeconds": 0},
            )
            await eventually(lambda: ("delete", "before") in handler.calls)
        finally:
            await reflector.stop()
    assert handler.calls[:2] == [("add", "before"), ("add", "after")]
    assert ("add", "other") not in handler.calls
    assert reflector.list() == []
    assert reflector.decode_errors == 0


async def test_bookmark_advances_resource_version(kubeconfig: Path, namespace: str) -> None:
    pods = api_path("pods", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        handler = Recorder()
        # timeoutSeconds of 3-6 s: the server sends a bookmark 2 s before the end.
        reflector = Reflector(
            client, pods, Pod, handler, label_selector="app=watched", min_watch_timeout=3
        )
        reflector.start()
        try:
            async with asyncio.timeout(10):
                await reflector.wait_synced()
            listed_rv = int(reflector.resource_version)
            # Writes the watch does not match: only a bookmark can carry their versions. (A
            # bookmark only reports progress made after the watch started, so keep writing.)
            written: list[int] = []
            async with asyncio.timeout(20):
                while not reflector.bookmarks or int(reflector.resource_version) <= listed_rv:
                    unrelated = await client.post(
                        pods, pod_manifest(f"unrelated-{len(written)}", namespace), type=Pod
                    )
                    written.append(int(unrelated.metadata.resource_version))
                    await asyncio.sleep(0.5)
        finally:
            await reflector.stop()
    assert min(written) > listed_rv
    assert listed_rv < int(reflector.resource_version) <= max(written)
    assert handler.calls == []
    assert reflector.relists == 0


class Event(msgspec.Struct, rename="camel", kw_only=True):
    """Just enough of an events.k8s.io/v1 Event."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    reason: str = ""
    note: str = ""


class EventLog(ResourceEventHandler[Event]):
    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def on_add(self, obj: Event) -> None:
        self.calls.append(("add", obj.note))

    def on_update(self, old: Event, new: Event) -> None:
        self.calls.append(("update", new.note))

    def on_delete(self, obj: Event) -> None:
        self.calls.append(("delete", obj.note))


async def test_gone_relists_and_reconciles(
    kubeconfig: Path, namespace: str, compact_etcd: Callable[[], int]
) -> None:
    """Events are not in the API server's watch cache: after an etcd compaction a watch from
    an older resourceVersion gets 410 Gone, so the reflector has to re-list and reconcile."""
    events = api_path("events", group_version="events.k8s.io/v1", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        recorder = EventRecorder(client, reporting_controller="kubesched-e2e")
        recorder.start()
        for name in ("keep", "change", "vanish"):
            ref = ObjectReference(
                kind="Pod", namespace=namespace, name=name, uid=name, api_version="v1"
            )
            recorder.event(ref, type="Normal", reason="Test", action="Testing", note=name)
        await recorder.aclose()

        handler = EventLog()
        reflector: Reflector[Event] = Reflector(client, events, Event, handler)
        reflector.start()
        async with asyncio.timeout(10):
            await reflector.wait_synced()
        await eventually(lambda: len(handler.calls) == 3)
        await reflector.stop()
        by_note = {e.note: e for e in reflector.list()}
        assert sorted(by_note) == ["change", "keep", "vanish"]

        # While the reflector is not watching: one event changes, one goes, one comes.
        await client.patch(
            f"{events}/{by_note['change'].metadata.name}", {"metadata": {"labels": {"v": "2"}}}
        )
        await client.delete(f"{events}/{by_note['vanish'].metadata.name}")
        recorder = EventRecorder(client, reporting_controller="kubesched-e2e")
        recorder.start()
        ref = ObjectReference(
            kind="Pod", namespace=namespace, name="fresh", uid="fresh", api_version="v1"
        )
        recorder.event(ref, type="Normal", reason="Test", action="Testing", note="fresh")
        await recorder.aclose()
        revision = compact_etcd()
        assert revision > int(reflector.resource_version)

        handler.calls.clear()
        reflector.start()
        try:
            await eventually(lambda: reflector.relists == 1)
        finally:
            await reflector.stop()
    assert sorted(handler.calls) == [("add", "fresh"), ("delete", "vanish"), ("update", "change")]
    assert sorted(e.note for e in reflector.list()) == ["change", "fresh", "keep"]
    assert int(reflector.resource_version) >= revision
