"""The extender's HTTP(S) listener (aiohttp).

Routes, for a path prefix ``P`` (default empty) and each profile ``N`` of the configuration:

* ``POST P/<verb>``: the default (first) profile; ``POST P/N/<verb>``: profile ``N``. Verbs are
  named as in kube-scheduler's ``extenders[]`` (``filterVerb: filter`` ...), and may be renamed.
* ``GET /healthz`` (and ``/livez``): the process answers; ``GET /readyz``: informers synced;
  ``GET /metrics``: Prometheus; ``GET /version``.

TLS is on when a certificate and key are given; with a client CA, clients must present a
certificate it signed (mutual TLS). A client that hangs up cancels its request, so work nobody
waits for is not started.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

import kubesched
from kubesched.extender._engine import TRACE, VERBS, Extender, Reply
from kubesched.extender._errors import ExtenderError

__all__ = ["ExtenderServer", "ListenError", "ServerOptions", "server_ssl_context"]

log = logging.getLogger(__name__)

#: Large enough for a NodeList of tens of thousands of nodes.
MAX_BODY = 1 << 30
#: Read buffer per connection: a multi-megabyte NodeList arrives in few reads.
READ_BUFSIZE = 1 << 22


class ListenError(ExtenderError, OSError):
    """The listener cannot bind its address (port taken, address not local, no permission)."""


def server_ssl_context(cert: str, key: str, client_ca: str | None = None) -> ssl.SSLContext:
    """A TLS server context; with ``client_ca``, a client certificate signed by it is required."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    if client_ca:
        context.load_verify_locations(cafile=client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    # kube-scheduler's transport offers h2; this server speaks HTTP/1.1.
    context.set_alpn_protocols(["http/1.1"])
    return context


@dataclass(frozen=True, slots=True)
class ServerOptions:
    host: str = "127.0.0.1"
    port: int = 8888
    path_prefix: str = ""
    #: Verb -> the last path segment(s) it is served at.
    verbs: Mapping[str, str] = field(default_factory=lambda: {v: v for v in VERBS})
    ssl_context: ssl.SSLContext | None = None


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ExtenderServer:
    """Serves an :class:`Extender` over HTTP(S)."""

    def __init__(
        self,
        extender: Extender,
        options: ServerOptions,
        *,
        ready: Callable[[], str | None] = lambda: None,
    ) -> None:
        self.extender = extender
        self.options = options
        self.ready = ready
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self.app = self._app()

    def routes(self) -> list[tuple[str, str, str]]:
        """Every ``(path, verb, profile)`` served."""
        prefix = "/" + self.options.path_prefix.strip("/") if self.options.path_prefix else ""
        out = []
        for verb in VERBS:
            segment = self.options.verbs.get(verb, verb).strip("/")
            if not segment:
                continue
            out.append((f"{prefix}/{segment}", verb, self.extender.default_profile))
            for profile in self.extender.profiles:
                out.append((f"{prefix}/{profile}/{segment}", verb, profile))
        return out

    def _app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        seen: set[str] = set()
        for path, verb, profile in self.routes():
            if path in seen:
                continue
            seen.add(path)
            app.router.add_post(path, self._verb_handler(verb, profile))
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/version", self._version)
        return app

    def _verb_handler(self, verb: str, profile: str) -> Handler:
        extender = self.extender
        metrics = extender.metrics

        async def handle(request: web.Request) -> web.StreamResponse:
            start = time.perf_counter()
            try:
                body = await request.read()
            except web.HTTPException as e:  # body too large
                reply = Reply.text(e.status, e.text or e.reason)
            else:
                if log.isEnabledFor(TRACE):
                    log.log(TRACE, "%s %s <- %s", request.method, request.path, body[:4096])
                reply = await extender.handle(verb, profile, body)
            seconds = time.perf_counter() - start
            metrics.request(verb, profile, reply.status, seconds)
            if reply.status >= 400:
                log.info("%s %s: %d %s", request.method, request.path, reply.status, reply.body)
            elif log.isEnabledFor(TRACE):
                log.log(TRACE, "%s %s -> %d in %.2fms: %s", request.method, request.path,
                        reply.status, seconds * 1e3, reply.body[:4096])  # fmt: skip
            return web.Response(
                status=reply.status, body=reply.body, headers={"Content-Type": reply.content_type}
            )

        return handle

    async def _healthz(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.StreamResponse:
        why = self.ready()
        if why is None:
            return web.Response(text="ok")
        return web.Response(status=503, text=why)

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        body = generate_latest(self.extender.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _version(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"version": kubesched.__version__})

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> None:
        runner = web.AppRunner(
            self.app,
            access_log=None,
            handler_cancellation=True,
            read_bufsize=READ_BUFSIZE,
            shutdown_timeout=5.0,
        )
        await runner.setup()
        site = web.TCPSite(
            runner,
            self.options.host,
            self.options.port,
            ssl_context=self.options.ssl_context,
        )
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            where = f"{self.options.host}:{self.options.port}"
            raise ListenError(e.errno, f"cannot listen on {where}: {e.strerror or e}") from e
        self._runner, self._site = runner, site
        scheme = "https" if self.options.ssl_context is not None else "http"
        log.info(
            "extender listening on %s://%s:%d (profiles: %s)",
            scheme,
            self.options.host,
            self.port,
            ", ".join(self.extender.profiles),
        )

    @property
    def port(self) -> int:
        """The bound port (useful with port 0)."""
        assert self._runner is not None
        for address in self._runner.addresses:
            if isinstance(address, tuple):
                return int(address[1])
        raise RuntimeError("the server is not listening")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = self._site = None
