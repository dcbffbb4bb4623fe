"""The page's HTTP server (aiohttp): the page and its script from the package, JSON endpoints,
and a read-only window on a running scheduler's queue.

Read-only by construction: every route is a GET but ``POST /api/what-if``, which simulates on a
copy in memory; any other method gets 405. Binds to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import aiohttp
from aiohttp import web

from kubesched.simulate import WhyError
from kubesched.ui._model import (
    Loaded,
    WhatIfError,
    cluster_view,
    explain_view,
    pod_yaml,
    pods_view,
    profile_view,
    what_if,
    why_view,
)

WHAT_IF_PATH = "/api/what-if"
#: The running scheduler's endpoint (``kubesched run --debug-queue``).
DEBUG_QUEUE_PATH = "/debug/queue"
_STATIC = {
    "/": ("index.html", "text/html"),
    "/app.js": ("app.js", "text/javascript"),
    "/app.css": ("app.css", "text/css"),
}
#: A what-if body larger than this is refused (a pod and a configuration are a few KiB).
MAX_BODY = 1 << 20
_LOADED: web.AppKey[Loaded] = web.AppKey("loaded", Loaded)
_SCHEDULER: web.AppKey[str] = web.AppKey("scheduler", str)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@web.middleware
async def _read_only(request: web.Request, handler: Handler) -> web.StreamResponse:
    allowed = ("POST",) if request.path == WHAT_IF_PATH else ("GET", "HEAD")
    if request.method not in allowed:
        raise web.HTTPMethodNotAllowed(request.method, allowed)
    return await handler(request)


def build_app(loaded: Loaded, *, scheduler: str = "") -> web.Application:
    """The application over ``loaded``; ``scheduler`` is the base URL of a running ``kubesched
    run --debug-queue`` health listener, or empty."""
    app = web.Application(middlewares=[_read_only], client_max_size=MAX_BODY)
    app[_LOADED] = loaded
    app[_SCHEDULER] = scheduler.rstrip("/")
    for path in _STATIC:
        app.router.add_get(path, _static)
    app.router.add_get("/api/cluster", _cluster)
    app.router.add_get("/api/pods", _pods)
    app.router.add_get("/api/explain", _explain)
    app.router.add_get("/api/why", _why)
    app.router.add_get("/api/pod-yaml", _pod_yaml)
    app.router.add_get("/api/profile", _profile)
    app.router.add_get("/api/queue", _queue)
    app.router.add_post(WHAT_IF_PATH, _what_if)
    return app


async def _static(request: web.Request) -> web.Response:
    name, ctype = _STATIC[request.path]
    body = resources.files("kubesched.ui").joinpath("static", name).read_bytes()
    return web.Response(body=body, content_type=ctype, charset="utf-8")


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status)


def _key(request: web.Request) -> str:
    key = request.query.get("pod", "")
    if "/" not in key:
        raise web.HTTPBadRequest(text="pod: must be namespace/name")
    return key


async def _cluster(request: web.Request) -> web.Response:
    return _json(cluster_view(request.app[_LOADED]))


async def _pods(request: web.Request) -> web.Response:
    return _json(pods_view(request.app[_LOADED].result))


async def _explain(request: web.Request) -> web.Response:
    view = await explain_view(request.app[_LOADED], _key(request))
    if view is None:
        raise web.HTTPNotFound(text="no such pod among the simulated ones")
    return _json(view)


async def _why(request: web.Request) -> web.Response:
    try:
        return _json(await why_view(request.app[_LOADED], _key(request)))
    except WhyError as e:
        raise web.HTTPNotFound(text=str(e)) from e


async def _pod_yaml(request: web.Request) -> web.Response:
    text = pod_yaml(request.app[_LOADED], _key(request))
    if text is None:
        raise web.HTTPNotFound(text="no such pending pod")
    return web.Response(text=text, content_type="application/yaml")


async def _profile(request: web.Request) -> web.Response:
    return _json(profile_view(request.app[_LOADED]))


async def _queue(request: web.Request) -> web.Response:
    base = request.app[_SCHEDULER]
    if not base:
        return _json({"connected": False, "reason": "no --scheduler given"})
    url = base + DEBUG_QUEUE_PATH
    try:
        timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(url) as resp:
            if resp.status != 200:
                reason = f"{url}: HTTP {resp.status} (is it run with --debug-queue?)"
                return _json({"connected": False, "reason": reason})
            doc = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        return _json({"connected": False, "reason": f"{url}: {e or type(e).__name__}"})
    return _json({"connected": True, "url": url, **doc})


async def _what_if(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except json.JSONDecodeError as e:
        return _json({"error": f"body: not JSON: {e}"}, status=400)
    if not isinstance(body, dict):
        return _json({"error": "body: must be a JSON object"}, status=400)
    try:
        return _json(await what_if(request.app[_LOADED], body))
    except WhatIfError as e:
        return _json({"error": str(e)}, status=400)
