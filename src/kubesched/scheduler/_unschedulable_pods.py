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

    It keeps apart the pods any event may move (those no plugin rejected, an error, or rejected
    by a plugin that registered no events), and the gated pods by their gating plugin: an event
    reaches a gated pod only if its gating plugin registered a matching one, and thousands of
    pods gated alike need not each be looked at for every event that cannot lift their gate.
    """

    name = UNSCHEDULABLE

    def __init__(self, plugins_with_events: Collection[str], incoming: dict[str, int]) -> None:
        """``plugins_with_events``: the plugins that registered the events that may move the
        pods they reject; ``incoming`` counts the pods arriving here by event."""
        self._registered = plugins_with_events
        self._incoming = incoming
        self._pods: dict[str, QueuedPodInfo] = {}
        #: The pods not gated (an insertion-ordered set), and the gated ones by gating plugin.
        self._ungated: dict[str, None] = {}
        self._gates: dict[str, dict[str, None]] = {}
        self._gate_of: dict[str, str] = {}
        #: How many pods wait here, and how many of them are gated (the containers' own
        #: ``__len__``, cheap on the hot path).
        self.size: Callable[[], int] = self._pods.__len__
        self.gated_size: Callable[[], int] = self._gate_of.__len__
        self._catch_all: set[str] = set()

    def add(self, qpi: QueuedPodInfo, event: str) -> None:
        """``addOrUpdate``: a pod not here yet counts as incoming, for ``event``."""
        uid = qpi.pod.metadata.uid
        if uid not in self._pods:
            counts = self._incoming
            counts[event] = counts.get(event, 0) + 1
        self._pods[uid] = qpi
        self._ungate(uid)
        if qpi.gated_by:
            self._gate_of[uid] = qpi.gated_by
            self._gates.setdefault(qpi.gated_by, {})[uid] = None
        else:
            self._ungated[uid] = None
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors or any(p not in self._registered for p in rejectors):
            self._catch_all.add(uid)
        else:
            self._catch_all.discard(uid)

    def add_again(self, qpi: QueuedPodInfo, event: str, gated_by: str) -> None:
        """The pod, gated by ``gated_by``, taken out and put back at once: as :meth:`delete`
        then :meth:`add` leave it (last in order, counted as arriving for ``event``); when its
        gate is the same, without deriving again what :meth:`add` derives."""
        uid = qpi.pod.metadata.uid
        group = self._gates.get(gated_by)
        if qpi.gated_by != gated_by or group is None or uid not in group:
            self.delete(uid)
            self.add(qpi, event)
            return
        counts = self._incoming
        counts[event] = counts.get(event, 0) + 1
        pods = self._pods
        del pods[uid]
        pods[uid] = qpi
        del group[uid]
        group[uid] = None

    def delete(self, uid: str) -> bool:
        if self._pods.pop(uid, None) is None:
            return False
        self._ungate(uid)
        self._catch_all.discard(uid)
        return True

    def _ungate(self, uid: str) -> None:
        """Take the pod out of its group, gated or not."""
        self._ungated.pop(uid, None)
        gate = self._gate_of.pop(uid, None)
        if gate is not None:
            uids = self._gates[gate]
            del uids[uid]
            if not uids:
                del self._gates[gate]

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def gated(self, uid: str) -> bool:
        return uid in self._gate_of

    def pod_infos(self) -> list[QueuedPodInfo]:
        return list(self._pods.values())

    def reachable(self, gate_lifted_by: Callable[[str], bool]) -> list[QueuedPodInfo]:
        """The pods an event may reach: those not gated, and the gated ones whose gating plugin
        ``gate_lifted_by`` accepts (it registered an event matching this one)."""
        pods = self._pods
        out = [pods[uid] for uid in self._ungated]
        for gate, uids in self._gates.items():
            if gate_lifted_by(gate):
                out.extend(pods[uid] for uid in uids)
        return out

    def catch_all(self) -> list[QueuedPodInfo]:
        """The pods any event may move."""
        return [self._pods[uid] for uid in self._catch_all]

    def pods(self) -> Iterable[Pod]:
        return (q.pod for q in self._pods.values())
