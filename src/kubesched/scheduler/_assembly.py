"""One way to put a scheduler together from its profiles.

``kubesched run``, ``simulate``, ``bench core`` and ``demo`` all call :func:`new_scheduler`, so the
queue (QueueSort, PreEnqueue, the plugins' cluster events, backoff) is wired the same way
whatever front end drives it; only what the front end writes to (``writer``) and reads from
(``pod_lookup``) differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Mapping

from kubesched.api import Pod
from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import ClusterEventWithHint, Framework, Snapshot, Status
from kubesched.scheduler._cache import Cache
from kubesched.scheduler._metrics import SchedulerMetrics
from kubesched.scheduler._scheduler import AttemptObserver, ClusterWriter, PodLookup, Scheduler
from kubesched.scheduler._scheduling_queue import (
    DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION,
    SchedulingQueue,
)


def events_to_register(
    frameworks: Mapping[str, Framework],
) -> dict[str, list[ClusterEventWithHint]]:
    """Plugin name -> its cluster events, over every profile (one queue serves them all)."""
    out: dict[str, list[ClusterEventWithHint]] = {}
    for fwk in frameworks.values():
        for plugin, events in fwk.events_to_register().items():
            out.setdefault(plugin, []).extend(events)
    return out


def new_scheduler(
    config: KubeSchedulerConfiguration,
    frameworks: Mapping[str, Framework],
    snapshot: Snapshot,
    writer: ClusterWriter,
    *,
    metrics: SchedulerMetrics | None = None,
    pod_lookup: PodLookup | None = None,
    observer: AttemptObserver | None = None,
    clock: Callable[[], float] = time.monotonic,
    pod_max_in_unschedulable_pods_duration: float = (
        DEFAULT_POD_MAX_IN_UNSCHEDULABLE_PODS_DURATION
    ),
    scheduler_type: type[Scheduler] = Scheduler,
) -> Scheduler:
    """A scheduler over ``frameworks`` (from :func:`~kubesched.framework.build_frameworks` on the
    same ``snapshot``): its queue ordered by the profiles' QueueSort, gated by each pod's
    profile's PreEnqueue plugins, moved by the plugins' cluster events, backing off as
    ``config`` says; its cache over ``snapshot``. ``clock`` is the queue's (monotonic seconds);
    ``scheduler_type`` a subclass of :class:`Scheduler` to build instead (``bench core``'s)."""
    first = next(iter(frameworks.values()))

    def pre_enqueue(pod: Pod, gating: str) -> Status | None:
        fwk = frameworks.get(pod.spec.scheduler_name)
        return None if fwk is None else fwk.run_pre_enqueue(pod, gating)

    def gate_keys(pod: Pod, gating: str) -> frozenset[Hashable] | None:
        fwk = frameworks.get(pod.spec.scheduler_name)
        return None if fwk is None else fwk.gate_keys(pod, gating)

    queue = SchedulingQueue(
        less=first.less,
        sort_key=first.sort_key,
        pre_enqueue=pre_enqueue,
        gate_keys=gate_keys,
        # With several profiles each plugin keeps its own pods: each pod is asked.
        held_pods=first.held_pods if len(frameworks) == 1 else None,
        events_to_register=events_to_register(frameworks),
        pod_initial_backoff=float(config.pod_initial_backoff_seconds),
        pod_max_backoff=float(config.pod_max_backoff_seconds),
        pod_max_in_unschedulable_pods_duration=pod_max_in_unschedulable_pods_duration,
        clock=clock,
        pending_pods_metric=None if metrics is None else metrics.set_pending,
        incoming_pods_metric=None if metrics is None else metrics.queue_incoming_pods,
    )
    return scheduler_type(
        profiles=frameworks,
        cache=Cache(snapshot),
        queue=queue,
        writer=writer,
        metrics=metrics,
        pod_lookup=pod_lookup,
        observer=observer,
    )
