"""``kubesched bench core``: the scheduling loop of ``kubesched run``, in memory.

The nodes and pods of a workload are fed to a :class:`~kubesched.scheduler.Scheduler` through its
informer callbacks, and :meth:`Scheduler.run` schedules them: the queue, the cache, the profile's
plugins, the asynchronous binding cycle with the DefaultBinder, and the scheduler metrics, exactly
as ``kubesched run`` wires them. Only the API server is replaced, by :class:`MemoryCluster`: it
records each binding and delivers the pod's update back to the scheduler as the pod informer would
(which confirms the assumed pod in the cache).

Measured: the scheduling loop from the first pop until every pod is bound (setup excluded), its
wall-clock and CPU time, the duration of each scheduling cycle (``schedule_one``), the peak RSS
while scheduling, and, from the scheduler's own metrics, where each cycle's time went.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import msgspec

from kubesched.api import Node, Pod
from kubesched.bench._errors import BenchError
from kubesched.bench._placement import check_placement
from kubesched.bench._plugin_sets import plugin_set_config
from kubesched.bench._proc import own_peak_rss_bytes, reset_peak_rss, sample
from kubesched.bench._progress import Progress, Silent
from kubesched.bench._stats import Summary
from kubesched.bench._workloads import Workload, workload
from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import (
    QueuedPodInfo,
    Registry,
    Snapshot,
    build_frameworks,
)
from kubesched.scheduler import Outcome, Scheduler, SchedulerMetrics, new_scheduler

#: ``bench core --profile`` -> workload whose node and pod shapes it uses.
PROFILES = {
    "default": "basic",
    "mixed": "mixed",
    "spread": "spread",
    "daemonset": "SchedulingDaemonset/15000Nodes",
}
NAMESPACE = "bench"
#: ``--distinct`` gives each pod this label with a value of its own.
DISTINCT_LABEL = "bench.kubesched.io/pod"
#: How often the run checks whether it is over (and reports progress).
_POLL = 0.05


class BindConflictError(BenchError):
    """A binding the API server would refuse (unknown pod, other UID, already bound)."""


class MemoryCluster:
    """The API server of an in-memory run, as far as the scheduler sees it.

    :meth:`bind` is the framework's API client: it binds the pod and, on the next turn of the
    event loop, tells the scheduler that the pod changed (``on_pod_update``), as the pod
    informer would after the API server's watch event.
    """

    def __init__(self) -> None:
        self.pods: dict[str, Pod] = {}
        self.scheduler: Scheduler | None = None
        self.bound = 0
        self.conflicts = 0

    def add(self, pod: Pod) -> None:
        self.pods[pod.key] = pod

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        key = f"{namespace}/{name}"
        pod = self.pods.get(key)
        if pod is None or pod.metadata.uid != uid or pod.spec.node_name:
            self.conflicts += 1
            raise BindConflictError(f"cannot bind {key} ({uid}) to {node}")
        bound = msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))
        self.pods[key] = bound
        self.bound += 1
        asyncio.get_running_loop().call_soon(self._deliver, pod, bound)

    def _deliver(self, old: Pod, new: Pod) -> None:
        if self.scheduler is not None:
            self.scheduler.on_pod_update(old, new)

    def lookup(self, namespace: str, name: str) -> Pod | None:
        return self.pods.get(f"{namespace}/{name}")


class _Writer:
    """Events and conditions go nowhere; failures are counted."""

    def __init__(self) -> None:
        self.failures = 0

    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        self.failures += 1


class _TimedScheduler(Scheduler):
    """The scheduler, with the duration of every scheduling cycle recorded."""

    cycle_seconds: list[float]

    def schedule_one(self, qpi: QueuedPodInfo) -> Outcome:
        start = time.perf_counter()
        try:
            return super().schedule_one(qpi)
        finally:
            self.cycle_seconds.append(time.perf_counter() - start)


@dataclass(slots=True)
class CoreResult:
    """One in-memory run."""

    nodes: int
    pods: int
    profile: str
    seed: int
    #: The scheduler plugins: ``core`` or ``default`` (see ``kubesched.bench._plugin_sets``),
    #: ``custom`` for a configuration given by the caller.
    plugin_set: str
    #: Whether each pod had a label of its own (no two pods of one shape).
    distinct: bool
    scheduled: int
    unscheduled: int
    attempts: int
    failed_attempts: int
    setup_s: float
    elapsed_s: float
    cpu_s: float
    pods_per_s: float
    pods_per_cpu_s: float
    #: Duration of one scheduling cycle (``schedule_one``), seconds.
    cycle: Summary
    peak_rss_bytes: int
    rss_before_bytes: int
    overcommitted_nodes: int
    constraint_violations: int
    cpu_fraction_std: float
    #: The machine's 1-minute load average when scheduling started and ended.
    load_average: tuple[float, float] = (0.0, 0.0)
    #: Extension point -> mean seconds per scheduling cycle (from the scheduler's metrics).
    extension_points: dict[str, float] = field(default_factory=dict)
    #: ``Point/Plugin`` -> mean seconds per call.
    plugins: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def make_nodes(shape: Workload, count: int) -> list[Node]:
    return [msgspec.convert(shape.make_node(i), Node) for i in range(count)]


def make_pods(
    shape: Workload, count: int, *, prefix: str = "pod", distinct: bool = False
) -> list[Pod]:
    """``count`` pods of ``shape``; with ``distinct`` no two alike (a label of their own), so
    that no pod's Filter and Score come from the per-shape cache."""
    pods = []
    for i in range(count):
        raw = shape.make_pod(i, f"{prefix}-{i:05d}", NAMESPACE)
        raw["metadata"]["uid"] = f"{prefix}-uid-{i}"
        if distinct:
            raw["metadata"].setdefault("labels", {})[DISTINCT_LABEL] = str(i)
        pods.append(msgspec.convert(raw, Pod))
    return pods


def _metric_means(metrics: SchedulerMetrics, cycles: int) -> tuple[dict[str, float], ...]:
    """Mean seconds per cycle of each extension point, and per call of each plugin."""
    points: dict[str, float] = {}
    plugins: dict[str, float] = {}
    counts: dict[str, float] = {}
    for family in metrics.registry.collect():
        if family.name == "scheduler_framework_extension_point_duration_seconds":
            for s in family.samples:
                if s.name.endswith("_sum"):
                    point = s.labels["extension_point"]
                    points[point] = points.get(point, 0.0) + s.value / max(cycles, 1)
        elif family.name == "scheduler_plugin_execution_duration_seconds":
            for s in family.samples:
                key = f"{s.labels['extension_point']}/{s.labels['plugin']}"
                if s.name.endswith("_sum"):
                    plugins[key] = plugins.get(key, 0.0) + s.value
                elif s.name.endswith("_count"):
                    counts[key] = counts.get(key, 0.0) + s.value
    per_call = {k: v / counts[k] for k, v in plugins.items() if counts.get(k)}
    return (
        dict(sorted(points.items(), key=lambda kv: -kv[1])),
        dict(sorted(per_call.items(), key=lambda kv: -kv[1])),
    )


async def _run(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    nodes: list[Node],
    pods: list[Pod],
    seed: int,
    progress: Progress,
    limit_s: float,
) -> tuple[_TimedScheduler, MemoryCluster, _Writer, SchedulerMetrics, dict[str, float]]:
    started = time.perf_counter()
    metrics = SchedulerMetrics()
    cluster = MemoryCluster()
    snapshot = Snapshot()
    frameworks = build_frameworks(
        config, registry, snapshot, client=cluster, rng=random.Random(seed), metrics=metrics
    )
    writer = _Writer()
    scheduler = new_scheduler(
        config,
        frameworks,
        snapshot,
        writer,
        metrics=metrics,
        pod_lookup=cluster.lookup,
        scheduler_type=_TimedScheduler,
    )
    assert isinstance(scheduler, _TimedScheduler)
    queue = scheduler.queue
    scheduler.cycle_seconds = []
    cluster.scheduler = scheduler
    for node in nodes:
        scheduler.on_node_add(node)
    for pod in pods:
        cluster.add(pod)
        scheduler.on_pod_add(pod)
    total = len(pods)
    setup = time.perf_counter() - started

    queue_task = asyncio.create_task(queue.run())
    reset_peak_rss()
    before = sample()
    load_start = os.getloadavg()[0]
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    loop_task = asyncio.create_task(scheduler.run())
    bar = progress.bar("pods bound", total)
    try:
        while not loop_task.done():
            await asyncio.sleep(_POLL)
            bar.update(cluster.bound)
            counts = queue.counts()
            idle = counts["active"] == 0 and counts["backoff"] == 0 and not queue.in_flight_pods()
            if cluster.bound >= total or idle or time.perf_counter() - t0 > limit_s:
                break
    finally:
        # What is still in flight is drained by run(); the clock stops at the last binding.
        scheduler.stop()
        await loop_task
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        queue_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await queue_task
        bar.update(cluster.bound)
        bar.close()
    timing = {
        "setup_s": setup,
        "elapsed_s": elapsed,
        "cpu_s": cpu,
        "rss_before_bytes": float(before.rss_bytes if before else 0),
        "peak_rss_bytes": float(own_peak_rss_bytes()),
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
    }
    return scheduler, cluster, writer, metrics, timing


def run_core(
    *,
    nodes: int,
    pods: int,
    profile: str = "default",
    seed: int = 0,
    plugin_set: str | None = None,
    distinct: bool = False,
    config: KubeSchedulerConfiguration | None = None,
    registry: Registry | None = None,
    progress: Progress | None = None,
    timeout: float = 3600.0,
) -> CoreResult:
    """Schedule ``pods`` pods of ``profile`` onto ``nodes`` empty nodes, in memory, with the
    plugins of ``plugin_set`` (``config``, when given, instead). By default ``core``, but
    ``default`` for the ``spread`` pods, whose constraints need the plugins ``core`` leaves
    out. ``distinct`` makes every pod a shape of its own (see :func:`make_pods`)."""
    if plugin_set is None:
        plugin_set = "default" if profile == "spread" else "core"
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
    if registry is None:
        from kubesched.plugins import default_registry  # noqa: PLC0415

        registry = default_registry()
    shape = workload(PROFILES[profile])
    node_objs = make_nodes(shape, nodes)
    pod_objs = make_pods(shape, pods, distinct=distinct)
    scheduler, cluster, writer, metrics, timing = asyncio.run(
        _run(
            config or plugin_set_config(plugin_set),
            registry,
            node_objs,
            pod_objs,
            seed,
            progress or Silent(),
            timeout,
        )
    )
    placement = check_placement(node_objs, cluster.pods.values())
    cycles = scheduler.cycle_seconds
    points, plugins = _metric_means(metrics, len(cycles))
    elapsed, cpu = timing["elapsed_s"], timing["cpu_s"]
    return CoreResult(
        nodes=nodes,
        pods=pods,
        profile=profile,
        seed=seed,
        plugin_set="custom" if config is not None else plugin_set,
        distinct=distinct,
        scheduled=cluster.bound,
        unscheduled=pods - cluster.bound,
        attempts=len(cycles),
        failed_attempts=writer.failures,
        setup_s=timing["setup_s"],
        elapsed_s=elapsed,
        cpu_s=cpu,
        pods_per_s=cluster.bound / elapsed if elapsed > 0 else 0.0,
        pods_per_cpu_s=cluster.bound / cpu if cpu > 0 else 0.0,
        cycle=Summary.of(cycles),
        peak_rss_bytes=int(timing["peak_rss_bytes"]),
        rss_before_bytes=int(timing["rss_before_bytes"]),
        overcommitted_nodes=len(placement.overcommitted),
        constraint_violations=len(placement.violations),
        cpu_fraction_std=placement.cpu_fraction_std,
        load_average=(timing["load_start"], timing["load_end"]),
        extension_points=points,
        plugins=plugins,
    )


__all__ = ["PROFILES", "BindConflictError", "CoreResult", "MemoryCluster", "run_core"]
