"""``kubesched run``: the scheduler wired to a real API server.

Informers (reflectors on nodes and pods) feed the cache and queue, and the storage objects the
volume plugins read (PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes,
VolumeAttachments) feed the snapshot's object store and the queue, as do the kinds the enabled
plugins declare
(:attr:`~kubesched.framework.Plugin.watched_kinds`, NodeFeatures for ImageCompatibility). Such a
kind that the API server does not serve (its CRD is not installed) or will not list counts as
empty and synced, so it holds neither readiness nor scheduling; it is listed again every 30 s
at most until it is served. The loop schedules; the default binder, VolumeBinding's
PreBind and the event recorder write back; a Lease decides who schedules when several
replicas run; ``/healthz``, ``/readyz`` and ``/metrics`` tell the outside how it goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Awaitable, Mapping
from typing import Any, Generic, TypeVar

from kubesched.api import (
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    ResourceClaim,
    StorageClass,
    VolumeAttachment,
    collect_before_loading,
    freeze_loaded,
)
from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Framework,
    Registry,
    Snapshot,
    StoredObject,
    build_frameworks,
    watched_kinds,
)
from kubesched.kube import (
    ACTION_BINDING,
    ACTION_PREEMPTING,
    ACTION_SCHEDULING,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    APIClient,
    Conflict,
    EventRecorder,
    LeaderElector,
    NotFound,
    PluginAPIClient,
    Reflector,
    ResourceEventHandler,
    api_path,
    patch_custom_object_status,
    truncate_message,
    update_pod_condition,
)
from kubesched.scheduler._assembly import new_scheduler
from kubesched.scheduler._debug import DEBUG_QUEUE_PATH, queue_json
from kubesched.scheduler._health import HealthServer
from kubesched.scheduler._metrics import SchedulerMetrics
from kubesched.scheduler._scheduler import Scheduler
from kubesched.scheduler._scheduling_queue import (
    DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
)
from kubesched.scheduler._workloads import context_reflectors

log = logging.getLogger(__name__)

#: Pods that still need a node or hold resources on one (kube-scheduler's informer filter).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"

S = TypeVar("S", bound=StoredObject)

#: Storage kinds the volume plugins read: list path and kube-scheduler's event resource name.
STORAGE_KINDS: tuple[tuple[type[Any], str, str], ...] = (
    (PersistentVolume, "/api/v1/persistentvolumes", "PersistentVolume"),
    (PersistentVolumeClaim, "/api/v1/persistentvolumeclaims", "PersistentVolumeClaim"),
    (StorageClass, "/apis/storage.k8s.io/v1/storageclasses", "storage.k8s.io/StorageClass"),
    (CSINode, "/apis/storage.k8s.io/v1/csinodes", "storage.k8s.io/CSINode"),
    (
        VolumeAttachment,
        "/apis/storage.k8s.io/v1/volumeattachments",
        "storage.k8s.io/VolumeAttachment",
    ),
)


class _Binder(PluginAPIClient):
    """The framework's :class:`~kubesched.framework.APIClient`, on the real API server."""

    # StorageAPIClient: VolumeBinding's writes, as JSON merge patches.

    async def patch_persistent_volume(
        self, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolume:
        path = api_path("persistentvolumes", name=name, subresource="status" if status else None)
        pv: PersistentVolume = await self._client.patch(path, patch, type=PersistentVolume)
        return pv

    async def patch_persistent_volume_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolumeClaim:
        path = api_path(
            "persistentvolumeclaims",
            namespace=namespace,
            name=name,
            subresource="status" if status else None,
        )
        pvc: PersistentVolumeClaim = await self._client.patch(
            path, patch, type=PersistentVolumeClaim
        )
        return pvc

    # Coscheduling keeps PodGroup status where kubesched binds (not behind kube-scheduler as an
    # extender, which has no Permit).

    async def patch_custom_object_status(
        self,
        group_version: str,
        plural: str,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str,
    ) -> bool:
        return await patch_custom_object_status(
            self._client, group_version, plural, name, status, namespace=namespace
        )

    # ResourceClaimAPIClient: DynamicResources' writes.

    async def patch_resource_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> ResourceClaim:
        path = _claim_path(namespace, name, status=status)
        claim: ResourceClaim = await self._client.patch(path, patch, type=ResourceClaim)
        return claim

    async def get_resource_claim(self, namespace: str, name: str) -> ResourceClaim:
        claim: ResourceClaim = await self._client.get(
            _claim_path(namespace, name), type=ResourceClaim
        )
        return claim

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> ResourceClaim:
        path = _claim_path(namespace, name, status=True)
        patch = {
            "metadata": {"uid": claim_uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
        }
        claim: ResourceClaim = await self._client.patch(
            path, patch, type=ResourceClaim, patch_type="strategic"
        )
        return claim

    def is_conflict(self, error: BaseException) -> bool:
        return isinstance(error, Conflict)


def _claim_path(namespace: str, name: str, *, status: bool = False) -> str:
    """A ResourceClaim's path, or (``status``) its status subresource's."""
    return api_path(
        "resourceclaims",
        namespace=namespace,
        name=name,
        subresource="status" if status else None,
        group_version="resource.k8s.io/v1",
    )


class _Writer:
    """Events and pod conditions, written in the background so the loop never waits on them."""

    def __init__(self, client: APIClient, profiles: Mapping[str, Framework]) -> None:
        self._client = client
        # Events have a rate limiter of their own, as kube-scheduler's event clientset does.
        events = client.with_own_limiter()
        self.recorders = {
            name: EventRecorder(events, reporting_controller=name) for name in profiles
        }
        self._tasks: set[asyncio.Task[None]] = set()
        # Pod UID -> the newest condition not written yet. One writer per pod at a time: the
        # client writes over many connections, and a slow write that landed after a newer one
        # would put an old message back (kube-scheduler writes a pod's status in order too).
        self._latest: dict[str, tuple[Pod, PodCondition, str | None]] = {}
        self._writing: set[str] = set()

    def start(self) -> None:
        for r in self.recorders.values():
            r.start()

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        for r in self.recorders.values():
            await r.aclose()

    def scheduled(self, pod: Pod, node: str, profile: str) -> Awaitable[None] | None:
        recorder = self.recorders[profile]
        if recorder.full and not recorder.failing:
            return self._scheduled_when_room(recorder, pod, node)
        self._record_scheduled(recorder, pod, node)
        return None

    async def _scheduled_when_room(self, recorder: EventRecorder, pod: Pod, node: str) -> None:
        await recorder.room()
        self._record_scheduled(recorder, pod, node)

    @staticmethod
    def _record_scheduled(recorder: EventRecorder, pod: Pod, node: str) -> None:
        recorder.event(
            pod,
            type=EVENT_TYPE_NORMAL,
            reason="Scheduled",
            action=ACTION_BINDING,
            note=f"Successfully assigned {pod.metadata.namespace}/{pod.metadata.name} to {node}",
        )

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.recorders[profile].event(
            pod,
            type=EVENT_TYPE_WARNING,
            reason="FailedScheduling",
            action=ACTION_SCHEDULING,
            note=truncate_message(message),
        )
        condition = PodCondition(
            type="PodScheduled", status="False", reason=reason, message=message
        )
        uid = pod.metadata.uid
        if nominated_node is None and uid in self._latest:
            nominated_node = self._latest[uid][2]  # None leaves it: keep the unwritten one
        self._latest[uid] = (pod, condition, nominated_node)
        if uid in self._writing:
            return
        self._writing.add(uid)
        task = asyncio.get_running_loop().create_task(self._write(uid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write(self, uid: str) -> None:
        """Write the pod's newest condition until none is left (updates in between coalesce)."""
        try:
            while (update := self._latest.pop(uid, None)) is not None:
                pod, condition, nominated = update
                try:
                    await update_pod_condition(
                        self._client, pod, condition, nominated_node_name=nominated
                    )
                except Exception as e:  # the pod may be gone; the next attempt writes again
                    log.warning("cannot update status of pod %s: %s", pod.key, e)
        finally:
            self._writing.discard(uid)

    # -- the framework's PodEvictor (preemption) -------------------------------------------------

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        """``DisruptionTarget=True`` (``PreemptionByScheduler``) on the victim, then a graceful
        delete, as kube-scheduler's ``PreemptPod``; ``False`` for a victim already gone."""
        condition = PodCondition(
            type="DisruptionTarget",
            status="True",
            reason="PreemptionByScheduler",
            message=(
                f"{preemptor.spec.scheduler_name}: preempting to accommodate a higher priority pod"
            ),
        )
        meta = victim.metadata
        try:
            await update_pod_condition(self._client, victim, condition)
            await self._client.delete(api_path("pods", namespace=meta.namespace, name=meta.name))
        except NotFound:
            log.info("victim pod %s of %s is already deleted", victim.key, preemptor.key)
            return False
        log.info("preemptor pod %s preempted victim pod %s", preemptor.key, victim.key)
        return True

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        self.recorders[profile].event(
            victim,
            type=EVENT_TYPE_NORMAL,
            reason="Preempted",
            action=ACTION_PREEMPTING,
            note=f"Preempted by pod {preemptor.metadata.uid} on node {node}",
            related=preemptor,
        )

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        await update_pod_condition(self._client, pod, None, nominated_node_name="")


class _NodeHandler(ResourceEventHandler[Node]):
    def __init__(self, scheduler: Scheduler) -> None:
        self.s = scheduler

    def on_add(self, obj: Node) -> None:
        self.s.on_node_add(obj)

    def on_update(self, old: Node, new: Node) -> None:
        self.s.on_node_update(old, new)

    def on_delete(self, obj: Node) -> None:
        self.s.on_node_delete(obj)

    def on_undecodable(self, key: str) -> None:
        self.s.on_undecodable("Node", key)


class _PodHandler(ResourceEventHandler[Pod]):
    def __init__(self, scheduler: Scheduler) -> None:
        self.s = scheduler

    def on_add(self, obj: Pod) -> None:
        self.s.on_pod_add(obj)

    def on_update(self, old: Pod, new: Pod) -> None:
        self.s.on_pod_update(old, new)

    def on_delete(self, obj: Pod) -> None:
        self.s.on_pod_delete(obj)

    def on_undecodable(self, key: str) -> None:
        self.s.on_undecodable("Pod", key)


class _StorageHandler(ResourceEventHandler[S], Generic[S]):
    """A storage kind, or a kind plugins watch, into the snapshot's object store, and its
    events to the queue."""

    def __init__(self, snapshot: Snapshot, scheduler: Scheduler, resource: str) -> None:
        self.snapshot = snapshot
        self.scheduler = scheduler
        self.resource = resource

    def on_add(self, obj: S) -> None:
        self.snapshot.objects.set(obj)
        self.scheduler.queue.move_all_to_active_or_backoff(
            ClusterEvent(self.resource, ActionType.ADD), None, obj
        )

    def on_update(self, old: S, new: S) -> None:
        self.snapshot.objects.set(new)
        self.scheduler.queue.move_all_to_active_or_backoff(
            ClusterEvent(self.resource, ActionType.UPDATE), old, new
        )

    def on_delete(self, obj: S) -> None:
        meta = obj.metadata
        self.snapshot.objects.delete(type(obj), meta.name, meta.namespace)
        self.scheduler.queue.move_all_to_active_or_backoff(
            ClusterEvent(self.resource, ActionType.DELETE), obj, None
        )

    def on_undecodable(self, key: str) -> None:
        self.scheduler.on_undecodable(self.resource, key)


class SchedulerService:
    """Everything ``kubesched run`` starts, in the order it starts and stops it."""

    def __init__(
        self,
        config: KubeSchedulerConfiguration,
        client: APIClient,
        registry: Registry,
        *,
        health_host: str = "127.0.0.1",
        health_port: int = 10259,
        identity: str | None = None,
        debug_queue: bool = False,
        pod_max_in_unschedulable_pods_duration: float = (
            DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION
        ),
    ) -> None:
        self.config = config
        self.client = client
        self.metrics = SchedulerMetrics()
        snapshot = Snapshot()
        self.frameworks = build_frameworks(
            config, registry, snapshot, client=_Binder(client), metrics=self.metrics
        )
        self.writer = _Writer(client, self.frameworks)
        recorders = self.writer.recorders
        self.metrics.count_dropped_events(lambda: {p: r.dropped for p, r in recorders.items()})
        # PodDisruptionBudgets, which preemption tries not to violate.
        self.pdbs: Reflector[PodDisruptionBudget] = Reflector(
            client,
            "/apis/policy/v1/poddisruptionbudgets",
            PodDisruptionBudget,
            ResourceEventHandler(),
        )
        for name, fwk in self.frameworks.items():
            fwk.set_evictor(self.writer)
            fwk.set_event_recorder(self.writer.recorders[name])
            fwk.register_lister(PodDisruptionBudget, self.pdbs.list)
        self.scheduler = new_scheduler(
            config,
            self.frameworks,
            snapshot,
            self.writer,
            metrics=self.metrics,
            pod_lookup=self._lookup,
            pod_max_in_unschedulable_pods_duration=pod_max_in_unschedulable_pods_duration,
        )
        self.queue = self.scheduler.queue
        self.nodes = Reflector(client, "/api/v1/nodes", Node, _NodeHandler(self.scheduler))
        # Pods are handed to the scheduler once the objects their PreEnqueue looks up are: a
        # pod delivered before its ResourceClaim waits for the claim's Add, and each of thousands
        # of such events would ask every waiting pod's hints. Their list is fetched meanwhile.
        self._lookups_synced = asyncio.Event()
        self.pods = Reflector(
            client,
            "/api/v1/pods",
            Pod,
            _PodHandler(self.scheduler),
            field_selector=POD_FIELD_SELECTOR,
            deliver_after=self._lookups_synced,
        )
        # Namespace labels (namespaceSelector) and workload selectors (default spreading).
        self.context = context_reflectors(client, snapshot)
        self.storage: list[Reflector[Any]] = [
            Reflector(client, path, kind, _StorageHandler(snapshot, self.scheduler, resource))
            for kind, path, resource in STORAGE_KINDS
        ]
        self.storage.extend(
            Reflector(
                client,
                k.path,
                k.type,
                _StorageHandler(snapshot, self.scheduler, k.resource),
                label_selector=k.label_selector,
                tolerate_missing=True,
            )
            for k in watched_kinds(p for f in self.frameworks.values() for p in f.plugins())
        )
        reflectors: list[Reflector[Any]] = [
            self.pdbs,
            self.nodes,
            self.pods,
            *self.context,
            *self.storage,
        ]
        self.metrics.count_handler_errors(lambda: {r.name: r.handler_errors for r in reflectors})
        le = config.leader_election
        self.elector = (
            LeaderElector(
                # A limiter of its own, as kube-scheduler's leader-election clientset: renewals
                # must not queue behind a burst of bindings for tokens and miss the deadline.
                client.with_own_limiter(),
                namespace=le.resource_namespace,
                name=le.resource_name,
                identity=identity,
                lease_duration=float(le.lease_duration),
                renew_deadline=float(le.renew_deadline),
                retry_period=float(le.retry_period),
                on_started_leading=self._lead,
                release_on_cancel=True,
            )
            if le.leader_elect
            else None
        )
        self.health = HealthServer(
            self.metrics.registry,
            host=health_host,
            port=health_port,
            ready_checks={"sched-handler-sync": self._synced},
            live_checks={"leaderElection": self._leader_ok},
            debug={DEBUG_QUEUE_PATH: self._queue_json} if debug_queue else None,
        )
        self._stop = asyncio.Event()
        self.lost_leadership = False

    def _queue_json(self) -> bytes:
        return queue_json(self.queue, time.monotonic())  # the queue's own clock

    def _lookup(self, namespace: str, name: str) -> Pod | None:
        return self.pods.store.get_by_name(namespace, name)

    def _synced(self) -> str | None:
        if (
            self.nodes.has_synced
            and self.pods.has_synced
            and self.pdbs.has_synced
            and all(r.has_synced for r in self.storage)
        ):
            return None
        return "waiting for informers to sync"

    def _leader_ok(self) -> str | None:
        if self.elector is None or self.elector.check():
            return None
        return "the leader lease has expired"

    async def _lead(self) -> None:
        log.info("became the leader; scheduling")
        try:
            await self.scheduler.run()
        finally:
            await self.scheduler.drain()

    def stop(self) -> None:
        self._stop.set()

    async def run(self) -> int:
        """Run until stopped (0) or until leadership is lost (1, as kube-scheduler exits)."""
        await self.health.start()
        self.writer.start()
        self.nodes.start()
        self.pdbs.start()
        for r in (*self.storage, *self.context):
            r.start()
        self.pods.start()
        queue_task = asyncio.create_task(self.queue.run())
        code = 0
        try:
            for r in (*self.storage, *self.context):
                await r.wait_synced()
            # While the pods' list is being served (the longest here): the plugins load what
            # their first cycle would, and the set-up's garbage goes before the pods come in.
            for fwk in self.frameworks.values():
                fwk.prepare()
            collect_before_loading()
            self._lookups_synced.set()
            await self.nodes.wait_synced()
            await self.pods.wait_synced()
            await self.pdbs.wait_synced()
            log.info(
                "caches synced: %d nodes, %d pods", len(self.nodes.store), len(self.pods.store)
            )
            # What the first lists loaded lives as long as the process; thawed on the way out.
            freeze_loaded()
            work = asyncio.create_task(
                self.elector.run() if self.elector is not None else self._lead()
            )
            stop = asyncio.create_task(self._stop.wait())
            done, _ = await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
            if work in done and self.elector is not None:
                self.lost_leadership = True
                log.error("leaderelection lost")
                code = 1
            for t in (work, stop):
                t.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        finally:
            gc.unfreeze()
            self.scheduler.stop()
            await self.scheduler.drain()
            for fwk in self.frameworks.values():
                await fwk.aclose()
            queue_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await queue_task
            await self.nodes.stop()
            await self.pods.stop()
            await self.pdbs.stop()
            for r in (*self.storage, *self.context):
                await r.stop()
            await self.writer.aclose()
            await self.health.stop()
        return code


async def serve(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    kubeconfig: str | None,
    health_host: str = "127.0.0.1",
    health_port: int = 10259,
    identity: str | None = None,
    debug_queue: bool = False,
    pod_max_in_unschedulable_pods_duration: float = DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
) -> int:
    """Run ``kubesched run`` until SIGINT/SIGTERM; the exit code."""
    cc = config.client_connection
    client = APIClient.from_kubeconfig(
        kubeconfig or cc.kubeconfig or None, qps=float(cc.qps), burst=int(cc.burst)
    )
    async with client:
        service = SchedulerService(
            config,
            client,
            registry,
            health_host=health_host,
            health_port=health_port,
            identity=identity,
            debug_queue=debug_queue,
            pod_max_in_unschedulable_pods_duration=pod_max_in_unschedulable_pods_duration,
        )
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, service.stop)
        return await service.run()
