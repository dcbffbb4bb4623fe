"""The HTTP listener: routes, health and metrics, TLS and mutual TLS, and requests that must not
wait on a slow one."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from extender_fakes import Slow, config, fixture, make_pod, names_body, nodes, registry

from kubesched.cluster import CertificateAuthority
from kubesched.extender import Extender, ExtenderServer, ServerOptions, server_ssl_context


def make_server(
    cfg_plugins: tuple[str, ...] = ("RejectOdd",), **options: object
) -> tuple[Extender, ExtenderServer]:
    cfg = config(*cfg_plugins)
    ext = Extender(cfg, registry(), informers=True)
    for n in nodes("n-1", "n-2"):
        ext.cache.set_node(n)
    opts = ServerOptions(host="127.0.0.1", port=0, **options)  # type: ignore[arg-type]
    return ext, ExtenderServer(ext, opts)


@contextlib.asynccontextmanager
async def serving(
    plugins: tuple[str, ...] = ("RejectOdd",), **options: object
) -> AsyncIterator[tuple[ExtenderServer, str]]:
    """A started server on a free port, and its base URL (http or https)."""
    ext, server = make_server(plugins, **options)
    await server.start()
    scheme = "https" if options.get("ssl_context") is not None else "http"
    try:
        yield server, f"{scheme}://127.0.0.1:{server.port}"
    finally:
        await server.stop()
        ext.close()


async def post(url: str, body: bytes, **kwargs: object) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, **kwargs) as response,  # type: ignore[arg-type]
    ):
        return response.status, await response.read()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


BODY = names_body(make_pod("p"), ["n-1", "n-2"])


async def test_verbs_at_the_default_and_per_profile_paths() -> None:
    async with serving() as (_, url):
        await _verbs(url)


async def _verbs(url: str) -> None:
    for path in ("/filter", "/test/filter"):
        status, body = await post(url + path, BODY, headers={"Content-Type": "application/json"})
        assert status == 200
        assert json.loads(body)["NodeNames"] == ["n-2"]
    status, body = await post(url + "/prioritize", BODY)
    assert status == 200
    assert json.loads(body) == [{"Host": "n-1", "Score": 0}, {"Host": "n-2", "Score": 0}]
    status, body = await post(url + "/preempt", fixture("preempt-meta-victims"))
    assert (status, json.loads(body)) == (200, {"NodeNameToMetaVictims": {}})
    status, body = await post(url + "/bind", fixture("bind"))
    assert status == 200
    assert json.loads(body)["Error"]  # no client here


async def test_errors_over_http() -> None:
    async with serving() as (_, url):
        await _errors(url)


async def _errors(url: str) -> None:
    status, body = await post(url + "/filter", b"{nope")
    assert status == 400
    assert body.startswith(b"cannot decode ExtenderArgs: JSON is malformed")
    assert (await post(url + "/nope", BODY))[0] == 404
    assert (await get(url + "/filter"))[0] == 405


async def test_health_readiness_version_and_metrics() -> None:
    async with serving() as (server, url):
        await _health(server, url)


async def _health(server: ExtenderServer, url: str) -> None:
    assert await get(url + "/healthz") == (200, "ok")
    assert await get(url + "/livez") == (200, "ok")
    assert await get(url + "/readyz") == (200, "ok")
    server.ready = lambda: "waiting for the node and pod informers to sync"
    assert (await get(url + "/readyz"))[0] == 503
    status, version = await get(url + "/version")
    assert status == 200
    assert "version" in json.loads(version)
    await post(url + "/filter", BODY)
    await post(url + "/filter", b"[")
    status, text = await get(url + "/metrics")
    assert status == 200
    for line in (
        'extender_request_duration_seconds_count{code="200",profile="test",verb="filter"} 1.0',
        'extender_request_duration_seconds_count{code="400",profile="test",verb="filter"} 1.0',
        'extender_queue_wait_seconds_count{verb="filter"}',
        'scheduler_framework_extension_point_duration_seconds_count{extension_point="Filter"',
        'extender_cache_nodes{source="informer"} 2.0',
    ):
        assert line in text


async def test_path_prefix_and_renamed_verbs() -> None:
    verbs = {"filter": "predicates/odd", "prioritize": "priorities/odd", "preempt": "", "bind": ""}
    ext, server = make_server(path_prefix="/scheduler/", verbs=verbs)
    paths = {path for path, _, _ in server.routes()}
    assert paths == {
        "/scheduler/predicates/odd",
        "/scheduler/test/predicates/odd",
        "/scheduler/priorities/odd",
        "/scheduler/test/priorities/odd",
    }
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/scheduler/predicates/odd"
        status, body = await post(url, BODY)
        assert (status, json.loads(body)["NodeNames"]) == (200, ["n-2"])
    finally:
        await server.stop()
        ext.close()


# --- TLS --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority.generate("extender-test-ca")
    ca.write(d / "ca.crt", d / "ca.key")
    ca.issue_serving_cert(["localhost"], ["127.0.0.1"], "extender").write(
        d / "tls.crt", d / "tls.key"
    )
    ca.issue_client_cert("kube-scheduler").write(d / "client.crt", d / "client.key")
    other = CertificateAuthority.generate("someone-else")
    other.issue_client_cert("intruder").write(d / "intruder.crt", d / "intruder.key")
    return {p.stem + p.suffix: str(p) for p in Path(d).iterdir()}


def client_context(pki: dict[str, str], cert: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki["ca.crt"])
    if cert is not None:
        context.load_cert_chain(pki[f"{cert}.crt"], pki[f"{cert}.key"])
    return context


async def test_https(pki: dict[str, str]) -> None:
    context = server_ssl_context(pki["tls.crt"], pki["tls.key"])
    ext, server = make_server(ssl_context=context)
    await server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/filter"
        status, body = await post(url, BODY, ssl=client_context(pki))
        assert (status, json.loads(body)["NodeNames"]) == (200, ["n-2"])
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await post(url, BODY, ssl=ssl.create_default_context())  # does not trust the CA
    finally:
        await server.stop()
        ext.close()


async def test_mutual_tls_requires_a_client_certificate_from_the_ca(pki: dict[str, str]) -> None:
    context = server_ssl_context(pki["tls.crt"], pki["tls.key"], pki["ca.crt"])
    ext, server = make_server(ssl_context=context)
    await server.start()
    try:
        url = f"https://127.0.0.1:{server.port}/filter"
        status, _ = await post(url, BODY, ssl=client_context(pki, "client"))
        assert status == 200
        for cert in (None, "intruder"):
            with pytest.raises((aiohttp.ClientError, ssl.SSLError, ConnectionError)):
                await post(url, BODY, ssl=client_context(pki, cert))
    finally:
        await server.stop()
        ext.close()


def test_tls_files_that_do_not_exist_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        server_ssl_context(str(tmp_path / "no.crt"), str(tmp_path / "no.key"))


# --- a slow plugin ------------------------------------------------------------------------------


async def test_a_slow_plugin_does_not_hold_up_health_metrics_or_bind() -> None:
    Slow.seconds, Slow.calls = 1.0, 0
    Slow.started.clear()
    ext, server = make_server(("Slow",))
    await server.start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        slow = asyncio.create_task(post(url + "/filter", BODY))
        await asyncio.to_thread(Slow.started.wait, 5)
        start = time.perf_counter()
        assert await get(url + "/healthz") == (200, "ok")
        assert (await get(url + "/metrics"))[0] == 200
        assert (await post(url + "/bind", fixture("bind")))[0] == 200
        assert time.perf_counter() - start < 0.5
        assert (await slow)[0] == 200
    finally:
        await server.stop()
        ext.close()


async def test_a_request_whose_client_hung_up_is_not_run() -> None:
    Slow.seconds, Slow.calls = 0.5, 0
    Slow.started.clear()
    ext, server = make_server(("Slow",))
    await server.start()
    url = f"http://127.0.0.1:{server.port}/filter"
    try:
        first = asyncio.create_task(post(url, BODY))
        await asyncio.to_thread(Slow.started.wait, 5)
        queued = asyncio.create_task(post(url, BODY))  # waits for the worker
        await asyncio.sleep(0.1)
        queued.cancel()  # the client gives up: its connection closes
        assert (await first)[0] == 200
        await asyncio.sleep(0.7)
        assert Slow.calls == 1
        assert (await post(url, BODY))[0] == 200
        assert Slow.calls == 2
    finally:
        await server.stop()
        ext.close()
