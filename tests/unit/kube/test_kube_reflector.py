"""Reflector: reconcile diff, paginated list, watch events, bookmarks, 410 re-list, bad objects."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import msgspec
import pytest
from kube_fakes import (
    FakeAPI,
    Response,
    Watch,
    error_response,
    event_line,
    eventually,
    make_client,
    pod,
    status_body,
)

from kubesched.api import ObjectMeta, Pod
from kubesched.kube import Backoff, Reflector, ResourceEventHandler, reconcile


def _pod(name: str, rv: str, uid: str | None = None) -> Pod:
    return msgspec.convert(pod(name, rv, uid=uid), Pod)


def test_reconcile_diff() -> None:
    current = {p.key: p for p in (_pod("same", "1"), _pod("changed", "1"), _pod("gone", "1"))}
    listed = [_pod("same", "1"), _pod("changed", "2"), _pod("new", "3")]
    fresh, diff = reconcile(current, listed)
    assert sorted(fresh) == ["ns/changed", "ns/new", "ns/same"]
    assert [p.key for p in diff.added] == ["ns/new"]
    assert [
        (o.metadata.resource_version, n.metadata.resource_version) for o, n in diff.updated
    ] == [("1", "2")]
    assert [p.key for p in diff.deleted] == ["ns/gone"]
    assert diff.unchanged == 1
    # Unchanged objects keep the instance consumers already hold.
    assert fresh["ns/same"] is current["ns/same"]


def test_reconcile_recreated_object_is_delete_then_add() -> None:
    old = _pod("a", "1", uid="u1")
    new = _pod("a", "5", uid="u2")
    _, diff = reconcile({old.key: old}, [new])
    assert diff.deleted == [old]
    assert diff.added == [new]
    assert diff.updated == []


def test_reconcile_empty_is_falsy() -> None:
    _, diff = reconcile({}, [])
    assert not diff


class Recorder(ResourceEventHandler[Pod]):
    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.changed = asyncio.Event()

    def on_add(self, obj: Pod) -> None:
        self.calls.append(("add", obj.key, obj.metadata.resource_version))
        self.changed.set()

    def on_update(self, old: Pod, new: Pod) -> None:
        self.calls.append(
            ("update", new.key, old.metadata.resource_version, new.metadata.resource_version)
        )
        self.changed.set()

    def on_delete(self, obj: Pod) -> None:
        self.calls.append(("delete", obj.key, obj.metadata.resource_version))
        self.changed.set()

    def on_synced(self) -> None:
        self.calls.append(("synced",))
        self.changed.set()


def _reflector(api: FakeAPI, handler: Recorder, **kwargs: Any) -> Reflector[Pod]:
    client = make_client(api)
    return Reflector(
        client,
        "/api/v1/pods",
        Pod,
        handler,
        backoff=Backoff(0.01, 0.02, jitter=0),
        **kwargs,
    )


async def test_first_list_is_paginated_then_synced() -> None:
    api = FakeAPI(objects=[pod(f"p{i}", str(i)) for i in range(5)], list_rv="20")
    handler = Recorder()
    reflector = _reflector(
        api, handler, page_size=2, field_selector="status.phase!=Succeeded,status.phase!=Failed"
    )
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    await reflector.stop()
    assert handler.calls[:5] == [("add", f"ns/p{i}", str(i)) for i in range(5)]
    assert handler.calls[5] == ("synced",)
    assert reflector.has_synced
    assert reflector.resource_version == "20"
    assert len(reflector.list()) == 5
    assert reflector.get("ns/p3") is not None
    assert reflector.store.get_by_name("ns", "p4") is not None
    lists = api.lists()
    assert len(lists) == 3
    assert lists[0].url.params["resourceVersion"] == "0"
    assert lists[0].url.params["limit"] == "2"
    assert "resourceVersion" not in lists[1].url.params
    assert lists[1].url.params["continue"] == "2"
    assert all(
        r.url.params["fieldSelector"] == "status.phase!=Succeeded,status.phase!=Failed"
        for r in api.requests
    )


async def test_a_held_first_list_is_fetched_at_once_and_delivered_when_released() -> None:
    api = FakeAPI(objects=[pod("a", "5")], list_rv="10")
    api.watches.append(Watch([event_line("ADDED", pod("b", "11"))], hang=True))
    handler = Recorder()
    release = asyncio.Event()
    reflector = _reflector(api, handler, deliver_after=release)
    reflector.start()
    await eventually(lambda: len(api.lists()) == 1)
    await asyncio.sleep(0.05)
    # Listed, but nothing handed over and no watch yet.
    assert handler.calls == []
    assert not reflector.has_synced
    assert api.watch_requests() == []
    release.set()
    await eventually(lambda: len(handler.calls) == 3)
    await reflector.stop()
    assert handler.calls == [("add", "ns/a", "5"), ("synced",), ("add", "ns/b", "11")]
    assert api.watch_requests()[0].url.params["resourceVersion"] == "10"


async def test_watch_events_and_bookmark() -> None:
    api = FakeAPI(objects=[pod("a", "5")], list_rv="10")
    api.watches.append(
        Watch(
            [
                event_line("ADDED", pod("b", "11")),
                event_line("MODIFIED", pod("a", "12")),
                event_line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "15"}}),
                event_line("DELETED", pod("b", "16")),
            ],
            hang=True,
            chunk=7,
        )
    )
    handler = Recorder()
    reflector = _reflector(api, handler, min_watch_timeout=300)
    reflector.start()
    await eventually(lambda: len(handler.calls) == 5)
    await reflector.stop()
    assert handler.calls == [
        ("add", "ns/a", "5"),
        ("synced",),
        ("add", "ns/b", "11"),
        ("update", "ns/a", "5", "12"),
        ("delete", "ns/b", "16"),
    ]
    assert reflector.resource_version == "16"
    assert reflector.bookmarks == 1
    assert [p.key for p in reflector.list()] == ["ns/a"]
    watch = api.watch_requests()[0].url.params
    assert watch["resourceVersion"] == "10"
    assert watch["allowWatchBookmarks"] == "true"
    assert 300 <= int(watch["timeoutSeconds"]) <= 600


async def test_bookmark_only_advances_resource_version() -> None:
    api = FakeAPI(list_rv="10")
    api.watches.append(
        Watch([event_line("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "42"}})])
    )
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    await eventually(lambda: len(api.watch_requests()) == 2)
    await reflector.stop()
    assert handler.calls == [("synced",)]
    # The next watch resumes from the bookmark.
    assert api.watch_requests()[1].url.params["resourceVersion"] == "42"


async def test_expired_watch_relists_and_reconciles() -> None:
    api = FakeAPI(objects=[pod("keep", "1"), pod("change", "2"), pod("vanish", "3")], list_rv="10")
    expired = status_body(410, "Expired", "too old resource version: 10 (50)")
    api.watches.append(Watch([event_line("ERROR", expired)]))
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    # Meanwhile on the server: one changed, one deleted, one created.
    api.objects = [pod("keep", "1"), pod("change", "40"), pod("fresh", "45")]
    api.list_rv = "50"
    await eventually(lambda: reflector.relists == 1)
    await reflector.stop()
    assert handler.calls[4:] == [
        ("delete", "ns/vanish", "3"),
        ("add", "ns/fresh", "45"),
        ("update", "ns/change", "2", "40"),
    ]
    assert reflector.resource_version == "50"
    relist = api.lists()[1].url.params
    # As client-go: re-list "not older than" the last version seen, in one request.
    assert relist["resourceVersion"] == "10"
    assert "limit" not in relist
    assert sorted(reflector.store.keys()) == ["ns/change", "ns/fresh", "ns/keep"]


async def test_relist_falls_back_to_quorum_read_when_too_old() -> None:
    api = FakeAPI(objects=[pod("a", "1")], list_rv="10")
    api.watches.append(Watch([event_line("ERROR", status_body(410, "Expired", "too old"))]))
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    api.list_errors.append(error_response(410, "Expired", "too old resource version"))
    api.list_rv = "60"
    await eventually(lambda: reflector.relists == 1)
    await reflector.stop()
    lists = api.lists()
    assert [r.url.params.get("resourceVersion") for r in lists] == ["0", "10", ""]
    assert lists[2].url.params["limit"] == "500"
    assert reflector.resource_version == "60"


async def test_connection_loss_rewatches_from_last_version() -> None:
    api = FakeAPI(objects=[], list_rv="10")
    api.watches.append(Watch([event_line("ADDED", pod("a", "11"))], fail_after=True))
    api.watches.append(Watch([event_line("MODIFIED", pod("a", "12"))], hang=True))
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    await eventually(lambda: len(handler.calls) == 3)
    await reflector.stop()
    assert handler.calls == [("synced",), ("add", "ns/a", "11"), ("update", "ns/a", "11", "12")]
    assert len(api.lists()) == 1
    assert [r.url.params["resourceVersion"] for r in api.watch_requests()] == ["10", "11"]


async def test_bad_objects_are_skipped_and_named(caplog: pytest.LogCaptureFixture) -> None:
    bad_in_list = pod("bad-list", "3")
    bad_in_list["spec"]["containers"] = "not a list"
    api = FakeAPI(objects=[pod("good", "1"), bad_in_list], list_rv="10")
    bad_event = pod("bad-event", "11")
    bad_event["spec"]["tolerations"] = [{"tolerationSeconds": "soon"}]
    api.watches.append(
        Watch(
            [
                event_line("ADDED", bad_event),
                b"this is not json\n",
                event_line("ADDED", pod("after", "12")),
            ],
            hang=True,
        )
    )
    handler = Recorder()
    reflector = _reflector(api, handler)
    with caplog.at_level(logging.WARNING, logger="kubesched.kube"):
        reflector.start()
        await eventually(lambda: ("add", "ns/after", "12") in handler.calls)
        await reflector.stop()
    assert handler.calls == [("add", "ns/good", "1"), ("synced",), ("add", "ns/after", "12")]
    assert reflector.decode_errors == 3
    assert "ns/bad-list" in caplog.text
    assert "ns/bad-event" in caplog.text
    assert reflector.resource_version == "12"


async def test_handler_errors_do_not_stop_the_stream() -> None:
    class Boom(Recorder):
        def on_add(self, obj: Pod) -> None:
            super().on_add(obj)
            raise RuntimeError("consumer bug")

    api = FakeAPI(objects=[pod("a", "1")], list_rv="10")
    api.watches.append(
        Watch(
            [event_line("ADDED", pod("b", "11")), event_line("DELETED", pod("a", "12"))], hang=True
        )
    )
    handler = Boom()
    reflector = _reflector(api, handler)
    reflector.start()
    await eventually(lambda: any(c[0] == "delete" for c in handler.calls))
    await reflector.stop()
    assert reflector.handler_errors == 2
    assert [p.key for p in reflector.list()] == ["ns/b"]


async def test_recreated_object_in_watch_is_delete_then_add() -> None:
    api = FakeAPI(objects=[pod("a", "1", uid="u1")], list_rv="10")
    api.watches.append(Watch([event_line("ADDED", pod("a", "11", uid="u2"))], hang=True))
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    await eventually(lambda: len(handler.calls) == 4)
    await reflector.stop()
    assert handler.calls[2:] == [("delete", "ns/a", "1"), ("add", "ns/a", "11")]


async def test_generic_over_struct_type() -> None:
    class ConfigMap(msgspec.Struct, kw_only=True):
        metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
        data: dict[str, str] = {}

    body = {
        "items": [
            {
                "metadata": {"name": "cm", "namespace": "x", "resourceVersion": "2"},
                "data": {"k": "v"},
            }
        ],
    }

    api = FakeAPI()
    api.objects = body["items"]  # type: ignore[assignment]
    api.list_rv = "3"
    reflector: Reflector[ConfigMap] = Reflector(make_client(api), "/api/v1/configmaps", ConfigMap)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    await reflector.stop()
    cm = reflector.get("x/cm")
    assert cm is not None
    assert cm.data == {"k": "v"}
    assert json.loads(msgspec.json.encode(cm))["data"] == {"k": "v"}


async def test_watch_that_ends_at_once_backs_off() -> None:
    class CountingBackoff(Backoff):
        calls = 0

        def next(self) -> float:
            self.calls += 1
            return 0.001

    api = FakeAPI(list_rv="10")
    api.watches.extend(Watch([event_line("BOOKMARK", {"metadata": {}})]) for _ in range(3))
    backoff = CountingBackoff(0.001, 0.001)
    reflector = Reflector(make_client(api), "/api/v1/pods", Pod, Recorder(), backoff=backoff)
    reflector.start()
    await eventually(lambda: len(api.watch_requests()) >= 4)
    await reflector.stop()
    assert backoff.calls >= 3


async def test_expired_continue_token_lists_in_one_request() -> None:
    api = FakeAPI(objects=[pod(f"p{i}", str(i)) for i in range(5)], list_rv="20")
    handler = Recorder()
    reflector = _reflector(api, handler, page_size=2)
    original = api.__call__

    async def expire_second_page(request: Any) -> Any:
        if request.url.params.get("continue") == "2" and "expired" not in api.__dict__:
            api.__dict__["expired"] = True
            api.requests.append(request)
            return error_response(410, "Expired", "The provided continue parameter is too old")
        return await original(request)

    reflector._client = make_client(expire_second_page)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    await reflector.stop()
    assert sorted(p.key for p in reflector.list()) == [f"ns/p{i}" for i in range(5)]
    lists = api.lists()
    # First page, the expired continuation, then everything at once at the same version.
    assert [dict(r.url.params) for r in lists] == [
        {"limit": "2", "resourceVersion": "0"},
        {"limit": "2", "continue": "2"},
        {"resourceVersion": "0"},
    ]


async def test_undecodable_list_is_retried() -> None:
    api = FakeAPI(objects=[pod("a", "1")], list_rv="10")
    api.list_errors.append(Response(200, content=b"<html>not a list</html>"))
    handler = Recorder()
    reflector = _reflector(api, handler)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    await reflector.stop()
    assert handler.calls == [("add", "ns/a", "1"), ("synced",)]
    assert len(api.lists()) == 2


async def test_a_path_not_served_is_empty_and_synced_when_tolerated() -> None:
    # A CRD not installed (404), then not allowed (403), then served.
    api = FakeAPI(
        objects=[pod("a", "1")],
        list_errors=[
            error_response(404, "NotFound", "the server could not find the requested resource"),
            error_response(403, "Forbidden", "nodefeatures is forbidden"),
        ],
    )
    handler = Recorder()
    reflector = _reflector(api, handler, tolerate_missing=True)
    reflector.start()
    async with asyncio.timeout(2):
        await reflector.wait_synced()
    assert reflector.missing
    assert handler.calls == [("synced",)]
    await eventually(lambda: ("add", "ns/a", "1") in handler.calls)
    await reflector.stop()
    assert not reflector.missing
    assert len(api.lists()) == 3


async def test_a_path_not_served_is_retried_without_syncing_by_default() -> None:
    api = FakeAPI(list_errors=[error_response(404, "NotFound")] * 3)
    reflector = _reflector(api, Recorder())
    reflector.start()
    await eventually(lambda: len(api.lists()) >= 2)
    assert not reflector.has_synced
    await reflector.stop()


class UndecodableRecorder(Recorder):
    def on_undecodable(self, key: str) -> None:
        self.calls.append(("undecodable", key))
        self.changed.set()


async def test_bad_objects_are_reported_and_a_bad_deletion_still_deletes() -> None:
    bad_in_list = pod("bad-list", "3")
    bad_in_list["spec"]["containers"] = "not a list"
    api = FakeAPI(objects=[pod("kept", "1"), bad_in_list], list_rv="10")
    bad_update = pod("kept", "11")
    bad_update["spec"]["tolerations"] = [{"tolerationSeconds": "soon"}]
    bad_delete = pod("kept", "12")
    bad_delete["spec"]["containers"] = "not a list"
    api.watches.append(
        Watch(
            [event_line("MODIFIED", bad_update), event_line("DELETED", bad_delete)],
            hang=True,
        )
    )
    handler = UndecodableRecorder()
    reflector = _reflector(api, handler)
    reflector.start()
    await eventually(lambda: ("delete", "ns/kept", "1") in handler.calls)
    await reflector.stop()
    assert handler.calls == [
        ("undecodable", "ns/bad-list"),
        ("add", "ns/kept", "1"),
        ("synced",),
        ("undecodable", "ns/kept"),
        # The store's version was deleted, though the deletion's own object was unreadable.
        ("undecodable", "ns/kept"),
        ("delete", "ns/kept", "1"),
    ]
    assert reflector.get("ns/kept") is None
