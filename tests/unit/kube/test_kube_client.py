"""APIClient at the HTTP boundary: paths, params, bodies, decoding, errors, streams, config."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import msgspec
import pytest
from kube_fakes import (
    ReadError,
    Request,
    Response,
    error_response,
    json_response,
    make_client,
    pod,
    serve,
)
from multidict import MultiDict

from kubesched.api import ObjectList, Pod
from kubesched.kube import (
    APIClient,
    APIConnectionError,
    Conflict,
    KubeConfigError,
    NotFound,
    TooManyRequests,
    api_path,
    decoder_for,
)
from kubesched.kube._http1 import ConnectionPool


def test_api_path() -> None:
    assert api_path("pods") == "/api/v1/pods"
    assert api_path("pods", namespace="a", name="b", subresource="status") == (
        "/api/v1/namespaces/a/pods/b/status"
    )
    assert api_path("leases", group_version="coordination.k8s.io/v1", namespace="kube-system") == (
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    )
    with pytest.raises(ValueError, match="subresource"):
        api_path("pods", subresource="status")


def test_decoders_are_shared() -> None:
    assert decoder_for(Pod) is decoder_for(Pod)
    assert decoder_for(ObjectList[Pod]) is decoder_for(ObjectList[Pod])


async def test_get_decodes_into_type() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return json_response(200, pod("a", "7"))

    async with make_client(handler) as client:
        raw = await client.get("/api/v1/namespaces/ns/pods/a")
        typed = await client.get("/api/v1/namespaces/ns/pods/a", type=Pod)
    assert json.loads(raw)["metadata"]["name"] == "a"
    assert isinstance(typed, Pod)
    assert typed.key == "ns/a"
    assert typed.metadata.resource_version == "7"
    assert seen[0].headers["accept"] == "application/json"
    assert seen[0].headers["user-agent"].startswith("kubesched/")


async def test_list_params() -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return json_response(200, {"metadata": {"resourceVersion": "5"}, "items": [pod("a", "3")]})

    async with make_client(handler) as client:
        result = await client.list(
            "/api/v1/pods",
            type=ObjectList[Pod],
            field_selector="status.phase!=Succeeded",
            limit=500,
            resource_version="0",
        )
    assert result.metadata.resource_version == "5"
    assert [p.metadata.name for p in result.items] == ["a"]
    params = seen[0].url.params
    assert params["fieldSelector"] == "status.phase!=Succeeded"
    assert params["limit"] == "500"
    assert params["resourceVersion"] == "0"
    assert "labelSelector" not in params
    assert "continue" not in params


@pytest.mark.parametrize(
    ("patch_type", "content_type"),
    [
        ("merge", "application/merge-patch+json"),
        ("strategic", "application/strategic-merge-patch+json"),
        ("json", "application/json-patch+json"),
        ("apply", "application/apply-patch+yaml"),
    ],
)
async def test_patch_content_types(patch_type: str, content_type: str) -> None:
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return json_response(200, pod("a", "8"))

    async with make_client(handler) as client:
        await client.patch(
            "/api/v1/namespaces/ns/pods/a/status", {"status": {}}, patch_type=patch_type
        )  # type: ignore[arg-type]
    assert seen[0].method == "PATCH"
    assert seen[0].headers["content-type"] == content_type
    assert json.loads(seen[0].content) == {"status": {}}


async def test_post_encodes_structs_and_put_delete() -> None:
    class Thing(msgspec.Struct, rename="camel"):
        some_field: int

    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return json_response(201, {"kind": "Thing"})

    async with make_client(handler) as client:
        await client.post("/x", Thing(some_field=3))
        await client.put("/x", b'{"raw": true}')
        await client.delete("/x", {"preconditions": {"uid": "u"}}, params={"dryRun": "All"})
    assert json.loads(seen[0].content) == {"someField": 3}
    assert seen[0].headers["content-type"] == "application/json"
    assert seen[1].method == "PUT"
    assert seen[1].content == b'{"raw": true}'
    assert seen[2].method == "DELETE"
    assert seen[2].url.params["dryRun"] == "All"


async def test_errors_are_mapped() -> None:
    def handler(request: Request) -> Response:
        if request.method == "GET":
            return error_response(404, "NotFound", 'pods "a" not found')
        return error_response(409, "Conflict", "the object has been modified")

    async with make_client(handler) as client:
        with pytest.raises(NotFound) as not_found:
            await client.get("/api/v1/namespaces/ns/pods/a")
        with pytest.raises(Conflict):
            await client.put("/api/v1/namespaces/ns/pods/a", {})
    assert not_found.value.message == 'pods "a" not found'


async def test_transport_errors_become_connection_errors() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    pool = ConnectionPool("127.0.0.1", port, ssl_context=None, user_agent="t")
    async with APIClient(pool, qps=0) as client:
        with pytest.raises(APIConnectionError, match="connection refused"):
            await client.get("/version")


async def test_stream_splits_lines_across_chunks() -> None:
    chunks = [b'{"a":', b'1}\n{"b":2}\n\n{"c"', b":3}\n", b'{"d":4}']

    async def body() -> object:
        for chunk in chunks:
            yield chunk

    def handler(request: Request) -> Response:
        return Response(200, content=body())

    async with make_client(handler) as client, client.stream("/w") as lines:
        got = [line async for line in lines]
    assert got == [b'{"a":1}', b'{"b":2}', b'{"c":3}', b'{"d":4}']


async def test_stream_error_status_raises_before_yielding() -> None:
    def handler(request: Request) -> Response:
        return error_response(403, "Forbidden", "no watch for you")

    async with make_client(handler) as client:
        with pytest.raises(Exception, match="no watch for you") as info:
            async with client.stream("/w"):
                pass
    assert info.value.status == 403  # type: ignore[attr-defined]


async def test_stream_read_error_becomes_connection_error() -> None:
    async def body() -> object:
        yield b'{"a":1}\n'
        raise ReadError("reset")

    def handler(request: Request) -> Response:
        return Response(200, content=body())

    got: list[bytes] = []

    async def consume(client: APIClient) -> None:
        async with client.stream("/w") as lines:
            async for line in lines:
                got.append(line)

    async with make_client(handler) as client:
        with pytest.raises(APIConnectionError):
            await consume(client)
    assert got == [b'{"a":1}']


async def test_rate_limit_applies_to_requests() -> None:
    def handler(request: Request) -> Response:
        return json_response(200, {})

    async with make_client(handler, qps=50, burst=2) as client:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(*(client.get("/x") for _ in range(7)))
        elapsed = loop.time() - start
    # 2 at once, 5 more at 50/s.
    assert elapsed >= 0.09
    assert client.throttled_seconds > 0
    assert client.requests_total == 7


async def test_cancelled_request_does_not_raise_later() -> None:
    release = asyncio.Event()

    async def handler(request: Request) -> Response:
        await release.wait()
        return json_response(200, {})

    async with make_client(handler) as client:
        task = asyncio.create_task(client.get("/slow"))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        await asyncio.sleep(0.01)
        assert await client.get("/fast") == b"{}"


KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: test
contexts:
- name: test
  context: {cluster: test, user: test, namespace: team-a}
- name: other
  context: {cluster: other, user: test}
clusters:
- name: test
  cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}
- name: other
  cluster: {server: "https://10.0.0.2:6443", insecure-skip-tls-verify: true}
users:
- name: test
  user: {token: abc}
"""


async def test_from_kubeconfig_path_and_context(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    async with APIClient.from_kubeconfig(path) as client:
        assert client.base_url.startswith("https://10.0.0.1:6443")
        assert client.namespace == "team-a"
    async with APIClient.from_kubeconfig(path, context="other") as client:
        assert client.base_url.startswith("https://10.0.0.2:6443")
        assert client.namespace == "default"


async def test_from_kubeconfig_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    async with APIClient.from_kubeconfig() as client:
        assert client.base_url.startswith("https://10.0.0.1:6443")


def test_missing_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    with pytest.raises(KubeConfigError):
        APIClient.from_kubeconfig(tmp_path / "nope")
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    with pytest.raises(KubeConfigError, match="nope"):
        APIClient.from_kubeconfig(path, context="nope")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("garbage: [\n", "not YAML"),
        ("- a\n", "not a kubeconfig"),
        ("just text\n", "not a kubeconfig"),
    ],
)
def test_a_kubeconfig_that_does_not_read_names_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "config"
    path.write_text(text)
    with pytest.raises(KubeConfigError, match=message) as caught:
        APIClient.from_kubeconfig(path)
    assert str(path) in str(caught.value)


async def test_repeated_header_fields_reach_the_error() -> None:
    def handler(request: Request) -> Response:
        return Response(
            429,
            content=b'{"kind":"Status","code":429,"reason":"TooManyRequests"}',
            headers=MultiDict(
                [("Retry-After", "3"), ("Warning", '299 - "a"'), ("Warning", '299 - "b"')]
            ),
        )

    async with make_client(handler) as client:
        with pytest.raises(TooManyRequests) as info:
            await client.get("/api/v1/pods")
    assert info.value.retry_after == 3


def _self_signed_ca(path: Path) -> None:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


async def test_in_cluster_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kubesched.kube._client as client_module

    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("kube-system")
    _self_signed_ca(tmp_path / "ca.crt")
    monkeypatch.setattr(client_module, "SERVICE_ACCOUNT_DIR", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    async with APIClient.from_kubeconfig() as client:
        assert client.base_url.startswith("https://10.96.0.1")
        assert client.namespace == "kube-system"
        assert await client.transport.credentials.authorization() == "Bearer sa-token"


EXEC_PLUGIN = """
import json, pathlib, sys
count = pathlib.Path(sys.argv[1])
runs = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(runs))
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": f"tok{runs}", "expirationTimestamp": "2999-01-01T00:00:00Z"},
}))
"""


async def test_exec_plugin_token_reaches_requests_and_is_renewed_on_401(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: Request) -> Response:
        seen.append(request.headers["authorization"])
        if request.headers["authorization"] == "Bearer tok1":
            return error_response(401, "Unauthorized", "Unauthorized")
        return json_response(200, {"kind": "Status"})

    port = serve(handler)
    (tmp_path / "plugin.py").write_text(EXEC_PLUGIN)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "runs")],
                    }
                },
            }
        ],
    }
    (tmp_path / "config").write_text(json.dumps(config))
    async with APIClient.from_kubeconfig(tmp_path / "config", qps=0) as client:
        await client.get("/version")
        await client.get("/version")
    assert seen == ["Bearer tok1", "Bearer tok2", "Bearer tok2"]
    assert (tmp_path / "runs").read_text() == "2"


def test_auth_provider_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG.replace("user: {token: abc}", "user: {auth-provider: {name: gcp}}"))
    with pytest.raises(KubeConfigError, match="auth-provider"):
        APIClient.from_kubeconfig(path)


def test_proxy_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kubesched.kube._http1 import Proxy

    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    monkeypatch.setenv("HTTPS_PROXY", "http://u:p%40ss@proxy.example:3128")
    pool = APIClient.from_kubeconfig(path).transport
    assert pool._proxy == Proxy("proxy.example", 3128, "Basic dTpwQHNz")
    monkeypatch.setenv("NO_PROXY", "10.0.0.1")
    assert APIClient.from_kubeconfig(path).transport._proxy is None
    monkeypatch.delenv("NO_PROXY")
    monkeypatch.setenv("HTTPS_PROXY", "https://proxy.example:3128")
    with pytest.raises(KubeConfigError, match=r"only http:// proxies"):
        APIClient.from_kubeconfig(path)
