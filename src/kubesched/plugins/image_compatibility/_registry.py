"""Find an image's NFD compatibility artifact in its OCI registry.

An image compatibility artifact is an OCI manifest whose ``subject`` is the image's manifest (or
index) and whose ``artifactType`` is ``application/vnd.nfd.image-compatibility.v1alpha1``; its
layer of media type ``application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml`` holds the
compatibility spec. It is what ``oras attach --artifact-type <that type> <image>
spec.yaml:<spec media type>`` pushes, and what NFD's ``nfd compat validate-node`` looks up with
oras-go. This module does the same lookup over the OCI distribution API, with ``aiohttp``:

1. Resolve the image's tag to a manifest digest (``HEAD /v2/<name>/manifests/<tag>``, falling
   back to ``GET`` when the registry does not answer ``HEAD`` with ``Docker-Content-Digest``).
2. List the image's referrers: the Referrers API (``GET /v2/<name>/referrers/<digest>
   ?artifactType=...``), or, on a registry without it (a 404), the index that the referrers tag
   schema keeps under the tag ``sha256-<hex>``, as clients maintain it for such registries.
3. Keep the referrers of the NFD artifact type and pick the newest by its
   ``org.opencontainers.image.created`` annotation (as NFD does; a missing or unreadable time
   counts as oldest, ties go to the greater digest so the choice never depends on the order the
   registry lists them in).
4. Fetch that artifact's manifest and its spec layer, verifying both against their digests and
   refusing either when it is larger than ``max_artifact_bytes``: the size the descriptor
   declares is checked before the download and the download itself is capped.

Authentication follows the Docker registry token protocol: an unauthenticated request answered
``401`` with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...`` is repeated with a token
from the realm (fetched with HTTP Basic credentials when some match the registry, anonymously
otherwise); a ``Basic`` challenge is answered with the credentials directly. Tokens are cached per
registry, scope and user until they expire. Credentials come from a pod's image pull secrets,
matched to the image the way kubelet matches them (:func:`credentials_from_secrets`,
:func:`matching_credentials`).

Transport: HTTPS by default, verified against the system trust store (or ``ca_file`` instead).
Plain HTTP is used only for registries named in ``plain_http`` (``host:port``, or a bare host
for every port), loopback ones included: whether ``localhost:5000`` speaks HTTP is the container
runtime's configuration, which the scheduler cannot see, and guessing by trying HTTP after a
failed HTTPS would let anyone who can answer on that port feed the scheduler unauthenticated
data. Proxy settings in the environment (``HTTPS_PROXY``) are not used.

Nothing is cached by tag: a tag can move at any time, so every :meth:`RegistryClient.resolve`
asks the registry. What an image digest leads to never changes, so callers may cache
:class:`Artifact` results by ``image_digest``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import fnmatch
import hashlib
import json
import math
import re
import ssl
import time
import urllib.parse
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NoReturn

import aiohttp

from kubesched.plugins.image_compatibility._spec import ARTIFACT_TYPE, SPEC_MEDIA_TYPE

#: The annotation oras and NFD order artifacts by (RFC 3339).
CREATED_ANNOTATION = "org.opencontainers.image.created"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"

#: What a tag may point at: any image manifest or index, OCI or Docker.
_MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST))

#: Docker Hub's names: images say ``docker.io``, its API answers at ``registry-1.docker.io``.
DOCKER_HUB = "docker.io"
_DOCKER_HUB_API = "registry-1.docker.io"
_DOCKER_HUB_LEGACY = "index.docker.io"

#: Bound on image manifests, indexes and referrer lists (oras-go's default for metadata).
_MAX_METADATA_BYTES = 4 << 20
#: Referrers API pages followed at most (a ``Link: <...>; rel="next"`` header each).
_MAX_REFERRER_PAGES = 16
#: A token is renewed this long before the expiry its issuer stated.
_TOKEN_EXPIRY_MARGIN = 5.0
#: Token lifetime when the issuer states none (the distribution token spec's default).
_DEFAULT_TOKEN_SECONDS = 60.0
_CHUNK = 64 << 10
#: Cached authorizations kept at most (expired ones are dropped first when it is reached).
_MAX_AUTHORIZATIONS = 1024


# --- image references ------------------------------------------------------------------------

_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(
    rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?\Z"
)
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*\Z")
_TAG = re.compile(r"[\w][\w.-]{0,127}\Z")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}\Z")
_DIGEST_HEX = {"sha256": 64, "sha512": 128}
_MAX_NAME = 255


@dataclass(frozen=True)
class ImageReference:
    """An image name as a container runtime pulls it, normalized the way Docker does.

    ``nginx`` is ``docker.io/library/nginx:latest``; a digest reference keeps its tag if it has
    one (``tag`` is informational then: the digest is what is pulled).
    """

    registry: str  # "docker.io", "ghcr.io", "localhost:5000", "[::1]:5000"
    repository: str  # "library/nginx"
    tag: str | None
    digest: str | None  # "sha256:<64 hex>"

    @property
    def name(self) -> str:
        """``registry/repository``: what kubelet looks credentials up by."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest if there is one, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"


def _check_digest(digest: str, image: str) -> None:
    if not _DIGEST.match(digest):
        raise ValueError(f"invalid image reference {image!r}: malformed digest {digest!r}")
    algorithm, _, encoded = digest.partition(":")
    length = _DIGEST_HEX.get(algorithm)
    if length is None:
        raise ValueError(
            f"invalid image reference {image!r}: unsupported digest algorithm {algorithm!r} "
            f"(expected one of {', '.join(_DIGEST_HEX)})"
        )
    if len(encoded) != length or not re.fullmatch(r"[a-f0-9]+", encoded):
        raise ValueError(
            f"invalid image reference {image!r}: a {algorithm} digest is {length} lowercase "
            f"hex characters, got {encoded!r}"
        )


def _split_domain(name: str) -> tuple[str, str]:
    """Docker's rule: the first component is a registry host only if it looks like one."""
    first, slash, rest = name.partition("/")
    if not slash or (
        not any(c in first for c in ".:") and first != "localhost" and first.lower() == first
    ):
        registry, remainder = DOCKER_HUB, name
    else:
        registry, remainder = first, rest
    if registry == _DOCKER_HUB_LEGACY:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in remainder:
        remainder = f"library/{remainder}"
    return registry, remainder


def parse_image_reference(image: str) -> ImageReference:
    """Parse a container image as a pod spec names it, with Docker's normalization.

    No registry host means Docker Hub (``docker.io``, also for ``index.docker.io``); a
    single-component Docker Hub name gets ``library/``; no tag and no digest means ``latest``.
    The first component is a host when it contains ``.`` or ``:`` or is ``localhost``.
    Raises ValueError naming the problem for anything a runtime would refuse to pull.
    """
    if not isinstance(image, str) or not image:
        raise ValueError("invalid image reference: empty")
    if image != image.strip() or any(c.isspace() for c in image):
        raise ValueError(f"invalid image reference {image!r}: contains whitespace")
    remainder, at, digest = image.partition("@")
    if at:
        _check_digest(digest, image)
    tag: str | None = None
    last = remainder.rfind("/")
    colon = remainder.rfind(":")
    if colon > last:
        remainder, tag = remainder[:colon], remainder[colon + 1 :]
        if not _TAG.match(tag):
            raise ValueError(
                f"invalid image reference {image!r}: malformed tag {tag!r} (letters, digits, "
                "'_', '.', '-', not starting with '.' or '-', at most 128 characters)"
            )
    if not remainder:
        raise ValueError(f"invalid image reference {image!r}: no repository name")
    registry, repository = _split_domain(remainder)
    if not _DOMAIN.match(registry):
        raise ValueError(f"invalid image reference {image!r}: malformed registry {registry!r}")
    for component in repository.split("/"):
        if not _PATH_COMPONENT.match(component):
            hint = " (must be lowercase)" if component.lower() != component else ""
            raise ValueError(
                f"invalid image reference {image!r}: malformed repository component "
                f"{component!r}{hint}"
            )
    if len(f"{registry}/{repository}") > _MAX_NAME:
        raise ValueError(
            f"invalid image reference {image!r}: the name is longer than {_MAX_NAME} characters"
        )
    if tag is None and not at:
        tag = "latest"
    return ImageReference(registry, repository, tag, digest if at else None)


# --- credentials -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Credential:
    """A username and password for the registries ``registry`` matches.

    ``registry`` is the key of a docker config normalized as kubelet normalizes it: scheme
    dropped, a ``/v1/`` or ``/v2/`` path dropped, any other path kept (it then only matches
    repositories under it), and host components may be globs (``*.example.com``).
    """

    registry: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"Credential(registry={self.registry!r}, username={self.username!r}, password=***)"


def _registry_key(location: str) -> str:
    """kubelet's key for a docker config entry (``BasicDockerKeyring.Add``)."""
    value = location if location.startswith(("https://", "http://")) else f"https://{location}"
    parsed = urllib.parse.urlsplit(value)
    path = parsed.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return parsed.netloc + path if path and path != "/" else parsed.netloc


def _decode_auth(field: str) -> tuple[str, str]:
    """The ``auth`` field: base64 of ``username:password``, padded or not."""
    text = field.strip()
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as err:
        raise ValueError("the auth field is not base64") from err
    username, colon, password = decoded.partition(":")
    if not colon:
        raise ValueError("the auth field must be base64 of username:password")
    return username, password


def _entries(config: Any, what: str) -> list[Credential]:
    if not isinstance(config, dict):
        raise ValueError(f"{what}: expected a JSON object of registries")
    found: list[Credential] = []
    for location, entry in config.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{what}: the entry for {location!r} is not an object")
        username, password = entry.get("username") or "", entry.get("password") or ""
        if not isinstance(username, str) or not isinstance(password, str):
            raise ValueError(f"{what}: username and password of {location!r} must be strings")
        auth = entry.get("auth")
        if auth:
            if not isinstance(auth, str):
                raise ValueError(f"{what}: the auth field of {location!r} must be a string")
            try:
                username, password = _decode_auth(auth)
            except ValueError as err:
                raise ValueError(f"{what}: {location!r}: {err}") from None
        found.append(Credential(_registry_key(location), username, password))
    return found


def credentials_from_secrets(secrets: Iterable[Mapping[str, Any]]) -> list[Credential]:
    """The registry credentials in image pull secrets, as the API serves them (base64 ``data``).

    Reads ``kubernetes.io/dockerconfigjson`` secrets (``.dockerconfigjson``: ``{"auths": {...}}``)
    and ``kubernetes.io/dockercfg`` ones (``.dockercfg``: the registry map itself); each entry
    has ``auth`` (base64 ``username:password``, which wins, as in kubelet) or ``username`` and
    ``password``. Secrets of other types, or without the key, are skipped as kubelet skips them.
    Like kubelet, which fails the pull on a secret it cannot parse, raises ValueError naming the
    secret when one is malformed.
    """
    found: list[Credential] = []
    for secret in secrets:
        metadata = secret.get("metadata") or {}
        what = f"image pull secret {metadata.get('namespace', '')}/{metadata.get('name', '')}"
        kind = secret.get("type")
        key = {
            "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
            "kubernetes.io/dockercfg": ".dockercfg",
        }.get(kind if isinstance(kind, str) else "")
        data = secret.get("data") or {}
        if key is None or not isinstance(data, dict) or not data.get(key):
            continue
        try:
            config = json.loads(base64.b64decode(data[key], validate=True))
        except (TypeError, ValueError, binascii.Error) as err:
            raise ValueError(f"{what}: {key} is not base64-encoded JSON: {err}") from None
        if key == ".dockerconfigjson":
            if not isinstance(config, dict):
                raise ValueError(f"{what}: {key} is not a JSON object")
            config = config.get("auths") or {}
        found.extend(_entries(config, what))
    return found


def _split_host(netloc: str) -> tuple[list[str], str]:
    host, colon, port = netloc.rpartition(":")
    if not colon or "]" in port:
        host, port = netloc, ""
    return host.split("."), port


def _urls_match(glob: str, target: str) -> bool:
    """kubelet's ``URLsMatchStr``: same port, as many host parts, each a glob match, path a
    prefix (a plain string prefix, as in kubelet)."""
    glob_url = urllib.parse.urlsplit(f"https://{glob}")
    target_url = urllib.parse.urlsplit(f"https://{target}")
    glob_parts, glob_port = _split_host(glob_url.netloc)
    target_parts, target_port = _split_host(target_url.netloc)
    if glob_port != target_port or len(glob_parts) != len(target_parts):
        return False
    if not target_url.path.startswith(glob_url.path):
        return False
    return all(fnmatch.fnmatchcase(t, g) for g, t in zip(glob_parts, target_parts, strict=True))


def _is_docker_hub(name: str) -> bool:
    """kubelet's ``isDefaultRegistryMatch`` on a normalized ``registry/repository``."""
    first, slash, _ = name.partition("/")
    if not first:
        return False
    return (
        not slash or first in (DOCKER_HUB, _DOCKER_HUB_LEGACY) or not any(c in first for c in ".:")
    )


def matching_credentials(
    ref: ImageReference, credentials: Sequence[Credential]
) -> list[Credential]:
    """The credentials kubelet would try for ``ref``, in its order.

    Keys are tried in reverse lexical order (so ``quay.io/team`` before ``quay.io``); when none
    matches, a Docker Hub image takes those for ``index.docker.io`` (``https://index.docker.io/v1/``
    in a docker config).
    """
    keys = sorted({c.registry for c in credentials}, reverse=True)
    matched = [k for k in keys if _urls_match(k, ref.name)]
    if not matched and _is_docker_hub(ref.name) and _DOCKER_HUB_LEGACY in keys:
        matched = [_DOCKER_HUB_LEGACY]
    return [c for k in matched for c in credentials if c.registry == k]


# --- results and errors ----------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    """An image's compatibility artifact: the spec bytes (YAML) and where they came from."""

    image_digest: str
    artifact_digest: str
    created: str  # the artifact's org.opencontainers.image.created annotation, "" if none
    spec: bytes


class RegistryError(Exception):
    """A registry could not answer. ``retryable``: whether asking again later may succeed.

    Network errors, timeouts, 5xx and 429 are retryable; a refusal after authenticating (401,
    403), an unknown image (404), an oversized or malformed artifact are not.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def _fail(ref: ImageReference, message: str, *, retryable: bool = False) -> NoReturn:
    raise RegistryError(f"image {ref}: {message}", retryable=retryable)


# --- WWW-Authenticate ------------------------------------------------------------------------

_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*,?')


@dataclass(frozen=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: its scheme (lowercase) and parameters."""

    scheme: str
    params: Mapping[str, str]


def parse_www_authenticate(header: str) -> Challenge | None:
    """The first challenge of a ``WWW-Authenticate`` header, or None when there is none.

    ``Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="..."``
    gives scheme ``bearer`` and those three parameters (names lowercased, quotes and
    backslash escapes removed). A second challenge in the same header is ignored.
    """
    match = re.match(r"\s*([A-Za-z][\w!#$%&'*+.^`|~-]*)(?:\s+|$)", header)
    if match is None:
        return None
    params: dict[str, str] = {}
    position = match.end()
    while position < len(header):
        param = _CHALLENGE_PARAM.match(header, position)
        if param is None or param.end() == position:
            break
        quoted, token = param.group(2), param.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else token or ""
        params[param.group(1).lower()] = value
        position = param.end()
    return Challenge(match.group(1).lower(), params)


# --- descriptors and artifact selection ------------------------------------------------------


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor, as listed in an index or a referrers list."""

    media_type: str
    digest: str
    size: int
    artifact_type: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)


def _created(descriptor: Descriptor) -> datetime | None:
    """The descriptor's creation time, or None when it is missing or not RFC 3339."""
    text = descriptor.annotations.get(CREATED_ANNOTATION, "")
    try:
        created = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    # RFC 3339 requires an offset; a naive time cannot be compared with the others.
    return created if created.tzinfo is not None else None


def newest_artifact(descriptors: Iterable[Descriptor]) -> Descriptor | None:
    """The artifact NFD picks: the latest ``org.opencontainers.image.created``.

    A descriptor without a readable time counts as older than every dated one (NFD sorts it as
    the zero time). Ties, undated ones included, go to the greater digest, so the choice does
    not depend on the order the registry lists referrers in.
    """
    oldest = datetime.min.replace(tzinfo=UTC)

    def key(descriptor: Descriptor) -> tuple[datetime, str]:
        return (_created(descriptor) or oldest, descriptor.digest)

    return max(descriptors, key=key, default=None)


def referrers_tag(digest: str) -> str:
    """The referrers tag schema's tag for ``digest``: ``<alg>-<hex>`` (``sha256-ab...``)."""
    algorithm, _, encoded = digest.partition(":")
    return f"{algorithm[:32]}-{encoded[:64]}"


def _parse_descriptor(raw: Any) -> Descriptor | None:
    """A descriptor from JSON, or None when it lacks a digest or a size."""
    if not isinstance(raw, dict):
        return None
    digest, size = raw.get("digest"), raw.get("size")
    if not isinstance(digest, str) or not isinstance(size, int) or isinstance(size, bool):
        return None
    annotations = raw.get("annotations")
    pairs = annotations.items() if isinstance(annotations, dict) else ()
    return Descriptor(
        media_type=str(raw.get("mediaType") or ""),
        digest=digest,
        size=size,
        artifact_type=str(raw.get("artifactType") or ""),
        annotations={str(k): str(v) for k, v in pairs},
    )


def _json_object(ref: ImageReference, body: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(body)
    except ValueError as err:
        _fail(ref, f"{what} is not JSON: {err}")
    if not isinstance(document, dict):
        _fail(ref, f"{what} is not a JSON object")
    return document


def _index_descriptors(ref: ImageReference, body: bytes, what: str) -> list[Descriptor]:
    document = _json_object(ref, body, what)
    # Go servers write an empty list as null (cuelabs' ociserver does for no referrers).
    manifests = document.get("manifests") or []
    if not isinstance(manifests, list):
        _fail(ref, f"{what} has no manifests list")
    return [d for d in map(_parse_descriptor, manifests) if d is not None]


def _is_digest(text: str) -> bool:
    try:
        _check_digest(text, text)
    except ValueError:
        return False
    return True


def _verify(ref: ImageReference, body: bytes, digest: str, what: str) -> None:
    if not _is_digest(digest):
        _fail(ref, f"{what} has a malformed digest {digest!r}")
    algorithm, _, expected = digest.partition(":")
    actual = hashlib.new(algorithm, body).hexdigest()
    if actual != expected:
        _fail(ref, f"{what} does not match its digest {digest} (got {algorithm}:{actual})")


# --- the client ------------------------------------------------------------------------------

_NETWORK_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)


@dataclass(frozen=True)
class _Reply:
    """A finished exchange: status, headers, and the body (capped; an error body truncated)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    next_url: str | None  # from ``Link: <...>; rel="next"``, resolved against the request

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0].strip()

    def error_codes(self) -> list[str]:
        """The ``code`` of each error in an OCI error body."""
        with contextlib.suppress(ValueError, AttributeError, TypeError):
            errors = json.loads(self.body).get("errors") or []
            return [str(e.get("code", "")) for e in errors if isinstance(e, dict)]
        return []

    def error_detail(self) -> str:
        with contextlib.suppress(ValueError, AttributeError, TypeError, IndexError):
            first = json.loads(self.body)["errors"][0]
            return f": {first.get('code', '')} {first.get('message', '')}".rstrip()
        return ""


@dataclass
class _Authorization:
    header: str
    expires: float  # time.monotonic(); inf for Basic


_STATUS_REASONS = {401: "unauthorized", 403: "access denied", 404: "not found", 429: "rate limited"}


def _fail_status(ref: ImageReference, reply: _Reply, what: str) -> NoReturn:
    status = reply.status
    reason = _STATUS_REASONS.get(status, "registry error")
    _fail(
        ref,
        f"{what}: {reason} (HTTP {status}){reply.error_detail()}",
        retryable=status >= 500 or status == 429,
    )


async def _read_capped(
    response: aiohttp.ClientResponse, limit: int, ref: ImageReference, what: str
) -> bytes:
    """The body, refused (not retryable) as soon as it passes ``limit`` bytes."""
    if response.content_length is not None and response.content_length > limit:
        _fail(ref, f"{what} is {response.content_length} bytes, over the limit of {limit}")
    chunks: list[bytes] = []
    total = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        total += len(chunk)
        if total > limit:
            _fail(ref, f"{what} is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _next_link(response: aiohttp.ClientResponse) -> str | None:
    for link in response.headers.getall("Link", []):
        match = re.match(r'\s*<([^>]*)>\s*;\s*rel="?next"?', link)
        if match:
            return str(urllib.parse.urljoin(str(response.url), match.group(1)))
    return None


class RegistryClient:
    """An OCI distribution client that finds NFD compatibility artifacts (see the module doc).

    One client serves any number of registries and concurrent lookups; it owns an
    ``aiohttp.ClientSession``, created on first use in the running event loop. Call
    :meth:`aclose` when done (or use it as an async context manager).

    ``timeout`` bounds each request, connect to last byte. ``max_artifact_bytes`` bounds the
    artifact's manifest and its spec layer. ``plain_http`` lists the registries spoken to over
    HTTP (``host:port``, or a bare host for any port). ``ca_file`` is a PEM bundle of trusted CAs
    used instead of the system's; ``insecure_skip_verify`` turns certificate checks off.
    """

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        max_artifact_bytes: int = 1 << 20,
        plain_http: Collection[str] = (),
        ca_file: str | None = None,
        insecure_skip_verify: bool = False,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_artifact_bytes <= 0:
            raise ValueError(f"max_artifact_bytes must be positive, got {max_artifact_bytes}")
        self.timeout = timeout
        self.max_artifact_bytes = max_artifact_bytes
        self.plain_http = frozenset(plain_http)
        self._ssl: ssl.SSLContext | bool = True
        if insecure_skip_verify:
            self._ssl = False
        elif ca_file is not None:
            try:
                self._ssl = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(f"cannot load CA bundle {ca_file}: {err}") from err
        self._session: aiohttp.ClientSession | None = None
        # (registry, scope, credential or None for anonymous) -> what answered its challenge.
        self._authorizations: dict[tuple[str, str, Credential | None], _Authorization] = {}

    async def aclose(self) -> None:
        """Close the HTTP session (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # --- transport ---

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit_per_host=8),
                headers={"User-Agent": "kubesched-image-compatibility"},
            )
        return self._session

    def base_url(self, registry: str) -> str:
        """``https://host[:port]`` (``http://`` if listed in ``plain_http``) of a registry."""
        host = _DOCKER_HUB_API if registry == DOCKER_HUB else registry
        bare = host if host.endswith("]") else host.rsplit(":", 1)[0]
        plain = registry in self.plain_http or bare in self.plain_http
        return f"{'http' if plain else 'https'}://{host}"

    async def _exchange(
        self,
        ref: ImageReference,
        method: str,
        path: str,
        *,
        accept: str,
        credentials: Sequence[Credential],
        what: str,
        limit: int,
        params: Mapping[str, str] | None = None,
        url: str | None = None,
    ) -> _Reply:
        """One request and its body, authenticating on a 401 challenge.

        Raises a retryable RegistryError on network errors and timeouts, and a non-retryable one
        when every matching credential (or none) is refused; returns every other status.
        """
        target = url or f"{self.base_url(ref.registry)}/v2/{ref.repository}/{path}"
        scope = f"repository:{ref.repository}:pull"
        users = matching_credentials(ref, credentials)
        try:
            authorization = self._cached_authorization(ref.registry, scope, users)
            reply = await self._send(
                ref, method, target, accept, authorization, params, limit, what
            )
            if reply.status != 401:
                return reply
            challenge = parse_www_authenticate(reply.headers.get("WWW-Authenticate", ""))
            if challenge is None or challenge.scheme not in ("bearer", "basic"):
                _fail(ref, f"{what}: unauthorized (HTTP 401) without a Bearer or Basic challenge")
            candidates: list[Credential | None] = [*users] if users else [None]
            for user in candidates:
                answer = await self._authorize(ref, challenge, scope, user)
                if answer is None:
                    continue  # the token service refused this user: kubelet tries the next
                reply = await self._send(
                    ref, method, target, accept, answer.header, params, limit, what
                )
                if reply.status != 401:
                    self._remember((ref.registry, scope, user), answer)
                    return reply
        except _NETWORK_ERRORS as err:
            _fail(ref, f"{what}: {type(err).__name__}: {err}", retryable=True)
        tried = "with every matching image pull secret" if users else "no image pull secret matches"
        _fail(ref, f"{what}: unauthorized (HTTP 401), {tried}{reply.error_detail()}")

    async def _send(
        self,
        ref: ImageReference,
        method: str,
        url: str,
        accept: str,
        authorization: str | None,
        params: Mapping[str, str] | None,
        limit: int,
        what: str,
    ) -> _Reply:
        headers = {"Accept": accept}
        if authorization:
            headers["Authorization"] = authorization
        # aiohttp drops Authorization when a redirect leaves the origin (blob storage URLs).
        async with self._http().request(method, url, headers=headers, params=params) as response:
            if method == "HEAD":
                body = b""  # Content-Length is that of the GET
            elif 200 <= response.status < 300:
                body = await _read_capped(response, limit, ref, what)
            else:
                body = await response.content.read(8192)  # for the error message only
            return _Reply(response.status, response.headers, body, _next_link(response))

    def _cached_authorization(
        self, registry: str, scope: str, users: Sequence[Credential]
    ) -> str | None:
        """A still valid answer that worked before for one of ``users``, or anonymously."""
        now = time.monotonic()
        for user in [*users, None]:
            cached = self._authorizations.get((registry, scope, user))
            if cached is not None and cached.expires > now:
                return cached.header
        return None

    def _remember(
        self, key: tuple[str, str, Credential | None], authorization: _Authorization
    ) -> None:
        if len(self._authorizations) >= _MAX_AUTHORIZATIONS:
            now = time.monotonic()
            for stale in [k for k, a in self._authorizations.items() if a.expires <= now]:
                del self._authorizations[stale]
            if len(self._authorizations) >= _MAX_AUTHORIZATIONS:
                self._authorizations.clear()  # a burst of live ones: start over, tokens renew
        self._authorizations[key] = authorization

    async def _authorize(
        self, ref: ImageReference, challenge: Challenge, scope: str, user: Credential | None
    ) -> _Authorization | None:
        """The Authorization header answering ``challenge`` as ``user`` (anonymous if None),
        or None when the token service refuses that user."""
        username = user.username if user else ""
        basic = None
        if user is not None:
            basic = "Basic " + base64.b64encode(f"{username}:{user.password}".encode()).decode()
        if challenge.scheme == "basic":
            if basic is None:
                _fail(
                    ref, "the registry wants a username and password; no image pull secret matches"
                )
            return _Authorization(basic, math.inf)
        realm = challenge.params.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            _fail(ref, f"the registry's token realm {realm!r} is not an HTTP URL")
        query = {"scope": challenge.params.get("scope") or scope}
        if challenge.params.get("service"):
            query["service"] = challenge.params["service"]
        headers = {"Accept": "application/json"}
        if basic is not None:
            headers["Authorization"] = basic
        async with self._http().get(realm, params=query, headers=headers) as response:
            status = response.status
            body = await _read_capped(response, 1 << 20, ref, "the token response")
        if status in (401, 403):
            return None
        if status != 200:
            as_user = f" for {username}" if username else " anonymously"
            _fail(
                ref,
                f"the token service {realm} refused a token{as_user} (HTTP {status})",
                retryable=status >= 500 or status == 429,
            )
        document = _json_object(ref, body, "the token response")
        token = document.get("token") or document.get("access_token")
        if not isinstance(token, str) or not token:
            _fail(ref, "the token response has no token")
        expires_in = document.get("expires_in")
        seconds = _DEFAULT_TOKEN_SECONDS
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
            seconds = float(expires_in) if expires_in > 0 else seconds
        expires = time.monotonic() + max(seconds - _TOKEN_EXPIRY_MARGIN, 0.0)
        return _Authorization(f"Bearer {token}", expires)

    # --- API ---

    async def resolve(self, ref: ImageReference, credentials: Sequence[Credential] = ()) -> str:
        """The digest of the manifest or index ``ref`` names, asked of the registry every time.

        A tag is resolved now (``HEAD``, or ``GET`` and hash when ``HEAD`` gives no digest); a
        digest reference is returned once the registry confirms it has that manifest.
        """
        what = f"manifest {ref.reference}"
        path = f"manifests/{ref.reference}"
        head = await self._exchange(
            ref, "HEAD", path, accept=_MANIFEST_ACCEPT, credentials=credentials, what=what, limit=0
        )
        digest = head.headers.get("Docker-Content-Digest", "")
        if head.ok and _is_digest(digest) and digest == (ref.digest or digest):
            return digest
        if head.status in (401, 403, 404, 429) or head.status >= 500:
            _fail_status(ref, head, what)
        got = await self._exchange(
            ref,
            "GET",
            path,
            accept=_MANIFEST_ACCEPT,
            credentials=credentials,
            what=what,
            limit=_MAX_METADATA_BYTES,
        )
        if not got.ok:
            _fail_status(ref, got, what)
        if ref.digest:
            _verify(ref, got.body, ref.digest, what)
            return ref.digest
        return f"sha256:{hashlib.sha256(got.body).hexdigest()}"

    async def referrers(
        self,
        ref: ImageReference,
        digest: str,
        credentials: Sequence[Credential] = (),
        *,
        artifact_type: str = ARTIFACT_TYPE,
    ) -> list[Descriptor]:
        """The manifests whose subject is ``digest`` and whose artifact type is ``artifact_type``.

        From the Referrers API; on a registry without it, from the referrers tag schema's index.
        """
        listed = await self._referrers_api(ref, digest, credentials, artifact_type)
        if listed is None:
            listed = await self._referrers_tag(ref, digest, credentials)
        # A registry may ignore the filter (and then omits OCI-Filters-Applied): filter anyway.
        return [d for d in listed if d.artifact_type == artifact_type]

    async def _referrers_api(
        self,
        ref: ImageReference,
        digest: str,
        credentials: Sequence[Credential],
        artifact_type: str,
    ) -> list[Descriptor] | None:
        """The Referrers API's list (all pages), or None when the registry does not offer it."""
        what = f"referrers of {digest}"
        found: list[Descriptor] = []
        url: str | None = None
        params: Mapping[str, str] | None = {"artifactType": artifact_type}
        for _ in range(_MAX_REFERRER_PAGES):
            reply = await self._exchange(
                ref,
                "GET",
                f"referrers/{digest}",
                accept=OCI_INDEX,
                credentials=credentials,
                what=what,
                limit=_MAX_METADATA_BYTES,
                params=params,
                url=url,
            )
            if reply.status == 404 and "NAME_UNKNOWN" in reply.error_codes():
                _fail_status(ref, reply, what)  # the repository is gone, not the API
            # A 404 is the spec's sign of no Referrers API; 400 and 405 are what registries that
            # route the path elsewhere answer, and a 200 that is not an index is no list either.
            if reply.status in (400, 404, 405) or (reply.ok and reply.content_type != OCI_INDEX):
                return None
            if not reply.ok:
                _fail_status(ref, reply, what)
            found.extend(_index_descriptors(ref, reply.body, what))
            if reply.next_url is None:
                return found
            url, params = reply.next_url, None
        _fail(ref, f"{what}: more than {_MAX_REFERRER_PAGES} pages")

    async def _referrers_tag(
        self, ref: ImageReference, digest: str, credentials: Sequence[Credential]
    ) -> list[Descriptor]:
        tag = referrers_tag(digest)
        what = f"referrers index {tag}"
        reply = await self._exchange(
            ref,
            "GET",
            f"manifests/{tag}",
            accept=OCI_INDEX,
            credentials=credentials,
            what=what,
            limit=_MAX_METADATA_BYTES,
        )
        if reply.status == 404:
            return []
        if not reply.ok:
            _fail_status(ref, reply, what)
        return _index_descriptors(ref, reply.body, what)

    async def find_artifact(
        self, ref: ImageReference, credentials: Sequence[Credential] = ()
    ) -> Artifact | None:
        """The image's newest compatibility artifact, or None when it has none.

        Raises RegistryError when the registry cannot be reached, refuses, does not know the
        image, or serves an artifact that is malformed, differs from its digests, or is larger
        than ``max_artifact_bytes``.
        """
        image_digest = await self.resolve(ref, credentials)
        chosen = newest_artifact(await self.referrers(ref, image_digest, credentials))
        if chosen is None:
            return None
        what = f"compatibility artifact {chosen.digest}"
        manifest = _json_object(
            ref,
            await self._fetch(
                ref, f"manifests/{chosen.digest}", OCI_MANIFEST, chosen, credentials, what
            ),
            what,
        )
        layers = manifest.get("layers")
        specs = [
            d
            for d in map(_parse_descriptor, layers if isinstance(layers, list) else [])
            if d is not None and d.media_type == SPEC_MEDIA_TYPE
        ]
        if not specs:
            _fail(ref, f"{what} has no layer of media type {SPEC_MEDIA_TYPE}")
        spec = await self._fetch(
            ref, f"blobs/{specs[0].digest}", "*/*", specs[0], credentials, f"{what}, its spec"
        )
        annotations = manifest.get("annotations")
        created = annotations.get(CREATED_ANNOTATION) if isinstance(annotations, dict) else None
        return Artifact(
            image_digest=image_digest,
            artifact_digest=chosen.digest,
            created=str(created or chosen.annotations.get(CREATED_ANNOTATION, "")),
            spec=spec,
        )

    async def _fetch(
        self,
        ref: ImageReference,
        path: str,
        accept: str,
        descriptor: Descriptor,
        credentials: Sequence[Credential],
        what: str,
    ) -> bytes:
        """A manifest or blob by its descriptor: the declared size checked first, the download
        capped, then both size and digest verified."""
        limit = self.max_artifact_bytes
        if descriptor.size > limit:
            _fail(ref, f"{what} is {descriptor.size} bytes, over the limit of {limit}")
        reply = await self._exchange(
            ref, "GET", path, accept=accept, credentials=credentials, what=what, limit=limit
        )
        if not reply.ok:
            _fail_status(ref, reply, what)
        if len(reply.body) != descriptor.size:
            _fail(ref, f"{what} is {len(reply.body)} bytes, its descriptor says {descriptor.size}")
        _verify(ref, reply.body, descriptor.digest, what)
        return reply.body
