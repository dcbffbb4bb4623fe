"""What the scheduler knows of one node: the Node object and the pods assigned or assumed there."""

from __future__ import annotations

from dataclasses import dataclass, field

from kubesched.api import (
    CPU,
    MEMORY,
    Node,
    Pod,
    Resources,
    add_resources,
    pod_requests,
)

#: (hostIP, protocol, hostPort); hostIP ``0.0.0.0`` stands for every address.
HostPort = tuple[str, str, int]


@dataclass(slots=True)
class PodInfo:
    """A pod with what the scheduler derives from it once, not per node or per cycle."""

    pod: Pod
    #: ``PodRequests``: what the pod takes from a node's allocatable.
    requests: Resources
    #: Requests with 100m CPU / 200Mi memory assumed for containers that set none (scoring).
    non_zero_cpu: int
    non_zero_memory: int
    host_ports: tuple[HostPort, ...]
    #: What node-local plugins may read of the pod, encoded when first needed (the key of
    #: the runtime's per-shape cache).
    shape: bytes | None = None

    @classmethod
    def of(cls, pod: Pod) -> PodInfo:
        requests = pod_requests(pod)
        spec = pod.spec
        # Counting a missing cpu or memory request as 100m / 200Mi changes nothing when every
        # container sets both: the usual pod, read once.
        non_zero = (
            requests
            if all(
                CPU in c.resources.requests and MEMORY in c.resources.requests
                for c in (*spec.containers, *spec.init_containers)
            )
            else pod_requests(pod, non_missing=True)
        )
        return cls(
            pod=pod,
            requests=requests,
            non_zero_cpu=non_zero.get(CPU, 0),
            non_zero_memory=non_zero.get(MEMORY, 0),
            host_ports=host_ports(pod),
        )

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid

    @property
    def key(self) -> str:
        return self.pod.key


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The host ports the pod's containers and sidecars claim (``GetHostPorts``).

    Ordinary init containers have exited before the pod runs, so their ports are not held.
    """
    out: list[HostPort] = []
    sidecars = [c for c in pod.spec.init_containers if c.restart_policy == "Always"]
    for c in (*sidecars, *pod.spec.containers):
        for p in c.ports:
            if p.host_port > 0:
                out.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
    return tuple(out)


def ports_conflict(used: set[HostPort], wanted: tuple[HostPort, ...]) -> bool:
    """``HostPortInfo.CheckConflict``: same protocol and port, and one side is 0.0.0.0 or both IPs
    are equal."""
    for ip, proto, port in wanted:
        for uip, uproto, uport in used:
            if uport == port and uproto == proto and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


@dataclass(slots=True, eq=False)
class NodeInfo:
    """kube-scheduler's ``NodeInfo``: a node and the pods that count on it.

    ``node`` is ``None`` while pods are known on a node whose Node object has not arrived (or was
    deleted before its pods): such a node is never a candidate.
    """

    name: str
    slot: int
    node: Node | None = None
    pods: dict[str, PodInfo] = field(default_factory=dict)
    #: Sum of the pods' requests (``Requested``), pods counted under ``"pods"``.
    requested: Resources = field(default_factory=dict)
    non_zero_cpu: int = 0
    non_zero_memory: int = 0
    used_ports: set[HostPort] = field(default_factory=set)
    allocatable: Resources = field(default_factory=dict)
    #: New on every change, so a reader can tell whether its derived data is stale. A trial's
    #: changes take new ones too, and its undo gives back the one before (the same content).
    generation: int = 0
    #: The last generation handed out: a new one is never one the node had before.
    _issued: int = field(default=0, init=False, repr=False)

    def add_pod(self, info: PodInfo) -> None:
        self.pods[info.uid] = info
        self._account(info, 1)

    def changed(self) -> None:
        """A new :attr:`generation`."""
        self._issued += 1
        self.generation = self._issued

    def remove_pod(self, uid: str) -> PodInfo | None:
        info = self.pods.pop(uid, None)
        if info is not None:
            self._account(info, -1)
        return info

    def _account(self, info: PodInfo, sign: int) -> None:
        add_resources(self.requested, info.requests, sign)
        self.requested["pods"] = self.requested.get("pods", 0) + sign
        self.non_zero_cpu += sign * info.non_zero_cpu
        self.non_zero_memory += sign * info.non_zero_memory
        if info.host_ports:
            if sign > 0:
                self.used_ports.update(info.host_ports)
            else:
                self.used_ports = {p for i in self.pods.values() for p in i.host_ports}
        self.changed()


@dataclass(slots=True, frozen=True, eq=False)
class NodeContent:
    """A node as a verdict on it found it: that verdict still holds while the node has the same
    content, which the same NodeInfo at the same :attr:`~NodeInfo.generation` has (a trial that
    changed the node and undid it gives back its generation)."""

    info: NodeInfo
    generation: int

    @classmethod
    def of(cls, info: NodeInfo) -> NodeContent:
        return cls(info, info.generation)

    def holds(self, info: NodeInfo) -> bool:
        """Whether ``info`` has the content seen then."""
        return self.info is info and self.generation == info.generation
