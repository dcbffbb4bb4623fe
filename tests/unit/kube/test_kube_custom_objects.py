"""Custom objects as plain JSON at the HTTP boundary: paths, pages, and the two expected answers."""

from __future__ import annotations

import json

import pytest
from kube_fakes import Request, Response, error_response, json_response, make_client

from kubesched.kube import Forbidden
from kubesched.kube._custom_objects import (
    create_custom_object,
    delete_custom_object,
    list_custom_objects,
)

GV = "nfd.k8s-sigs.io/v1alpha1"
PATH = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/nfd/nodefeaturegroups"


def group(name: str) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"featureGroupRules": []}}


async def test_list_follows_every_page_with_the_selector() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        if request.url.params.get("continue") == "next":
            return json_response(200, {"metadata": {}, "items": [group("c")]})
        return json_response(
            200, {"metadata": {"continue": "next"}, "items": [group("a"), group("b")]}
        )

    async with make_client(handler) as client:
        items = await list_custom_objects(
            client, GV, "nodefeaturegroups", namespace="nfd", label_selector="a=b"
        )
    assert [i["metadata"]["name"] for i in items] == ["a", "b", "c"]
    assert [r.url.path for r in seen] == [PATH, PATH]
    assert all(r.url.params["labelSelector"] == "a=b" for r in seen)
    assert seen[0].url.params["limit"] == "500"


async def test_list_of_nothing_is_empty() -> None:
    async with make_client(lambda r: json_response(200, {"items": None})) as client:
        assert await list_custom_objects(client, GV, "nodefeaturegroups", namespace="nfd") == []


async def test_create_posts_and_answers_none_when_the_name_is_taken() -> None:
    bodies: list[object] = []

    def handler(request: Request) -> Response:
        assert request.method == "POST"
        assert request.url.path == PATH
        bodies.append(json.loads(request.content))
        if len(bodies) == 1:
            return json_response(201, {**group("g"), "status": {"nodes": [{"name": "n1"}]}})
        return error_response(409, "AlreadyExists", 'nodefeaturegroups "g" already exists')

    async with make_client(handler) as client:
        created = await create_custom_object(
            client, GV, "nodefeaturegroups", group("g"), namespace="nfd"
        )
        again = await create_custom_object(
            client, GV, "nodefeaturegroups", group("g"), namespace="nfd"
        )
    assert created == {**group("g"), "status": {"nodes": [{"name": "n1"}]}}
    assert again is None
    assert bodies == [group("g"), group("g")]


async def test_delete_answers_false_when_already_gone_and_raises_otherwise() -> None:
    answers = iter(
        [
            json_response(200, {"kind": "Status", "status": "Success"}),
            error_response(404, "NotFound"),
            error_response(403, "Forbidden", "no"),
        ]
    )

    def handler(request: Request) -> Response:
        assert request.method == "DELETE"
        assert request.url.path == f"{PATH}/g"
        return next(answers)

    async with make_client(handler) as client:
        assert await delete_custom_object(client, GV, "nodefeaturegroups", "g", namespace="nfd")
        assert not await delete_custom_object(client, GV, "nodefeaturegroups", "g", namespace="nfd")
        with pytest.raises(Forbidden):
            await delete_custom_object(client, GV, "nodefeaturegroups", "g", namespace="nfd")
