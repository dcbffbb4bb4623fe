"""APIClient against the real kube-apiserver: auth from the kubeconfig, connections, errors."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from pathlib import Path

import pytest
import yaml
from kube_e2e import ConnectProxy, pod_manifest

from kubesched.api import ObjectList, Pod
from kubesched.cluster import ClusterInfo
from kubesched.kube import (
    AlreadyExists,
    APIClient,
    APIConnectionError,
    Conflict,
    Forbidden,
    Invalid,
    NotFound,
    TemporaryAPIError,
    Unauthorized,
    api_path,
    with_retries,
)

pytestmark = pytest.mark.e2e


async def test_typed_crud(kubeconfig: Path, namespace: str) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        created = await client.post(
            api_path("pods", namespace=namespace), pod_manifest("a", namespace), type=Pod
        )
        assert created.key == f"{namespace}/a"
        assert created.metadata.uid
        got = await client.get(api_path("pods", namespace=namespace, name="a"), type=Pod)
        assert got.metadata.uid == created.metadata.uid
        patched = await client.patch(
            api_path("pods", namespace=namespace, name="a"),
            {"metadata": {"labels": {"x": "y"}}},
            type=Pod,
        )
        assert patched.metadata.labels == {"x": "y"}
        listed = await client.list(
            api_path("pods", namespace=namespace), type=ObjectList[Pod], label_selector="x=y"
        )
        assert [p.metadata.name for p in listed.items] == ["a"]
        await client.delete(
            api_path("pods", namespace=namespace, name="a"), params={"gracePeriodSeconds": 0}
        )


async def test_requests_and_watches_share_one_transport(kubeconfig: Path, namespace: str) -> None:
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        pool = client.transport
        await client.get("/version")
        await client.get("/version")
        assert pool.connections_opened == 1  # kept alive
        async with client.stream(
            api_path("pods", namespace=namespace), params={"watch": True, "timeoutSeconds": 1}
        ) as lines:
            created = await client.post(
                api_path("pods", namespace=namespace), pod_manifest("w", namespace), type=Pod
            )
            first = await anext(aiter(lines))
        assert b'"ADDED"' in first
        assert created.metadata.uid.encode() in first
        assert pool.connections_opened == 2  # the watch had its own


async def test_error_classes(kubeconfig: Path, namespace: str) -> None:
    pods = api_path("pods", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        with pytest.raises(NotFound) as not_found:
            await client.get(api_path("pods", namespace=namespace, name="nope"))
        assert not_found.value.status == 404
        assert not_found.value.message == 'pods "nope" not found'
        created = await client.post(pods, pod_manifest("dup", namespace), type=Pod)
        with pytest.raises(AlreadyExists) as exists:
            await client.post(pods, pod_manifest("dup", namespace))
        assert exists.value.reason == "AlreadyExists"
        # A write carrying a stale resourceVersion.
        await client.patch(
            api_path("pods", namespace=namespace, name="dup"), {"metadata": {"labels": {"a": "b"}}}
        )
        stale = pod_manifest("dup", namespace)
        stale["metadata"]["resourceVersion"] = created.metadata.resource_version
        with pytest.raises(Conflict) as conflict:
            await client.put(api_path("pods", namespace=namespace, name="dup"), stale)
        assert not isinstance(conflict.value, AlreadyExists)
        bad = pod_manifest("Not_A_Valid_Name", namespace)
        with pytest.raises(Invalid) as invalid:
            await client.post(pods, bad)
        assert invalid.value.status == 422
        assert not invalid.value.retryable


async def test_forbidden_for_the_scheduler_identity(control_plane: ClusterInfo) -> None:
    config = control_plane.client_kubeconfig("system:kube-scheduler")
    async with APIClient.from_kubeconfig(config) as client:
        # kube-scheduler may list pods...
        await client.list("/api/v1/pods", limit=1)
        # ... but not create namespaces.
        with pytest.raises(Forbidden) as forbidden:
            await client.post("/api/v1/namespaces", {"metadata": {"name": "nope"}})
    assert forbidden.value.status == 403
    assert not forbidden.value.retryable
    assert "system:kube-scheduler" in forbidden.value.message


async def test_unauthorized_token(control_plane: ClusterInfo, tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "bad",
        "contexts": [{"name": "bad", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": control_plane.server,
                    "certificate-authority": str(control_plane.ca_file),
                },
            }
        ],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with APIClient.from_kubeconfig(path) as client:
        with pytest.raises(Unauthorized) as unauthorized:
            await client.get("/api/v1/namespaces/default")
    assert unauthorized.value.status == 401
    assert not unauthorized.value.retryable


async def test_connection_refused_is_temporary(control_plane: ClusterInfo, tmp_path: Path) -> None:
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:1"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    # Relative certificate paths in the copy resolve against the original's directory.
    for user in config.get("users", []):
        for key in ("client-certificate", "client-key"):
            if key in user["user"] and not Path(user["user"][key]).is_absolute():
                user["user"][key] = str(control_plane.kubeconfig.parent / user["user"][key])
    for entry in config["clusters"]:
        ca = entry["cluster"].get("certificate-authority")
        if ca and not Path(ca).is_absolute():
            entry["cluster"]["certificate-authority"] = str(control_plane.kubeconfig.parent / ca)
    path.write_text(yaml.safe_dump(config))
    attempts = 0

    async with APIClient.from_kubeconfig(path) as client:

        async def call() -> bytes:
            nonlocal attempts
            attempts += 1
            return await client.get("/version")

        with pytest.raises(APIConnectionError) as refused:
            await with_retries(call, attempts=3, initial_delay=0.01)
    assert attempts == 3
    assert isinstance(refused.value, TemporaryAPIError)


async def test_qps_and_burst(kubeconfig: Path) -> None:
    async with APIClient.from_kubeconfig(kubeconfig, qps=20, burst=2) as client:
        start = time.monotonic()
        await asyncio.gather(*(client.get("/version") for _ in range(12)))
        elapsed = time.monotonic() - start
    # Two at once, then ten at 20 per second.
    assert elapsed >= 0.45


async def test_every_warning_is_kept_and_logged(
    kubeconfig: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    # Each deprecated node selector label earns a Warning header field of its own.
    selector = {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux"}
    pods = api_path("pods", namespace=namespace)
    async with APIClient.from_kubeconfig(kubeconfig) as client:
        response = await client.transport.request(
            "POST",
            pods,
            body=json.dumps(pod_manifest("a", namespace, nodeSelector=selector)).encode(),
        )
        with caplog.at_level(logging.INFO, logger="kubesched.kube"):
            await client.post(pods, pod_manifest("b", namespace, nodeSelector=selector))
    assert response.status == 201
    warnings = response.headers.get_all("warning")
    assert len(warnings) == 2, warnings
    assert all("deprecated" in w for w in warnings)
    logged = [r.getMessage() for r in caplog.records if r.name == "kubesched.kube._warnings"]
    assert len(logged) == 2, logged
    assert all(m.startswith("Warning: spec.nodeSelector[beta.kubernetes.io/") for m in logged)


EXEC_PLUGIN = """
import json, pathlib, sys
runs = pathlib.Path(sys.argv[1])
first = not runs.exists()
runs.write_text("ran")
token = "not-a-token" if first else pathlib.Path(sys.argv[2]).read_text()
print(json.dumps({
    "apiVersion": "client.authentication.k8s.io/v1beta1",
    "kind": "ExecCredential",
    "status": {"token": token},
}))
"""


async def test_exec_plugin_token_is_used_and_renewed_on_401(
    kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    sa = "exec-user"
    async with APIClient.from_kubeconfig(kubeconfig) as admin:
        await admin.post(
            api_path("serviceaccounts", namespace=namespace), {"metadata": {"name": sa}}
        )
        issued = await admin.post(
            api_path("serviceaccounts", namespace=namespace, name=sa, subresource="token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    exec_config = _exec_kubeconfig(kubeconfig, tmp_path, json.loads(issued)["status"]["token"])
    async with APIClient.from_kubeconfig(exec_config) as client:
        # The first token is refused; the plugin runs again and its token is used.
        review = json.loads(
            await client.post(
                "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
            )
        )
    assert review["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:{sa}"


def _exec_kubeconfig(kubeconfig: Path, tmp_path: Path, token: str) -> Path:
    """``kubeconfig`` with its user's credentials from an exec plugin that prints a bad token
    the first time and ``token`` after."""
    (tmp_path / "token").write_text(token)
    (tmp_path / "plugin.py").write_text(EXEC_PLUGIN)
    config = yaml.safe_load(kubeconfig.read_text())
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(tmp_path / "plugin.py"), str(tmp_path / "runs"), str(tmp_path / "token")],
    }
    user = config["contexts"][0]["context"]["user"]
    config["users"] = [{"name": user, "user": {"exec": plugin}}]
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    return path


async def test_requests_and_watches_through_a_proxy(
    kubeconfig: Path, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", f"http://user:p%40ss@127.0.0.1:{proxy.port}")
        async with APIClient.from_kubeconfig(kubeconfig) as client:
            await client.get("/version")
            async with client.stream(
                api_path("pods", namespace=namespace), params={"watch": True}
            ) as lines:
                await client.post(
                    api_path("pods", namespace=namespace), pod_manifest("p", namespace)
                )
                assert b'"ADDED"' in await anext(aiter(lines))
    port = client.base_url.rsplit(":", 1)[1]
    assert [line for line, _ in proxy.requests] == [f"CONNECT 127.0.0.1:{port} HTTP/1.1"] * 2
    assert all(f["proxy-authorization"] == "Basic dXNlcjpwQHNz" for _, f in proxy.requests)
