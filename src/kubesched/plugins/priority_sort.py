"""PrioritySort: the order in which pending pods are tried.

The scheduling queue is a heap; this plugin is its comparison. A pod with a higher
``spec.priority`` (set by admission from the pod's PriorityClass; unset counts as 0) goes first.
Among pods of equal priority, the one that entered the queue earlier goes first, so pods of one
priority are served roughly first-in, first-out.

Exactly one QueueSort plugin is enabled per profile, and all profiles share one queue, so they
must all use the same one (kube-scheduler's configuration validation enforces that).
"""

from __future__ import annotations

from kubesched.api import Pod
from kubesched.framework import QueuedPodInfo, QueueSortPlugin

NAME = "PrioritySort"


def pod_priority(pod: Pod) -> int:
    """``corev1helpers.PodPriority``: ``spec.priority``, or 0 when unset."""
    return pod.spec.priority if pod.spec.priority is not None else 0


class PrioritySort(QueueSortPlugin):
    """Higher priority first; ties broken by the time the pod was (re)added to the queue."""

    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        # kube-scheduler compares QueuedPodInfo.Timestamp: when the pod was last added to the
        # queue (it is refreshed when a pod comes back after a failed attempt), not the time of
        # its first attempt.
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)

    def sort_key(self, qpi: QueuedPodInfo) -> tuple[int, float]:
        """``less`` as a key: higher priority, then earlier timestamp, sorts lower."""
        return -pod_priority(qpi.pod), qpi.timestamp
