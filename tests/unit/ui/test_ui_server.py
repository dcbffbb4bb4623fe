"""``kubesched ui``'s HTTP surface: read-only but the what-if endpoint, the page from the
package, errors as 400 naming the field, the scheduler's queue passed through."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from importlib import resources

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kubesched.config import default_config
from kubesched.plugins import default_registry
from kubesched.simulate import example_paths, load_inputs
from kubesched.ui import build_app, load


async def _client(scheduler: str = "") -> TestClient[web.Request, web.Application]:
    loaded = await load(
        load_inputs(example_paths()), default_config(), default_registry(), source="t", seed=1
    )
    client = TestClient(TestServer(build_app(loaded, scheduler=scheduler)))
    await client.start_server()
    return client


@contextlib.asynccontextmanager
async def serving() -> AsyncIterator[TestClient[web.Request, web.Application]]:
    c = await _client()
    try:
        yield c
    finally:
        await c.close()


async def test_page_and_script_come_from_the_package() -> None:
    async with serving() as client:
        page = await client.get("/")
        assert page.status == 200
        assert '<script src="/app.js">' in await page.text()
        for name in ("index.html", "app.js", "app.css"):
            text = resources.files("kubesched.ui").joinpath("static", name).read_text()
            # Nothing fetched from elsewhere: no absolute URL anywhere in what the page loads.
            assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", text), name
        assert (await client.get("/app.js")).content_type == "text/javascript"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/cluster"),
        ("PUT", "/api/what-if"),
        ("DELETE", "/api/pods"),
        ("PATCH", "/"),
        ("GET", "/api/what-if"),
        ("POST", "/api/queue"),
    ],
)
async def test_write_methods_are_refused(method: str, path: str) -> None:
    async with serving() as client:
        assert (await client.request(method, path)).status == 405


async def test_endpoints() -> None:
    async with serving() as client:
        cluster = await (await client.get("/api/cluster")).json()
        assert cluster["nodes"] == 6
        pods = await (await client.get("/api/pods")).json()
        assert {p["key"] for p in pods} >= {"ml/notebook", "default/web-1"}
        explain = await (await client.get("/api/explain", params={"pod": "ml/train"})).json()
        assert explain["pod"]["node"] == "gpu-b1"
        assert (await client.get("/api/explain", params={"pod": "x/y"})).status == 404
        assert (await client.get("/api/explain", params={"pod": "nope"})).status == 400
        why = await (await client.get("/api/why", params={"pod": "ml/notebook"})).json()
        assert why["rejections"]
        text = await (await client.get("/api/pod-yaml", params={"pod": "ml/notebook"})).text()
        assert "name: notebook" in text
        profile = await (await client.get("/api/profile")).json()
        assert "NodeResourcesFit" in [p["name"] for p in profile["profiles"][0]["plugins"]]


async def test_what_if_answers_400_naming_the_field() -> None:
    async with serving() as client:
        bad = await client.post(
            "/api/what-if", data="{", headers={"Content-Type": "application/json"}
        )
        assert bad.status == 400
        assert (await bad.json())["error"].startswith("body: not JSON")
        bad = await client.post("/api/what-if", json={"weights": {"ImageLocality": "x"}})
        assert bad.status == 400
        assert (await bad.json())["error"].startswith("weights:")
        ok = await client.post(
            "/api/what-if", json={"target": "default/web-1", "disabled": ["ImageLocality"]}
        )
        assert ok.status == 200
        assert "ImageLocality" not in (await ok.json())["after"]["plugins"]


async def test_queue_is_read_from_the_scheduler_debug_endpoint() -> None:
    async def queue(request: web.Request) -> web.Response:
        return web.json_response({"formatVersion": 1, "counts": {"active": 1}, "pods": []})

    fake = web.Application()
    fake.router.add_get("/debug/queue", queue)
    scheduler = TestServer(fake)
    await scheduler.start_server()
    on = await _client(str(scheduler.make_url("/")))
    off = await _client()
    missing = await _client(str(scheduler.make_url("/elsewhere")))
    try:
        doc = await (await on.get("/api/queue")).json()
        assert (doc["connected"], doc["counts"]) == (True, {"active": 1})
        assert (await (await off.get("/api/queue")).json())["connected"] is False
        gone = await (await missing.get("/api/queue")).json()
        assert gone["connected"] is False
        assert "HTTP 404" in gone["reason"]
    finally:
        for c in (on, off, missing):
            await c.close()
        await scheduler.close()
