"""PodGroup status as scheduler-plugins' PodGroup controller keeps it, written by kubesched when
that controller does not run (``updatePodGroupStatus``).

The controller moves a group one step per reconcile; :func:`desired_status` takes every step at
once, so the result is the state the controller settles in:

- no phase yet: ``Pending``;
- ``Pending`` with at least ``minMember`` pods: ``Scheduling`` (``occupiedBy`` names the first
  pod's owners; ``scheduleStartTime`` is set now, which the controller leaves to the scheduler);
- from then on ``running``/``succeeded``/``failed`` count the members by phase, and the phase is
  ``Pending`` below ``minMember`` pods, ``Scheduling`` while fewer than ``minMember`` run or
  succeeded, ``Running`` once that many do, ``Failed`` once a member failed and the failed,
  running and succeeded ones reach ``minMember``, ``Finished`` once ``minMember`` succeeded.
  ``Finished`` and ``Failed`` are final.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from kubesched.plugins.coscheduling._api import (
    API_VERSION,
    FAILED,
    FINISHED,
    PENDING,
    PLURAL,
    RUNNING,
    SCHEDULING,
    Member,
    PodGroup,
    PodGroupStatus,
)
from kubesched.plugins.coscheduling._manager import GroupKey, Members

log = logging.getLogger(__name__)

#: How often pending status changes are written (the controller's pace is per event; a second
#: groups the bursts of a gang binding).
WRITE_INTERVAL = 1.0


@runtime_checkable
class StatusAPIClient(Protocol):
    """The front end's API client when it can write custom objects' status."""

    async def patch_custom_object_status(
        self,
        group_version: str,
        plural: str,
        name: str,
        status: Mapping[str, Any],
        *,
        namespace: str,
    ) -> bool: ...


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _occupied_by(member: Member) -> str:
    refs = sorted(f"{member.metadata.namespace}/{r.name}" for r in member.metadata.owner_references)
    return ",".join(refs)


def status_patch(status: PodGroupStatus) -> dict[str, Any]:
    """Every field, zeros included: a merge patch leaves out what it does not name."""
    return {
        "phase": status.phase,
        "occupiedBy": status.occupied_by,
        "running": status.running,
        "succeeded": status.succeeded,
        "failed": status.failed,
        "scheduleStartTime": status.schedule_start_time,
    }


def desired_status(
    pg: PodGroup, members: Iterable[Member], now: Callable[[], str] = _now
) -> PodGroupStatus:
    """The status the PodGroup controller would settle on; see the module docstring."""
    status = msgspec.structs.replace(pg.status)
    if status.phase in (FINISHED, FAILED):
        return status
    pods = list(members)
    min_member = pg.spec.min_member
    if not status.phase:
        status.phase = PENDING
    if status.phase == PENDING and len(pods) >= min_member:
        status.phase = SCHEDULING
        if pods:
            status.occupied_by = _occupied_by(pods[0]) or status.occupied_by
        if status.schedule_start_time is None:
            status.schedule_start_time = now()
    if status.phase == PENDING:
        return status
    status.running = sum(1 for p in pods if p.status.phase == "Running")
    status.succeeded = sum(1 for p in pods if p.status.phase == "Succeeded")
    status.failed = sum(1 for p in pods if p.status.phase == "Failed")
    if len(pods) < min_member:
        status.phase = PENDING
        return status
    if status.succeeded + status.running < min_member:
        status.phase = SCHEDULING
    else:
        status.phase = RUNNING
    if status.failed and status.failed + status.running + status.succeeded >= min_member:
        status.phase = FAILED
    if status.succeeded >= min_member:
        status.phase = FINISHED
    return status


class StatusWriter:
    """Writes the status of groups whose members or PodGroup changed, in the background."""

    def __init__(
        self,
        client: StatusAPIClient,
        members: Members,
        pod_group: Callable[[GroupKey], PodGroup | None],
        groups_changed: Callable[[], set[GroupKey]],
    ) -> None:
        self._client = client
        self._members = members
        self._pod_group = pod_group
        self._groups_changed = groups_changed
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start on the running event loop, once."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(WRITE_INTERVAL)
            try:
                await self.write_changed()
            except Exception:  # a failing write must not end the writer
                log.exception("Coscheduling: writing PodGroup status failed")

    async def write_changed(self) -> int:
        """Write every changed group's status; how many were written."""
        keys = self._members.take_changed() | self._groups_changed()
        written = 0
        for key in sorted(keys):
            pg = self._pod_group(key)
            if pg is None:
                continue
            status = desired_status(pg, self._members.of(key))
            if status == pg.status:
                continue
            if await self._client.patch_custom_object_status(
                API_VERSION,
                PLURAL,
                pg.metadata.name,
                status_patch(status),
                namespace=pg.metadata.namespace,
            ):
                written += 1
        return written

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
