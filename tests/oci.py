"""Real OCI registries on loopback for tests, and content pushed to them the way oras pushes it.

Two registries, both built by ``make binaries`` (``kubesched cluster binaries``) from
``hack/registry``:

* :func:`start_distribution`: the CNCF distribution registry v3 (no Referrers API: referrers are
  found through the referrers tag schema), optionally behind htpasswd Basic auth;
* :func:`start_ociserver`: cuelabs.dev/go/oci/ociregistry's in-memory registry, which serves the
  Referrers API with its ``artifactType`` filter.

:func:`push_image` pushes a one-layer OCI image; :func:`attach_artifact` pushes what
``oras attach --artifact-type <type> <image> spec.yaml:<media type>`` pushes (an empty config,
the spec as the one layer titled ``spec.yaml``, ``subject`` and ``artifactType`` set, and an
``org.opencontainers.image.created`` annotation), and, when the registry does not acknowledge
the subject (no ``OCI-Subject`` header), adds the artifact to the referrers tag index
``sha256-<hex>`` and deletes the index it replaces, as oras does.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import hashlib
import http.client
import io
import json
import re
import secrets
import socket
import subprocess
import tarfile
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import bcrypt

from kubesched.cluster import DISTRIBUTION_REGISTRY, OCISERVER, find_tool
from kubesched.plugins.image_compatibility._registry import (
    CREATED_ANNOTATION,
    OCI_INDEX,
    OCI_MANIFEST,
)
from kubesched.plugins.image_compatibility._spec import ARTIFACT_TYPE, SPEC_MEDIA_TYPE

TITLE_ANNOTATION = "org.opencontainers.image.title"

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_EMPTY = "application/vnd.oci.empty.v1+json"
EMPTY_JSON = b"{}"

_START_TIMEOUT = 30.0


@dataclass(frozen=True)
class RegistryBinaries:
    registry: Path
    ociserver: Path


def registry_binaries() -> RegistryBinaries:
    """The built registries; a clear error (not a skip) when ``make binaries`` has not run."""
    registry, ociserver = find_tool(DISTRIBUTION_REGISTRY), find_tool(OCISERVER)
    if registry is None or ociserver is None:
        raise RuntimeError(
            "the test registries are not built at their pinned versions: run `make binaries` "
            "(`.venv/bin/kubesched cluster binaries`)"
        )
    return RegistryBinaries(registry, ociserver)


# --- processes ---------------------------------------------------------------------------------


@dataclass
class Registry:
    """A registry process on 127.0.0.1, spoken to over plain HTTP."""

    kind: str  # "distribution" or "ociserver"
    host: str  # "127.0.0.1:<port>": the registry part of image names
    process: subprocess.Popen[bytes]
    log: Path
    referrers_api: bool
    username: str | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}"

    def image(self, repository: str, reference: str = "latest") -> str:
        """``<host>/<repository>:<tag>`` (or ``@<digest>``)."""
        sep = "@" if ":" in reference else ":"
        return f"{self.host}/{repository}{sep}{reference}"

    def dockerconfigjson_secret(
        self, name: str = "registry-auth", namespace: str = "default", *, key: str | None = None
    ) -> dict[str, Any]:
        """An image pull secret for this registry, as the API serves it (base64 ``data``).

        ``key`` is the docker config key (default ``http://<host>``, the form ``docker login``
        writes for an insecure registry).
        """
        if self.username is None or self.password is None:
            raise ValueError(f"{self.kind} at {self.host} has no auth configured")
        auth = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        config = {"auths": {key or f"http://{self.host}": {"auth": auth}}}
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
        }

    def stop(self) -> None:
        """Terminate the process (killed if it does not exit within 10 s)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def free_port() -> int:
    """A port nothing listens on right now on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _log_tail(path: Path, lines: int = 30) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def _wait_ready(registry: Registry, timeout: float) -> None:
    """Until ``GET /v2/`` answers (200, or 401 behind auth); fail with the log if it dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            raise RuntimeError(
                f"{registry.kind} exited with {registry.process.returncode}:\n"
                f"{_log_tail(registry.log)}"
            )
        with contextlib.suppress(OSError):
            connection = http.client.HTTPConnection(registry.host, timeout=2)
            try:
                connection.request("GET", "/v2/")
                if connection.getresponse().status in (200, 401):
                    return
            finally:
                connection.close()
        time.sleep(0.1)
    registry.stop()
    raise RuntimeError(f"{registry.kind} not ready in {timeout}s:\n{_log_tail(registry.log)}")


def htpasswd_line(username: str, password: str) -> str:
    """An htpasswd entry with a bcrypt hash (the only scheme distribution accepts)."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()
    return f"{username}:{hashed}\n"


def start_distribution(
    workdir: Path,
    *,
    auth: tuple[str, str] | None = None,
    binaries: RegistryBinaries | None = None,
    timeout: float = _START_TIMEOUT,
) -> Registry:
    """The distribution registry on a free loopback port, storing under ``workdir``.

    ``auth`` = (username, password) puts it behind htpasswd Basic auth. Deletes are enabled (the
    referrers tag index that :func:`attach_artifact` replaces is deleted, as oras does).
    """
    binary = (binaries or registry_binaries()).registry
    workdir.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "version": "0.1",
        "log": {"level": "warn", "accesslog": {"disabled": True}},
        "storage": {
            "filesystem": {"rootdirectory": str(workdir / "storage")},
            "delete": {"enabled": True},
        },
        "http": {"secret": secrets.token_hex(16)},
    }
    if auth is not None:
        (workdir / "htpasswd").write_text(htpasswd_line(*auth))
        config["auth"] = {
            "htpasswd": {"realm": "kubesched-test", "path": str(workdir / "htpasswd")}
        }
    for _attempt in range(3):
        host = f"127.0.0.1:{free_port()}"
        config["http"]["addr"] = host
        # YAML is a superset of JSON: the registry reads this as its configuration.
        (workdir / "config.yml").write_text(json.dumps(config))
        log = workdir / "registry.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [str(binary), "serve", str(workdir / "config.yml")],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        registry = Registry(
            "distribution",
            host,
            process,
            log,
            referrers_api=False,
            username=auth[0] if auth else None,
            password=auth[1] if auth else None,
        )
        try:
            _wait_ready(registry, timeout)
        except RuntimeError:
            if "address already in use" in _log_tail(log):
                continue  # the free port was taken meanwhile
            raise
        return registry
    raise RuntimeError(f"distribution found no free port:\n{_log_tail(log)}")


def start_ociserver(
    workdir: Path, *, binaries: RegistryBinaries | None = None, timeout: float = _START_TIMEOUT
) -> Registry:
    """cuelabs' in-memory registry (Referrers API) on a port of its choosing on 127.0.0.1."""
    binary = (binaries or registry_binaries()).ociserver
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "ociserver.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(binary), "-addr", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    host = ""
    while not host and time.monotonic() < deadline and process.poll() is None:
        match = re.search(r"listening on (127\.0\.0\.1:\d+)", _log_tail(log, 5))
        host = match.group(1) if match else ""
        time.sleep(0.05)
    registry = Registry("ociserver", host, process, log, referrers_api=True)
    if not host:
        registry.stop()
        raise RuntimeError(f"ociserver did not start:\n{_log_tail(log)}")
    _wait_ready(registry, max(deadline - time.monotonic(), 1.0))
    return registry


# --- pushing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Descriptor:
    media_type: str
    digest: str
    size: int
    artifact_type: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if self.artifact_type:
            out["artifactType"] = self.artifact_type
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


@dataclass(frozen=True)
class _Response:
    status: int
    headers: Mapping[str, str]
    body: bytes


def _request(
    registry: Registry,
    method: str,
    target: str,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> _Response:
    """One request; Basic credentials sent up front when the registry has them."""
    all_headers = dict(headers or {})
    if registry.username is not None:
        token = base64.b64encode(f"{registry.username}:{registry.password}".encode()).decode()
        all_headers["Authorization"] = f"Basic {token}"
    connection = http.client.HTTPConnection(registry.host, timeout=30)
    try:
        connection.request(method, target, body=body, headers=all_headers)
        response = connection.getresponse()
        return _Response(response.status, dict(response.getheaders()), response.read())
    finally:
        connection.close()


def _expect(response: _Response, what: str, *statuses: int) -> _Response:
    if response.status not in statuses:
        raise AssertionError(f"{what}: HTTP {response.status}: {response.body[:500]!r}")
    return response


def push_blob(registry: Registry, repository: str, data: bytes, media_type: str) -> Descriptor:
    """Upload a blob (POST then PUT with the digest), unless the registry has it."""
    digest = digest_of(data)
    descriptor = Descriptor(media_type, digest, len(data))
    if _request(registry, "HEAD", f"/v2/{repository}/blobs/{digest}").status == 200:
        return descriptor
    started = _expect(
        _request(registry, "POST", f"/v2/{repository}/blobs/uploads/"), "start upload", 202
    )
    location = urllib.parse.urlsplit(started.headers["Location"])
    query = f"{location.query}&" if location.query else ""
    target = f"{location.path}?{query}digest={urllib.parse.quote(digest)}"
    headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
    _expect(_request(registry, "PUT", target, data, headers), f"upload {digest}", 201)
    return descriptor


def push_manifest(
    registry: Registry, repository: str, reference: str | None, manifest: Mapping[str, Any]
) -> tuple[Descriptor, _Response]:
    """PUT a manifest (by its digest when ``reference`` is None); its descriptor and the reply."""
    body = json.dumps(manifest, separators=(",", ":")).encode()
    media_type = str(manifest["mediaType"])
    descriptor = Descriptor(media_type, digest_of(body), len(body))
    target = f"/v2/{repository}/manifests/{reference or descriptor.digest}"
    response = _expect(
        _request(registry, "PUT", target, body, {"Content-Type": media_type}),
        f"push manifest {repository}:{reference or descriptor.digest}",
        201,
    )
    return descriptor, response


def _layer(content: bytes) -> tuple[bytes, bytes]:
    """A gzipped tar holding one file, and the uncompressed tar (for the config's diff_id)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        info = tarfile.TarInfo("hello.txt")
        info.size = len(content)
        info.mtime = 0
        tar.addfile(info, io.BytesIO(content))
    return gzip.compress(raw.getvalue(), mtime=0), raw.getvalue()


def push_image(
    registry: Registry, repository: str, tag: str = "latest", *, content: bytes | None = None
) -> Descriptor:
    """Push a one-layer linux/amd64 OCI image and tag it; its manifest's descriptor.

    ``content`` is the layer's one file (default: unique per call, so each push is a new image).
    """
    layer, diff = _layer(content if content is not None else secrets.token_bytes(16))
    config = {
        "architecture": "amd64",
        "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [digest_of(diff)]},
        "config": {},
    }
    config_body = json.dumps(config, separators=(",", ":")).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": push_blob(registry, repository, config_body, OCI_CONFIG).to_json(),
        "layers": [push_blob(registry, repository, layer, OCI_LAYER).to_json()],
    }
    return push_manifest(registry, repository, tag, manifest)[0]


def rfc3339(moment: datetime | None = None) -> str:
    """``2024-05-01T12:00:00Z``: what oras writes in ``org.opencontainers.image.created``."""
    return (moment or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def artifact_manifest(
    subject: Descriptor,
    layer: Descriptor,
    *,
    artifact_type: str = ARTIFACT_TYPE,
    created: str | None = "now",
    file_name: str = "spec.yaml",
) -> dict[str, Any]:
    """The manifest ``oras attach`` writes: ``artifactType``, the empty config (inline, as
    oras-go writes it), one layer titled ``file_name``, ``subject``, and the creation time
    (``created``: RFC 3339, "now", or None to leave the annotation out)."""
    empty = Descriptor(OCI_EMPTY, digest_of(EMPTY_JSON), len(EMPTY_JSON))
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "artifactType": artifact_type,
        "config": empty.to_json() | {"data": base64.b64encode(EMPTY_JSON).decode()},
        "layers": [layer.to_json() | {"annotations": {TITLE_ANNOTATION: file_name}}],
        "subject": subject.to_json(),
    }
    if created is not None:
        manifest["annotations"] = {CREATED_ANNOTATION: rfc3339() if created == "now" else created}
    return manifest


def attach_artifact(
    registry: Registry,
    repository: str,
    subject: Descriptor,
    spec: bytes,
    *,
    created: str | None = "now",
    artifact_type: str = ARTIFACT_TYPE,
    media_type: str = SPEC_MEDIA_TYPE,
    file_name: str = "spec.yaml",
    layer_size: int | None = None,
) -> Descriptor:
    """Attach ``spec`` to ``subject`` as ``oras attach --artifact-type <artifact_type> <image>
    <file_name>:<media_type>`` does; the artifact manifest's descriptor (as referrers list it).

    ``created``: the ``org.opencontainers.image.created`` annotation ("now" by default, None to
    leave it out). ``layer_size`` overrides the size the layer descriptor declares (to test a
    client that must not trust it).
    """
    push_blob(registry, repository, EMPTY_JSON, OCI_EMPTY)
    layer = push_blob(registry, repository, spec, media_type)
    if layer_size is not None:
        layer = Descriptor(layer.media_type, layer.digest, layer_size)
    manifest = artifact_manifest(
        subject, layer, artifact_type=artifact_type, created=created, file_name=file_name
    )
    pushed, response = push_manifest(registry, repository, None, manifest)
    descriptor = Descriptor(
        pushed.media_type,
        pushed.digest,
        pushed.size,
        artifact_type,
        manifest.get("annotations", {}),
    )
    if not _header(response.headers, "OCI-Subject"):
        _add_to_referrers_index(registry, repository, subject.digest, descriptor)
    return descriptor


def _header(headers: Mapping[str, str], name: str) -> str:
    return next((v for k, v in headers.items() if k.lower() == name.lower()), "")


def _add_to_referrers_index(
    registry: Registry, repository: str, subject: str, referrer: Descriptor
) -> None:
    """The referrers tag schema: put ``referrer`` in the index tagged ``sha256-<hex>``."""
    # Written out here rather than taken from the client, so a wrong tag cannot agree with itself.
    tag = subject.replace("sha256:", "sha256-", 1)
    found = _request(
        registry, "GET", f"/v2/{repository}/manifests/{tag}", headers={"Accept": OCI_INDEX}
    )
    _expect(found, f"get referrers index {tag}", 200, 404)
    old = json.loads(found.body) if found.status == 200 else None
    manifests: list[dict[str, Any]] = list(old["manifests"]) if old else []
    if any(m.get("digest") == referrer.digest for m in manifests):
        return
    manifests.append(referrer.to_json())
    index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests}
    push_manifest(registry, repository, tag, index)
    if old is not None:
        # oras deletes the index it replaced, so that it does not linger untagged.
        old_digest = digest_of(found.body)
        _request(registry, "DELETE", f"/v2/{repository}/manifests/{old_digest}")
