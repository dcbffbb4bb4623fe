"""The OCI distribution calls that find an image's NFD compatibility artifact.

Resolve the tag, list the referrers (the Referrers API or the referrers tag schema), pick the
newest artifact as NFD does, fetch its manifest and spec layer verified against their digests,
authenticating with the Docker registry token protocol. How and why: "The registry client" in
docs/plugins/image-compatibility.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import ssl
import urllib.parse
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

from kubesched import KubeschedError
from kubesched.plugins.image_compatibility._challenge import Challenge, parse_www_authenticate
from kubesched.plugins.image_compatibility._credentials import Credential, matching_credentials
from kubesched.plugins.image_compatibility._reference import (
    DOCKER_HUB,
    DOCKER_HUB_API,
    ImageReference,
    is_digest,
)
from kubesched.plugins.image_compatibility._spec import ARTIFACT_TYPE, SPEC_MEDIA_TYPE
from kubesched.plugins.image_compatibility._tokens import (
    Authorization,
    TokenCache,
    basic_authorization,
)

if TYPE_CHECKING:
    import aiohttp

#: The annotation oras and NFD order artifacts by (RFC 3339).
CREATED_ANNOTATION = "org.opencontainers.image.created"

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_MANIFEST_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"

#: What a tag may point at: any image manifest or index, OCI or Docker.
_MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_MANIFEST_LIST, DOCKER_MANIFEST))

#: Bound on image manifests, indexes and referrer lists (oras-go's default for metadata).
_MAX_METADATA_BYTES = 4 << 20
#: Referrers API pages followed at most (a ``Link: <...>; rel="next"`` header each).
_MAX_REFERRER_PAGES = 16
_CHUNK = 64 << 10


# --- results and errors ----------------------------------------------------------------------


@dataclass(frozen=True)
class Artifact:
    """An image's compatibility artifact: the spec bytes (YAML) and where they came from."""

    image_digest: str
    artifact_digest: str
    created: str  # the artifact's org.opencontainers.image.created annotation, "" if none
    spec: bytes


class RegistryError(KubeschedError):
    """A registry could not answer, and asking again will not help: a refusal after
    authenticating (401, 403), an unknown image (404), an oversized or malformed artifact."""

    retryable: ClassVar[bool] = False


class TemporaryRegistryError(RegistryError):
    """A registry could not answer for now: network errors, timeouts, 5xx and 429."""

    retryable: ClassVar[bool] = True


def _fail(ref: ImageReference, message: str, *, retryable: bool = False) -> NoReturn:
    error = TemporaryRegistryError if retryable else RegistryError
    raise error(f"image {ref}: {message}")


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


def _verify(ref: ImageReference, body: bytes, digest: str, what: str) -> None:
    if not is_digest(digest):
        _fail(ref, f"{what} has a malformed digest {digest!r}")
    algorithm, _, expected = digest.partition(":")
    actual = hashlib.new(algorithm, body).hexdigest()
    if actual != expected:
        _fail(ref, f"{what} does not match its digest {digest} (got {algorithm}:{actual})")


# --- the client ------------------------------------------------------------------------------


def _network_errors() -> tuple[type[BaseException], ...]:
    import aiohttp  # noqa: PLC0415  (loaded with the first session: a third of a second)

    return (aiohttp.ClientError, TimeoutError, OSError)


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
        self._tokens = TokenCache()

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
        import aiohttp  # noqa: PLC0415  (importing it costs every command a third of a second)

        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit_per_host=8),
                headers={"User-Agent": "kubesched-image-compatibility"},
            )
        return self._session

    def base_url(self, registry: str) -> str:
        """``https://host[:port]`` (``http://`` if listed in ``plain_http``) of a registry."""
        host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
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
            authorization = self._tokens.lookup(ref.registry, scope, users)
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
                    self._tokens.remember(ref.registry, scope, user, answer)
                    return reply
        except _network_errors() as err:
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

    async def _authorize(
        self, ref: ImageReference, challenge: Challenge, scope: str, user: Credential | None
    ) -> Authorization | None:
        """The Authorization header answering ``challenge`` as ``user`` (anonymous if None),
        or None when the token service refuses that user."""
        basic = basic_authorization(user) if user is not None else None
        if challenge.scheme == "basic":
            if basic is None:
                _fail(
                    ref, "the registry wants a username and password; no image pull secret matches"
                )
            return basic
        realm = challenge.params.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            _fail(ref, f"the registry's token realm {realm!r} is not an HTTP URL")
        query = {"scope": challenge.params.get("scope") or scope}
        if challenge.params.get("service"):
            query["service"] = challenge.params["service"]
        headers = {"Accept": "application/json"}
        if basic is not None:
            headers["Authorization"] = basic.header
        async with self._http().get(realm, params=query, headers=headers) as response:
            status = response.status
            body = await _read_capped(response, 1 << 20, ref, "the token response")
        if status in (401, 403):
            return None
        if status != 200:
            as_user = f" for {user.username}" if user and user.username else " anonymously"
            _fail(
                ref,
                f"the token service {realm} refused a token{as_user} (HTTP {status})",
                retryable=status >= 500 or status == 429,
            )
        document = _json_object(ref, body, "the token response")
        token = document.get("token") or document.get("access_token")
        if not isinstance(token, str) or not token:
            _fail(ref, "the token response has no token")
        return self._tokens.bearer(token, document.get("expires_in"))

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
        if head.ok and is_digest(digest) and digest == (ref.digest or digest):
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
