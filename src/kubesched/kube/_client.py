"""A thin async client for kube-apiserver: raw paths in, bytes or typed structs out.

Configuration (kubeconfig, in-cluster service account, client certificates, exec plugins, CA) is
loaded by ``lightkube``, which hands back a configured ``httpx2.AsyncClient``; everything above
the socket (paths, rate limiting, error mapping, decoding) is ours, so hot-path responses are
decoded once, straight into ``msgspec`` structs.
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

import httpx2
import msgspec

import kubesched
from kubesched.kube._errors import APIConnectionError, error_from_response
from kubesched.kube._http1 import ConnectionPool, Credentials, TransportError
from kubesched.kube._ratelimit import TokenBucket

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
#: Requests inside the HTTP client at once (more wait for a slot, in order).
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

_IDEMPOTENT: Final = frozenset({"GET", "HEAD", "OPTIONS"})

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


class KubeConfigError(Exception):
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

    try:
        if kubeconfig is not None:
            config = KubeConfig.from_file(kubeconfig)
        elif env := os.environ.get("KUBECONFIG"):
            paths = [p for p in env.split(os.pathsep) if p]
            existing = [p for p in paths if Path(p).expanduser().is_file()]
            config = KubeConfig.from_file(existing[0] if existing else paths[0])
        elif (
            os.environ.get("KUBERNETES_SERVICE_HOST")
            and Path(SERVICE_ACCOUNT_DIR, "token").is_file()
        ):
            config = KubeConfig.from_service_account(SERVICE_ACCOUNT_DIR)
        else:
            config = KubeConfig.from_file("~/.kube/config")
        return config.get(context)
    except (ConfigError, KeyError, OSError, TypeError, ValueError) as exc:
        raise KubeConfigError(f"cannot load cluster configuration: {exc}") from exc


def _http2_available() -> bool:
    try:
        import h2  # noqa: F401, PLC0415
    except ImportError:
        return False
    return True


class APIClient:
    """Async access to one kube-apiserver with client-side rate limiting.

    Every request waits for a token of a bucket of ``qps`` tokens per second holding up to
    ``burst`` (``KubeSchedulerConfiguration.clientConnection``: 50 / 100 by default; ``qps <=
    0`` or huge means unlimited). Error responses raise the matching
    :class:`~kubesched.kube.APIError` subclass; transport failures raise
    :class:`~kubesched.kube.APIConnectionError`.

    Methods take raw paths (``/api/v1/namespaces/ns/pods``, see :func:`api_path`) and return the
    body as bytes, or decoded into ``type`` when one is given. The client is safe to share
    between tasks: many requests may be in flight at once, at most ``max_in_flight`` of them
    inside the HTTP client (the others wait their turn; watches do not count). Cancelling a call
    returns at once, but a request already being sent still completes in the background (its
    answer dropped), so a cancelled write may have been applied.

    With ``pool`` (a :class:`~kubesched.kube._http1.ConnectionPool`, as
    :meth:`from_kubeconfig` sets up), ordinary requests go over its kept-alive HTTP/1.1
    connections, at most ``max_in_flight`` of them, and watches over connections it opens for
    each; ``http`` is then not used by the client itself.
    """

    def __init__(
        self,
        http: httpx2.AsyncClient,
        *,
        stream_http: httpx2.AsyncClient | None = None,
        pool: ConnectionPool | None = None,
        qps: float = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
        user_agent: str | None = None,
        namespace: str = "default",
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> None:
        self._http = http
        self._stream_http = stream_http or http
        self._pool = pool
        self.limiter = TokenBucket(qps, burst)
        self.namespace = namespace
        self._headers = {
            "Accept": "application/json",
            "User-Agent": user_agent or DEFAULT_USER_AGENT,
        }
        self._background: set[asyncio.Task[Any]] = set()
        # The HTTP client's connection pool scans its queue of waiting requests on every
        # request: with thousands queued (a burst of bindings) that is quadratic.
        self._slots = asyncio.Semaphore(max(1, max_in_flight))
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
        http2: bool = True,
        lean: bool = True,
        timeout: float = 30.0,
        max_connections: int = 512,
        max_keepalive_connections: int = 128,
        user_agent: str | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
    ) -> APIClient:
        """A client for the cluster found by :func:`load_kubeconfig`.

        With ``lean`` (the default) ordinary requests go over kubesched's own pool of up to
        ``max_in_flight`` kept-alive HTTP/1.1 connections (:mod:`kubesched.kube._http1`),
        whenever the configuration allows it: client certificates, a bearer token or token
        file, or basic auth, and no proxy from the environment. Otherwise (an exec credential
        plugin, a proxy, or ``lean=False``) they go through ``httpx2``: with ``http2`` (and the
        ``h2`` package installed, and the server offering it over TLS ALPN) on one multiplexed
        HTTP/2 connection, where a read lost to a GOAWAY is repeated once over HTTP/1.1;
        without it over HTTP/1.1, up to ``max_connections`` connections. Each watch has an
        HTTP/1.1 connection of its own (the pool's, or ``httpx2``'s), closed when it ends.
        ``timeout`` bounds an ordinary request (each phase of it with ``httpx2``); watches set
        their own read timeout.
        """
        from lightkube.config.client_adapter import ConnectionParams  # noqa: PLC0415

        config = load_kubeconfig(kubeconfig, context=context)
        user_agent = user_agent or DEFAULT_USER_AGENT
        params = ConnectionParams(
            timeout=httpx2.Timeout(timeout),
            http2=http2 and _http2_available(),
        )
        try:
            kwargs = params.httpx_params(config)
        except (OSError, ValueError, AssertionError) as exc:
            raise KubeConfigError(f"cannot use cluster configuration: {exc}") from exc
        limits = httpx2.Limits(
            max_connections=max_connections,
            max_keepalive_connections=max_keepalive_connections,
            keepalive_expiry=60.0,
        )
        http = httpx2.AsyncClient(limits=limits, **kwargs)
        stream_http = None
        if kwargs.get("http2"):
            # Watches get their own HTTP/1.1 connections: ending one early then closes its
            # connection, where on the shared HTTP/2 connection the server would keep sending
            # into a stream nobody reads (the transport does not reset abandoned streams).
            stream_http = httpx2.AsyncClient(limits=limits, **{**kwargs, "http2": False})
        pool = None
        if lean:
            try:
                pool = lean_pool(
                    config,
                    user_agent=user_agent,
                    max_connections=max_in_flight,
                    timeout=timeout,
                )
            except (OSError, ValueError, TransportError) as exc:
                raise KubeConfigError(f"cannot use cluster configuration: {exc}") from exc
        return cls(
            http,
            stream_http=stream_http,
            pool=pool,
            qps=qps,
            burst=burst,
            user_agent=user_agent,
            namespace=config.namespace,
            max_in_flight=max_in_flight,
        )

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
        return str(self._http.base_url)

    @property
    def http(self) -> httpx2.AsyncClient:
        """The underlying HTTP client (auth and TLS already configured)."""
        return self._http

    @property
    def pool(self) -> ConnectionPool | None:
        """The HTTP/1.1 connection pool of ordinary requests, if they do not use ``http``."""
        return self._pool

    async def aclose(self) -> None:
        """Close all connections."""
        if self._pool is not None:
            await self._pool.aclose()
        await self._http.aclose()
        if self._stream_http is not self._http:
            await self._stream_http.aclose()

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
        timeout: float | httpx2.Timeout | None = None,  # noqa: ASYNC109  (the HTTP timeout)
    ) -> bytes:
        """Send one request and return the response body; raise an ``APIError`` on failure."""
        await self._throttle()
        content = encode_body(body)
        if self._pool is not None:
            return await self._pooled(method, path, params, content, content_type, timeout)
        headers = self._headers
        if content is not None:
            headers = {**headers, "Content-Type": content_type}
        request = self._http.build_request(
            method,
            path,
            params=_clean_params(params),
            content=content,
            headers=headers,
            timeout=httpx2.USE_CLIENT_DEFAULT if timeout is None else timeout,
        )
        self.requests_total += 1
        try:
            try:
                response = await self._send(self._http, request, stream=False)
            except httpx2.RemoteProtocolError:
                # The HTTP/2 transport cannot finish a stream once the server has sent GOAWAY
                # (kube-apiserver does so before answering an unauthenticated request, with
                # --goaway-chance, and when shutting down). A read is safe to repeat: once
                # more, on an HTTP/1.1 connection. Anything else may have been applied.
                if method not in _IDEMPOTENT or self._stream_http is self._http:
                    raise
                request = self._stream_http.build_request(
                    method,
                    path,
                    params=_clean_params(params),
                    headers=headers,
                    timeout=httpx2.USE_CLIENT_DEFAULT if timeout is None else timeout,
                )
                response = await self._send(self._stream_http, request, stream=False)
        except httpx2.TransportError as exc:
            raise APIConnectionError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 400:
            raise error_from_response(response.status_code, response.content, response.headers)
        return response.content

    async def _pooled(
        self,
        method: str,
        path: str,
        params: Params | None,
        content: bytes | None,
        content_type: str,
        timeout: float | httpx2.Timeout | None,  # noqa: ASYNC109  (the HTTP timeout)
    ) -> bytes:
        assert self._pool is not None
        if isinstance(timeout, httpx2.Timeout):
            phases = (timeout.connect, timeout.read, timeout.write, timeout.pool)
            timeout = max((t for t in phases if t is not None), default=None)
        sending = self._pool.request(
            method,
            path,
            query=query_string(params),
            body=content,
            content_type=content_type,
            timeout=timeout,
        )
        self.requests_total += 1
        try:
            response = await _shielded(sending, self._background)
        except TransportError as exc:
            raise APIConnectionError(f"{method} {path}: {exc}") from exc
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
        if self._pool is not None:
            async with self._pooled_stream(path, params, read_timeout) as lines:
                yield lines
            return
        current = self._stream_http.timeout
        timeout = httpx2.Timeout(
            connect=current.connect, read=read_timeout, write=current.write, pool=current.pool
        )
        request = self._stream_http.build_request(
            "GET", path, params=_clean_params(params), headers=self._headers, timeout=timeout
        )
        self.requests_total += 1
        try:
            response = await self._send(self._stream_http, request, stream=True)
        except httpx2.TransportError as exc:
            raise APIConnectionError(f"GET {path}: {type(exc).__name__}: {exc}") from exc
        try:
            if response.status_code >= 400:
                try:
                    body = await response.aread()
                except httpx2.TransportError:
                    body = b""
                raise error_from_response(response.status_code, body, response.headers)
            yield iter_lines(response.aiter_bytes(), path)
        finally:
            await response.aclose()

    @contextlib.asynccontextmanager
    async def _pooled_stream(
        self, path: str, params: Params | None, read_timeout: float | None
    ) -> AsyncIterator[AsyncIterator[bytes]]:
        assert self._pool is not None
        self.requests_total += 1
        try:
            body = await self._pool.open_stream(
                path, query=query_string(params), read_timeout=read_timeout
            )
        except TransportError as exc:
            raise APIConnectionError(f"GET {path}: {exc}") from exc
        try:
            if body.status >= 400:
                try:
                    content = await body.read()
                except TransportError:
                    content = b""
                raise error_from_response(body.status, content, body.headers)
            yield iter_lines(body.chunks(), path)
        finally:
            body.close()

    async def _send(
        self, http: httpx2.AsyncClient, request: httpx2.Request, *, stream: bool
    ) -> httpx2.Response:
        sending = http.send(request, stream=stream)
        return await _shielded(sending if stream else self._in_slot(sending), self._background)

    async def _in_slot(self, sending: Awaitable[httpx2.Response]) -> httpx2.Response:
        async with self._slots:
            return await sending

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

    A request cancelled while its headers or body are being written leaves a shared HTTP/2
    connection broken for every other request on it (and an HTTP/1.1 one unusable). So the
    caller is released at once and the request completes in the background; its answer, when
    it comes, is closed (a streamed ``httpx2`` response) and dropped.
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
        if task.cancelled() or task.exception() is not None:
            return
        response = task.result()
        if isinstance(response, httpx2.Response) and not response.is_closed:
            closing = asyncio.ensure_future(response.aclose())
            background.add(closing)
            closing.add_done_callback(background.discard)

    return discard


def query_string(params: Params | None) -> str:
    """``params`` as a URL query (``None`` values left out, booleans as ``true``/``false``,
    sequences repeated), as ``httpx2`` encodes them."""
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


def lean_pool(
    config: Any, *, user_agent: str, max_connections: int, timeout: float | None
) -> ConnectionPool | None:
    """A :class:`ConnectionPool` for lightkube's ``SingleConfig`` ``config``, or ``None`` when
    the configuration needs what only the general-purpose client does (an exec credential
    plugin, an auth provider, a proxy from the environment, a scheme other than HTTP(S)).

    Credentials are taken in lightkube's order (token file, token, exec, basic auth); TLS is
    the context lightkube would build (CA, ``insecure-skip-tls-verify``, client certificate),
    made afresh and offering only HTTP/1.1 over ALPN.
    """
    from lightkube.config.client_adapter import verify_cluster  # noqa: PLC0415

    url = urllib.parse.urlsplit(config.cluster.server)
    user = config.user
    if url.scheme not in ("http", "https") or not url.hostname or user is None:
        return None
    if user.auth_provider or (user.exec and not (user.token_file or user.token)):
        return None
    if _proxied(url):
        return None
    if user.token_file:
        credentials = Credentials(token_file=user.token_file)
    elif user.token:
        credentials = Credentials(f"Bearer {user.token}")
    elif user.username and user.password:
        pair = f"{user.username}:{user.password}".encode()
        credentials = Credentials(f"Basic {base64.b64encode(pair).decode()}")
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
    )


def _proxied(url: urllib.parse.SplitResult) -> bool:
    """Whether the environment sends requests to ``url`` through a proxy (as ``httpx2``
    with ``trust_env`` would)."""
    proxies = urllib.request.getproxies()
    if not (proxies.get(url.scheme) or proxies.get("all")):
        return False
    return not urllib.request.proxy_bypass(url.hostname or "")


def _clean_params(params: Params | None) -> dict[str, Any] | None:
    if not params:
        return None
    return {k: v for k, v in params.items() if v is not None}


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
    except (httpx2.TransportError, TransportError) as exc:
        raise APIConnectionError(f"reading {what}: {type(exc).__name__}: {exc}") from exc
    if pending:
        last = b"".join(pending).strip()
        if last:
            yield last
