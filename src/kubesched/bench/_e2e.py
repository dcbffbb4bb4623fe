"""``kubesched bench e2e``: a scheduler against a real kube-apiserver, measured from outside.

Each run gets a fresh local control plane started with the apiserver flags kube-scheduler's own
perf suite relies on (no priority and fairness, large in-flight limits), then:

1. the workload's namespaces and nodes are created (Ready, with their allocatable);
2. the scheduler under test starts, as its own process, with the same
   KubeSchedulerConfiguration for both (client QPS/burst 5000/5000, no leader election);
3. the init pods are created and awaited (all bound);
4. the measured pods are created as fast as the API server takes them, from many concurrent
   requests, and the run waits until every one is bound (or for ``stall_timeout`` seconds
   nothing is bound and nothing happens to any pod);
5. the measured pods' ``Scheduled`` events are counted (see _events);
6. nodes, pods and namespaces are listed and checked: overcommitted nodes, constraint
   violations, pods left unbound, and the spread of allocated CPU.

That is ``rate`` arrival. With ``backlog`` arrival the scheduler that placed the init pods is
stopped, every measured pod is created, and a fresh scheduler process starts on them all.

Timing comes from a watch on the pods (the API server's side): a pod's latency is from its
ADDED event to the event that shows it bound, throughput is bound pods per second. CPU seconds
and peak RSS of the scheduler process come from ``/proc``.

A run that cannot be carried out (the API server refusing or not answering the bench's
requests for the stall timeout, a scheduler that exits or does not start) is reported as an
:class:`E2EFailure` with what failed and where; the other schedulers' runs, each on its own
control plane, are not affected (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import os
import sys
import time
import traceback
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kubesched.api import ANN_POD_CLAIM_NAME, Namespace, Node, ObjectList, Pod, ResourceClaim
from kubesched.bench._errors import BenchError, RunFailedError
from kubesched.bench._events import settled_scheduled_events
from kubesched.bench._http import FastClient
from kubesched.bench._placement import check_placement
from kubesched.bench._proc import ProcessSample, sample
from kubesched.bench._progress import Progress, Silent
from kubesched.bench._retry import APIUnavailableError, patiently
from kubesched.bench._stats import Summary, percentile, throughput_series
from kubesched.bench._workloads import (
    CHURN_RECREATE,
    RESOURCE_API,
    Churn,
    Json,
    Workload,
    device_class,
    resource_claim,
    resource_claim_template,
    resource_slice,
)
from kubesched.kube import AlreadyExists, APIClient, NotFound, api_path

#: The schedulers measured; ``binder`` decides nothing (the API server's ceiling: hack/binder,
#: a Go program on client-go that binds round-robin and writes kube-scheduler's event, and the
#: pod's ResourceClaims before).
SCHEDULERS = ("kubesched", "kube-scheduler", "binder")
NAMESPACE = "bench"

#: kube-apiserver flags of the runs: what kube-scheduler's perf suite relies on (priority and
#: fairness off, so that requests are limited only by the in-flight limits, and those large).
#: ``Priority`` admission is disabled there too (no PriorityClasses are used here anyway).
APISERVER_ARGS = (
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=3000",
    "--max-mutating-requests-inflight=1000",
    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority",
)
#: Client rate limits of both schedulers (scheduler_perf's rest config).
CLIENT_QPS = 5000
CLIENT_BURST = 5000
#: Connections the benchmark creates objects on, one request in flight on each. More do not
#: create faster here (the API server is the limit) and take API server time from the scheduler.
CREATE_CONCURRENCY = 16
_MERGE_PATCH = "application/merge-patch+json"
THROUGHPUT_INTERVAL = 1.0
#: Measured pods created while the scheduler runs, as fast as the API server takes them.
ARRIVAL_RATE = "rate"
#: Every measured pod exists before the scheduler starts: the scheduler's own ceiling.
ARRIVAL_BACKLOG = "backlog"
ARRIVALS = (ARRIVAL_RATE, ARRIVAL_BACKLOG)


@dataclass(slots=True)
class _E2ERun:
    """What every run of the report names: the scheduler and the workload at its sizes."""

    scheduler: str
    workload: str
    #: How the measured pods arrived: ``rate`` or ``backlog``.
    arrival: str
    nodes: int
    init_pods: int
    measured_pods: int

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


@dataclass(slots=True)
class E2EResult(_E2ERun):
    """One scheduler, one fresh control plane."""

    #: Measured pods bound by the end of the run.
    pods_bound: int
    #: Measured pods with a ``Scheduled`` event in the API server at the end of the run
    #: (``events.k8s.io/v1``): what ``kubectl get events`` shows.
    events_written: int
    #: Measured pods bound per second: with ``rate`` arrival from the first measured pod's ADDED
    #: event to the last measured pod's binding, with ``backlog`` from launching the scheduler.
    throughput_pods_per_s: float
    throughput_interval_s: float
    #: Bound measured pods per window of ``throughput_interval_s``, from the same start.
    throughput_series: list[float]
    throughput_window_p50: float | None
    throughput_window_max: float | None
    #: ADDED -> bound, measured pods, seconds.
    latency_p50_s: float | None
    latency_p90_s: float | None
    latency_p99_s: float | None
    latency_max_s: float | None
    latency_mean_s: float | None
    #: Backlog arrival: from starting the scheduler process to the first measured binding
    #: (start-up, informer lists, and any work before a binding, as preemption's dry runs).
    startup_s: float | None
    #: Scheduler process CPU (user + system) during the measured phase.
    cpu_s: float
    cpu_per_pod_ms: float
    #: Scheduler process CPU from start to the end of the measured phase.
    cpu_total_s: float
    peak_rss_bytes: int
    overcommitted_nodes: int
    unbound_pods: int
    constraint_violations: int
    cpu_fraction_std: float
    cpu_fraction_mean: float
    creation_pods_per_s: float
    measured_duration_s: float
    apiserver_cpu_s: float
    bench_client_cpu_s: float
    kubernetes_version: str
    #: The machine's 1-minute load average when the measured phase started and ended.
    load_average: tuple[float, float] = (0.0, 0.0)
    #: Objects the workload's churn created while the measured pods were scheduled.
    churn_objects: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(slots=True)
class E2EFailure(_E2ERun):
    """A run that did not finish: the report gives what failed, and where, instead of figures.
    The other schedulers' runs are parts of their own, each on its own control plane."""

    error: str
    #: Measured pods bound when the run failed, if the measured phase had begun.
    pods_bound: int | None = None
    #: The scheduler's peak RSS when the run failed, if it was running: memory side by side
    #: even when the other scheduler's run broke down.
    peak_rss_bytes: int | None = None


def scheduler_config() -> dict[str, Any]:
    """The KubeSchedulerConfiguration both schedulers run with."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"qps": CLIENT_QPS, "burst": CLIENT_BURST},
        "leaderElection": {"leaderElect": False},
    }


class _Running:
    """What a run has under way, for the report of a failure: the scheduler's process, and
    the measured pods once they are named."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.times: _PodTimes | None = None
        self.measured: list[str] = []

    def failed(self, err: BenchError) -> RunFailedError:
        """``err`` with the measured pods bound so far and the scheduler's peak RSS; read while
        the scheduler still runs (before its control plane is stopped)."""
        now = sample(self.pid) if self.pid is not None else None
        bound = (
            self.times.bound_among(self.measured)
            if self.times is not None and self.measured
            else None
        )
        return RunFailedError(
            str(err), pods_bound=bound, peak_rss_bytes=now.peak_rss_bytes if now else None
        )


class _PodTimes:
    """The pod watch: when each pod was first seen, and first seen bound; when anything last
    happened to a pod (a nomination, a victim deleted: preemption's progress before a binding)."""

    def __init__(self) -> None:
        self.added: dict[str, float] = {}
        self.bound: dict[str, float] = {}
        #: Each pod's uid, for the ResourceClaims made for it.
        self.uids: dict[str, str] = {}
        self.changed = asyncio.Event()
        self.last_event = time.monotonic()

    def on_add(self, obj: Pod) -> None:
        now = self.last_event = time.monotonic()
        name = obj.metadata.name
        self.added.setdefault(name, now)
        self.uids[name] = obj.metadata.uid
        if obj.spec.node_name and name not in self.bound:
            self.bound[name] = now
            self.changed.set()

    def on_update(self, old: Pod, new: Pod) -> None:
        self.last_event = time.monotonic()
        if new.spec.node_name and new.metadata.name not in self.bound:
            self.bound[new.metadata.name] = self.last_event
            self.changed.set()

    def on_delete(self, obj: Pod) -> None:
        self.last_event = time.monotonic()

    def on_synced(self) -> None:
        pass

    def on_undecodable(self, key: str) -> None:
        pass

    def bound_among(self, names: Sequence[str]) -> int:
        return sum(1 for n in names if n in self.bound)


async def _wait_bound(
    times: _PodTimes,
    names: Sequence[str],
    *,
    stall_timeout: float,
    progress: Progress,
    label: str,
    on_tick: Any = None,
) -> float | None:
    """Wait until every pod of ``names`` is bound, or for ``stall_timeout`` seconds nothing got
    bound and nothing happened to any pod; the time the last of them was bound, if all were."""
    bar = progress.bar(label, len(names))
    pending = set(names)
    last_progress = time.monotonic()
    try:
        while pending:
            times.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(times.changed.wait(), timeout=0.25)
            newly = {n for n in pending if n in times.bound}
            if newly:
                pending -= newly
                last_progress = time.monotonic()
            bar.update(len(names) - len(pending))
            if on_tick is not None:
                on_tick()
            quiet_since = max(last_progress, times.last_event)
            if pending and time.monotonic() - quiet_since > stall_timeout:
                return None
    finally:
        bar.close()
    return max(times.bound[n] for n in names) if names else time.monotonic()


def _cluster_pid(cluster: str, name: str) -> int | None:
    from kubesched.cluster import status  # noqa: PLC0415

    for found in status():
        if found.name == cluster:
            for p in found.processes:
                if p.name == name:
                    return p.pid
    return None


def _component_log(cluster: str, name: str) -> Path | None:
    """The log of the component ``name`` of ``cluster`` if it is no longer running."""
    from kubesched.cluster import status  # noqa: PLC0415

    for found in status():
        if found.name == cluster:
            for c in found.components:
                if c.name == name and not c.running:
                    return c.log
    return None


async def _explain_stall(
    client: APIClient, *, cluster: str, which: str, what: str, within: float
) -> None:
    """A wait in which nothing happened to any pod: a failure of the run if the scheduler
    process exited or the API server stopped answering; otherwise the scheduler's own stall,
    and the run goes on to report the pods it left unbound."""
    log = _component_log(cluster, which)
    if log is not None:
        raise BenchError(f"{which} exited while {what} (its log: {log})")
    await patiently(lambda: client.get(f"/api/v1/namespaces/{NAMESPACE}"), what=what, within=within)


async def _create_volumes(
    creator: FastClient,
    shape: Workload,
    pods: Sequence[str],
    namespaces: Sequence[str],
    *,
    within: float,
) -> list[str]:
    """Each pod's PersistentVolume and claim, bound to each other, as
    ``CreatePodWithPersistentVolume`` makes them: the claim, its status, the volume, its
    status (a create sets no status). The errors of those the API server turned away."""
    encoder = msgspec.json.Encoder()
    made = [shape.make_volume(p, ns) for p, ns in zip(pods, namespaces, strict=True)]
    claims = [api_path("persistentvolumeclaims", namespace=ns) for ns in namespaces]
    claim_status = [
        api_path(
            "persistentvolumeclaims", namespace=ns, name=c["metadata"]["name"], subresource="status"
        )
        for ns, (_, c) in zip(namespaces, made, strict=True)
    ]
    volume_status = [
        api_path("persistentvolumes", name=v["metadata"]["name"], subresource="status")
        for v, _ in made
    ]
    bound = [b'{"status":{"phase":"Bound"}}'] * len(made)
    errors: list[str] = []
    for method, paths, bodies in (
        ("POST", claims, [encoder.encode(c) for _, c in made]),
        ("PATCH", claim_status, bound),
        ("POST", api_path("persistentvolumes"), [encoder.encode(v) for v, _ in made]),
        ("PATCH", volume_status, bound),
    ):
        errors += await creator.send_all(
            method,
            paths,
            bodies,
            what=f"creating {len(pods)} volumes and claims",
            within=within,
            content_type=_MERGE_PATCH if method == "PATCH" else "application/json",
            connections=CREATE_CONCURRENCY,
        )
    return errors


async def _create_devices(
    creator: FastClient, shape: Workload, nodes: int, namespaces: Sequence[str], *, within: float
) -> list[str]:
    """DRA's objects before any pod: the DeviceClass, each node's ResourceSlice
    (``createResourceDriver``) and each namespace's ResourceClaimTemplate. The errors of those
    the API server turned away."""
    encoder = msgspec.json.Encoder()
    templates = [resource_claim_template(ns) for ns in namespaces]
    errors: list[str] = []
    for path, objects in (
        (api_path("deviceclasses", group_version=RESOURCE_API), [device_class()]),
        (
            api_path("resourceslices", group_version=RESOURCE_API),
            [resource_slice(shape.node_name(i), shape.devices_per_node) for i in range(nodes)],
        ),
        (
            [
                api_path("resourceclaimtemplates", namespace=ns, group_version=RESOURCE_API)
                for ns in namespaces
            ],
            templates,
        ),
    ):
        errors += await creator.create_all(
            path,
            [encoder.encode(o) for o in objects],
            what="creating the DeviceClass, ResourceSlices and ResourceClaimTemplates",
            within=within,
            connections=CREATE_CONCURRENCY,
        )
    return errors


def _pod_claims(pods: Sequence[Json], source: str) -> Iterator[tuple[Json, Json]]:
    """Each pod with each of its ``spec.resourceClaims`` entries that names a ``source``."""
    for pod in pods:
        for claim in pod["spec"].get("resourceClaims", ()):
            if claim.get(source) is not None:
                yield pod, claim


def _from_templates(pods: Sequence[Json]) -> bool:
    return any(True for _ in _pod_claims(pods, "resourceClaimTemplateName"))


async def _create_shared_claims(
    creator: FastClient, pods: Sequence[Json], made: set[tuple[str, str]], *, within: float
) -> list[str]:
    """The ResourceClaims ``pods`` name that are not ``made`` yet, before the pods
    (``resourceclaim.yaml`` ahead of ``pod-with-claim-ref.yaml``)."""
    claims: list[Json] = []
    for pod, entry in _pod_claims(pods, "resourceClaimName"):
        key = (pod["metadata"]["namespace"], entry["resourceClaimName"])
        if key not in made:
            made.add(key)
            claims.append(resource_claim(key[1], key[0]))
    if not claims:
        return []
    return await _create_claims(creator, claims, f"creating {len(claims)} ResourceClaims", within)


async def _create_claims(
    creator: FastClient, claims: Sequence[Json], what: str, within: float
) -> list[str]:
    """Create ``claims``, each in its namespace; the errors of those turned away."""
    encoder = msgspec.json.Encoder()
    return await creator.create_all(
        [
            api_path(
                "resourceclaims", namespace=c["metadata"]["namespace"], group_version=RESOURCE_API
            )
            for c in claims
        ],
        [encoder.encode(c) for c in claims],
        what=what,
        within=within,
        connections=CREATE_CONCURRENCY,
    )


async def _claims_from_templates(
    creator: FastClient, pods: Sequence[Json], uids: Mapping[str, str], *, within: float
) -> list[str]:
    """What the resourceclaim controller does for each pod claim from a template: a
    ResourceClaim of the template's spec, owned by the pod and annotated with the claim's name
    (here ``<pod>-<claim>``, not generated), then the pod's ``status.resourceClaimStatuses``
    naming it. The errors of the writes the API server turned away."""
    claims: list[Json] = []
    statuses: dict[tuple[str, str], list[Json]] = {}
    for pod, entry in _pod_claims(pods, "resourceClaimTemplateName"):
        meta = pod["metadata"]
        namespace, pod_name = meta["namespace"], meta["name"]
        name = f"{pod_name}-{entry['name']}"
        claim = resource_claim(name, namespace)
        claim["spec"] = resource_claim_template(namespace)["spec"]["spec"]
        claim["metadata"]["annotations"] = {ANN_POD_CLAIM_NAME: entry["name"]}
        claim["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod_name,
                "uid": uids[pod_name],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        claims.append(claim)
        statuses.setdefault((namespace, pod_name), []).append(
            {"name": entry["name"], "resourceClaimName": name}
        )
    encoder = msgspec.json.Encoder()
    what = f"creating {len(claims)} ResourceClaims from templates"
    errors = await _create_claims(creator, claims, what, within)
    errors += await creator.send_all(
        "PATCH",
        [api_path("pods", namespace=ns, name=p, subresource="status") for ns, p in statuses],
        [encoder.encode({"status": {"resourceClaimStatuses": s}}) for s in statuses.values()],
        what=what,
        within=within,
        content_type=_MERGE_PATCH,
        connections=CREATE_CONCURRENCY,
    )
    return errors


async def _create_namespace(client: APIClient, body: dict[str, Any]) -> None:
    # A retried create whose first attempt went through finds its namespace there.
    with contextlib.suppress(AlreadyExists):
        await client.post("/api/v1/namespaces", body)


async def _delete(client: APIClient, path: str) -> None:
    # A retried delete whose first attempt went through finds the object gone.
    with contextlib.suppress(NotFound):
        await client.delete(path)


def _start_scheduler(
    which: str, cluster: str, kubeconfig: Path, config_file: Path, progress: Progress
) -> int:
    """Start the scheduler under test on ``cluster``; its pid."""
    from kubesched import cluster as control_plane  # noqa: PLC0415

    if which == "kube-scheduler":
        info = control_plane.start_kube_scheduler(
            config_file, cluster=cluster, kubeconfig=kubeconfig, progress=progress.note
        )
        return info.pid

    if which == "binder":
        binder = control_plane.ensure_tool(control_plane.BINDER, progress=progress.note)
        command = [
            str(binder),
            f"--kubeconfig={kubeconfig}",
            f"--qps={CLIENT_QPS}",
            f"--burst={CLIENT_BURST}",
        ]
        return control_plane.start_component(
            "binder", command, cluster=cluster, progress=progress.note
        ).pid

    def argv(port: int) -> list[str]:
        return [
            sys.executable,
            "-c",
            "from kubesched.cli import main; main()",
            "run",
            f"--config={config_file}",
            f"--kubeconfig={kubeconfig}",
            f"--port={port}",
            # kube-scheduler's default verbosity logs nothing per pod either.
            "--log-level=WARNING",
        ]

    started = control_plane.start_component(
        "kubesched",
        argv,
        cluster=cluster,
        health_path="/readyz",
        health_scheme="http",
        timeout=120.0,
        progress=progress.note,
    )
    return started.pid


@contextlib.asynccontextmanager
async def _cancelled_on_exit() -> AsyncIterator[list[asyncio.Task[Any]]]:
    """Tasks put in the list run until the block ends: a failed run leaves none behind."""
    tasks: list[asyncio.Task[Any]] = []
    try:
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _wait_seen(times: _PodTimes, names: Sequence[str], within: float) -> bool:
    """Wait until the pod watch has seen every pod of ``names`` (created before the scheduler
    starts, with backlog arrival); False if it has not within ``within`` seconds."""
    try:
        async with asyncio.timeout(within):
            while any(n not in times.added for n in names):
                times.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(times.changed.wait(), timeout=0.25)
    except TimeoutError:
        return False
    return True


async def _measure(
    which: str,
    shape: Workload,
    *,
    cluster: str,
    nodes: int,
    init_pods: int,
    measured_pods: int,
    arrival: str,
    stall_timeout: float,
    progress: Progress,
    running: _Running,
) -> E2EResult:
    from kubesched import cluster as control_plane  # noqa: PLC0415
    from kubesched.kube import Reflector  # noqa: PLC0415

    info = control_plane.info(cluster)
    if info is None:
        raise BenchError(f"cluster {cluster!r} is not running")
    errors: list[str] = []
    encoder = msgspec.json.Encoder()
    creator = FastClient("127.0.0.1", info.apiserver_port, info.ssl_context())
    client = APIClient.from_kubeconfig(str(info.kubeconfig), qps=0, burst=0, timeout=120.0)
    watch_client = APIClient.from_kubeconfig(str(info.kubeconfig), qps=0, burst=0)
    # Every request of the bench's own is retried while the API server refuses it, for as long
    # as a run may stall; then the run fails, naming what it was doing.
    within = stall_timeout
    async with client, watch_client, _cancelled_on_exit() as background:
        # The measured pods' namespace, and those the workload's init pods live in, if apart.
        for namespace in shape.make_namespaces(NAMESPACE):
            await patiently(
                functools.partial(_create_namespace, client, namespace),
                what="creating the namespaces",
                within=within,
            )
        progress.note(f"[{which}] creating {nodes} nodes")
        bar = progress.bar(f"[{which}] nodes", nodes)
        node_bodies = [encoder.encode(shape.make_node(i)) for i in range(nodes)]
        errors += await creator.create_all(
            "/api/v1/nodes",
            node_bodies,
            what=f"creating {nodes} nodes",
            within=within,
            connections=CREATE_CONCURRENCY,
            on_done=bar.update,
        )
        bar.close()
        if shape.csi_node is not None:
            make_csi_node = shape.csi_node
            errors += await creator.create_all(
                api_path("csinodes", group_version="storage.k8s.io/v1"),
                [encoder.encode(make_csi_node(shape.node_name(i))) for i in range(nodes)],
                what=f"creating {nodes} CSINodes",
                within=within,
                connections=CREATE_CONCURRENCY,
            )

        run_namespaces = [n["metadata"]["name"] for n in shape.make_namespaces(NAMESPACE)]
        if shape.devices_per_node:
            progress.note(f"[{which}] creating {nodes} ResourceSlices")
            errors += await _create_devices(creator, shape, nodes, run_namespaces, within=within)
        shared_claims: set[tuple[str, str]] = set()

        async def create_volumes(pods: Sequence[str], namespaces: Sequence[str]) -> None:
            nonlocal errors
            progress.note(f"[{which}] creating {len(pods)} volumes and claims")
            errors += await _create_volumes(creator, shape, pods, namespaces, within=within)

        times = running.times = _PodTimes()
        pods_path = api_path("pods", namespace=NAMESPACE)
        # Every namespace's: a workload's init pods may live apart from the measured ones (the
        # run's pod names are unique across its namespaces).
        all_pods_path = api_path("pods")
        watch = Reflector(watch_client, all_pods_path, Pod, times, name="bench pods")
        background.append(watch.start())
        try:
            async with asyncio.timeout(within):
                await watch.wait_synced()
        except TimeoutError:
            raise APIUnavailableError("listing the pods to watch them", within) from None

        config_file = info.state_dir / "bench-scheduler-config.yaml"
        config_file.write_text(yaml.safe_dump(scheduler_config(), sort_keys=False))
        kubeconfig = info.client_kubeconfig("system:kube-scheduler")

        def start_scheduler() -> int:
            progress.note(f"[{which}] starting the scheduler")
            try:
                return _start_scheduler(which, cluster, kubeconfig, config_file, progress)
            except control_plane.ClusterError as err:
                raise BenchError(f"starting {which}: {err}") from err

        async def explain_stall(what: str) -> None:
            await _explain_stall(client, cluster=cluster, which=which, what=what, within=within)

        async def wait_seen(names: Sequence[str]) -> None:
            if not await _wait_seen(times, names, within):
                await explain_stall("waiting for the pod watch to see the pods created")
                seen = sum(1 for n in names if n in times.added)
                raise BenchError(
                    f"the pod watch saw {seen} of the {len(names)} pods created "
                    f"within {within:.0f} s"
                )

        # With backlog arrival the init pods are scheduled by a first scheduler process, stopped
        # before the measured pods are created; the one measured starts on the full backlog.
        pid: int | None = None
        if arrival == ARRIVAL_RATE or (init_pods and shape.init_pods_bind):
            pid = running.pid = start_scheduler()
        apiserver_pid = _cluster_pid(cluster, "kube-apiserver")

        init_names = [f"init-{i:05d}" for i in range(init_pods)]
        if init_names:
            namespaces = [shape.init_namespace(i, NAMESPACE) for i in range(init_pods)]
            if shape.has_volume(init=True):
                await create_volumes(init_names, namespaces)
            init_objects = [
                shape.make_init_pod(i, name, namespace)
                for i, (name, namespace) in enumerate(zip(init_names, namespaces, strict=True))
            ]
            errors += await _create_shared_claims(
                creator, init_objects, shared_claims, within=within
            )
            bar = progress.bar(f"[{which}] creating init pods", init_pods)
            bodies = [encoder.encode(p) for p in init_objects]
            errors += await creator.create_all(
                [api_path("pods", namespace=namespace) for namespace in namespaces],
                bodies,
                what=f"creating {init_pods} init pods",
                within=within,
                connections=CREATE_CONCURRENCY,
                on_done=bar.update,
            )
            bar.close()
            if _from_templates(init_objects):
                await wait_seen(init_names)
                errors += await _claims_from_templates(
                    creator, init_objects, times.uids, within=within
                )
            if not shape.init_pods_bind:
                await wait_seen(init_names)
            elif (
                await _wait_bound(
                    times,
                    init_names,
                    stall_timeout=stall_timeout,
                    progress=progress,
                    label=f"[{which}] init pods bound",
                )
                is None
            ):
                await explain_stall("waiting for the init pods to be bound")
                errors.append(f"init pods: {init_pods - times.bound_among(init_names)} not bound")

        names = running.measured = [f"pod-{i:05d}" for i in range(measured_pods)]
        measured_objects = [
            shape.make_pod(init_pods + i, name, NAMESPACE) for i, name in enumerate(names)
        ]
        bodies = [encoder.encode(p) for p in measured_objects]
        if shape.has_volume(init=False):
            # Before the measured phase in either arrival: upstream creates each pod's volume
            # just before the pod; here the volumes' writes stay out of the measured window.
            await create_volumes(names, [NAMESPACE] * len(names))
        created_at: list[float] = []

        async def create() -> None:
            nonlocal errors
            errors += await _create_shared_claims(
                creator, measured_objects, shared_claims, within=within
            )
            errors += await creator.create_all(
                pods_path,
                bodies,
                what=f"creating {measured_pods} pods",
                within=within,
                connections=CREATE_CONCURRENCY,
            )
            created_at.append(time.monotonic())
            if _from_templates(measured_objects):
                await wait_seen(names)
                errors += await _claims_from_templates(
                    creator, measured_objects, times.uids, within=within
                )

        churn_objects = 0

        async def churn(spec: Churn) -> None:
            nonlocal errors, churn_objects
            # recreate mode: per slot, the paths of the objects it holds
            slots: list[list[str]] = [[] for _ in range(spec.number)]
            for tick in itertools.count():
                held = slots[tick % spec.number]
                if spec.mode == CHURN_RECREATE and held:
                    for path in held:
                        await patiently(
                            functools.partial(_delete, client, path),
                            what="deleting churn objects",
                            within=within,
                        )
                    held.clear()
                else:
                    for resource, make in spec.templates:
                        name = f"churn-{resource[:-1]}-{tick:05d}"
                        namespace = None if resource == "nodes" else NAMESPACE
                        path = api_path(resource, namespace=namespace)
                        body = encoder.encode(make(tick, name, NAMESPACE))
                        refused = await creator.create_all(
                            path,
                            [body],
                            what=f"creating churn {resource}",
                            within=within,
                            connections=1,
                        )
                        errors += refused
                        if not refused:
                            held.append(f"{path}/{name}")
                            churn_objects += 1
                await asyncio.sleep(spec.interval_s)

        creating: asyncio.Task[None] | None = None
        launched: float | None = None
        if arrival == ARRIVAL_BACKLOG:
            if pid is not None:
                # Each scheduler runs as the control plane's component of its own name.
                control_plane.stop_component(which, cluster=cluster)
                running.pid = None
            progress.note(f"[{which}] creating {measured_pods} pods before the scheduler starts")
            start = time.monotonic()
            await create()
            await wait_seen(names)
            api_before = sample(apiserver_pid) if apiserver_pid else None
            client_cpu0 = time.process_time()
            load_start = os.getloadavg()[0]
            launched = time.monotonic()
            # In a thread: the pod watch must go on timing the bindings made while the start
            # waits for the scheduler's health endpoint.
            pid = running.pid = await asyncio.to_thread(start_scheduler)
            # A fresh process: all its CPU is the measured phase's.
            before: ProcessSample | None = ProcessSample(0.0, 0, 0)
        else:
            assert pid is not None
            before = sample(pid)
            api_before = sample(apiserver_pid) if apiserver_pid else None
            client_cpu0 = time.process_time()
            load_start = os.getloadavg()[0]
            start = time.monotonic()
            creating = asyncio.create_task(create())
            background.append(creating)
        churning = None if shape.churn is None else asyncio.create_task(churn(shape.churn))
        if churning is not None:
            background.append(churning)

        def creation_failed() -> None:
            # Pods that could not be created will never be bound: no need to wait for a stall.
            for task in (creating, churning):
                if task is not None and task.done() and (failure := task.exception()) is not None:
                    raise failure

        last = await _wait_bound(
            times,
            names,
            stall_timeout=stall_timeout,
            progress=progress,
            label=f"[{which}] measured pods bound",
            on_tick=creation_failed,
        )
        if last is None:
            await explain_stall("waiting for the measured pods to be bound")
        if churning is not None:
            churning.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await churning
        after = sample(pid)
        api_after = sample(apiserver_pid) if apiserver_pid else None
        client_cpu = time.process_time() - client_cpu0
        load_end = os.getloadavg()[0]
        if creating is not None:
            await creating
        await watch.stop()
        bound_count = times.bound_among(names)
        progress.note(f"[{which}] counting the Scheduled events")
        events = await settled_scheduled_events(
            client, NAMESPACE, names, bound=bound_count, within=within
        )
        all_pods = await patiently(
            lambda: client.list(all_pods_path, type=ObjectList[Pod]),
            what="listing the pods",
            within=within,
        )
        # For the terms that select their pods' namespaces by label.
        all_namespaces = await patiently(
            lambda: client.list("/api/v1/namespaces", type=ObjectList[Namespace]),
            what="listing the namespaces",
            within=within,
        )
        all_nodes = await patiently(
            lambda: client.list("/api/v1/nodes", type=ObjectList[Node]),
            what="listing the nodes",
            within=within,
        )
        all_claims = (
            await patiently(
                lambda: client.list(
                    api_path("resourceclaims", group_version=RESOURCE_API),
                    type=ObjectList[ResourceClaim],
                ),
                what="listing the ResourceClaims",
                within=within,
            )
            if shape.devices_per_node
            else ObjectList[ResourceClaim]()
        )

    placement = check_placement(
        all_nodes.items, all_pods.items, all_namespaces.items, all_claims.items
    )
    final = {p.metadata.name: p.spec.node_name for p in all_pods.items}
    # Measured pods must all be there, bound; init pods that bind must be bound if still there
    # (preemption deletes some); gated init pods and churn pods are never bound.
    unbound = sum(1 for n in names if not final.get(n))
    if shape.init_pods_bind:
        unbound += sum(1 for n in init_names if n in final and not final[n])
    if unbound:
        # What the scheduler last said about each, for whoever reads a failed run.
        left = set(names) | (set(init_names) if shape.init_pods_bind else set())
        errors += [
            _unbound(p) for p in all_pods.items if p.metadata.name in left and not p.spec.node_name
        ][:5]
    bound_times = [times.bound[n] for n in names if n in times.bound]
    if launched is None:
        first = min((times.added[n] for n in names if n in times.added), default=start)
    else:
        # Backlog: from the launch of the scheduler, so that its start-up and whatever it does
        # before its first binding (a pass of preemption's dry runs) count.
        first = launched
    end = last if last is not None else max(bound_times, default=first)
    latencies = [
        times.bound[n] - times.added[n] for n in names if n in times.bound and n in times.added
    ]
    series = throughput_series(bound_times, first, end, THROUGHPUT_INTERVAL)
    # The last window is often a fraction of one: leave it out of the window statistics.
    windows = series[:-1] if len(series) > 1 else series
    lat = Summary.of(latencies)
    span = end - first
    cpu = after.cpu_s - before.cpu_s if after and before else 0.0
    creation_span = (created_at[0] if created_at else end) - start
    return E2EResult(
        scheduler=which,
        workload=shape.name,
        arrival=arrival,
        nodes=nodes,
        init_pods=init_pods,
        measured_pods=measured_pods,
        pods_bound=bound_count,
        events_written=events,
        throughput_pods_per_s=len(bound_times) / span if span > 0 else 0.0,
        throughput_interval_s=THROUGHPUT_INTERVAL,
        throughput_series=series,
        throughput_window_p50=percentile(windows, 50),
        throughput_window_max=max(windows) if windows else None,
        latency_p50_s=lat.p50,
        latency_p90_s=lat.p90,
        latency_p99_s=lat.p99,
        latency_max_s=lat.max,
        latency_mean_s=lat.mean,
        startup_s=None if launched is None or not bound_times else min(bound_times) - launched,
        cpu_s=cpu,
        cpu_per_pod_ms=cpu * 1000 / len(bound_times) if bound_times else 0.0,
        cpu_total_s=after.cpu_s if after else 0.0,
        peak_rss_bytes=after.peak_rss_bytes if after else 0,
        overcommitted_nodes=len(placement.overcommitted),
        unbound_pods=unbound,
        constraint_violations=len(placement.violations),
        cpu_fraction_std=placement.cpu_fraction_std,
        cpu_fraction_mean=placement.cpu_fraction_mean,
        creation_pods_per_s=measured_pods / creation_span if creation_span > 0 else 0.0,
        measured_duration_s=span,
        apiserver_cpu_s=(
            api_after.cpu_s - api_before.cpu_s if api_after is not None and api_before else 0.0
        ),
        bench_client_cpu_s=client_cpu,
        kubernetes_version=info.version,
        load_average=(load_start, load_end),
        churn_objects=churn_objects,
        errors=errors[:20] + placement.violations[:20],
    )


def _unbound(pod: Pod) -> str:
    """A pod left unbound: its PodScheduled condition and nomination, or that it has none."""
    said = [f"{c.reason}: {c.message}" for c in pod.status.conditions if c.type == "PodScheduled"]
    nominated = pod.status.nominated_node_name
    return (
        f"pod {pod.metadata.name} left unbound ("
        + (said[0] if said else "no PodScheduled condition")
        + (f"; nominated to {nominated}" if nominated else "")
        + ")"
    )


def _check(which: str, arrival: str) -> None:
    if which not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {which!r}; one of {', '.join(SCHEDULERS)}")
    if arrival not in ARRIVALS:
        raise ValueError(f"unknown arrival {arrival!r}; one of {', '.join(ARRIVALS)}")


def run_one(
    which: str,
    shape: Workload,
    *,
    nodes: int | None = None,
    init_pods: int | None = None,
    measured_pods: int | None = None,
    arrival: str = ARRIVAL_RATE,
    stall_timeout: float = 60.0,
    progress: Progress | None = None,
    keep_cluster: bool = False,
) -> E2EResult:
    """One run of ``which`` on a fresh control plane, torn down afterwards.

    Raises :class:`BenchError` when the run cannot be carried out (the API server stops
    answering the bench's requests for ``stall_timeout`` seconds, the control plane or the
    scheduler does not start, the scheduler exits ...)."""
    from kubesched import cluster as control_plane  # noqa: PLC0415

    _check(which, arrival)
    progress = progress or Silent()
    n, i, m = shape.sizes(nodes, init_pods, measured_pods)
    name = f"bench-{which}-{os.getpid()}"
    progress.note(f"[{which}] starting a control plane ({name})")
    running = _Running()
    try:
        try:
            control_plane.up(name, apiserver_args=APISERVER_ARGS, progress=progress.note)
        except control_plane.ClusterError as err:
            raise BenchError(f"starting the control plane: {err}") from err
        try:
            return asyncio.run(
                _measure(
                    which,
                    shape,
                    cluster=name,
                    nodes=n,
                    init_pods=i,
                    measured_pods=m,
                    arrival=arrival,
                    stall_timeout=stall_timeout,
                    progress=progress,
                    running=running,
                )
            )
        except BenchError as err:
            raise running.failed(err) from err
    finally:
        # Also after a failure: the next run gets a fresh control plane, never this one.
        if not keep_cluster:
            progress.note(f"[{which}] stopping {name}")
            control_plane.down(name)


def _failure_text(err: Exception, progress: Progress) -> str:
    """What a failed run reports: the error, which names what failed and where; an error no
    part of the run expects gets its traceback on the progress stream too."""
    from kubesched.cluster import ClusterError  # noqa: PLC0415

    if isinstance(err, BenchError | ClusterError):
        return str(err)
    progress.note("".join(traceback.format_exception(err)).rstrip())
    return f"{type(err).__name__}: {err}"


def run_e2e(
    schedulers: Sequence[str],
    shape: Workload,
    *,
    nodes: int | None = None,
    init_pods: int | None = None,
    measured_pods: int | None = None,
    arrival: str = ARRIVAL_RATE,
    stall_timeout: float = 60.0,
    progress: Progress | None = None,
) -> list[E2EResult | E2EFailure]:
    """:func:`run_one` for each scheduler in turn, each a part of its own: a run that fails
    is reported as an :class:`E2EFailure` and the next one still runs."""
    for which in schedulers:
        _check(which, arrival)
    progress = progress or Silent()
    n, i, m = shape.sizes(nodes, init_pods, measured_pods)
    parts: list[E2EResult | E2EFailure] = []
    for which in schedulers:
        try:
            parts.append(
                run_one(
                    which,
                    shape,
                    nodes=nodes,
                    init_pods=init_pods,
                    measured_pods=measured_pods,
                    arrival=arrival,
                    stall_timeout=stall_timeout,
                    progress=progress,
                )
            )
        except Exception as err:  # one run failing must not lose the others
            error = _failure_text(err, progress)
            progress.note(f"[{which}] failed: {error}")
            failure = E2EFailure(which, shape.name, arrival, n, i, m, error)
            if isinstance(err, RunFailedError):
                failure.pods_bound, failure.peak_rss_bytes = err.pods_bound, err.peak_rss_bytes
            parts.append(failure)
    return parts


__all__ = [
    "APISERVER_ARGS",
    "ARRIVALS",
    "ARRIVAL_BACKLOG",
    "ARRIVAL_RATE",
    "CLIENT_BURST",
    "CLIENT_QPS",
    "SCHEDULERS",
    "E2EFailure",
    "E2EResult",
    "run_e2e",
    "run_one",
    "scheduler_config",
]
