"""``kubesched extender``: the verbs served over HTTP, with informers when a cluster is at hand."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from functools import partial
from typing import Any

from kubesched.api import Node, Pod, collect_before_loading, freeze_loaded
from kubesched.config import KubeSchedulerConfiguration
from kubesched.extender._cache import (
    WORKLOAD_PATHS,
    Namespace,
    NamespaceHandler,
    NodeHandler,
    ObjectHandler,
    PodHandler,
    WorkloadHandler,
)
from kubesched.extender._engine import Extender
from kubesched.extender._metrics import ExtenderMetrics
from kubesched.extender._server import ExtenderServer, ServerOptions
from kubesched.framework import Registry
from kubesched.kube import APIClient, EventRecorder, PluginAPIClient, Reflector

__all__ = ["POD_FIELD_SELECTOR", "ExtenderService", "serve"]

log = logging.getLogger(__name__)

#: Pods that hold resources on a node: assigned and not finished.
POD_FIELD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


class _EventsFromWorker:
    """Plugins' events about pods, recorded from the worker thread the plugins run on: handed to
    the recorder on the event loop, where it lives."""

    def __init__(self, recorder: EventRecorder, loop: asyncio.AbstractEventLoop) -> None:
        self._recorder = recorder
        self._loop = loop

    def event(self, regarding: Pod, *, type: str, reason: str, action: str, note: str) -> None:
        record = partial(
            self._recorder.event, regarding, type=type, reason=reason, action=action, note=note
        )
        self._loop.call_soon_threadsafe(record)


class ExtenderService:
    """The extender, its informers (with a ``client``) and its listener.

    The informers: nodes, and pods that are assigned and not finished; Namespaces when a profile
    runs InterPodAffinity (``namespaceSelector``); Services, ReplicationControllers, ReplicaSets
    and StatefulSets when one runs PodTopologySpread (default constraints), as kube-scheduler
    watches them. Without a client the extender serves ``Nodes`` bodies only: it knows no node
    by name, no pod, and cannot bind. The kinds the plugins declare
    (:attr:`~kubesched.framework.Plugin.watched_kinds`) get an informer each; one the server
    does not serve or will not list is empty and synced, and listed again every 30 s at most.
    Plugins' events about pods are recorded (reporting controller ``kubesched-extender``).
    """

    def __init__(
        self,
        config: KubeSchedulerConfiguration,
        registry: Registry,
        options: ServerOptions,
        *,
        client: APIClient | None = None,
    ) -> None:
        self.client = client
        self.metrics = ExtenderMetrics()
        self.extender = Extender(
            config,
            registry,
            client=PluginAPIClient(client) if client is not None else None,
            metrics=self.metrics,
            informers=client is not None,
        )
        self.nodes: Reflector[Node] | None = None
        self.pods: Reflector[Pod] | None = None
        self.reflectors: list[Reflector[Any]] = []
        if client is not None:
            cache = self.extender.cache
            self.nodes = Reflector(client, "/api/v1/nodes", Node, NodeHandler(cache))
            self.pods = Reflector(
                client,
                "/api/v1/pods",
                Pod,
                PodHandler(cache),
                field_selector=POD_FIELD_SELECTOR,
            )
            self.reflectors = [self.nodes, self.pods]
            if self.extender.uses("InterPodAffinity"):
                self.reflectors.append(
                    Reflector(client, "/api/v1/namespaces", Namespace, NamespaceHandler(cache))
                )
            if self.extender.uses("PodTopologySpread"):
                for kind, (path, decoded) in WORKLOAD_PATHS.items():
                    workloads: Reflector[Any] = Reflector(
                        client, path, decoded, WorkloadHandler(cache, kind)
                    )
                    self.reflectors.append(workloads)
            # Kinds plugins read (NodeFeatures ...); one the server does not serve is empty.
            self.reflectors.extend(
                Reflector(
                    client,
                    k.path,
                    k.type,
                    ObjectHandler(cache),
                    label_selector=k.label_selector,
                    tolerate_missing=True,
                )
                for k in self.extender.watched_kinds()
            )
        #: Plugins' events (ImageCompatibility's warnings), with a client only.
        self.recorder = (
            EventRecorder(client, reporting_controller="kubesched-extender")
            if client is not None
            else None
        )
        self.extender.synced = self._synced
        self.server = ExtenderServer(self.extender, options, ready=self._ready)
        self._stop = asyncio.Event()

    def _synced(self) -> bool:
        return all(r.has_synced for r in self.reflectors)

    def _ready(self) -> str | None:
        waiting = [r.name for r in self.reflectors if not r.has_synced]
        return f"waiting for informers to sync: {', '.join(waiting)}" if waiting else None

    def stop(self) -> None:
        self._stop.set()

    async def start(self) -> None:
        """Listen, and start the informers and the event recorder."""
        if self.recorder is not None:
            self.recorder.start()
            events = _EventsFromWorker(self.recorder, asyncio.get_running_loop())
            for fwk in (
                *self.extender.cluster_profiles.values(),
                *self.extender.body_profiles.values(),
            ):
                fwk.set_event_recorder(events)
        await self.server.start()
        for r in self.reflectors:
            r.start()

    async def wait_synced(self) -> None:
        for r in self.reflectors:
            await r.wait_synced()

    async def aclose(self) -> None:
        await self.server.stop()
        for r in self.reflectors:
            await r.stop()
        if self.recorder is not None:
            await self.recorder.aclose()
        await self.extender.aclose()

    async def run(self) -> int:
        """Serve until :meth:`stop` (SIGINT or SIGTERM in :func:`serve`)."""
        collect_before_loading()
        await self.start()
        try:
            if self.nodes is not None and self.pods is not None:
                synced = asyncio.create_task(self.wait_synced())
                stop = asyncio.create_task(self._stop.wait())
                await asyncio.wait({synced, stop}, return_when=asyncio.FIRST_COMPLETED)
                if synced.done():
                    log.info(
                        "informers synced: %d nodes, %d assigned pods",
                        len(self.nodes.store),
                        len(self.pods.store),
                    )
                    # What the first lists loaded lives as long as the process.
                    await self.extender.settle()
                    freeze_loaded()
                for task in (synced, stop):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await self._stop.wait()
        finally:
            await self.aclose()
        return 0


async def serve(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    options: ServerOptions,
    *,
    kubeconfig: str | None = None,
    standalone: bool = False,
) -> int:
    """Run ``kubesched extender`` until SIGINT/SIGTERM; the exit code.

    Unless ``standalone``, connects with ``kubeconfig`` (else the configuration's
    ``clientConnection.kubeconfig``, ``$KUBECONFIG``, the in-cluster service account,
    ``~/.kube/config``) and raises :class:`~kubesched.kube.KubeConfigError` if none works.
    """
    client: APIClient | None = None
    if not standalone:
        cc = config.client_connection
        client = APIClient.from_kubeconfig(
            kubeconfig or cc.kubeconfig or None, qps=float(cc.qps), burst=int(cc.burst)
        )
    try:
        service = ExtenderService(config, registry, options, client=client)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, service.stop)
        return await service.run()
    finally:
        if client is not None:
            await client.aclose()
