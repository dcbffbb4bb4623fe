#!/usr/bin/env python3
"""Random dynamics scenarios, run against the real kube-scheduler and ``kubesched run`` in turn.

Each seed makes a small cluster in which every pending pod is pinned to a node of its own (by
``kubernetes.io/hostname``) and kept off it by one to three blockers (the node's CPU taken by a
running pod, a label the pod selects missing, a taint, the node cordoned, a running pod the
pod's required anti-affinity selects, a host port taken, no running pod its required affinity
selects, a scheduling gate), then a random sequence of changes that lift some blockers and
make changes no pod waits for, with a pause after each. A pod's fate depends on its node only,
so no tie-break or queue order can make the two schedulers differ; they must agree on which
pods end up bound, none later than kube-scheduler + 1 s (plus 0.75 s: backoffs end on whole
seconds of the clock) after the last change, the final message of the others, and the cluster
events that moved pods out of unschedulablePods.

A seed where they differ is written to ``--out`` as a dynamics scenario, to be looked into and,
once understood, recorded into ``dynamics/`` (``dynamics.py``) like the hand-written ones.

Run from the repository root:
  PYTHONPATH=tests:tests/e2e/scheduler python tests/conformance/dynamics_fuzz.py --seeds 20
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml
from sched_e2e import scenario_launcher

from conformance.dynamics import (
    DEFAULT_CONFIG,
    LATENESS,
    KubeSchedulerLauncher,
    Scenario,
    run,
)
from conformance.regenerate import Api
from kubesched import cluster

#: Extra lateness allowed: backoffs end on whole seconds of the clock (backoffQ's windows).
SLACK = 0.75
#: Moving events kubesched knowingly has where kube-scheduler v1.34.4 has none: a pod rejected
#: by InterPodAffinity is retried when its own labels change, as upstream does since PR #135394
#: (the recorded divergence ``anti-affinity-pending-relabelled``).
KNOWN_EXTRA_MOVES = frozenset({"UnschedulablePodUpdatePodLabel"})
BLOCKERS = ("cpu", "label", "taint", "cordon", "anti", "port", "affinity", "gate")
IMAGE = "registry.k8s.io/pause:3.10"


def _node(name: str, cpu: int, *, labels: dict[str, str], taint: bool, cordon: bool) -> Any:
    capacity = {"cpu": str(cpu), "memory": "4Gi", "pods": "110"}
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    if cordon:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": spec,
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _container(cpu: str, port: int | None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": IMAGE, "resources": {"requests": {"cpu": cpu}}}
    if port is not None:
        c["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
    return c


def generate(seed: int, *, preemption: bool = False) -> Scenario:
    """The scenario of ``seed``: its cluster, pinned pending pods and changes.

    With ``preemption`` DefaultPreemption runs, and some pending pods are of a higher priority
    than the running pod on their node (which ends at once when deleted): preemption, rather
    than a change, is what frees the node of it.
    """
    rng = random.Random(seed)
    setup: list[dict[str, Any]] = []
    pods: list[dict[str, Any]] = []
    lifts: list[list[dict[str, Any]]] = []
    others: list[dict[str, Any]] = []
    for i in range(1, rng.randint(2, 3) + 1):
        name = f"n{i}"
        blockers = rng.sample(BLOCKERS, rng.randint(1, 3))
        cpu = rng.choice((2, 4))
        preempt = preemption and rng.random() < 0.6
        if preempt and "cpu" not in blockers:
            blockers.append("cpu")
        setup.append(
            _node(name, cpu, labels={}, taint="taint" in blockers, cordon="cordon" in blockers)
        )
        hog_needed = any(b in blockers for b in ("cpu", "anti", "port"))
        hog = f"hog-{i}"
        if hog_needed:
            setup.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": hog, "labels": {"app": f"hog-{i}"}},
                    "spec": {
                        "nodeName": name,
                        "terminationGracePeriodSeconds": 0,
                        "containers": [
                            _container(
                                str(cpu) if "cpu" in blockers else "100m",
                                8080 if "port" in blockers else None,
                            )
                        ],
                    },
                }
            )
        selector = {"kubernetes.io/hostname": name}
        if "label" in blockers:
            selector["tier"] = "gold"
        spec: dict[str, Any] = {
            "nodeSelector": selector,
            "containers": [_container("1", 8080 if "port" in blockers else None)],
        }
        affinity: dict[str, Any] = {}
        for b, kind, app in (
            ("anti", "podAntiAffinity", "hog"),
            ("affinity", "podAffinity", "friend"),
        ):
            if b in blockers:
                term = {
                    "labelSelector": {"matchLabels": {"app": f"{app}-{i}"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
                affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        if affinity:
            spec["affinity"] = affinity
        if "gate" in blockers:
            spec["schedulingGates"] = [{"name": "example.com/gate"}]
        if preempt:
            spec["priorityClassName"] = "high"
        pods.append(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": spec}
        )
        node_ref = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
        hog_ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": hog, "namespace": "default"},
        }
        pod_ref = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": "default"},
        }
        # What lifts each blocker (one way, chosen at random where there are several).
        steps: list[dict[str, Any]] = []
        freed = False
        for b in blockers:
            if preempt and b in ("cpu", "anti", "port"):
                continue  # left to preemption: the running pod goes as its victim
            if b in ("cpu", "anti", "port") and not freed and rng.random() < 0.5:
                steps.append({"delete": hog_ref})
                freed = True
            elif b == "cpu" and not freed:
                more = str(cpu * 2)
                capacity = {"cpu": more, "memory": "4Gi", "pods": "110"}
                patch = {"status": {"capacity": capacity, "allocatable": capacity}}
                steps.append({"patch": {**node_ref, "subresource": "status", "patch": patch}})
            elif b == "anti" and not freed:
                patch = {"metadata": {"labels": {"app": "other"}}}
                steps.append({"patch": {**hog_ref, "patch": patch}})
            elif b == "port" and not freed:
                steps.append({"delete": hog_ref})
                freed = True
            elif b == "label":
                steps.append(
                    {"patch": {**node_ref, "patch": {"metadata": {"labels": {"tier": "gold"}}}}}
                )
            elif b == "taint" and rng.random() < 0.5:
                steps.append({"patch": {**node_ref, "patch": {"spec": {"taints": None}}}})
            elif b == "taint":
                toleration = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
                patch = {"spec": {"tolerations": [toleration]}}
                steps.append({"patch": {**pod_ref, "patch": patch}})
            elif b == "affinity":
                friend = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"friend-{i}", "labels": {"app": f"friend-{i}"}},
                    "spec": {"nodeName": name, "containers": [_container("100m", None)]},
                }
                steps.append({"create": friend})
            elif b == "gate":
                steps.append({"patch": {**pod_ref, "patch": {"spec": {"schedulingGates": None}}}})
            elif b == "cordon":
                steps.append({"patch": {**node_ref, "patch": {"spec": {"unschedulable": None}}}})
        # Some pods keep a blocker for good.
        if rng.random() < 0.25:
            steps.pop(rng.randrange(len(steps)))
        lifts.append(steps)
        # Changes no pod waits for.
        others.append(
            {"patch": {**node_ref, "patch": {"metadata": {"labels": {"tier": "silver"}}}}}
            if "label" not in blockers
            else {"patch": {**node_ref, "patch": {"metadata": {"annotations": {"seen": "yes"}}}}}
        )
        others.append({"patch": {**pod_ref, "patch": {"metadata": {"labels": {"seen": "yes"}}}}})
    others.append({"create": _node("extra", 4, labels={"zone": "b"}, taint=False, cordon=False)})
    # Interleave: each pod's own changes stay in their order.
    queues = [list(s) for s in lifts if s] + [[o] for o in rng.sample(others, rng.randint(0, 2))]
    steps = []
    while queues:
        q = rng.choice(queues)
        steps.append(q.pop(0))
        if not q:
            queues.remove(q)
        # A pause after every change: back to back, whether a pod's retry falls between two
        # changes is a race in kube-scheduler itself (its informers and its scheduling loop
        # run in parallel), and the moving events then differ from run to run.
        steps.append({"sleep": rng.choice((0.3, 0.3, 1.0, 2.5))})
    while steps and "sleep" in steps[-1]:
        steps.pop()
    config = yaml.safe_load(DEFAULT_CONFIG.read_text())
    if preemption:
        config["profiles"][0]["plugins"]["multiPoint"]["disabled"] = [{"name": "DynamicResources"}]
        high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000}
        setup.insert(0, {**high, "metadata": {"name": "high"}})
    return Scenario(
        name=f"fuzz-{'p-' if preemption else ''}{seed}",
        description=f"random scenario of seed {seed}",
        config=config,
        setup=setup,
        pods=pods,
        steps=steps,
        watch=12.0,
        compare_attempts=False,
        slack=SLACK,
        max_in_unschedulable=None,
        divergence=None,
    )


def compare(expected: dict[str, Any], got: dict[str, Any], *, moves: bool = True) -> list[str]:
    """:func:`conformance.dynamics.compare` for random scenarios: the same pods bound (each on
    the one node it may take), none later than allowed, the same first and final messages,
    and (``moves``) the same moving events.

    With preemption (``moves`` false) the moving events are not compared, nor a first
    decision only one run saw: a victim's deletion moves pods, and binds its preemptor, at a
    moment that depends on how fast the eviction went, before or after the pods were all
    first decided, where the comparison starts."""
    problems: list[str] = []
    have = {p["pod"]: p for p in got["pods"]}
    for want in expected["pods"]:
        p = have[want["pod"]]
        if (p["node"] is None) != (want["node"] is None):
            problems.append(
                f"{want['pod']}: node {p['node']!r} != kube-scheduler's {want['node']!r}"
            )
        elif want["node"] is None:
            if (p.get("reason"), p.get("message")) != (want.get("reason"), want.get("message")):
                problems.append(
                    f"{want['pod']}: final {p.get('message')!r} != {want.get('message')!r}"
                )
        elif p["boundAfter"] > want["boundAfter"] + LATENESS + SLACK:
            problems.append(
                f"{want['pod']}: bound {p['boundAfter']}s after the last step, "
                f"kube-scheduler {want['boundAfter']}s"
            )
        # A preemptor may be bound before every pod was first decided, so that its failed
        # attempt is seen by one run and not the other.
        seen = moves or (p["first"] and want["first"])
        if seen and p["first"] != want["first"]:
            problems.append(f"{want['pod']}: first {p['first']} != {want['first']}")
    moved, want_moved = set(got["movedBy"]), set(expected["movedBy"])
    if moves and (not want_moved <= moved or not moved - want_moved <= KNOWN_EXTRA_MOVES):
        problems.append(f"moved by {got['movedBy']}, kube-scheduler by {expected['movedBy']}")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="how many seeds")
    parser.add_argument("--start", type=int, default=1, help="the first seed")
    parser.add_argument("--cluster", default="dynamics-fuzz", help="cluster name")
    parser.add_argument("--out", type=Path, default=Path("fuzz-scenarios"), help="differing seeds")
    parser.add_argument(
        "--preemption", action="store_true", help="DefaultPreemption on, some pods preempting"
    )
    args = parser.parse_args()
    cluster.ensure_binaries(progress=lambda m: sys.stderr.write(m + "\n"))
    info = cluster.up(args.cluster, progress=lambda m: sys.stderr.write(m + "\n"))
    api = Api(info)
    kubeconfig = info.client_kubeconfig("system:kube-scheduler")
    work = Path(tempfile.mkdtemp(prefix="dynamics-fuzz-"))

    kubesched = scenario_launcher(kubeconfig, work)

    differing = 0
    try:
        for seed in range(args.start, args.start + args.seeds):
            scenario = generate(seed, preemption=args.preemption)
            expected = run(api, scenario, KubeSchedulerLauncher(api, args.cluster))
            got = run(api, scenario, kubesched)
            problems = compare(expected, got, moves=not args.preemption)
            verdict = "differs" if problems else "agrees"
            bound = sum(p["node"] is not None for p in expected["pods"])
            sys.stderr.write(
                f"seed {seed}: {verdict} ({len(scenario.pods)} pods, {bound} bound, "
                f"{len(scenario.steps)} steps, moved by {expected['movedBy']})\n"
            )
            for problem in problems:
                sys.stderr.write(f"  {problem}\n")
            if problems:
                differing += 1
                args.out.mkdir(parents=True, exist_ok=True)
                doc = {
                    "description": f"seed {seed}: " + "; ".join(problems),
                    "config": scenario.config,
                    "setup": scenario.setup,
                    "pods": scenario.pods,
                    "steps": scenario.steps,
                    "watch": scenario.watch,
                }
                (args.out / f"{scenario.name}.yaml").write_text(
                    yaml.safe_dump(doc, sort_keys=False)
                )
    finally:
        cluster.down(args.cluster)
    sys.stderr.write(f"{differing} of {args.seeds} seeds differ\n")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
