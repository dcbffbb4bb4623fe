"""The Coscheduling plugin; see the package docstring and docs/plugins/coscheduling.md."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kubesched.api import CPU, PODS, Pod, PodSpec, add_resources
from kubesched.config import decode_args
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    Handle,
    Nodes,
    PermitPlugin,
    PostFilterPlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueingHint,
    QueueSortPlugin,
    ReservePlugin,
    Status,
)
from kubesched.plugins.coscheduling._api import (
    MEMBER_KIND,
    MEMBER_RESOURCE,
    POD_GROUP_KIND,
    POD_GROUP_LABEL,
    POD_GROUP_RESOURCE,
    Member,
    PodGroup,
)
from kubesched.plugins.coscheduling._args import (
    DEFAULT_PERMIT_WAITING_TIME_SECONDS,
    CoschedulingArgs,
)
from kubesched.plugins.coscheduling._manager import (
    GroupKey,
    GroupState,
    Members,
    MinResourcesError,
    group_key,
    min_resources,
    parse_time,
    resource_gap,
)
from kubesched.plugins.coscheduling._status import StatusAPIClient, StatusWriter
from kubesched.plugins.priority_sort import pod_priority

NAME = "Coscheduling"

# Reasons, as scheduler-plugins words them.
ERR_NOT_FOUND = "PodGroup not found"
ERR_NO_GROUP = "can not find pod group"
ERR_OPTIMISTIC_REJECTION = "optimistic rejection in PostFilter"
ERR_UNRESERVE_REJECTION = "rejection in Unreserve"

log = logging.getLogger(__name__)


def pod_group_label(pod: Pod | Member) -> str:
    """The PodGroup the pod names, or ``""``."""
    return pod.metadata.labels.get(POD_GROUP_LABEL, "")


def _format_gap(gap: dict[str, int]) -> str:
    return ", ".join(
        f"{name}: {value}m" if name == CPU else f"{name}: {value}"
        for name, value in sorted(gap.items())
    )


class Coscheduling(
    QueueSortPlugin,
    PreFilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PermitPlugin,
    EnqueueExtensions,
):
    """All or nothing for the pods of a ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``)."""

    name = NAME
    args_type = CoschedulingArgs
    watched_kinds = (POD_GROUP_KIND, MEMBER_KIND)

    def __init__(
        self,
        handle: Handle,
        args: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        decoded = decode_args(CoschedulingArgs, args)
        super().__init__(handle, decoded)
        self.schedule_timeout = float(
            decoded.permit_waiting_time_seconds or DEFAULT_PERMIT_WAITING_TIME_SECONDS
        )
        self.backoff = float(decoded.pod_group_backoff_seconds)
        self.reject_threshold = decoded.pod_group_reject_percentage / 100.0
        self.groups = GroupState(clock)
        self.members = Members(handle.snapshot, on_gone=self.groups.unassign)
        #: Adds to a monotonic time to give the wall-clock time (PodGroups are stamped in it).
        self._wall_offset = wall() - clock()
        self._pod_groups_seen = 0
        self._created: dict[GroupKey, tuple[PodGroup, float | None]] = {}
        client = handle.client
        self.status_writer = (
            StatusWriter(client, self.members, self.pod_group, self._changed_pod_groups)
            if decoded.update_pod_group_status and isinstance(client, StatusAPIClient)
            else None
        )

    # -- lookups ---------------------------------------------------------------------------------

    def pod_group(self, key: GroupKey) -> PodGroup | None:
        namespace, _, name = key.partition("/")
        return self.handle.snapshot.objects.get(PodGroup, name, namespace)

    def pod_group_of(self, pod: Pod) -> tuple[GroupKey, PodGroup | None]:
        """``GetPodGroup``: the group's key (``""`` for a pod in none) and the PodGroup."""
        name = pod_group_label(pod)
        if not name:
            return "", None
        return group_key(pod.metadata.namespace, name), self.handle.snapshot.objects.get(
            PodGroup, name, pod.metadata.namespace
        )

    def _live_members(self, key: GroupKey) -> list[Member]:
        return [m for m in self.members.of(key) if not m.terminal]

    def assigned_count(self, key: GroupKey) -> int:
        """``GetAssignedPodCount``: members that reached Permit here or are bound."""
        return len(self.groups.assigned_uids(key, self._live_members(key)))

    def _changed_pod_groups(self) -> set[GroupKey]:
        objects = self.handle.snapshot.objects
        changes = objects.changes(PodGroup, self._pod_groups_seen)
        self._pod_groups_seen = objects.version(PodGroup)
        if changes is None:
            return {
                group_key(pg.metadata.namespace, pg.metadata.name) for pg in objects.list(PodGroup)
            }
        return {
            group_key(pg.metadata.namespace, pg.metadata.name)
            for pair in changes
            for pg in pair
            if pg is not None
        }

    def _start_status_writer(self) -> None:
        """From the first PreFilter on: only the replica that schedules (the leader) writes."""
        if self.status_writer is None:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        self.status_writer.start()

    # -- QueueSort -------------------------------------------------------------------------------

    def _group_time(self, qpi: QueuedPodInfo) -> float:
        """``GetCreationTimestamp`` (wall-clock seconds): the group's last failure, else its
        PodGroup's creation, else the pod's first attempt."""
        pod = qpi.pod
        name = pod.metadata.labels.get(POD_GROUP_LABEL)
        if not name:
            return qpi.initial_attempt_timestamp + self._wall_offset
        key = group_key(pod.metadata.namespace, name)
        failed = self.groups.last_failed.get(key)
        if failed is not None:
            return failed + self._wall_offset
        pg = self.handle.snapshot.objects.get(PodGroup, name, pod.metadata.namespace)
        if pg is None:
            return qpi.initial_attempt_timestamp + self._wall_offset
        # The queue compares often: the creation time is parsed once per PodGroup object.
        cached = self._created.get(key)
        if cached is None or cached[0] is not pg:
            cached = self._created[key] = (pg, parse_time(pg.metadata.creation_timestamp))
        created = cached[1]
        return qpi.initial_attempt_timestamp + self._wall_offset if created is None else created

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Higher priority first; then the older group (or lone pod); then by namespace/name,
        which keeps a group's pods next to each other."""
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        if pa != pb:
            return pa > pb
        ta, tb = self._group_time(a), self._group_time(b)
        if ta == tb:
            return a.pod.key < b.pod.key
        return ta < tb

    # -- PreFilter -------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        key, pg = self.pod_group_of(pod)
        if pg is None:
            # A pod naming a missing PodGroup is turned away at Permit.
            return None, None
        self._start_status_writer()
        reason = self._pre_filter_reason(pod, key, pg)
        if reason:
            log.debug("Coscheduling: PreFilter rejects %s: %s", pod.key, reason)
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)
        return None, None

    def _pre_filter_reason(self, pod: Pod, key: GroupKey, pg: PodGroup) -> str:
        min_member = pg.spec.min_member
        if min_member < 0:
            return f"PodGroup {key}: spec.minMember must not be negative, got {min_member}"
        if key in self.groups.backed_off:
            return f"podGroup {key} failed recently"
        members = self._live_members(key)
        if len(members) < min_member:
            return (
                f"pre-filter pod {pod.metadata.name} cannot find enough sibling pods, "
                f"current pods number: {len(members)}, minMember of group: {min_member}"
            )
        # A group may have more pods than minMember; gated ones use up that slack.
        gap = min_member - len(members)
        for m in members:
            if m.spec.scheduling_gates:
                gap += 1
            if gap > 0:
                return (
                    f"pre-filter pod {pod.metadata.name} cannot proceed due to gated pods in "
                    "the same PodGroup"
                )
        if not pg.spec.min_resources or key in self.groups.permitted:
            return ""
        try:
            need = min_resources(pg)
        except MinResourcesError as err:
            return str(err)
        missing = resource_gap(self.handle.snapshot, need, self._own_requests(members))
        if missing:
            return f"resource gap: {_format_gap(missing)}"
        self.groups.permitted.add(key, self.schedule_timeout)
        return ""

    def _own_requests(self, members: list[Member]) -> dict[int, dict[str, int]]:
        """Node slot -> requests of the group's pods counted there (``pods``: how many)."""
        snapshot = self.handle.snapshot
        out: dict[int, dict[str, int]] = {}
        for m in members:
            info = snapshot.pod_info(m.metadata.uid)
            node = snapshot.node_of_pod(m.metadata.uid)
            slot = None if node is None else snapshot.slot_of(node)
            if info is None or slot is None:
                continue
            requests = out.setdefault(slot, {})
            add_resources(requests, info.requests)
            requests[PODS] = requests.get(PODS, 0) + 1
        return out

    # -- PostFilter ------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        key, pg = self.pod_group_of(pod)
        if not key:
            return None, Status(Code.UNSCHEDULABLE)
        if pg is None:
            return None, Status(Code.UNSCHEDULABLE, ERR_NO_GROUP)
        min_member = pg.spec.min_member
        assigned = self.assigned_count(key)
        # Enough members placed already: this pod's failure does not undo the group.
        if assigned >= min_member:
            return None, Status(Code.UNSCHEDULABLE)
        # A small gap to the quorum: let the next members try.
        if (min_member - assigned) / min_member <= self.reject_threshold:
            return None, Status(Code.UNSCHEDULABLE)
        self._reject_waiting(key, ERR_OPTIMISTIC_REJECTION)
        if self.backoff > 0 and len(self._live_members(key)) >= min_member:
            self.groups.backed_off.add(key, self.backoff)
        self.groups.permitted.discard(key)
        self.groups.mark_failure(key)
        return None, Status(
            Code.UNSCHEDULABLE,
            f"PodGroup {key} gets rejected due to Pod {pod.metadata.name} is unschedulable "
            "even after PostFilter",
        )

    def _reject_waiting(self, key: GroupKey, message: str) -> None:
        for waiting in list(self.handle.waiting_pods()):
            other = waiting.pod
            if group_key(other.metadata.namespace, pod_group_label(other)) == key:
                waiting.reject(self.name, message)

    # -- Reserve / Permit ------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        key, pg = self.pod_group_of(pod)
        if not key:
            return None, 0.0
        if pg is None:
            # Upstream's words, and which PodGroup.
            return Status(Code.UNSCHEDULABLE, f"{ERR_NOT_FOUND}: {key}"), 0.0
        self.groups.assign(key, pod.metadata.uid)
        assigned = self.assigned_count(key)
        if assigned >= pg.spec.min_member:
            self.groups.clear_failure(key)
            for waiting in list(self.handle.waiting_pods()):
                other = waiting.pod
                if group_key(other.metadata.namespace, pod_group_label(other)) == key:
                    waiting.allow(self.name)
            log.debug("Coscheduling: PodGroup %s complete (%d placed)", key, assigned)
            return None, 0.0
        if assigned == 1:
            # The first member placed brings its siblings back from the unschedulable pods.
            self.handle.activate(
                Pod(metadata=m.metadata, spec=PodSpec(node_name=m.spec.node_name))
                for m in self._live_members(key)
                if m.metadata.uid != pod.metadata.uid and not m.spec.node_name
            )
        timeout = pg.spec.schedule_timeout_seconds
        wait = float(timeout) if timeout is not None and timeout > 0 else self.schedule_timeout
        return Status(Code.WAIT), wait

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        key, pg = self.pod_group_of(pod)
        if pg is None:
            return
        self.groups.unassign(key, pod.metadata.uid)
        self._reject_waiting(key, ERR_UNRESERVE_REJECTION)
        self.groups.permitted.discard(key)
        self.groups.mark_failure(key)

    # -- requeueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new member may complete the group, a removed gate may let it proceed.
            ClusterEventWithHint(
                ClusterEvent(MEMBER_RESOURCE, ActionType.ADD | ActionType.UPDATE),
                self._same_group,
            ),
            ClusterEventWithHint(
                ClusterEvent(POD_GROUP_RESOURCE, ActionType.ADD | ActionType.UPDATE),
                self._own_pod_group,
            ),
            # Room for minResources.
            ClusterEventWithHint(ClusterEvent("AssignedPod", ActionType.DELETE)),
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE)
            ),
        ]

    def _same_group(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, Member):
            return QueueingHint.QUEUE
        same = (
            new.metadata.namespace == pod.metadata.namespace
            and pod_group_label(new) == pod_group_label(pod) != ""
        )
        return QueueingHint.QUEUE if same else QueueingHint.SKIP

    def _own_pod_group(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, PodGroup):
            return QueueingHint.QUEUE
        same = (
            new.metadata.namespace == pod.metadata.namespace
            and new.metadata.name == pod_group_label(pod)
        )
        return QueueingHint.QUEUE if same else QueueingHint.SKIP

    async def aclose(self) -> None:
        if self.status_writer is not None:
            await self.status_writer.aclose()
