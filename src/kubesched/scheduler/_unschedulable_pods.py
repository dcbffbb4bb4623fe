"""unschedulablePods: pods waiting for a cluster event (kube-scheduler's ``unschedulablePods``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable

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
    Pods that only their gating plugin rejected are also kept by their gate keys (what they
    wait for), so an event about a few objects reaches the pods waiting for those only.
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
        #: Per gate, its pods by gate key, and those it keeps by none (any event reaches them);
        #: each gated pod's place in arrival order, which reachable pods are given in.
        self._keyed: dict[str, dict[Hashable, dict[str, None]]] = {}
        self._unkeyed: dict[str, dict[str, None]] = {}
        self._keys_of: dict[str, frozenset[Hashable]] = {}
        self._order: dict[str, int] = {}
        self._arrivals = 0
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
            self._gate(uid, qpi)
        else:
            self._ungated[uid] = None
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if not rejectors or any(p not in self._registered for p in rejectors):
            self._catch_all.add(uid)
        else:
            self._catch_all.discard(uid)

    def add_again(self, qpi: QueuedPodInfo, event: str) -> None:
        """The pod, gated again by a plugin, taken out and put back: as :meth:`delete` then
        :meth:`add` leave it (kept by its gate and keys now, counted as arriving for
        ``event``)."""
        self.delete(qpi.pod.metadata.uid)
        self.add(qpi, event)

    def count_incoming(self, event: str, pods: int = 1) -> None:
        """Pods here taken out and put back as they were (gated again alike): only counted as
        arriving for ``event``; they keep their place (kube-scheduler's unschedulablePods is a
        map, with no order to keep)."""
        counts = self._incoming
        counts[event] = counts.get(event, 0) + pods

    def delete(self, uid: str) -> bool:
        if self._pods.pop(uid, None) is None:
            return False
        self._ungate(uid)
        self._catch_all.discard(uid)
        return True

    def _gate(self, uid: str, qpi: QueuedPodInfo) -> None:
        """Put the pod in its gate's group."""
        gate = qpi.gated_by
        self._gate_of[uid] = gate
        self._gates.setdefault(gate, {})[uid] = None
        self._arrivals += 1
        self._order[uid] = self._arrivals
        self._index(uid, qpi)

    def _index(self, uid: str, qpi: QueuedPodInfo) -> None:
        """Keep the gated pod by its gate keys, or by none when another plugin rejected it too
        (that plugin's events may move it as well)."""
        gate = qpi.gated_by
        keys = _indexed_keys(qpi)
        if keys is None:
            self._unkeyed.setdefault(gate, {})[uid] = None
            return
        self._keys_of[uid] = keys
        if not keys:
            return
        keyed = self._keyed.setdefault(gate, {})
        for key in keys:
            keyed.setdefault(key, {})[uid] = None

    def _unindex(self, uid: str, gate: str) -> None:
        keys = self._keys_of.pop(uid, None)
        if keys is None:
            unkeyed = self._unkeyed[gate]
            del unkeyed[uid]
            if not unkeyed:
                del self._unkeyed[gate]
            return
        if not keys:
            return  # waits for nothing an event is about
        keyed = self._keyed[gate]
        for key in keys:
            waiting = keyed[key]
            del waiting[uid]
            if not waiting:
                del keyed[key]
        if not keyed:
            del self._keyed[gate]

    def rekey(self, qpi: QueuedPodInfo) -> None:
        """A gated pod here changed (its gate keys with it): kept by its new keys, in its place."""
        uid = qpi.pod.metadata.uid
        gate = self._gate_of.get(uid)
        if gate is None or self._keys_of.get(uid) == _indexed_keys(qpi):
            return
        self._unindex(uid, gate)
        self._index(uid, qpi)

    def _ungate(self, uid: str) -> None:
        """Take the pod out of its group, gated or not."""
        self._ungated.pop(uid, None)
        gate = self._gate_of.pop(uid, None)
        if gate is None:
            return
        uids = self._gates[gate]
        del uids[uid]
        if not uids:
            del self._gates[gate]
        del self._order[uid]
        self._unindex(uid, gate)

    def get(self, uid: str) -> QueuedPodInfo | None:
        return self._pods.get(uid)

    def gated(self, uid: str) -> bool:
        return uid in self._gate_of

    def pod_infos(self) -> list[QueuedPodInfo]:
        return list(self._pods.values())

    def reachable(
        self,
        gate_lifted_by: Callable[[str], bool],
        keys_for: Callable[[str], Collection[Hashable] | None] | None = None,
    ) -> list[tuple[str, QueuedPodInfo]]:
        """The pods an event may reach, by UID: those not gated, and the gated ones whose gating
        plugin ``gate_lifted_by`` accepts (it registered an event matching this one); of those,
        when ``keys_for`` gives the keys the event is about for that gate, the pods kept by one
        of them or by none."""
        pods = self._pods
        out = [(uid, pods[uid]) for uid in self._ungated]
        for gate, uids in self._gates.items():
            if not gate_lifted_by(gate):
                continue
            keys = None if keys_for is None else keys_for(gate)
            if keys is None:
                out.extend((uid, pods[uid]) for uid in uids)
                continue
            keyed = self._keyed.get(gate, {})
            chosen = {uid for key in keys for uid in keyed.get(key, ())}
            chosen.update(self._unkeyed.get(gate, ()))
            out.extend((uid, pods[uid]) for uid in sorted(chosen, key=self._order.__getitem__))
        return out

    def catch_all(self) -> list[tuple[str, QueuedPodInfo]]:
        """The pods any event may move, by UID."""
        return [(uid, self._pods[uid]) for uid in self._catch_all]

    def pods(self) -> Iterable[Pod]:
        return (q.pod for q in self._pods.values())


def _indexed_keys(qpi: QueuedPodInfo) -> frozenset[Hashable] | None:
    """The gate keys a gated pod is kept by: none when another plugin rejected it too."""
    keys = qpi.gate_keys
    if keys is None or qpi.pending_plugins or qpi.unschedulable_plugins != {qpi.gated_by}:
        return None
    return keys
