"""What a pod requests and what a node offers, in the units kube-scheduler compares.

A request or an allocatable amount is a ``dict[str, int]`` keyed by resource name, with CPU in
millicores and everything else in whole units (bytes, pods, devices). Only the resources
kube-scheduler accounts for are kept: cpu, memory, ephemeral-storage, pods and scalar resources
(extended resources such as ``example.com/gpu``, ``hugepages-*``, ``attachable-volumes-*`` and
other ``kubernetes.io/``-prefixed names).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from kubesched.api._objects import Container, Node, Pod
from kubesched.api._quantity import nano_value

#: Sums are kept in nano-units: the API server rounds every quantity up to 1n, so integers of
#: nano-units are exact and much cheaper to add than fractions.
_NANO = 10**9

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

#: What kube-scheduler assumes a container without a CPU or memory request uses, for scoring.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

#: Resources a pod may request at pod level (``spec.resources``) in v1.34: cpu, memory and
#: hugepages (``IsSupportedPodLevelResource``).
_POD_LEVEL_RESOURCES = frozenset({CPU, MEMORY})
_HUGEPAGES_PREFIX = "hugepages-"


def _is_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


Resources = dict[str, int]


def is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource_name(name: str) -> bool:
    """``example.com/foo``: domain-prefixed, outside ``kubernetes.io/``, not a quota name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_scalar_resource_name(name: str) -> bool:
    """Counted by kube-scheduler besides cpu, memory, ephemeral-storage and pods: extended
    resources, ``hugepages-*``, ``attachable-volumes-*``, and any name containing
    ``kubernetes.io/`` (``IsPrefixedNativeResource``: ``subdomain.kubernetes.io/x`` too)."""
    return (
        is_extended_resource_name(name)
        or name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
    )


def _accounted(name: str) -> bool:
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or is_scalar_resource_name(name)


def _to_units(nanos: Mapping[str, int]) -> Resources:
    out: Resources = {}
    for name, value in nanos.items():
        if not _accounted(name):
            continue
        # -(-a // b) is ceil(a / b) in integers.
        out[name] = -(-value // 10**6) if name == CPU else -(-value // _NANO)
    return out


@lru_cache(maxsize=8192)
def _nanos(q: str) -> int:
    return nano_value(q)


def _parse(resources: Mapping[str, str]) -> dict[str, int]:
    return {name: _nanos(q) for name, q in resources.items()}


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


_NON_MISSING = {CPU: DEFAULT_MILLI_CPU_REQUEST * 10**6, MEMORY: DEFAULT_MEMORY_REQUEST * _NANO}


def _container_requests(container: Container, non_missing: bool) -> dict[str, int]:
    reqs = _parse(container.resources.requests)
    if non_missing:
        for name, value in _NON_MISSING.items():
            reqs.setdefault(name, value)
    return reqs


def _aggregate_container_requests(pod: Pod, non_missing: bool) -> dict[str, int]:
    # Mirrors component-helpers' AggregateContainerRequests: app containers add up; init
    # containers run one at a time but sidecars (restartPolicy Always) keep running, so each init
    # container needs its own request plus every sidecar started before it, and sidecars also add
    # to the steady state.
    reqs: dict[str, int] = {}
    for container in pod.spec.containers:
        _add(reqs, _container_requests(container, non_missing))
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for container in pod.spec.init_containers:
        creqs = _container_requests(container, non_missing)
        if container.restart_policy == "Always":
            _add(reqs, creqs)
            _add(sidecars, creqs)
            peak = dict(sidecars)
        else:
            peak = dict(creqs)
            _add(peak, sidecars)
        _max(init_max, peak)
    _max(reqs, init_max)
    return reqs


def pod_requests(
    pod: Pod, *, non_missing: bool = False, exclude_overhead: bool = False
) -> Resources:
    """kube-scheduler's ``PodRequests``: what the pod needs on a node.

    ``non_missing`` counts a container without a CPU or memory request as 100m / 200Mi, which
    is how kube-scheduler's scoring sees such pods (``NonZeroRequested``). Pod-level requests,
    where set, replace the containers' sum for cpu, memory and hugepages. Overhead (RuntimeClass)
    is added unless excluded.
    """
    reqs = _aggregate_container_requests(pod, non_missing)
    pod_level = pod.spec.resources
    if pod_level is not None and pod_level.requests:
        for name, q in pod_level.requests.items():
            if _is_pod_level_resource(name):
                reqs[name] = _nanos(q)
    if pod.spec.overhead and not exclude_overhead:
        _add(reqs, _parse(pod.spec.overhead))
    return _to_units(reqs)


def node_allocatable(node: Node) -> Resources:
    """The node's ``status.allocatable`` in scheduler units (cpu in millicores)."""
    return _to_units(_parse(node.status.allocatable))


def add_resources(into: Resources, other: Mapping[str, int], sign: int = 1) -> None:
    """``into += sign * other``, in place."""
    for name, value in other.items():
        into[name] = into.get(name, 0) + sign * value


def container_images(pod: Pod) -> Iterable[str]:
    """Every image the pod runs: init, app and ephemeral containers."""
    for c in (*pod.spec.init_containers, *pod.spec.containers, *pod.spec.ephemeral_containers):
        if c.image:
            yield c.image
