"""unschedulablePods: pods waiting for a cluster event (kube-scheduler's ``unschedulablePods``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from kubesched.api import Pod
from kubesched.framework import QueuedPodInfo

#: The sub-queue's name in metrics and logs.
UNSCHEDULABLE = "unschedulable"
#: The name ``scheduler_pending_pods`` gives the pods a PreEnqueue plugin gates, which wait here.
GATED = "gated"


class UnschedulablePods:
    """Pods rejected by plugins, or gated by a PreEnqueue plugin, keyed by UID.

    Besides the gated ones, it keeps apart the pods any event may move: those no plugin rejected
    (an error) or rejected by a plugin that registered no events.
    """

    name = UNSCHEDULABLE

    def __init__(self, plugins_with_events: Collection[str], incoming: dict[str, int]) -> None:
        """``plugins_with_events``: the plugins that registered the events that may move the
        pods they reject; ``incoming`` counts the pods arriving here by event."""
        self._registered = plugins_with_events
        self._incoming = incoming
        self._pods: dict[str, QueuedPodInfo] = {}
        self._gated: set[str] = set()
        #: How many pods wait here, and how many of them are gated (the containers' own
        #: ``__len__``, cheap on the hot path).
        self.size: Callable[[], int] = self._pods.__len__
        self.gated_size: Callable[[], int] = self._gated.__len__
        self._catch_all: set[str] = set()

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """``addOrUpdate``: a pod not here yet counts as incoming, for ``event``."""
        uid = qpi.pod.metadata.uid
        if uid not in self._pods:
            counts = self._incoming
            counts[event] = counts.get(event, 0) + 1
        self._pods[uid] = qpi
        if qpi.gated_by:
            self._gated.add(uid)
        else:
            self._gated.discard(uid)
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors or any(p not in self._registered for p in rejectors):
            self._catch_all.add(uid)
        else:
            self._catch_all.discard(uid)

    def delete(self, uid: str) -> bool:
        if self._pods.pop(uid, None) is None:
            return False
        self._gated.discard(uid)
        self._catch_all.discard(uid)
        return True

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def gated(self, uid: str) -> bool:
        return uid in self._gated

    def pod_infos(self) -> list[QueuedPodInfo]:
        return list(self._pods.values())

    def catch_all(self) -> list[QueuedPodInfo]:
        """The pods any event may move."""
        return [self._pods[uid] for uid in self._catch_all]

    def pods(self) -> Iterable[Pod]:
        return (q.pod for q in self._pods.values())
