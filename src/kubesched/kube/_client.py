"""A thin async client for kube-apiserver: raw paths in, bytes or typed structs out.

Configuration (kubeconfig, in-cluster service account, client certificates, exec plugins, CA) is
loaded by ``lightkube``; requests and watches go over one HTTP/1.1 transport
(:mod:`kubesched.kube._http1`), and everything above it (paths, rate limiting, error mapping,
decoding) is ours, so hot-path responses are decoded once, straight into ``msgspec`` structs.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import contextlib
import copy
import os
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias, TypeVar, overload

import msgspec
import yaml

import kubesched
from kubesched import KubeschedError
from kubesched.kube._credentials import Credentials, run_exec_plugin
from kubesched.kube._errors import APIConnectionError, error_from_response
from kubesched.kube._http1 import ConnectionPool, Proxy, TransportError
from kubesched.kube._ratelimit import TokenBucket
from kubesched.kube._warnings import handle_warnings

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "APIClient",
    "KubeConfigError",
    "PatchType",
    "api_path",
    "decoder_for",
    "load_kubeconfig",
]

T = TypeVar("T")

#: ``KubeSchedulerConfiguration.clientConnection`` defaults.
DEFAULT_QPS: Final = 50.0
DEFAULT_BURST: Final = 100
#: Requests on the wire at once, each on a kept-alive connection of its own (more wait for a
#: connection, in order).
DEFAULT_MAX_IN_FLIGHT: Final = 100
DEFAULT_USER_AGENT: Final = f"kubesched/{kubesched.__version__}"

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"

ParamValue: TypeAlias = str | int | float | bool
Params: TypeAlias = Mapping[str, ParamValue | Sequence[ParamValue] | None]
Body: TypeAlias = bytes | msgspec.Struct | Mapping[str, Any] | Sequence[Any] | None
PatchType: TypeAlias = Literal["merge", "strategic", "json", "apply"]

_PATCH_CONTENT_TYPES: Final[Mapping[str, str]] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}

_encoder = msgspec.json.Encoder()
_decoders: dict[Any, msgspec.json.Decoder[Any]] = {}


def decoder_for(type: builtins.type[T]) -> msgspec.json.Decoder[T]:
    """The shared JSON decoder for ``type`` (created on first use, then reused)."""
    dec = _decoders.get(type)
    if dec is None:
        dec = _decoders[type] = msgspec.json.Decoder(type)
    return dec


def encode_body(body: Body) -> bytes | None:
    """JSON bytes for a request body; ``bytes`` are sent as they are."""
    if body is None or isinstance(body, bytes):
        return body
    return _encoder.encode(body)


def api_path(
    resource: str,
    *,
    group_version: str = "v1",
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """The REST path of a resource, e.g. ``api_path("pods", namespace="a", name="b")``.

    ``group_version`` ``"v1"`` is the core group (``/api/v1``); anything else is a named group
    (``"coordination.k8s.io/v1"`` → ``/apis/coordination.k8s.io/v1``).
    """
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    parts = [root]
    if namespace:
        parts.append(f"namespaces/{namespace}")
    parts.append(resource)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    elif subresource:
        raise ValueError("a subresource needs a name")
    return "/".join(parts)


class KubeConfigError(KubeschedError):
    """No usable cluster configuration was found, or it could not be read."""


def load_kubeconfig(
    kubeconfig: str | os.PathLike[str] | None = None, *, context: str | None = None
) -> Any:
    """Load connection settings the way kubectl looks for them.

    In order: the ``kubeconfig`` path if given; else the first existing file in ``$KUBECONFIG``;
    else the in-cluster service account (when ``KUBERNETES_SERVICE_HOST`` is set and the token
    is mounted); else ``~/.kube/config``. Returns lightkube's ``SingleConfig`` for ``context``
    (or the current context).
    """
    from lightkube.config.kubeconfig import KubeConfig  # noqa: PLC0415  (import is slow)
    from lightkube.core.exceptions import ConfigError  # noqa: PLC0415

    source = "the in-cluster service account"
    try:
        if kubeconfig is not None:
            source = os.fspath(kubeconfig)
            config = KubeConfig.from_file(kubeconfig)
        elif env := os.environ.get("KUBECONFIG"):
            paths = [p for p in env.split(os.pathsep) if p]
            existing = [p for p in paths if Path(p).expanduser().is_file()]
            source = existing[0] if existing else paths[0]
            config = KubeConfig.from_file(source)
        elif (
            os.environ.get("KUBERNETES_SERVICE_HOST")
            and Path(SERVICE_ACCOUNT_DIR, "token").is_file()
        ):
            config = KubeConfig.from_service_account(SERVICE_ACCOUNT_DIR)
        else:
            source = "~/.kube/config"
            config = KubeConfig.from_file(source)
        return config.get(context)
    except yaml.YAMLError as exc:
        raise KubeConfigError(
            f"cannot load cluster configuration: {source}: not YAML: {exc}"
        ) from exc
    except AttributeError as exc:
        # lightkube reads the top level as a mapping.
        raise KubeConfigError(
            f"cannot load cluster configuration: {source}: not a kubeconfig (no mapping)"
        ) from exc
    except (ConfigError, KeyError, OSError, TypeError, ValueError) as exc:
        raise KubeConfigError(f"cannot load cluster configuration: {source}: {exc}") from exc


class APIClient:
    """Async access to one kube-apiserver with client-side rate limiting.

    Every request waits for a token of a bucket of ``qps`` tokens per second holding up to
    ``burst`` (``KubeSchedulerConfiguration.clientConnection``: 50 / 100 by default; ``qps <=
    0`` or huge means unlimited). Error responses raise the matching
    :class:`~kubesched.kube.APIError` subclass; transport failures raise
    :class:`~kubesched.kube.APIConnectionError`.

    Methods take raw paths (``/api/v1/namespaces/ns/pods``, see :func:`api_path`) and return the
    body as bytes, or decoded into ``type`` when one is given. The client is safe to share
    between tasks: many requests may be in flight at once, each on a kept-alive connection of
    ``transport`` (at most its ``max_connections``; the others wait their turn), and each watch
    on a connection of its own. Cancelling a call returns at once, but a request already being
    sent still completes in the background (its answer dropped), so a cancelled write may have
    been applied.
    """

    def __init__(
        self,
        transport: ConnectionPool,
        *,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        namespace: str = "default",
    ) -> None:
        self._transport = transport
        self.limiter = TokenBucket(qps, burst)
        self.namespace = namespace
        self._background: set[asyncio.Task[Any]] = set()
        self.requests_total = 0
        self.throttled_seconds = 0.0

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | os.PathLike[str] | None = None,
        *,
        context: str | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        timeout: float = 30.0,
        user_agent: str | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> APIClient:
        """A client for the cluster found by :func:`load_kubeconfig`, over up to
        ``max_in_flight`` kept-alive connections. ``timeout`` bounds an ordinary request;
        watches set their own read timeout."""
        config = load_kubeconfig(kubeconfig, context=context)
        try:
            pool = connection_pool(
                config,
                user_agent=user_agent or DEFAULT_USER_AGENT,
                max_connections=max_in_flight,
                timeout=timeout,
            )
        except (OSError, ValueError) as exc:
            raise KubeConfigError(f"cannot use cluster configuration: {exc}") from exc
        return cls(pool, qps=qps, burst=burst, namespace=config.namespace)

    def with_own_limiter(self) -> APIClient:
        """A client over the same connections with a rate limiter of its own (same ``qps`` and
        ``burst``), as kube-scheduler gives its event recorder a clientset of its own: events
        then never wait behind bindings for tokens. Close only the original."""
        sibling = copy.copy(self)
        sibling.limiter = TokenBucket(self.limiter.qps, self.limiter.burst)
        return sibling

    @property
    def base_url(self) -> str:
        """The API server's URL."""
        return self._transport.url

    @property
    def transport(self) -> ConnectionPool:
        """The connections requests and watches go over."""
        return self._transport

    async def aclose(self) -> None:
        """Close all connections."""
        await self._transport.aclose()

    async def __aenter__(self) -> APIClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _throttle(self) -> None:
        delay = self.limiter.reserve()
        if delay > 0:
            self.throttled_seconds += delay
            try:
                await asyncio.sleep(delay)
            except BaseException:
                self.limiter.cancel_reservation()
                raise

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: Body = None,
        content_type: str = "application/json",
        timeout: float | None = None,  # noqa: ASYNC109  (the HTTP timeout)
    ) -> bytes:
        """Send one request and return the response body; raise an ``APIError`` on failure."""
        await self._throttle()
        sending = self._transport.request(
            method,
            path,
            query=query_string(params),
            body=encode_body(body),
            content_type=content_type,
            timeout=timeout,
        )
        self.requests_total += 1
        try:
            response = await _shielded(sending, self._background)
        except TransportError as exc:
            raise APIConnectionError(f"{method} {path}: {exc}") from exc
        handle_warnings(response.headers)
        if response.status >= 400:
            raise error_from_response(response.status, response.body, response.headers)
        return response.body

    @contextlib.asynccontextmanager
    async def stream(
        self,
        path: str,
        *,
        params: Params | None = None,
        read_timeout: float | None = None,
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        """GET ``path`` and yield an iterator over the lines of the streamed body (a watch).

        Error responses raise before anything is yielded. A transport failure while reading
        raises :class:`~kubesched.kube.APIConnectionError` from the iterator. The connection
        is closed when the block ends, so the server stops sending.
        """
        await self._throttle()
        self.requests_total += 1
        try:
            body = await self._transport.open_stream(
                path, query=query_string(params), read_timeout=read_timeout
            )
        except TransportError as exc:
            raise APIConnectionError(f"GET {path}: {exc}") from exc
        try:
            handle_warnings(body.headers)
            if body.status >= 400:
                try:
                    content = await body.read()
                except TransportError:
                    content = b""
                raise error_from_response(body.status, content, body.headers)
            yield iter_lines(body.chunks(), path)
        finally:
            body.close()

    # --- verbs ------------------------------------------------------------------------------

    @overload
    async def get(self, path: str, *, params: Params | None = ...) -> bytes: ...
    @overload
    async def get(self, path: str, *, type: builtins.type[T], params: Params | None = ...) -> T: ...
    async def get(
        self, path: str, *, type: builtins.type[Any] | None = None, params: Params | None = None
    ) -> Any:
        """GET ``path``."""
        data = await self.request("GET", path, params=params)
        return data if type is None else decoder_for(type).decode(data)

    @overload
    async def list(
        self,
        path: str,
        *,
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        limit: int | None = ...,
        continue_: str | None = ...,
        resource_version: str | None = ...,
        resource_version_match: str | None = ...,
        params: Params | None = ...,
    ) -> bytes: ...
    @overload
    async def list(
        self,
        path: str,
        *,
        type: builtins.type[T],
        label_selector: str | None = ...,
        field_selector: str | None = ...,
        limit: int | None = ...,
        continue_: str | None = ...,
        resource_version: str | None = ...,
        resource_version_match: str | None = ...,
        params: Params | None = ...,
    ) -> T: ...
    async def list(
        self,
        path: str,
        *,
        type: builtins.type[Any] | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        params: Params | None = None,
    ) -> Any:
        """GET a collection with the usual list options (``type`` e.g. ``ObjectList[Pod]``)."""
        query: dict[str, Any] = dict(params or {})
        query.update(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
        )
        query["continue"] = continue_ or None
        data = await self.request("GET", path, params=query)
        return data if type is None else decoder_for(type).decode(data)

    @overload
    async def post(self, path: str, body: Body, *, params: Params | None = ...) -> bytes: ...
    @overload
    async def post(
        self, path: str, body: Body, *, type: builtins.type[T], params: Params | None = ...
    ) -> T: ...
    async def post(
        self,
        path: str,
        body: Body,
        *,
        type: builtins.type[Any] | None = None,
        params: Params | None = None,
    ) -> Any:
        """POST (create) ``body`` at ``path``."""
        data = await self.request("POST", path, params=params, body=body)
        return data if type is None else decoder_for(type).decode(data)

    @overload
    async def put(self, path: str, body: Body, *, params: Params | None = ...) -> bytes: ...
    @overload
    async def put(
        self, path: str, body: Body, *, type: builtins.type[T], params: Params | None = ...
    ) -> T: ...
    async def put(
        self,
        path: str,
        body: Body,
        *,
        type: builtins.type[Any] | None = None,
        params: Params | None = None,
    ) -> Any:
        """PUT (replace) ``body`` at ``path``; a ``metadata.resourceVersion`` in it is checked."""
        data = await self.request("PUT", path, params=params, body=body)
        return data if type is None else decoder_for(type).decode(data)

    @overload
    async def patch(
        self,
        path: str,
        body: Body,
        *,
        patch_type: PatchType = ...,
        params: Params | None = ...,
    ) -> bytes: ...
    @overload
    async def patch(
        self,
        path: str,
        body: Body,
        *,
        type: builtins.type[T],
        patch_type: PatchType = ...,
        params: Params | None = ...,
    ) -> T: ...
    async def patch(
        self,
        path: str,
        body: Body,
        *,
        type: builtins.type[Any] | None = None,
        patch_type: PatchType = "merge",
        params: Params | None = None,
    ) -> Any:
        """PATCH ``path``: JSON merge (default), strategic merge, JSON patch or server-side apply.

        A status write is a patch on the ``status`` subresource, e.g.
        ``patch(api_path("pods", namespace=ns, name=n, subresource="status"), {...},
        patch_type="strategic")``. Server-side apply needs ``params={"fieldManager": ...}``.
        """
        data = await self.request(
            "PATCH",
            path,
            params=params,
            body=body,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )
        return data if type is None else decoder_for(type).decode(data)

    @overload
    async def delete(
        self, path: str, body: Body = ..., *, params: Params | None = ...
    ) -> bytes: ...
    @overload
    async def delete(
        self, path: str, body: Body = ..., *, type: builtins.type[T], params: Params | None = ...
    ) -> T: ...
    async def delete(
        self,
        path: str,
        body: Body = None,
        *,
        type: builtins.type[Any] | None = None,
        params: Params | None = None,
    ) -> Any:
        """DELETE ``path``; ``body`` may be ``DeleteOptions`` (preconditions, grace period)."""
        data = await self.request("DELETE", path, params=params, body=body)
        return data if type is None else decoder_for(type).decode(data)


async def _shielded(sending: Awaitable[T], background: set[asyncio.Task[Any]]) -> T:
    """Await ``sending`` in a task of its own that cancelling the caller does not interrupt.

    A request cancelled while its bytes are being written or its answer read leaves its
    connection unusable. So the caller is released at once and the request completes in the
    background; its answer, when it comes, is dropped.
    """
    task = asyncio.ensure_future(sending)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        background.add(task)
        task.add_done_callback(_discarder(background))
        raise


def _discarder(background: set[asyncio.Task[Any]]) -> Any:
    def discard(task: asyncio.Task[Any]) -> None:
        background.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: nobody is waiting for it

    return discard


def query_string(params: Params | None) -> str:
    """``params`` as a URL query (``None`` values left out, booleans as ``true``/``false``,
    sequences repeated)."""
    if not params:
        return ""
    items: list[tuple[str, str]] = []
    for key, value in params.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else (value,)
        items.extend((key, _param_text(v)) for v in values)
    return urllib.parse.urlencode(items)


def _param_text(value: ParamValue) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def connection_pool(
    config: Any, *, user_agent: str, max_connections: int, timeout: float | None
) -> ConnectionPool:
    """The :class:`ConnectionPool` for lightkube's ``SingleConfig`` ``config``.

    Credentials are taken in lightkube's order (token file, token, exec plugin, basic auth);
    TLS is the context lightkube builds (CA, ``insecure-skip-tls-verify``, client certificate),
    offering only HTTP/1.1 over ALPN. A proxy from the environment (``HTTPS_PROXY``,
    ``HTTP_PROXY``, ``NO_PROXY``, as client-go reads them) is tunnelled through with CONNECT.
    Raises ``ValueError`` for what the transport does not speak: an auth provider, a proxy other
    than ``http://``, a scheme other than HTTP(S).
    """
    from lightkube.config.client_adapter import verify_cluster  # noqa: PLC0415

    url = urllib.parse.urlsplit(config.cluster.server)
    user = config.user
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"cluster.server {config.cluster.server!r}: not an http(s) URL")
    if user is None:
        raise ValueError("the context names no user")
    proxy = _proxy_for(url)
    if user.token_file:
        credentials = Credentials(token_file=user.token_file)
    elif user.token:
        credentials = Credentials(f"Bearer {user.token}")
    elif user.exec:
        credentials = Credentials(exec_plugin=run_exec_plugin(user.exec))
    elif user.username and user.password:
        pair = f"{user.username}:{user.password}".encode()
        credentials = Credentials(f"Basic {base64.b64encode(pair).decode()}")
    elif user.auth_provider:
        raise ValueError("users[].user.auth-provider is not supported: use an exec plugin")
    else:
        credentials = Credentials()
    context = None
    if url.scheme == "https":
        context = verify_cluster(config.cluster, user, config.abs_file)
        context.set_alpn_protocols(["http/1.1"])
    return ConnectionPool(
        url.hostname,
        url.port or (443 if context is not None else 80),
        ssl_context=context,
        server_hostname=url.hostname,
        path_prefix=url.path,
        user_agent=user_agent,
        credentials=credentials,
        max_connections=max_connections,
        timeout=timeout,
        proxy=proxy,
    )


def _proxy_for(url: urllib.parse.SplitResult) -> Proxy | None:
    """The proxy the environment sends requests to ``url`` through, if any."""
    proxies = urllib.request.getproxies()
    address = proxies.get(url.scheme) or proxies.get("all")
    if not address or urllib.request.proxy_bypass(url.hostname or ""):
        return None
    proxy = urllib.parse.urlsplit(address if "://" in address else f"http://{address}")
    if proxy.scheme != "http" or not proxy.hostname:
        raise ValueError(f"proxy {address!r} from the environment: only http:// proxies work")
    authorization = None
    if proxy.username is not None:
        pair = (
            f"{urllib.parse.unquote(proxy.username)}:{urllib.parse.unquote(proxy.password or '')}"
        )
        authorization = f"Basic {base64.b64encode(pair.encode()).decode()}"
    return Proxy(proxy.hostname, proxy.port or 80, authorization)


async def iter_lines(chunks: AsyncIterator[bytes], what: str = "") -> AsyncIterator[bytes]:
    """The non-empty lines of a streamed response body, without their newline."""
    pending: list[bytes] = []
    try:
        async for chunk in chunks:
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            data = chunk
            if pending:
                pending.append(chunk)
                data = b"".join(pending)
                pending.clear()
            lines = data.split(b"\n")
            tail = lines.pop()
            for line in lines:
                if line:
                    yield line
            if tail:
                pending.append(tail)
    except TransportError as exc:
        raise APIConnectionError(f"reading {what}: {type(exc).__name__}: {exc}") from exc
    if pending:
        last = b"".join(pending).strip()
        if last:
            yield last
