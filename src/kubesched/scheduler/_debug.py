"""``GET /debug/queue``: the scheduling queue as JSON, for ``kubesched ui``.

Read through the queue's public readers only, on the event loop the scheduler runs on, so a
reading never sees a pod half moved. Served by the health listener when ``kubesched run
--debug-queue`` asks for it; off by default (it names every pending pod).
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched.scheduler._scheduling_queue import SchedulingQueue

DEBUG_QUEUE_PATH = "/debug/queue"
#: Bumped on an incompatible change of the document.
FORMAT_VERSION = 1


def queue_document(queue: SchedulingQueue, now: float) -> dict[str, Any]:
    """Counts per sub-queue, and each pending or in-flight pod: where it is, its attempts, the
    plugins that rejected it last, and (in backoff) the seconds to its next try. ``now`` is a
    reading of the queue's clock."""
    pods = []
    for pod in [*queue.pending_pods(), *queue.in_flight_pods()]:
        uid = pod.metadata.uid
        entry: dict[str, Any] = {
            "namespace": pod.metadata.namespace,
            "name": pod.metadata.name,
            "queue": queue.where(uid),
            "priority": pod.spec.priority or 0,
            "schedulerName": pod.spec.scheduler_name,
        }
        qpi = queue.get(uid)
        if qpi is not None:
            entry |= {
                "attempts": qpi.attempts,
                "unschedulablePlugins": sorted(qpi.unschedulable_plugins),
                "pendingPlugins": sorted(qpi.pending_plugins),
                "gatedBy": qpi.gated_by,
                "queuedSeconds": round(now - qpi.initial_attempt_timestamp, 3),
            }
            if entry["queue"] == "backoff":
                entry["retryInSeconds"] = round(max(0.0, queue.backoff_expiry(qpi) - now), 3)
        pods.append(entry)
    return {"formatVersion": FORMAT_VERSION, "counts": queue.counts(), "pods": pods}


def queue_json(queue: SchedulingQueue, now: float) -> bytes:
    return msgspec.json.encode(queue_document(queue, now))
