"""The OCI registry client: artifact choice, and the HTTP exchanges against an in-process fake
registry (only the HTTP boundary is fake)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer

import oci
from kubesched.plugins.image_compatibility._credentials import Credential
from kubesched.plugins.image_compatibility._reference import ImageReference, parse_image_reference
from kubesched.plugins.image_compatibility._registry import (
    CREATED_ANNOTATION,
    OCI_INDEX,
    OCI_MANIFEST,
    Descriptor,
    RegistryClient,
    RegistryError,
    newest_artifact,
    referrers_tag,
)
from kubesched.plugins.image_compatibility._spec import ARTIFACT_TYPE, SPEC_MEDIA_TYPE

SHA = "sha256:" + "a" * 64

# --- choosing the artifact -----------------------------------------------------------------------


def desc(digest_char: str, created: str | None) -> Descriptor:
    annotations = {CREATED_ANNOTATION: created} if created is not None else {}
    return Descriptor(OCI_MANIFEST, "sha256:" + digest_char * 64, 10, ARTIFACT_TYPE, annotations)


def test_newest_artifact_by_created_then_digest() -> None:
    old = desc("1", "2024-01-01T00:00:00Z")
    new = desc("2", "2024-06-01T00:00:00+02:00")
    undated = desc("9", None)
    garbage = desc("8", "yesterday")
    naive = desc("7", "2030-01-01T00:00:00")  # no offset: not RFC 3339, counts as undated
    for order in ([old, new, undated, garbage, naive], [naive, garbage, undated, new, old]):
        assert newest_artifact(order) == new
    tie_a, tie_b = desc("a", "2024-01-01T00:00:00Z"), desc("b", "2024-01-01T00:00:00Z")
    assert newest_artifact([tie_b, tie_a]) == tie_b == newest_artifact([tie_a, tie_b])
    assert newest_artifact([undated, garbage]) == undated
    assert newest_artifact([]) is None


def test_referrers_tag() -> None:
    assert referrers_tag(SHA) == "sha256-" + "a" * 64


# --- the client against a fake registry ----------------------------------------------------------


@dataclass
class FakeRegistry:
    """Manifests and blobs in memory, with switches for the behaviours under test."""

    manifests: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # ref -> (type, body)
    blobs: dict[str, bytes] = field(default_factory=dict)
    referrers_api: bool = True
    filter_referrers: bool = False
    page_size: int = 0  # > 0: the referrers list is split into pages linked by Link headers
    head_digest: bool = True
    users: dict[str, str] = field(default_factory=dict)  # token auth when set
    token_expires_in: int = 300
    fail_status: int = 0  # every /v2/ request answers this when set
    requests: list[str] = field(default_factory=list)

    def put_manifest(self, document: Mapping[str, Any], tag: str | None = None) -> Descriptor:
        body = json.dumps(document).encode()
        digest = oci.digest_of(body)
        media_type = str(document["mediaType"])
        self.manifests[digest] = (media_type, body)
        if tag:
            self.manifests[tag] = (media_type, body)
        annotations = document.get("annotations", {})
        return Descriptor(
            media_type, digest, len(body), document.get("artifactType", ""), annotations
        )

    def put_blob(self, data: bytes) -> dict[str, Any]:
        self.blobs[oci.digest_of(data)] = data
        return {"digest": oci.digest_of(data), "size": len(data)}

    def push_image(self, tag: str = "v1") -> Descriptor:
        config = self.put_blob(b'{"os":"linux"}')
        layer = self.put_blob(b"layer")
        return self.put_manifest(
            {
                "schemaVersion": 2,
                "mediaType": OCI_MANIFEST,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", **layer}],
            },
            tag,
        )

    def attach(
        self,
        subject: Descriptor,
        spec: bytes,
        created: str | None,
        *,
        artifact_type: str = ARTIFACT_TYPE,
        declared_size: int | None = None,
        layer_type: str = SPEC_MEDIA_TYPE,
    ) -> Descriptor:
        self.put_blob(oci.EMPTY_JSON)
        layer = oci.Descriptor(layer_type, oci.digest_of(spec), declared_size or len(spec))
        self.blobs[layer.digest] = spec
        subject_descriptor = oci.Descriptor(subject.media_type, subject.digest, subject.size)
        document = oci.artifact_manifest(
            subject_descriptor, layer, artifact_type=artifact_type, created=created
        )
        return self.put_manifest(document)

    def referrers_of(self, digest: str) -> list[dict[str, Any]]:
        found = []
        for key, (media_type, body) in self.manifests.items():
            document = json.loads(body)
            if (
                key.startswith("sha256:")
                and (document.get("subject") or {}).get("digest") == digest
            ):
                found.append(
                    {
                        "mediaType": media_type,
                        "digest": key,
                        "size": len(body),
                        "artifactType": document.get("artifactType", ""),
                        "annotations": document.get("annotations", {}),
                    }
                )
        return sorted(found, key=lambda d: d["digest"])

    def tag_referrers(self, subject: str) -> None:
        """Maintain the referrers tag index for ``subject``, as clients do without the API."""
        index = {
            "schemaVersion": 2,
            "mediaType": OCI_INDEX,
            "manifests": self.referrers_of(subject),
        }
        self.put_manifest(index, referrers_tag(subject))

    # --- HTTP ---

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/token", self.token)
        app.router.add_route("*", "/v2/{name:.+}/manifests/{reference}", self.manifest)
        app.router.add_get("/v2/{name:.+}/blobs/{digest}", self.blob)
        app.router.add_get("/v2/{name:.+}/referrers/{digest}", self.referrers)
        return app

    async def token(self, request: web.Request) -> web.Response:
        self.requests.append(f"token {request.query.get('scope')}")
        header = request.headers.get("Authorization", "")
        user, _, password = base64.b64decode(header.removeprefix("Basic ")).decode().partition(":")
        if not header or self.users.get(user) != password:
            return web.json_response({"errors": [{"code": "UNAUTHORIZED"}]}, status=401)
        return web.json_response({"token": f"t-{user}", "expires_in": self.token_expires_in})

    def _gate(self, request: web.Request) -> web.Response | None:
        self.requests.append(f"{request.method} {request.path}")
        if self.fail_status:
            return web.json_response(
                {"errors": [{"code": "BOOM", "message": "x"}]}, status=self.fail_status
            )
        if self.users and not request.headers.get("Authorization", "").startswith("Bearer t-"):
            realm = f"http://{request.host}/token"
            challenge = f'Bearer realm="{realm}",service="fake",scope="repository:team/app:pull"'
            return web.json_response(
                {"errors": [{"code": "UNAUTHORIZED"}]},
                status=401,
                headers={"WWW-Authenticate": challenge},
            )
        return None

    async def manifest(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._gate(request)) is not None:
            return refused
        found = self.manifests.get(request.match_info["reference"])
        if found is None:
            return web.json_response({"errors": [{"code": "MANIFEST_UNKNOWN"}]}, status=404)
        media_type, body = found
        headers = {"Content-Type": media_type}
        if self.head_digest:
            headers["Docker-Content-Digest"] = oci.digest_of(body)
        return web.Response(body=body, headers=headers)

    async def blob(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._gate(request)) is not None:
            return refused
        data = self.blobs.get(request.match_info["digest"])
        if data is None:
            return web.json_response({"errors": [{"code": "BLOB_UNKNOWN"}]}, status=404)
        return web.Response(body=data, content_type="application/octet-stream")

    async def referrers(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._gate(request)) is not None:
            return refused
        if not self.referrers_api:
            return web.Response(status=404, text="404 page not found")
        listed = self.referrers_of(request.match_info["digest"])
        wanted = request.query.get("artifactType")
        headers = {}
        if self.filter_referrers and wanted:
            listed = [d for d in listed if d["artifactType"] == wanted]
            headers["OCI-Filters-Applied"] = "artifactType"
        if self.page_size:
            start = int(request.query.get("last", "0"))
            if start + self.page_size < len(listed):
                headers["Link"] = f'<{request.path}?last={start + self.page_size}>; rel="next"'
            listed = listed[start : start + self.page_size]
        # An empty list as a Go server writes it: null.
        index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": listed or None}
        return web.Response(body=json.dumps(index), content_type=OCI_INDEX, headers=headers)


# Function-scoped loops: the server and the client live in the test's own loop.
@pytest_asyncio.fixture(loop_scope="function")
async def fake() -> AsyncIterator[tuple[FakeRegistry, str]]:
    registry = FakeRegistry()
    server = TestServer(registry.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield registry, f"127.0.0.1:{server.port}"
    finally:
        await server.close()


@pytest_asyncio.fixture(loop_scope="function")
async def client(fake: tuple[FakeRegistry, str]) -> AsyncIterator[RegistryClient]:
    registry = RegistryClient(plain_http=[fake[1]], max_artifact_bytes=4096)
    try:
        yield registry
    finally:
        await registry.aclose()


def ref_of(host: str, tag: str = "v1") -> ImageReference:
    return parse_image_reference(f"{host}/team/app:{tag}")


SPEC = b"version: v1alpha1\ncompatibilities: []\n"


@pytest.mark.parametrize("api", [True, False], ids=["referrers-api", "referrers-tag"])
async def test_finds_the_newest_artifact(
    fake: tuple[FakeRegistry, str], client: RegistryClient, api: bool
) -> None:
    registry, host = fake
    registry.referrers_api = api
    registry.filter_referrers = api
    image = registry.push_image()
    registry.attach(image, b"old", "2024-01-01T00:00:00Z")
    newest = registry.attach(image, SPEC, "2025-01-01T00:00:00Z")
    registry.attach(image, b"signature", "2026-01-01T00:00:00Z", artifact_type="application/x-sig")
    registry.tag_referrers(image.digest)
    artifact = await client.find_artifact(ref_of(host))
    assert artifact is not None
    assert artifact.image_digest == image.digest
    assert artifact.artifact_digest == newest.digest
    assert artifact.created == "2025-01-01T00:00:00Z"
    assert artifact.spec == SPEC
    used = [r for r in registry.requests if "referrers" in r or "sha256-" in r]
    assert ("/referrers/" in used[-1]) == api


async def test_referrers_pages_and_unfiltered_lists(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    registry.page_size = 1
    image = registry.push_image()
    for year in (2021, 2023, 2022):
        registry.attach(image, f"spec {year}".encode(), f"{year}-01-01T00:00:00Z")
    registry.attach(image, b"sig", "2030-01-01T00:00:00Z", artifact_type="application/x-sig")
    artifact = await client.find_artifact(ref_of(host))
    assert artifact is not None
    assert artifact.spec == b"spec 2023"
    assert sum("/referrers/" in r for r in registry.requests) == 4


async def test_no_artifact_is_none(fake: tuple[FakeRegistry, str], client: RegistryClient) -> None:
    registry, host = fake
    image = registry.push_image()
    assert await client.find_artifact(ref_of(host)) is None
    registry.referrers_api = False  # and no referrers tag either
    assert await client.find_artifact(ref_of(host)) is None
    registry.attach(image, b"x", None, artifact_type="application/x-sig")
    registry.tag_referrers(image.digest)
    assert await client.find_artifact(ref_of(host)) is None


async def test_resolve_never_caches_a_tag(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    first = registry.push_image("v1")
    assert await client.resolve(ref_of(host)) == first.digest
    registry.blobs.clear()
    moved = registry.put_manifest({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "x": 1}, "v1")
    assert await client.resolve(ref_of(host)) == moved.digest
    assert (
        await client.resolve(parse_image_reference(f"{host}/team/app@{first.digest}"))
        == first.digest
    )


async def test_resolve_without_head_digest_hashes_the_get(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    registry.head_digest = False
    image = registry.push_image()
    assert await client.resolve(ref_of(host)) == image.digest
    assert registry.requests[-2:] == [
        "HEAD /v2/team/app/manifests/v1",
        "GET /v2/team/app/manifests/v1",
    ]


async def test_declared_size_over_the_limit_is_refused_before_download(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    image = registry.push_image()
    registry.attach(image, b"x" * 5000, "2025-01-01T00:00:00Z")
    with pytest.raises(RegistryError, match="5000 bytes, over the limit of 4096") as raised:
        await client.find_artifact(ref_of(host))
    assert not raised.value.retryable
    assert not any("/blobs/" in r for r in registry.requests)


async def test_a_lying_descriptor_is_cut_off_by_the_capped_download(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    image = registry.push_image()
    registry.attach(image, b"x" * 100_000, "2025-01-01T00:00:00Z", declared_size=10)
    with pytest.raises(RegistryError, match="over the limit of 4096") as raised:
        await client.find_artifact(ref_of(host))
    assert not raised.value.retryable


async def test_digest_and_layer_checks(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    image = registry.push_image()
    artifact = registry.attach(image, SPEC, "2025-01-01T00:00:00Z")
    spec_digest = oci.digest_of(SPEC)
    registry.blobs[spec_digest] = SPEC.upper()  # same size, other content
    with pytest.raises(RegistryError, match="does not match its digest") as raised:
        await client.find_artifact(ref_of(host))
    assert not raised.value.retryable
    registry.manifests.pop(artifact.digest)
    registry.attach(image, SPEC, "2025-02-01T00:00:00Z", layer_type="text/plain")
    with pytest.raises(RegistryError, match="no layer of media type"):
        await client.find_artifact(ref_of(host))


async def test_token_auth_with_pull_secret_credentials(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    registry.users = {"alice": "pw"}
    image = registry.push_image()
    registry.attach(image, SPEC, "2025-01-01T00:00:00Z")
    wrong = Credential(host, "mallory", "nope")
    right = Credential(host, "alice", "pw")
    artifact = await client.find_artifact(ref_of(host), [wrong, right])
    assert artifact is not None
    assert artifact.spec == SPEC
    tokens = [r for r in registry.requests if r.startswith("token")]
    assert tokens == ["token repository:team/app:pull"] * 2  # mallory refused, then alice
    registry.requests.clear()
    assert await client.find_artifact(ref_of(host), [wrong, right]) is not None
    assert not any(r.startswith("token") for r in registry.requests)  # cached until expiry
    assert not any("401" in r for r in registry.requests)


async def test_unauthorized_is_not_retryable(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    registry.users = {"alice": "pw"}
    registry.push_image()
    with pytest.raises(RegistryError, match="no image pull secret matches") as raised:
        await client.find_artifact(ref_of(host))
    assert not raised.value.retryable
    with pytest.raises(RegistryError, match="with every matching image pull secret"):
        await client.find_artifact(ref_of(host), [Credential(host, "alice", "wrong")])


async def test_an_expired_token_is_fetched_again(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    registry, host = fake
    registry.users = {"alice": "pw"}
    registry.token_expires_in = 1  # under the renewal margin: never reused
    registry.push_image()
    creds = [Credential(host, "alice", "pw")]
    await client.resolve(ref_of(host), creds)
    await client.resolve(ref_of(host), creds)
    assert sum(r.startswith("token") for r in registry.requests) == 2


@pytest.mark.parametrize(
    ("status", "retryable"), [(500, True), (503, True), (429, True), (403, False), (400, False)]
)
async def test_status_errors(
    fake: tuple[FakeRegistry, str], client: RegistryClient, status: int, retryable: bool
) -> None:
    registry, host = fake
    registry.fail_status = status
    with pytest.raises(RegistryError, match=rf"{host}/team/app:v1: .*HTTP {status}") as raised:
        await client.find_artifact(ref_of(host))
    assert raised.value.retryable is retryable


async def test_unknown_image_is_not_retryable(
    fake: tuple[FakeRegistry, str], client: RegistryClient
) -> None:
    _, host = fake
    with pytest.raises(RegistryError, match=r"manifest missing: not found \(HTTP 404\)") as raised:
        await client.find_artifact(ref_of(host, "missing"))
    assert not raised.value.retryable


async def test_unreachable_registry_is_retryable() -> None:
    async with RegistryClient(plain_http=["127.0.0.1:9"], timeout=2) as registry:
        with pytest.raises(RegistryError, match=r"127\.0\.0\.1:9/team/app:v1") as raised:
            await registry.find_artifact(ref_of("127.0.0.1:9"))
    assert raised.value.retryable


def test_base_urls() -> None:
    registry = RegistryClient(plain_http=["localhost:5000", "plain.io"])
    assert registry.base_url("docker.io") == "https://registry-1.docker.io"
    assert registry.base_url("localhost:5000") == "http://localhost:5000"
    assert registry.base_url("localhost:5001") == "https://localhost:5001"
    assert registry.base_url("plain.io:8080") == "http://plain.io:8080"
    assert registry.base_url("127.0.0.1:5000") == "https://127.0.0.1:5000"


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="timeout"):
        RegistryClient(timeout=0)
    with pytest.raises(ValueError, match="max_artifact_bytes"):
        RegistryClient(max_artifact_bytes=0)
    with pytest.raises(ValueError, match="cannot load CA bundle"):
        RegistryClient(ca_file="/nonexistent/ca.pem")
