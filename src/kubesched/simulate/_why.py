"""Why one pod is pending: which plugins reject which nodes, the nodes that came closest, and
changes that would let it schedule, each checked on the simulated cluster.

The cluster is a :class:`~kubesched.simulate._run.Simulation` holding the running pods and the one
pod asked about. Before its real attempt, the pod's profile is asked, without changing anything:

- every Filter plugin about every node (the scheduling cycle stops at the first rejection; here
  each node gets the full list, so a node stopped by one plugin only is told apart from one that
  three plugins reject);
- the same pod with one change each (a toleration, a smaller request, no required node affinity,
  a cordon lifted), through the profile's own PreFilter and Filter: a way out is reported only
  when the changed pod fits somewhere.

Then the pod gets its attempt, with PostFilter: DefaultPreemption's victims, if any, are the last
way out. See docs/why.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import msgspec
import numpy as np

from kubesched import KubeschedError
from kubesched.api import (
    CPU,
    Pod,
    Taint,
    Toleration,
    find_untolerated_taint,
    parse_quantity,
    pod_requests,
)
from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import CycleState, FitError, Framework, Nodes, Registry
from kubesched.plugins.helper import DO_NOT_SCHEDULE_TAINT_EFFECTS
from kubesched.plugins.node_affinity import NAME as NODE_AFFINITY
from kubesched.plugins.node_resources.fit import NAME as NODE_RESOURCES_FIT
from kubesched.plugins.node_unschedulable import NAME as NODE_UNSCHEDULABLE
from kubesched.plugins.taint_toleration import NAME as TAINT_TOLERATION
from kubesched.plugins.volume_zone import LABEL_TOPOLOGY_ZONE
from kubesched.plugins.volume_zone import NAME as VOLUME_ZONE
from kubesched.simulate._input import Inputs
from kubesched.simulate._run import (
    PRE_FILTER_RESULT,
    REASON_GATED,
    REASON_NOT_HANDLED,
    REASON_SCHEDULED,
    PodResult,
    Simulation,
)

#: The taint the node lifecycle controller puts on a cordoned node; a pod tolerating it passes
#: NodeUnschedulable too (as DaemonSet pods do).
TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"

#: Kinds of :class:`WayOut`.
WAY_TOLERATION = "toleration"
WAY_SMALLER_REQUEST = "smallerRequest"
WAY_NO_NODE_AFFINITY = "noNodeAffinity"
WAY_UNCORDON = "uncordon"
WAY_PREEMPTION = "preemption"
WAY_VOLUME_ZONE = "volumeZone"

REASON_UNSCHEDULABLE = "Unschedulable"

#: How many distinct taints and cordoned nodes are tried as ways out.
MAX_TRIED = 3
#: How many of the nodes a way out fits on are named.
MAX_NAMED = 5


@dataclass
class Rejection:
    """One Filter plugin's part in the pod's rejection."""

    plugin: str
    #: Nodes where it was the first plugin to reject (the count in the FailedScheduling message).
    first: int
    #: Nodes it rejects at all.
    any: int
    #: Reason -> nodes, over the nodes it rejects (a node lacking cpu and memory counts for
    #: both reasons).
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class NearNode:
    """A node that came close: every plugin that rejects it, in Filter order, with its reason."""

    name: str
    blocked_by: dict[str, str]
    #: Resource -> (requested by the pod, free on the node), for the resources it lacks.
    short: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class WayOut:
    """A change that lets the pod schedule, as checked on the simulated cluster."""

    kind: str
    #: The change and its effect, for people: "fits on 3 node(s) (...) with a toleration for ...".
    text: str
    #: The nodes the pod fits on after the change (all of them; printed up to :data:`MAX_NAMED`).
    nodes: list[str] = field(default_factory=list)
    #: Kind-specific facts (the toleration, the request, the victims ...), for programs.
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class WhyReport:
    namespace: str
    name: str
    scheduler_name: str
    #: ``Scheduled``, ``Unschedulable``, ``SchedulerError``, ``SchedulingGated``, ``NotHandled``.
    reason: str
    #: Where the pod would go now (when it fits), and the scheduler's message.
    node: str | None
    message: str
    num_nodes: int
    #: Set when PreFilter ruled out every node: no node was asked.
    pre_filter: str = ""
    rejections: list[Rejection] = field(default_factory=list)
    closest: list[NearNode] = field(default_factory=list)
    ways_out: list[WayOut] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class WhyError(KubeschedError):
    """The pod cannot be asked about (not found, or already running)."""


def only_pod(inputs: Inputs, namespace: str, name: str) -> Inputs:
    """``inputs`` with one pending pod: ``namespace/name``; the other pending pods left out,
    since they are not on the cluster the pod is tried on."""
    target = [
        p for p in inputs.pods if p.metadata.namespace == namespace and p.metadata.name == name
    ]
    if not target:
        raise WhyError(f'pod "{name}" not found in namespace "{namespace}"')
    pod = target[0]
    if pod.spec.node_name:
        raise WhyError(f"pod {pod.key} is not pending: it is bound to node {pod.spec.node_name}")
    return Inputs(
        nodes=inputs.nodes,
        pods=[*inputs.running, pod],
        objects=inputs.objects,
        issues=inputs.issues,
    )


async def why(
    inputs: Inputs,
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    closest: int = 5,
    seed: int | None = None,
) -> WhyReport:
    """The report on ``inputs``' one pending pod (see :func:`only_pod`)."""
    start = time.perf_counter()
    sim = Simulation(inputs, config, registry, seed=seed)
    (pod,) = sim.pending
    fwk = sim.frameworks.get(pod.spec.scheduler_name)
    analysis = _Analysis(fwk, pod, closest) if fwk is not None and not _gated(sim, pod) else None
    result = (await sim.run()).pods[0]
    report = WhyReport(
        namespace=pod.metadata.namespace,
        name=pod.metadata.name,
        scheduler_name=pod.spec.scheduler_name,
        reason=result.reason,
        node=result.node,
        message=result.message,
        num_nodes=len(inputs.nodes),
    )
    if analysis is not None and not analysis.fits and result.reason == REASON_SCHEDULED:
        # In only by preemption (the simulation's second attempt): today it fits nowhere.
        report.reason, report.node, report.message = REASON_UNSCHEDULABLE, None, analysis.message
    if analysis is not None and result.reason not in (REASON_GATED, REASON_NOT_HANDLED):
        analysis.fill(report)
        report.ways_out.extend(_preemption(pod, result, inputs))
    report.seconds = time.perf_counter() - start
    return report


def _gated(sim: Simulation, pod: Pod) -> bool:
    return sim.pre_enqueue(pod) is not None


class _Analysis:
    """What the profile says about the pod and its variants, on the cluster before the attempt."""

    def __init__(self, fwk: Framework, pod: Pod, closest: int) -> None:
        self.fwk = fwk
        self.pod = pod
        snapshot = fwk.snapshot
        names = snapshot.table.names
        state = CycleState()
        feasible, diagnosis = fwk.find_nodes_that_fit(state, pod)
        self.pre_filter = diagnosis.pre_filter_msg
        self.fits = len(feasible) > 0
        #: kube-scheduler's FailedScheduling message, without PostFilter's part.
        self.message = "" if self.fits else str(FitError(pod, diagnosis))
        #: Node name -> plugin -> reason, for every node some plugin rejects.
        self.blocked: dict[str, dict[str, str]] = {}
        self.rejections: dict[str, Rejection] = {}
        if self.pre_filter or self.fits:
            self.closest: list[NearNode] = []
            return
        # Nodes a PreFilter result left out are reported as such, never asked.
        asked = fwk.all_nodes().slots
        for g in diagnosis.groups:
            if not g.status.plugin:
                for s in g.slots.tolist():
                    self.blocked[names[s]] = {PRE_FILTER_RESULT: g.status.message}
                asked = asked[~np.isin(asked, g.slots)]
        nodes = Nodes(snapshot, asked)
        for p in fwk.filter_plugins:
            if p.name in state.skip_filter_plugins:
                continue
            verdict = p.filter_nodes(state, pod, nodes)
            if len(verdict.statuses) == 1:
                continue
            rejection = Rejection(p.name, 0, 0)
            for i in np.flatnonzero(verdict.ids).tolist():
                status = verdict.statuses[int(verdict.ids[i])]
                assert status is not None
                reason = ", ".join(status.reasons) or status.message
                name = names[int(asked[i])]
                by = self.blocked.setdefault(name, {})
                if not by:
                    rejection.first += 1
                by[p.name] = reason
                rejection.any += 1
                # Per reason, as the FailedScheduling message counts them.
                for r in status.reasons or [status.message]:
                    rejection.reasons[r] = rejection.reasons.get(r, 0) + 1
            if rejection.any:
                self.rejections[p.name] = rejection
        self.requests = pod_requests(pod)
        self.closest = sorted(
            (self._near(name, by) for name, by in self.blocked.items()),
            key=lambda n: (len(n.blocked_by), _shortfall(n), n.name),
        )[:closest]

    def _near(self, name: str, by: dict[str, str]) -> NearNode:
        near = NearNode(name, by)
        if NODE_RESOURCES_FIT in by:
            info = self.fwk.snapshot.get(name)
            assert info is not None
            for resource, want in self.requests.items():
                free = info.allocatable.get(resource, 0) - info.requested.get(resource, 0)
                if want > free:
                    near.short[resource] = (want, max(free, 0))
        return near

    def fill(self, report: WhyReport) -> None:
        report.pre_filter = self.pre_filter
        report.rejections = sorted(self.rejections.values(), key=lambda r: (-r.first, -r.any))
        report.closest = self.closest
        if self.fits or self.pre_filter:
            return
        for way in (
            self._tolerations,
            self._smaller_request,
            self._no_node_affinity,
            self._uncordon,
        ):
            report.ways_out.extend(way())
        report.ways_out.extend(self._volume_zone())

    def _fits(self, variant: Pod, within: Iterable[str] | None = None) -> list[str]:
        feasible, _ = self.fwk.find_nodes_that_fit(CycleState(), variant)
        names = feasible.names()
        if within is not None:
            keep = set(within)
            names = [n for n in names if n in keep]
        return sorted(names)

    def _only(self, plugin: str) -> list[str]:
        """Nodes rejected by ``plugin`` alone."""
        return [n for n, by in self.blocked.items() if list(by) == [plugin]]

    def _tolerations(self) -> list[WayOut]:
        counts: dict[Taint, int] = {}
        for name, by in self.blocked.items():
            if TAINT_TOLERATION not in by:
                continue
            info = self.fwk.snapshot.get(name)
            assert info is not None
            assert info.node is not None
            tolerations = list(self.pod.spec.tolerations)
            while (
                taint := find_untolerated_taint(
                    info.node.spec.taints, tolerations, DO_NOT_SCHEDULE_TAINT_EFFECTS
                )
            ) is not None:
                plain = Taint(key=taint.key, effect=taint.effect, value=taint.value)
                counts[plain] = counts.get(plain, 0) + 1
                tolerations.append(_toleration(plain))
        out = []
        for taint in sorted(counts, key=lambda t: -counts[t])[:MAX_TRIED]:
            variant = _with_tolerations(self.pod, [_toleration(taint)])
            nodes = self._fits(variant)
            if nodes:
                what = f"{taint.key}={taint.value}" if taint.value else taint.key
                out.append(
                    WayOut(
                        WAY_TOLERATION,
                        f"fits on {_named(nodes)} with a toleration for `{what}:{taint.effect}`",
                        nodes,
                        {"toleration": msgspec.to_builtins(_toleration(taint))},
                    )
                )
        return out

    def _smaller_request(self) -> list[WayOut]:
        # The node needing the smallest cut of the pod's requests, among those only
        # NodeResourcesFit rejects for lack of a resource the pod requests.
        best: tuple[Fraction, NearNode] | None = None
        for name in self._only(NODE_RESOURCES_FIT):
            near = self._near(name, self.blocked[name])
            if not near.short or any(free == 0 for _, free in near.short.values()):
                continue
            cut = min(Fraction(free, want) for want, free in near.short.values())
            if best is None or cut > best[0]:
                best = (cut, near)
        if best is None:
            return []
        near = best[1]
        limits = {r: free for r, (_, free) in near.short.items()}
        variant = _with_requests_at_most(self.pod, self.requests, limits)
        nodes = self._fits(variant)
        if near.name not in nodes:
            return []
        parts = [
            f"{r} request were at most {format_amount(r, free)} (now {format_amount(r, want)})"
            for r, (want, free) in near.short.items()
        ]
        return [
            WayOut(
                WAY_SMALLER_REQUEST,
                f"fits on node {near.name}{_others(nodes, near.name)} if its "
                + " and ".join(parts),
                nodes,
                {
                    "node": near.name,
                    "requests": {r: format_amount(r, v) for r, v in limits.items()},
                },
            )
        ]

    def _no_node_affinity(self) -> list[WayOut]:
        if NODE_AFFINITY not in self.rejections:
            return []
        spec = self.pod.spec
        affinity = spec.affinity
        if affinity is not None and affinity.node_affinity is not None:
            affinity = msgspec.structs.replace(
                affinity,
                node_affinity=msgspec.structs.replace(
                    affinity.node_affinity, required_during_scheduling_ignored_during_execution=None
                ),
            )
        variant = msgspec.structs.replace(
            self.pod, spec=msgspec.structs.replace(spec, node_selector={}, affinity=affinity)
        )
        nodes = self._fits(variant)
        if not nodes:
            return []
        return [
            WayOut(
                WAY_NO_NODE_AFFINITY,
                f"fits on {_named(nodes)} without its nodeSelector and required node affinity",
                nodes,
                {"nodeSelector": dict(spec.node_selector)},
            )
        ]

    def _uncordon(self) -> list[WayOut]:
        cordoned = [
            n for n, by in self.blocked.items() if NODE_UNSCHEDULABLE in by and len(by) == 1
        ]
        if not cordoned:
            return []
        toleration = Toleration(
            key=TAINT_NODE_UNSCHEDULABLE, operator="Exists", effect="NoSchedule"
        )
        nodes = self._fits(_with_tolerations(self.pod, [toleration]), within=cordoned)
        return [
            WayOut(
                WAY_UNCORDON,
                f"fits on node {n} once uncordoned (`kubectl uncordon {n}`)",
                [n],
                {"node": n},
            )
            for n in nodes[:MAX_TRIED]
        ]

    def _volume_zone(self) -> list[WayOut]:
        """Where VolumeZone lets the pod go, and what stops it there."""
        if VOLUME_ZONE not in self.rejections:
            return []
        allowed = [
            info
            for info in self.fwk.snapshot.node_infos()
            if VOLUME_ZONE not in self.blocked.get(info.name, {})
        ]
        zones = sorted(
            {
                info.node.metadata.labels.get(LABEL_TOPOLOGY_ZONE, "")
                for info in allowed
                if info.node is not None
            }
            - {""}
        )
        stopped: dict[str, int] = {}
        for info in allowed:
            for plugin in self.blocked.get(info.name, {}):
                stopped[plugin] = stopped.get(plugin, 0) + 1
        where = f"zone {', '.join(zones)}" if zones else "no zone"
        if not allowed:
            text = "its volumes are in a zone with no node"
        else:
            blockers = ", ".join(f"{p} rejects {n}" for p, n in sorted(stopped.items()))
            text = (
                f"its volumes are in {where}, where no node has room for it: "
                f"{len(allowed)} node(s) there ({blockers})"
            )
        return [
            WayOut(
                WAY_VOLUME_ZONE,
                text,
                [],
                {"zones": zones, "nodes": len(allowed), "rejectedBy": stopped},
            )
        ]


def _preemption(pod: Pod, result: PodResult, inputs: Inputs) -> list[WayOut]:
    if not result.victims or result.nominated_node is None:
        return []
    by_key = {p.key: p for p in inputs.running}
    victims = [
        {"pod": key, "priority": by_key[key].spec.priority or 0}
        for key in result.victims
        if key in by_key
    ]
    mine = pod.spec.priority or 0
    prios = ", ".join(sorted({str(v["priority"]) for v in victims}))
    return [
        WayOut(
            WAY_PREEMPTION,
            f"preemption would evict {', '.join(result.victims)} on node "
            f"{result.nominated_node} (priority {prios} < {mine}), then it fits there",
            [result.nominated_node],
            {"node": result.nominated_node, "victims": victims},
        )
    ]


def _shortfall(near: NearNode) -> Fraction:
    return sum(
        (Fraction(want - free, want) for want, free in near.short.values()),
        start=Fraction(0),
    )


def _toleration(taint: Taint) -> Toleration:
    if taint.value:
        return Toleration(key=taint.key, operator="Equal", value=taint.value, effect=taint.effect)
    return Toleration(key=taint.key, operator="Exists", effect=taint.effect)


def _with_tolerations(pod: Pod, extra: list[Toleration]) -> Pod:
    spec = msgspec.structs.replace(pod.spec, tolerations=[*pod.spec.tolerations, *extra])
    return msgspec.structs.replace(pod, spec=spec)


def _with_requests_at_most(pod: Pod, requests: dict[str, int], limits: dict[str, int]) -> Pod:
    """``pod`` with each container's request of each resource in ``limits`` scaled down so the
    pod's total is at most the limit (in scheduler units: millicores for cpu)."""
    scale = {r: Fraction(limit, requests[r]) for r, limit in limits.items() if requests.get(r)}

    def scaled(containers: list[Any]) -> list[Any]:
        out = []
        for c in containers:
            reqs = dict(c.resources.requests)
            for r, f in scale.items():
                if r in reqs:
                    reqs[r] = _scaled_quantity(r, reqs[r], f)
            out.append(
                msgspec.structs.replace(
                    c, resources=msgspec.structs.replace(c.resources, requests=reqs)
                )
            )
        return out

    spec = pod.spec
    resources = spec.resources
    if resources is not None and resources.requests:
        reqs = dict(resources.requests)
        for r, f in scale.items():
            if r in reqs:
                reqs[r] = _scaled_quantity(r, reqs[r], f)
        resources = msgspec.structs.replace(resources, requests=reqs)
    spec = msgspec.structs.replace(
        spec,
        containers=scaled(spec.containers),
        init_containers=scaled(spec.init_containers),
        resources=resources,
    )
    return msgspec.structs.replace(pod, spec=spec)


def _scaled_quantity(resource: str, quantity: str, factor: Fraction) -> str:
    value = parse_quantity(quantity) * factor
    if resource == CPU:
        return f"{int(value * 1000)}m"
    return str(int(value))


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def format_amount(resource: str, amount: int) -> str:
    """An amount in scheduler units as a quantity: ``1500m``, ``2``, ``512Mi``."""
    if resource == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    for suffix, size in _BINARY:
        if amount >= size and amount % size == 0:
            return f"{amount // size}{suffix}"
    for suffix, size in _BINARY:
        if amount >= size:
            return f"{amount / size:.1f}{suffix}"
    return str(amount)


def _named(nodes: list[str]) -> str:
    """``3 node(s) (a, b, c)``, naming up to :data:`MAX_NAMED`."""
    more = len(nodes) - MAX_NAMED
    shown = ", ".join(nodes[:MAX_NAMED]) + (f" and {more} more" if more > 0 else "")
    return f"{len(nodes)} node(s) ({shown})"


def _others(nodes: list[str], one: str) -> str:
    n = sum(1 for x in nodes if x != one)
    return f" (and {n} other node(s))" if n else ""
