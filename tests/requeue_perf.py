"""The scheduling queue's cost per (event, waiting pod), in memory: HELD pods held at
PreEnqueue, as preemptors are while their victims are evicted, each rejected before by
NodeResourcesFit, and EVENTS deletions of a bound pod reaching all of them (NodeResourcesFit's
hint says Queue, PreEnqueue holds the pod again), as in PreemptionBasic.

The queue, frameworks and plugins are ``kubesched run``'s, with kube-scheduler's default profile
plus ``Holding``, a PreEnqueue plugin that holds every pod and, like DefaultPreemption, registers
Pod/Delete with a hint that says Skip; with ``--told`` it names the pods it holds
(``held_pods``), as DefaultPreemption does.
Reported: the best of three rounds, CPU seconds and microseconds per (event, pod). Run::

    .venv/bin/python tests/requeue_perf.py --held 1000 --events 200 [--told]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.config import load_config_from_dict
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    EnqueueExtensions,
    Handle,
    PreEnqueuePlugin,
    QueueingHint,
    Snapshot,
    Status,
    build_frameworks,
    plugin_args_types,
)
from kubesched.plugins import default_registry
from kubesched.scheduler import SchedulingQueue


class Holding(PreEnqueuePlugin, EnqueueExtensions):
    """Holds every pod, as DefaultPreemption holds a preemptor while its victims go."""

    name = "Holding"
    held = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "held", plugin="Holding")

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        #: The UIDs :meth:`held_pods` names (none unless ``--told``).
        self.told: set[str] = set()

    def pre_enqueue(self, pod: Pod) -> Status | None:
        return self.held

    def held_pods(self) -> set[str]:
        return self.told

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.DELETE), lambda *_: QueueingHint.SKIP
            )
        ]


def run(held: int, events: int, told: bool) -> float:
    registry = default_registry()
    registry.register(Holding)
    cfg = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"plugins": {"preEnqueue": {"enabled": [{"name": "Holding"}]}}}],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    snapshot = Snapshot()
    snapshot.set_node(make_node("n1", cpu="4", memory="4Gi"))
    fwk = build_frameworks(cfg, registry, snapshot, rng=random.Random(0))["default-scheduler"]
    holding = False

    def pre_enqueue(pod: Pod, gating: str) -> Status | None:
        return fwk.run_pre_enqueue(pod, gating) if holding else None

    queue = SchedulingQueue(
        less=fwk.less,
        sort_key=fwk.sort_key,
        pre_enqueue=pre_enqueue,
        held_pods=fwk.held_pods,
        events_to_register=fwk.events_to_register(),
    )
    pods = [make_pod(f"p{i}", cpu="1", memory="1Gi") for i in range(held)]
    for pod in pods:
        queue.add(pod)
    for _ in range(held):
        qpi = queue.try_pop()
        assert qpi is not None
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        queue.add_unschedulable_if_not_present(qpi, queue.scheduling_cycle)
    holding = True
    victim = make_pod("victim", cpu="1", memory="1Gi", node_name="n1")
    queue.assigned_pod_deleted(victim)  # each pod is held from now on
    assert queue.counts()["gated"] == held
    if told:
        gate = next(p for p in fwk.pre_enqueue_plugins if isinstance(p, Holding))
        gate.told.update(p.metadata.uid for p in pods)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(events):
            queue.assigned_pod_deleted(victim)
        best = min(best, time.process_time() - start)
    assert queue.counts()["gated"] == held
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--held", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--told", action="store_true", help="Holding names the pods it holds")
    args = parser.parse_args()
    cpu = run(args.held, args.events, args.told)
    per_pair = cpu / (args.held * args.events) * 1e6
    told = ", named as held" if args.told else ""
    print(
        f"{args.held} held pods{told}, {args.events} events: {cpu:.3f} s CPU,"
        f" {per_pair:.2f} us a pair"
    )


if __name__ == "__main__":
    main()
