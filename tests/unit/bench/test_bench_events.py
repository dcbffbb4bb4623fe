"""Counting the Scheduled events of the measured pods."""

from __future__ import annotations

import json

from kubesched.bench._events import pods_with_event


def event(reason: str, pod: str) -> dict[str, object]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.1", "namespace": "bench"},
        "reason": reason,
        "regarding": {"kind": "Pod", "namespace": "bench", "name": pod},
        "note": "n",
        "type": "Normal",
    }


def test_counts_pods_with_a_scheduled_event_once_each() -> None:
    body = json.dumps(
        {
            "kind": "EventList",
            "items": [
                event("Scheduled", "pod-1"),
                event("Scheduled", "pod-1"),  # a pod counts once
                event("FailedScheduling", "pod-2"),  # not the binding's event
                event("Scheduled", "init-1"),  # not a measured pod
                event("Scheduled", "pod-3"),
            ],
        }
    ).encode()
    assert pods_with_event(body, ["pod-1", "pod-2", "pod-3"]) == 2
    assert pods_with_event(b'{"items": []}', ["pod-1"]) == 0
