"""The registry client against real registries on loopback: distribution v3 (no Referrers API,
the referrers tag schema) and cuelabs' ociserver (Referrers API), with artifacts attached as
``oras attach`` attaches them."""

from __future__ import annotations

import base64
import http.client
import json
import re
from pathlib import Path

import pytest

from kubesched.plugins.image_compatibility._credentials import credentials_from_secrets
from kubesched.plugins.image_compatibility._reference import parse_image_reference
from kubesched.plugins.image_compatibility._registry import Artifact, RegistryClient, RegistryError
from oci import Registry, attach_artifact, push_image, start_distribution

SPEC = b"""\
version: v1alpha1
compatibilities:
- rules:
  - name: kernel
    matchFeatures:
    - feature: kernel.version
      matchExpressions:
        major: {op: Ge, value: ["6"]}
"""

KINDS = ["oci_registry", "oci_referrers_registry"]


@pytest.fixture(params=KINDS, ids=["referrers-tag", "referrers-api"])
def registry(request: pytest.FixtureRequest) -> Registry:
    """Each test runs against both registries."""
    found: Registry = request.getfixturevalue(request.param)
    return found


async def find(
    registry: Registry,
    image: str,
    *,
    max_bytes: int = 1 << 20,
    secret: dict[str, object] | None = None,
) -> Artifact | None:
    credentials = credentials_from_secrets([secret] if secret else [])
    async with RegistryClient(plain_http=[registry.host], max_artifact_bytes=max_bytes) as client:
        return await client.find_artifact(parse_image_reference(image), credentials)


def status_of(registry: Registry, path: str) -> int:
    connection = http.client.HTTPConnection(registry.host, timeout=10)
    try:
        connection.request(
            "GET", path, headers={"Accept": "application/vnd.oci.image.index.v1+json"}
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


async def test_artifact_found(registry: Registry, unique_repo: str) -> None:
    image = push_image(registry, unique_repo, "v1")
    attached = attach_artifact(registry, unique_repo, image, SPEC, created="2025-03-01T10:00:00Z")
    artifact = await find(registry, registry.image(unique_repo, "v1"))
    assert artifact == Artifact(image.digest, attached.digest, "2025-03-01T10:00:00Z", SPEC)
    by_digest = await find(registry, registry.image(unique_repo, image.digest))
    assert by_digest == artifact
    # The path taken: the Referrers API where the registry has it, else the referrers tag.
    api = status_of(registry, f"/v2/{unique_repo}/referrers/{image.digest}")
    tag = status_of(
        registry, f"/v2/{unique_repo}/manifests/sha256-{image.digest.removeprefix('sha256:')}"
    )
    assert (api, tag) == ((200, 404) if registry.referrers_api else (404, 200))


async def test_newest_of_two_wins(registry: Registry, unique_repo: str) -> None:
    image = push_image(registry, unique_repo, "v1")
    newer = attach_artifact(registry, unique_repo, image, SPEC, created="2025-06-01T00:00:00Z")
    attach_artifact(registry, unique_repo, image, b"old", created="2024-06-01T00:00:00Z")
    attach_artifact(
        registry,
        unique_repo,
        image,
        b"{}",
        created="2026-01-01T00:00:00Z",
        artifact_type="application/vnd.dev.cosign.artifact.sig.v1+json",
        media_type="application/vnd.dev.cosign.simplesigning.v1+json",
    )
    artifact = await find(registry, registry.image(unique_repo, "v1"))
    assert artifact is not None
    assert (artifact.artifact_digest, artifact.spec) == (newer.digest, SPEC)


async def test_no_artifact_is_none(registry: Registry, unique_repo: str) -> None:
    push_image(registry, unique_repo, "v1")
    assert await find(registry, registry.image(unique_repo, "v1")) is None


async def test_oversized_artifact_is_refused(registry: Registry, unique_repo: str) -> None:
    image = push_image(registry, unique_repo, "v1")
    attach_artifact(registry, unique_repo, image, SPEC + b"#" * 4096)
    with pytest.raises(RegistryError, match="over the limit of 2048") as raised:
        await find(registry, registry.image(unique_repo, "v1"), max_bytes=2048)
    assert not raised.value.retryable


async def test_lying_layer_size_is_cut_off(registry: Registry, unique_repo: str) -> None:
    image = push_image(registry, unique_repo, "v1")
    attach_artifact(registry, unique_repo, image, b"#" * 8192, layer_size=100)
    with pytest.raises(RegistryError, match="over the limit of 2048") as raised:
        await find(registry, registry.image(unique_repo, "v1"), max_bytes=2048)
    assert not raised.value.retryable


async def test_unknown_image_is_not_retryable(registry: Registry, unique_repo: str) -> None:
    push_image(registry, unique_repo, "v1")
    for image in (registry.image(unique_repo, "missing"), registry.image("no/such-repo", "v1")):
        with pytest.raises(RegistryError, match=r"not found \(HTTP 404\)") as raised:
            await find(registry, image)
        assert not raised.value.retryable
        assert image in str(raised.value)


async def test_a_moved_tag_is_resolved_again(registry: Registry, unique_repo: str) -> None:
    first = push_image(registry, unique_repo, "v1")
    attach_artifact(registry, unique_repo, first, SPEC)
    ref = parse_image_reference(registry.image(unique_repo, "v1"))
    async with RegistryClient(plain_http=[registry.host]) as client:
        assert await client.resolve(ref) == first.digest
        assert await client.find_artifact(ref) is not None
        second = push_image(registry, unique_repo, "v1")
        assert await client.resolve(ref) == second.digest
        assert await client.find_artifact(ref) is None


async def test_credentials_from_a_dockerconfigjson_secret(
    oci_auth_registry: Registry, unique_repo: str
) -> None:
    registry = oci_auth_registry
    image = push_image(registry, unique_repo, "v1")
    attached = attach_artifact(registry, unique_repo, image, SPEC)
    name = registry.image(unique_repo, "v1")
    with pytest.raises(RegistryError, match="no image pull secret matches") as raised:
        await find(registry, name)
    assert not raised.value.retryable
    # docker login writes the key with a scheme; kubelet (and the client) match the bare host.
    for key in (f"http://{registry.host}", registry.host, f"{registry.host}/test"):
        artifact = await find(registry, name, secret=registry.dockerconfigjson_secret(key=key))
        assert artifact is not None
        assert artifact.artifact_digest == attached.digest
    wrong = registry.dockerconfigjson_secret()
    config = {"auths": {registry.host: {"username": registry.username, "password": "wrong"}}}
    wrong["data"] = {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()}
    with pytest.raises(RegistryError, match="unauthorized") as raised:
        await find(registry, name, secret=wrong)
    assert not raised.value.retryable


async def test_registry_down_is_retryable(tmp_path: Path) -> None:
    registry = start_distribution(tmp_path / "down")
    push_image(registry, "app", "v1")
    registry.stop()
    with pytest.raises(RegistryError, match=re.escape(registry.host)) as raised:
        await find(registry, registry.image("app", "v1"))
    assert raised.value.retryable
