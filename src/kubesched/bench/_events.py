"""The ``Scheduled`` events a run left in the API server, counted per pod.

Both schedulers write their events through ``events.k8s.io/v1`` in the background, so the last
ones land after the last binding: the count is read again until it reaches the pods bound or
stops growing for :data:`SETTLE_S` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection

import msgspec

from kubesched.bench._retry import patiently
from kubesched.kube import APIClient, api_path

#: The reason kube-scheduler (and kubesched) give the event of a pod bound to a node.
REASON_SCHEDULED = "Scheduled"
#: How long the count may stay put before it is taken as final.
SETTLE_S = 5.0
#: How often the count is read while waiting.
POLL_S = 1.0


class _Regarding(msgspec.Struct):
    name: str = ""


class _Event(msgspec.Struct):
    reason: str = ""
    regarding: _Regarding = msgspec.field(default_factory=_Regarding)


class _EventList(msgspec.Struct):
    items: list[_Event] = []


_decoder = msgspec.json.Decoder(_EventList)


def pods_with_event(event_list: bytes, names: Collection[str]) -> int:
    """How many of the pods ``names`` have a ``Scheduled`` event in ``event_list`` (an
    ``EventList`` as the API server sends it)."""
    events = _decoder.decode(event_list).items
    wanted = set(names)
    return len({e.regarding.name for e in events if e.reason == REASON_SCHEDULED} & wanted)


async def scheduled_events(
    client: APIClient, namespace: str, names: Collection[str], *, within: float
) -> int:
    """How many of the pods ``names`` in ``namespace`` have a ``Scheduled`` event now; the list
    is asked for again while the API server refuses it, for up to ``within`` seconds."""
    path = api_path("events", group_version="events.k8s.io/v1", namespace=namespace)
    listed = await patiently(
        lambda: client.list(path), what="counting the Scheduled events", within=within
    )
    return pods_with_event(listed, names)


async def settled_scheduled_events(
    client: APIClient, namespace: str, names: Collection[str], *, bound: int, within: float
) -> int:
    """:func:`scheduled_events` once it reaches ``bound`` or stops growing."""
    count = await scheduled_events(client, namespace, names, within=within)
    changed = time.monotonic()
    while count < bound and time.monotonic() - changed < SETTLE_S:
        await asyncio.sleep(POLL_S)
        now = await scheduled_events(client, namespace, names, within=within)
        if now != count:
            count, changed = now, time.monotonic()
    return count


__all__ = ["REASON_SCHEDULED", "pods_with_event", "scheduled_events", "settled_scheduled_events"]
