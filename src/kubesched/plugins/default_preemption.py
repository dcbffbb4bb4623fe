"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods to make room.

kube-scheduler v1.34's ``defaultpreemption`` plugin with its ``preemption.Evaluator``, as a
PostFilter (run only when Filter left no node) plus a PreEnqueue (asynchronous preemption):
eligibility, candidate nodes, victims found by a dry run on each, the node, then the evictions in
the background. Each step as kube-scheduler takes it: docs/plugins/default-preemption.md.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import math
import random
import time
from collections.abc import Callable, Container, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kubesched.api import Pod, PodDisruptionBudget, label_selector_matches
from kubesched.config import DefaultPreemptionArgs, decode_args
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    EnqueueExtensions,
    FitError,
    Handle,
    NodeContent,
    NodeGroup,
    NodeInfo,
    NodeTrial,
    PodInfo,
    PostFilterPlugin,
    PreEnqueuePlugin,
    QueueingHint,
    Status,
)

NAME = "DefaultPreemption"
# Its hint runs for each preemptor a victim's deletion reaches: an Enum member read through its
# class costs ten times a global on Python 3.11.
_QUEUE_SKIP = QueueingHint.SKIP

#: With kept dry runs possible, nodes are dry-run together, at least this many at a time (as
#: many as candidates are still wanted, when more).
DRY_RUN_CHUNK_AT_LEAST = 16

log = logging.getLogger(__name__)

#: A node with no pod of lower priority than the preemptor.
ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
#: Every node Filter rejected for a reason evicting pods cannot change.
ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING_VICTIM = "not eligible due to a terminating pod on the nominated node."
MSG_NO_CANDIDATE = "no candidate node for preemption"
#: PreEnqueue, while the victims of the pod's last preemption are being deleted.
MSG_PREEMPTION_RUNNING = "waiting for the preemption for this pod to be finished"

PREEMPT_NEVER = "Never"
#: The condition the scheduler sets on a victim before deleting it, and its reason.
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

_MAX_INT32 = 2**31 - 1


def pod_priority(pod: Pod) -> int:
    """``corev1helpers.PodPriority``: ``spec.priority``, 0 when unset."""
    return pod.spec.priority if pod.spec.priority is not None else 0


def pod_start_time(pod: Pod, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime`` in seconds, ``now`` if the pod has not started
    (assumed and bound pods that no kubelet has started yet)."""
    text = pod.status.start_time
    if not text:
        return now
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return now


def more_important_pod(a: Pod, b: Pod, now: float) -> bool:
    """``MoreImportantPod``: higher priority, or equal priority and started earlier."""
    pa, pb = pod_priority(a), pod_priority(b)
    if pa != pb:
        return pa > pb
    return pod_start_time(a, now) < pod_start_time(b, now)


def pod_terminating_by_preemption(pod: Pod) -> bool:
    """Whether the pod is being deleted because the scheduler preempted it (its
    ``DisruptionTarget`` condition says ``PreemptionByScheduler``)."""
    if pod.metadata.deletion_timestamp is None:
        return False
    for c in pod.status.conditions:
        if c.type == DISRUPTION_TARGET:
            return c.status == "True" and c.reason == REASON_PREEMPTION_BY_SCHEDULER
    return False


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PodDisruptionBudget]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """``filterPodsWithPDBViolation``: split ``pods`` (order kept) into those whose eviction,
    counted in this order against each matching budget's ``disruptionsAllowed``, would violate
    a PodDisruptionBudget, and the others.

    A budget matches a pod in its namespace through a non-empty, valid selector. A pod the API
    server already counted (in the budget's ``disruptedPods``) does not use it up again.
    """
    allowed = [pdb.status.disruptions_allowed for pdb in pdbs]
    violating: list[PodInfo] = []
    non_violating: list[PodInfo] = []
    for pi in pods:
        pod = pi.pod
        violated = False
        labels = pod.metadata.labels
        if labels:
            for i, pdb in enumerate(pdbs):
                if pdb.metadata.namespace != pod.metadata.namespace:
                    continue
                selector = pdb.spec.selector
                if selector is None or (
                    not selector.match_labels and not selector.match_expressions
                ):
                    continue
                if not label_selector_matches(selector, labels):
                    continue
                if pod.metadata.name in pdb.status.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else non_violating).append(pi)
    return violating, non_violating


@dataclass(slots=True)
class Victims:
    """``extenderv1.Victims``: the pods to evict on a node, most important first."""

    pods: list[Pod]
    num_pdb_violations: int = 0


@dataclass(slots=True)
class Candidate:
    """A node the preemptor fits on once ``victims`` are gone."""

    name: str
    victims: Victims


def pick_one_node_for_preemption(candidates: Sequence[Candidate], now: float | None = None) -> str:
    """``pickOneNodeForPreemption``: the node by kube-scheduler's criteria, each one used only
    to break the ties of the previous: fewest PDB violations; lowest priority of the most
    important victim; lowest sum of victim priorities (each shifted by 2^31, so that more
    negative-priority victims never look cheaper); fewest victims; latest start time among the
    most important victims; then the first candidate."""
    if not candidates:
        return ""
    clock = time.time() if now is None else now

    def earliest_top_start(c: Candidate) -> float:
        pods = c.victims.pods
        top = max(pod_priority(p) for p in pods)
        return min(pod_start_time(p, clock) for p in pods if pod_priority(p) == top)

    criteria: list[Callable[[Candidate], float]] = [
        lambda c: -c.victims.num_pdb_violations,
        lambda c: -pod_priority(c.victims.pods[0]),
        lambda c: -sum(pod_priority(p) + _MAX_INT32 + 1 for p in c.victims.pods),
        lambda c: -len(c.victims.pods),
        earliest_top_start,
    ]
    remaining = list(candidates)
    for score in criteria:
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0].name


def _any_unschedulable(filtered: Mapping[str, Status]) -> bool:
    """Whether Filter rejected some node as Unschedulable (where preemption may help). The nodes
    of a group share one status: each distinct status is looked at once, the map walked in C."""
    statuses = filtered.values()
    distinct = dict(zip(map(id, statuses), statuses, strict=True)).values()
    return any(s.code == Code.UNSCHEDULABLE for s in distinct)


def _aggregate(errors: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message, or distinct ones in brackets."""
    distinct = list(dict.fromkeys(errors))
    if len(distinct) == 1:
        return distinct[0]
    return "[" + ", ".join(distinct) + "]"


#: A dry run's outcome on a node: the victims, how many of them violate a PDB, or why none.
_Outcome = tuple[list[Pod], int, Status | None]


@dataclass(slots=True, frozen=True)
class _DryRun:
    """What a dry run's outcome on a node depended on: the key, the node's content, the
    nominator's stamp of the node with the UIDs of the pods nominated there and where each is
    counted (none is the preemptor)."""

    key: Hashable
    node: NodeContent
    stamp: Hashable
    uids: tuple[str, ...]
    where: tuple[str | None, ...]

    def stands(
        self,
        key: Hashable,
        info: NodeInfo,
        stamp: Hashable,
        uid: str,
        node_of_pod: Callable[[str], str | None],
    ) -> bool:
        """Whether the outcome stands for preemptor ``uid`` with ``key`` on ``info`` now
        (``node_of_pod``: the snapshot's)."""
        return (
            self.stamp == stamp
            and self.key == key
            and uid not in self.uids
            and self.where == tuple(map(node_of_pod, self.uids))
            and self.node.holds(info)
        )


@dataclass(slots=True)
class _Reprieves:
    """One node's part of :meth:`DefaultPreemption._select_victims_on_nodes`."""

    at: int
    trial: NodeTrial
    potential: list[PodInfo]
    #: The potential victims in the order they are put back: PDB-violating ones first.
    order: list[PodInfo] = field(default_factory=list)
    #: How many of ``order`` violate a PDB (the first ones).
    violating: int = 0
    victims: list[PodInfo] = field(default_factory=list)
    violations: int = 0


class _DryRunError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


class _RunningPreemptions(Container[str]):
    """The preemptors whose preemption is still running, by UID (``IsPodRunningPreemption``
    as a container: the queue asks it for each gated pod an event reaches).

    Once only the last victim is left, the preemption counts as done as soon as the snapshot
    shows that victim gone or being deleted, as upstream reads its informer. Its eviction having
    returned is not enough: until the snapshot shows it, a cycle of the preemptor would still
    count the victim and preempt it again (finding it gone), so the preemptor stays held until
    the victim's deletion is seen, as it would be had that event come before the answer."""

    __slots__ = ("_handle", "_last_victim", "_preempting")

    def __init__(self, handle: Handle):
        self._handle = handle
        #: Preemptors whose victims are being evicted in the background.
        self._preempting: set[str] = set()
        #: Preemptor UID -> UID of the last victim, once only that one is left to evict (kept
        #: after the preemption ends, until the snapshot shows the victim go).
        self._last_victim: dict[str, str] = {}

    def start(self, uid: str) -> None:
        self._preempting.add(uid)
        self._last_victim.pop(uid, None)
        # Preemptors deleted while held are never asked again: their victims go meanwhile.
        for gone in [u for u, v in self._last_victim.items() if not self._counted(v)]:
            del self._last_victim[gone]

    def last_victim_left(self, uid: str, victim_uid: str) -> None:
        self._last_victim[uid] = victim_uid

    def finish(self, uid: str, *, evicted: bool) -> None:
        """The preemption ended; ``evicted``: its last victim's eviction went through, so the
        preemptor stays held until the snapshot shows that victim go."""
        self._preempting.discard(uid)
        if not evicted:
            self._last_victim.pop(uid, None)

    def __contains__(self, uid: object) -> bool:
        if not isinstance(uid, str):
            return False
        last = self._last_victim.get(uid)
        if last is None:
            return uid in self._preempting
        if self._counted(last):
            return True
        if uid not in self._preempting:
            del self._last_victim[uid]
        return False

    def _counted(self, victim_uid: str) -> bool:
        """The victim is still in the snapshot, and not being deleted."""
        victim = self._handle.snapshot.pod_info(victim_uid)
        return victim is not None and victim.pod.metadata.deletion_timestamp is None


class DefaultPreemption(PostFilterPlugin, PreEnqueuePlugin, EnqueueExtensions):
    """Preemption of lower-priority pods (PostFilter), asynchronous as kube-scheduler v1.34."""

    name = NAME
    args_type = DefaultPreemptionArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(DefaultPreemptionArgs, args)
        super().__init__(handle, decoded)
        self.min_candidate_nodes_percentage = int(decoded.min_candidate_nodes_percentage)
        self.min_candidate_nodes_absolute = int(decoded.min_candidate_nodes_absolute)
        #: Where the dry run starts among the potential nodes (``getOffsetRand``).
        self.rng: random.Random = handle.rng
        #: PreEnqueue's answer while a pod's victims are being evicted, made once: every event
        #: reaching the waiting preemptors asks again.
        self._running = Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_PREEMPTION_RUNNING, plugin=self.name
        )
        self._running_preemptions = _RunningPreemptions(handle)
        self._tasks: set[asyncio.Task[None]] = set()
        #: Node name -> (NodeInfo, its generation, the lowest priority of its pods or None).
        self._lowest: dict[str, tuple[NodeInfo, int, int | None]] = {}
        #: Node name -> what its last dry run depended on, and its outcome (:meth:`_dry_run_nodes`).
        self._dry_runs: dict[str, tuple[_DryRun, _Outcome]] = {}
        #: The PodDisruptionBudgets those dry runs split victims by (held: their ids are the key).
        self._dry_runs_pdbs: list[PodDisruptionBudget] = []
        # A customized PreEnqueue is asked itself (held_pods would speak for it).
        self._held = (
            None
            if any(
                getattr(type(self), m) is not getattr(DefaultPreemption, m)
                for m in ("pre_enqueue", "is_pod_running_preemption")
            )
            else self._running_preemptions
        )
        # A customized evaluator may read anything: its dry runs are not reused.
        self._reuse_dry_runs = all(
            getattr(type(self), m) is getattr(DefaultPreemption, m)
            for m in ("is_eligible_pod", "more_important_pod", "select_victims_on_node")
        )

    # -- extension points ------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        nominated, status = self.preempt(state, pod, filtered)
        if status is not None and status.message:
            return nominated, Status(status.code, "preemption: " + status.message)
        return nominated, status

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if self.is_pod_running_preemption(pod.metadata.uid):
            return self._running
        return None

    def held_pods(self) -> Container[str] | None:
        return self._held

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only to let a pod held by PreEnqueue be looked at again once victims are deleted; the
        # plugins that rejected it in Filter decide whether it is worth trying.
        return [
            ClusterEventWithHint(
                ClusterEvent("AssignedPod", ActionType.DELETE), self._skip_after_pod_deletion
            )
        ]

    @staticmethod
    def _skip_after_pod_deletion(pod: Pod, old: Any, new: Any) -> QueueingHint:
        return _QUEUE_SKIP

    # -- customization points (kube-scheduler's IsEligiblePod and MoreImportantPod) ---------------

    def is_eligible_pod(self, node: NodeInfo, victim: PodInfo, preemptor: Pod) -> bool:
        """Whether ``victim`` may be preempted at all, beyond having a lower priority."""
        return True

    def more_important_pod(self, a: Pod, b: Pod, now: float) -> bool:
        """Whether ``a`` should be kept rather than ``b`` (victims are reprieved in this order)."""
        return more_important_pod(a, b, now)

    def is_preemption_allowed(self, node: NodeInfo, victim: PodInfo, preemptor: Pod) -> bool:
        return pod_priority(victim.pod) < pod_priority(preemptor) and self.is_eligible_pod(
            node, victim, preemptor
        )

    # -- the evaluator -------------------------------------------------------------------------

    def preempt(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        """``Evaluator.Preempt``: the nominated node (``None``: leave the nomination as it is,
        ``""``: clear it) and the status, without the ``preemption:`` prefix."""
        nominated_status = filtered.get(pod.status.nominated_node_name) or Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        )
        eligible, msg = self.pod_eligible_to_preempt_others(pod, nominated_status)
        if not eligible:
            return None, Status(Code.UNSCHEDULABLE, msg)
        snapshot = self.handle.snapshot
        if not len(snapshot):
            return None, Status(Code.ERROR, "no nodes available")
        if not _any_unschedulable(filtered):
            # No node may do (a pod larger than any): nothing to walk node by node.
            log.debug("preemption will not help schedule pod %s on any node", pod.key)
            return "", Status(Code.UNSCHEDULABLE, self._fit_error(pod, (), {}))
        all_nodes = list(snapshot.node_infos())
        now = time.time()
        candidates, statuses, errors = self.find_candidates(state, pod, all_nodes, filtered, now)
        if errors and not candidates:
            return None, Status(Code.ERROR, _aggregate(errors))
        if not candidates:
            return "", Status(Code.UNSCHEDULABLE, self._fit_error(pod, all_nodes, statuses))
        best = self.select_candidate(candidates, now)
        if best is None or not best.name:
            return None, Status(Code.UNSCHEDULABLE, MSG_NO_CANDIDATE)
        self.prepare_candidate_async(best, pod)
        return best.name, None

    def pod_eligible_to_preempt_others(
        self, pod: Pod, nominated_node_status: Status | None
    ) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.spec.preemption_policy == PREEMPT_NEVER:
            return False, MSG_POLICY_NEVER
        name = pod.status.nominated_node_name
        if name:
            if (
                nominated_node_status is not None
                and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                return True, ""
            info = self.handle.snapshot.get(name)
            if info is not None:
                for pi in info.pods.values():
                    if self.is_preemption_allowed(info, pi, pod) and pod_terminating_by_preemption(
                        pi.pod
                    ):
                        return False, MSG_TERMINATING_VICTIM
        return True, ""

    def calculate_num_candidates(self, num_nodes: int) -> int:
        """``max(nodes × percentage / 100, absolute)``, at most ``num_nodes``."""
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random offset into the potential nodes, and how many candidates to look for."""
        return self.rng.randrange(num_nodes), self.calculate_num_candidates(num_nodes)

    def find_candidates(
        self,
        state: CycleState,
        pod: Pod,
        all_nodes: Sequence[NodeInfo],
        filtered: dict[str, Status],
        now: float,
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Dry runs on the nodes Filter rejected as Unschedulable: candidates, the status of each
        node that is none, and the errors met."""
        potential = [
            info
            for info in all_nodes
            if (s := filtered.get(info.name)) is not None and s.code == Code.UNSCHEDULABLE
        ]
        if not potential:
            log.debug("preemption will not help schedule pod %s on any node", pod.key)
            return [], {}, []
        pdbs = self.handle.list_objects(PodDisruptionBudget)
        offset, num = self.get_offset_and_num_candidates(len(potential))
        return self.dry_run_preemption(state, pod, potential, pdbs, offset, num, now)

    def dry_run_preemption(
        self,
        state: CycleState,
        pod: Pod,
        potential: Sequence[NodeInfo],
        pdbs: Sequence[PodDisruptionBudget],
        offset: int,
        num_candidates: int,
        now: float | None = None,
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """``DryRunPreemption``: visit ``potential`` round robin from ``offset`` until
        ``num_candidates`` candidates are found with at least one violating no PDB. Candidates
        violating none come first; each list keeps at most ``num_candidates``."""
        clock = time.time() if now is None else now
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        errors: list[str] = []
        n = len(potential)
        key = self._dry_run_key(state, pod, pdbs)
        visited = 0
        while visited < n:
            # Without a key each dry run is made as the node's turn comes; with one, the nodes
            # up to where enough candidates may be found are dry-run together (a node past the
            # end only has its outcome kept).
            wanted = num_candidates - len(non_violating) - len(violating)
            chunk = 1 if key is None else min(n - visited, max(wanted, DRY_RUN_CHUNK_AT_LEAST))
            nodes = [potential[(offset + visited + j) % n] for j in range(chunk)]
            visited += chunk
            for info, outcome in zip(
                nodes, self._dry_run_nodes(state, pod, nodes, pdbs, clock, key), strict=True
            ):
                victims, num_violations, status = outcome
                if status is None and victims:
                    found = non_violating if num_violations == 0 else violating
                    if len(found) < num_candidates:
                        found.append(Candidate(info.name, Victims(list(victims), num_violations)))
                    if non_violating and len(non_violating) + len(violating) >= num_candidates:
                        return non_violating + violating, statuses, errors
                    continue
                if status is None:
                    status = Status(
                        Code.ERROR, f'expected at least one victim pod on node "{info.name}"'
                    )
                if status.code == Code.ERROR:
                    errors.append(status.message)
                statuses[info.name] = status
        return non_violating + violating, statuses, errors

    def _dry_run_key(
        self, state: CycleState, pod: Pod, pdbs: Sequence[PodDisruptionBudget]
    ) -> Hashable | None:
        """What this pod's dry runs depend on besides each node, when an earlier dry run on an
        unchanged node may stand for a new one: the Filter plugins judge each node alone (as
        with ordinary pods), and the budgets are the ones the kept dry runs were split by (else
        those are dropped)."""
        if not self._reuse_dry_runs:
            return None
        key = self.handle.node_verdict_key(state, pod)
        if key is None:
            return None
        kept = self._dry_runs_pdbs
        if len(kept) != len(pdbs) or any(a is not b for a, b in zip(kept, pdbs, strict=False)):
            self._dry_runs.clear()
            self._dry_runs_pdbs = list(pdbs)
        return key

    def _dry_run_nodes(
        self,
        state: CycleState,
        pod: Pod,
        nodes: Sequence[NodeInfo],
        pdbs: Sequence[PodDisruptionBudget],
        clock: float,
        key: Hashable | None,
    ) -> list[_Outcome]:
        """:meth:`select_victims_on_node` on each of ``nodes``, in order. With a ``key``
        (:meth:`_dry_run_key`), a node's earlier outcome for an equal key stands while the node
        has the same Node object and pods and the same pods are nominated there (counted
        nowhere else): most nodes are unchanged from one preemptor to the next, and
        kube-scheduler's dry runs on all of them again dominated a preemption. The others are
        dry-run together (:meth:`_select_victims_on_nodes`)."""
        priority = pod_priority(pod)
        out: list[_Outcome | None] = []
        fresh: list[tuple[int, NodeInfo, _DryRun]] = []
        handle, uid = self.handle, pod.metadata.uid
        node_of_pod = handle.snapshot.node_of_pod
        for info in nodes:
            lowest = self._lowest_priority(info)
            if lowest is None or lowest >= priority:
                # What the dry run would find at once, without copying the state.
                out.append(([], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS)))
                continue
            if key is None:
                out.append(self.select_victims_on_node(state.clone(), pod, info, pdbs, clock))
                continue
            stamp = handle.nominations_stamp(info.name)
            kept = self._dry_runs.get(info.name)
            if kept is not None and kept[0].stands(key, info, stamp, uid, node_of_pod):
                out.append(kept[1])
                continue
            uids = tuple(pi.uid for pi in handle.nominated_pods_for_node(info.name))
            if uid in uids:
                # Its own nomination does not count for the pod itself, for other pods it does.
                out.append(self.select_victims_on_node(state.clone(), pod, info, pdbs, clock))
                continue
            where = tuple(map(node_of_pod, uids))
            fresh.append((len(out), info, _DryRun(key, NodeContent.of(info), stamp, uids, where)))
            out.append(None)
        if len(fresh) == 1:
            at, info, _ = fresh[0]
            out[at] = self.select_victims_on_node(state.clone(), pod, info, pdbs, clock)
        elif fresh:
            outcomes = self._select_victims_on_nodes(state, pod, [f[1] for f in fresh], pdbs, clock)
            for (at, _, _), outcome in zip(fresh, outcomes, strict=True):
                out[at] = outcome
        if len(self._dry_runs) > 2 * len(handle.snapshot):
            self._dry_runs.clear()
        for at, info, deps in fresh:
            made = out[at]
            assert made is not None
            status = made[2]
            # Victims are ordered by start time, pods not started yet counting as started now:
            # the order would change if a start time were still to come.
            started = max(
                (pod_start_time(pi.pod, -math.inf) for pi in info.pods.values()), default=0
            )
            if (status is None or status.code != Code.ERROR) and started < clock:
                self._dry_runs[info.name] = deps, made
        return [o for o in out if o is not None]

    def select_victims_on_node(
        self,
        state: CycleState,
        pod: Pod,
        node: NodeInfo,
        pdbs: Sequence[PodDisruptionBudget],
        now: float | None = None,
    ) -> tuple[list[Pod], int, Status | None]:
        """``SelectVictimsOnNode``: the fewest pods to evict from ``node`` so that ``pod`` fits,
        most important first, and how many of them violate a PDB; or why there are none.
        ``state`` is changed (pass a clone); the node is as before when this returns."""
        clock = time.time() if now is None else now
        handle = self.handle
        try:
            with handle.trial(node.name) as trial:
                info = trial.node

                def remove(pi: PodInfo) -> None:
                    trial.remove_pod(pi)
                    s = handle.run_pre_filter_extension_remove_pod(state, pod, pi, info)
                    if s is not None:
                        raise _DryRunError(s)

                def add(pi: PodInfo) -> None:
                    trial.add_pod(pi)
                    s = handle.run_pre_filter_extension_add_pod(state, pod, pi, info)
                    if s is not None:
                        raise _DryRunError(s)

                potential = [
                    pi for pi in info.pods.values() if self.is_preemption_allowed(info, pi, pod)
                ]
                for pi in potential:
                    remove(pi)
                if not potential:
                    return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS)
                status = handle.run_filter_plugins_with_nominated_pods(state, pod, info)
                if status is not None:
                    return [], 0, status

                key = self._importance(clock)
                potential.sort(key=key)
                violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
                victims: list[PodInfo] = []

                def reprieve(pi: PodInfo) -> bool:
                    add(pi)
                    fits = handle.run_filter_plugins_with_nominated_pods(state, pod, info) is None
                    if not fits:
                        remove(pi)
                        victims.append(pi)
                    return fits

                num_violating = sum(1 for pi in violating if not reprieve(pi))
                for pi in non_violating:
                    reprieve(pi)
                if violating and non_violating:
                    victims.sort(key=key)
                return [pi.pod for pi in victims], num_violating, None
        except _DryRunError as e:
            return [], 0, e.status

    def _select_victims_on_nodes(
        self,
        state: CycleState,
        pod: Pod,
        nodes: Sequence[NodeInfo],
        pdbs: Sequence[PodDisruptionBudget],
        clock: float,
    ) -> list[_Outcome]:
        """:meth:`select_victims_on_node` on each of ``nodes`` at once, when their verdicts
        cannot affect each other (:meth:`_dry_run_key` gave a key: no PreFilter extension is
        active). The same steps, each over all the nodes: every potential victim taken off, one
        Filter pass; then the k-th victim of each node put back, one pass, and taken off again
        where the pod no longer fits. A node's steps read that node alone, so its victims are
        those of its own dry run."""
        handle = self.handle
        out: list[_Outcome | None] = [None] * len(nodes)
        key = self._importance(clock)
        with handle.snapshot.trials(nodes) as trials:
            walks: list[_Reprieves] = []
            for i, (info, trial) in enumerate(zip(nodes, trials, strict=True)):
                potential = [
                    pi for pi in info.pods.values() if self.is_preemption_allowed(info, pi, pod)
                ]
                if not potential:
                    out[i] = [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NO_VICTIMS)
                    continue
                trial.remove_pods(potential)
                walks.append(_Reprieves(i, trial, potential))
            verdicts = handle.run_filter_plugins_with_nominated_pods_together(
                state, pod, [w.trial.node for w in walks]
            )
            for w, status in zip(walks, verdicts, strict=True):
                if status is not None:
                    out[w.at] = [], 0, status
                    continue
                w.potential.sort(key=key)
                violating, non_violating = filter_pods_with_pdb_violation(w.potential, pdbs)
                w.order, w.violating = violating + non_violating, len(violating)
            walks = [w for w in walks if out[w.at] is None]
            step = 0
            while group := [w for w in walks if step < len(w.order)]:
                for w in group:
                    w.trial.add_pod(w.order[step])
                verdicts = handle.run_filter_plugins_with_nominated_pods_together(
                    state, pod, [w.trial.node for w in group]
                )
                for w, status in zip(group, verdicts, strict=True):
                    if status is not None:
                        w.trial.remove_pod(w.order[step])
                        w.victims.append(w.order[step])
                        w.violations += step < w.violating
                step += 1
            for w in walks:
                if w.violating and w.violating < len(w.order):
                    w.victims.sort(key=key)
                out[w.at] = [pi.pod for pi in w.victims], w.violations, None
        return [o for o in out if o is not None]

    def _importance(self, clock: float) -> Callable[[PodInfo], Any]:
        """A sort key putting the more important pods first (:meth:`more_important_pod`)."""

        def cmp(a: PodInfo, b: PodInfo) -> int:
            if self.more_important_pod(a.pod, b.pod, clock):
                return -1
            return 1 if self.more_important_pod(b.pod, a.pod, clock) else 0

        return functools.cmp_to_key(cmp)

    def _lowest_priority(self, info: NodeInfo) -> int | None:
        """The lowest priority among the node's pods (``None`` without pods), kept until the
        node's pods change: most nodes of a large cluster hold no pod a given preemptor may
        evict, and this spares them the dry run."""
        cached = self._lowest.get(info.name)
        if cached is not None and cached[0] is info and cached[1] == info.generation:
            return cached[2]
        lowest = min((pod_priority(pi.pod) for pi in info.pods.values()), default=None)
        self._lowest[info.name] = (info, info.generation, lowest)
        return lowest

    def select_candidate(
        self, candidates: Sequence[Candidate], now: float | None = None
    ) -> Candidate | None:
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        name = pick_one_node_for_preemption(candidates, now)
        return next((c for c in candidates if c.name == name), candidates[0])

    def _fit_error(
        self, pod: Pod, all_nodes: Sequence[NodeInfo], statuses: dict[str, Status]
    ) -> str:
        """The FitError of the dry run: each tried node's status, the others not helpful
        (``all_nodes``, the snapshot's, walked only when some node was tried)."""
        by_status: dict[int, tuple[Status, list[int]]] = {}
        snapshot = self.handle.snapshot
        if not statuses:
            absent = snapshot.present_slots()
        else:
            untried: list[int] = []
            for info in all_nodes:
                s = statuses.get(info.name)
                if s is None:
                    untried.append(info.slot)
                else:
                    by_status.setdefault(id(s), (s, []))[1].append(info.slot)
            absent = np.array(untried, dtype=np.int64)
        groups = [NodeGroup(np.array(slots, dtype=np.int64), s) for s, slots in by_status.values()]
        if len(absent):
            not_helpful = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_NOT_HELPFUL)
            groups.append(NodeGroup(absent, not_helpful))
        return str(FitError(pod, Diagnosis(num_all_nodes=len(snapshot), groups=groups)))

    # -- carrying it out -------------------------------------------------------------------------

    def is_pod_running_preemption(self, uid: str) -> bool:
        """``IsPodRunningPreemption``: the pod's victims are still being evicted. Once only the
        last victim is left, the preemption counts as done as soon as that victim is gone or
        being deleted."""
        return uid in self._running_preemptions

    def prepare_candidate_async(self, candidate: Candidate, pod: Pod) -> None:
        """``prepareCandidateAsync``: evict the victims in the background; the pod is held by
        PreEnqueue until that is done."""
        victims = [v for v in candidate.victims.pods if v.metadata.deletion_timestamp is None]
        if not victims:
            return
        uid = pod.metadata.uid
        self._running_preemptions.start(uid)
        task = asyncio.get_running_loop().create_task(
            self._preempt_in_background(candidate.name, pod, victims)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _preempt_in_background(self, node: str, pod: Pod, victims: Sequence[Pod]) -> None:
        handle, uid = self.handle, pod.metadata.uid
        ok = True
        try:
            # Lower-priority pods nominated to this node may no longer fit there: clearing their
            # nomination sends them to look for another node now.
            priority = pod_priority(pod)
            for pi in handle.nominated_pods_for_node(node):
                if pod_priority(pi.pod) >= priority or not pi.pod.status.nominated_node_name:
                    continue
                try:
                    await handle.clear_nominated_node_name(pi.pod)
                except Exception as e:
                    log.error("cannot clear the nominated node of pod %s: %s", pi.pod.key, e)
                    ok = False
            preempt_last = True
            if len(victims) > 1:
                results = await asyncio.gather(
                    *(handle.preempt_pod(pod, v, node, self.name) for v in victims[:-1]),
                    return_exceptions=True,
                )
                for v, r in zip(victims[:-1], results, strict=True):
                    if isinstance(r, BaseException):
                        log.error("preempting %s for %s failed: %s", v.key, pod.key, r)
                        ok = preempt_last = False
            if preempt_last:
                last = victims[-1]
                self._running_preemptions.last_victim_left(uid, last.metadata.uid)
                try:
                    await handle.preempt_pod(pod, last, node, self.name)
                except Exception as e:
                    log.error("preempting %s for %s failed: %s", last.key, pod.key, e)
                    ok = False
        finally:
            self._running_preemptions.finish(uid, evicted=ok)
            log.info(
                "preemption for pod %s on node %s finished (%s)",
                pod.key,
                node,
                "ok" if ok else "error",
            )
            snapshot = handle.snapshot
            if not ok or all(snapshot.pod_info(v.metadata.uid) is None for v in victims):
                # The pod could wait in unschedulablePods for an event that never comes: after
                # an error, or when every victim's deletion reached the queue already, while the
                # pod was held here or in flight (kubernetes#141694).
                handle.activate([pod])

    async def wait_for_evictions(self) -> None:
        """Until the evictions started so far are done (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


__all__ = [
    "DISRUPTION_TARGET",
    "ERR_NOT_HELPFUL",
    "ERR_NO_VICTIMS",
    "MSG_POLICY_NEVER",
    "MSG_PREEMPTION_RUNNING",
    "MSG_TERMINATING_VICTIM",
    "NAME",
    "REASON_PREEMPTION_BY_SCHEDULER",
    "Candidate",
    "DefaultPreemption",
    "Victims",
    "filter_pods_with_pdb_violation",
    "more_important_pod",
    "pick_one_node_for_preemption",
    "pod_priority",
    "pod_start_time",
    "pod_terminating_by_preemption",
]
