"""Gang scheduling speed in memory, on the shape of Kubernetes' gang-scheduling perf test:
GANGS PodGroups of 3 pods (``minMember: 3``) on NODES nodes, the nodes and pods of
kube-scheduler's ``SchedulingBasic`` (4 CPUs, 32Gi, 110 pods; pause pods of 100m and 500Mi).

The scheduler is ``kubesched run``'s loop (queue, cache, asynchronous binding cycles) with
kube-scheduler's default profile plus Coscheduling (also as QueueSort); only the API server is
replaced by ``kubesched.bench.MemoryCluster``. PodGroups and member pods are handed to the
snapshot's object store as their informers would.

A PodGroup's scheduling attempt runs from the start of its first member's scheduling cycle to the
end of its last member's (the one whose Permit releases the group). Reported: their average and
percentiles, the scheduling cycles' own time per group, the process's CPU time per group (less
sensitive to other processes on the machine), pods per second, and the machine's load average
before and after. Run::

    .venv/bin/python tests/gang_perf.py --gangs 1000 --nodes 5000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass

import msgspec

from kubesched.api import Node, ObjectMeta, Pod
from kubesched.bench import MemoryCluster, percentile, workload
from kubesched.config import KubeSchedulerConfiguration, load_config_from_dict
from kubesched.framework import (
    QueuedPodInfo,
    Snapshot,
    Status,
    build_frameworks,
    plugin_args_types,
)
from kubesched.plugins import default_registry
from kubesched.plugins.coscheduling import (
    POD_GROUP_LABEL,
    Member,
    PodGroup,
    PodGroupSpec,
)
from kubesched.scheduler import Cache, Outcome, Scheduler, SchedulingQueue

NAMESPACE = "bench"
SIZE = 3


def config() -> KubeSchedulerConfiguration:
    return load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                        "queueSort": {
                            "enabled": [{"name": "Coscheduling"}],
                            "disabled": [{"name": "*"}],
                        },
                    },
                }
            ],
        },
        plugin_args_types=plugin_args_types(default_registry()),
    )


class _Timed(Scheduler):
    """Records each scheduling cycle's start and end, by pod."""

    cycles: list[tuple[str, float, float]]

    def schedule_one(self, qpi: QueuedPodInfo) -> Outcome:
        start = time.perf_counter()
        try:
            return super().schedule_one(qpi)
        finally:
            self.cycles.append(
                (qpi.pod.metadata.labels[POD_GROUP_LABEL], start, time.perf_counter())
            )


@dataclass
class Result:
    gangs: int
    nodes: int
    pods_bound: int
    elapsed_s: float
    #: CPU time of the process while scheduling, seconds.
    cpu_s: float
    #: PodGroup scheduling attempt durations, seconds.
    attempts: list[float]
    #: Scheduling cycles' own time per PodGroup, seconds.
    cycle_time: list[float]
    load_average: tuple[float, float]

    def report(self) -> str:
        a = sorted(self.attempts)
        mean = statistics.fmean(a) * 1000
        return "\n".join(
            [
                f"gang perf: {self.gangs} PodGroups of {SIZE} pods on {self.nodes} nodes",
                f"bound                {self.pods_bound} / {self.gangs * SIZE} pods",
                f"PodGroup attempt     average {mean:.2f} ms  p50 {percentile(a, 50) * 1000:.2f} "
                f"ms  p90 {percentile(a, 90) * 1000:.2f} ms  p99 {percentile(a, 99) * 1000:.2f} "
                f"ms  ({len(a)} attempts)",
                f"cycles per PodGroup  average {statistics.fmean(self.cycle_time) * 1000:.2f} ms",
                f"CPU per PodGroup     {self.cpu_s / self.gangs * 1000:.2f} ms "
                f"(the whole process: {self.cpu_s:.2f} s CPU)",
                f"throughput           {self.pods_bound / self.elapsed_s:,.0f} pods/s "
                f"({self.elapsed_s:.2f} s)",
                f"load average         {self.load_average[0]:.2f} at start, "
                f"{self.load_average[1]:.2f} at end",
            ]
        )


async def run(gangs: int, nodes: int, limit_s: float = 600.0) -> Result:
    cfg = config()
    registry = default_registry()
    cluster = MemoryCluster()
    snapshot = Snapshot()
    frameworks = build_frameworks(cfg, registry, snapshot, client=cluster, rng=random.Random(0))
    fwk = frameworks["default-scheduler"]

    def pre_enqueue(pod: Pod, gating: str) -> Status | None:
        return fwk.run_pre_enqueue(pod, gating)

    queue = SchedulingQueue(
        less=fwk.less,
        sort_key=fwk.sort_key,
        pre_enqueue=pre_enqueue,
        events_to_register=fwk.events_to_register(),
    )
    scheduler = _Timed(
        profiles=frameworks,
        cache=Cache(snapshot),
        queue=queue,
        writer=_Writer(),
        pod_lookup=cluster.lookup,
    )
    scheduler.cycles = []
    cluster.scheduler = scheduler
    shape = workload("basic")
    for i in range(nodes):
        scheduler.on_node_add(msgspec.convert(shape.make_node(i), Node))
    created = time.time()
    for g in range(gangs):
        name = f"gang-{g:05d}"
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created + g))
        snapshot.objects.set(
            PodGroup(
                metadata=ObjectMeta(name=name, namespace=NAMESPACE, creation_timestamp=stamp),
                spec=PodGroupSpec(min_member=SIZE),
            )
        )
        for m in range(SIZE):
            raw = shape.make_pod(g * SIZE + m, f"{name}-{m}", NAMESPACE)
            raw["metadata"]["uid"] = f"{name}-{m}"
            raw["metadata"].setdefault("labels", {})[POD_GROUP_LABEL] = name
            pod = msgspec.convert(raw, Pod)
            snapshot.objects.set(msgspec.convert(raw, Member))
            cluster.add(pod)
            scheduler.on_pod_add(pod)
    total = gangs * SIZE
    queue_task = asyncio.create_task(queue.run())
    load_start = os.getloadavg()[0]
    t0 = time.perf_counter()
    cpu0 = time.process_time()
    loop = asyncio.create_task(scheduler.run())
    try:
        while not loop.done():
            await asyncio.sleep(0.05)
            if cluster.bound >= total or time.perf_counter() - t0 > limit_s:
                break
    finally:
        scheduler.stop()
        await loop
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        queue_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await queue_task
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    own: dict[str, float] = {}
    for group, start, end in scheduler.cycles:
        first.setdefault(group, start)
        last[group] = end
        own[group] = own.get(group, 0.0) + end - start
    return Result(
        gangs=gangs,
        nodes=nodes,
        pods_bound=cluster.bound,
        elapsed_s=elapsed,
        cpu_s=cpu,
        attempts=[last[g] - first[g] for g in first],
        cycle_time=list(own.values()),
        load_average=(load_start, os.getloadavg()[0]),
    )


class _Writer:
    def scheduled(self, pod: Pod, node: str, profile: str) -> None:
        pass

    def failed(
        self, pod: Pod, reason: str, message: str, profile: str, nominated_node: str | None
    ) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gangs", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=5000)
    args = parser.parse_args(argv)
    print(asyncio.run(run(args.gangs, args.nodes)).report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
