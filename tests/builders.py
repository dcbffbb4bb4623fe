"""Builders for Nodes and Pods in tests: the API's own structs, filled in briefly.

Fluent, as upstream's ``st.MakePod().Name("p").Req(...).Node("n1").Obj()``::

    PodWrapper("p").namespace("default").req({"cpu": "1"}).node("n1").priority(10).obj()
    NodeWrapper("n1").capacity({"cpu": "4", "memory": "8Gi"}).label("zone", "a").obj()

Fields not set keep the API's defaults. :func:`make_pod` and :func:`make_node` are the common
shapes (a pause container, a Ready node with 110 pods) in one call.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

import msgspec

from kubesched.api import Node, Pod

Json = dict[str, Any]

_uids = itertools.count(1)

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def next_uid() -> str:
    """A uid no other built pod has: ``uid-<n>``."""
    return f"uid-{next(_uids)}"


def _merge(target: Json, extra: Mapping[str, Any]) -> None:
    """``extra``'s objects merged into ``target``'s, other values replacing."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


class PodWrapper:
    """upstream's ``PodWrapper``: each method sets one part and returns the builder."""

    def __init__(self, name: str = "") -> None:
        self._metadata: Json = {"name": name}
        self._spec: Json = {}
        self._status: Json = {}

    def name(self, name: str) -> Self:
        self._metadata["name"] = name
        return self

    def namespace(self, namespace: str) -> Self:
        self._metadata["namespace"] = namespace
        return self

    def uid(self, uid: str) -> Self:
        self._metadata["uid"] = uid
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._metadata.setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> Self:
        return self.labels({key: value})

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        self._metadata.setdefault("annotations", {}).update(annotations)
        return self

    def owner(self, api_version: str, kind: str, name: str) -> Self:
        """A controller owner reference (a ReplicaSet, a StatefulSet, ...)."""
        ref = {"apiVersion": api_version, "kind": kind, "name": name, "controller": True}
        self._metadata.setdefault("ownerReferences", []).append(ref)
        return self

    def terminating(self, since: str = "2025-01-01T00:00:00Z") -> Self:
        """Marked for deletion (``metadata.deletionTimestamp``)."""
        self._metadata["deletionTimestamp"] = since
        return self

    def container(
        self,
        name: str | None = None,
        *,
        image: str = "",
        requests: Mapping[str, str] | None = None,
        **fields: Any,
    ) -> Self:
        """One more container (``c<i>`` unless named); ``fields`` as the API spells them."""
        containers = self._spec.setdefault("containers", [])
        containers.append(_container(name or f"c{len(containers)}", image, requests, fields))
        return self

    def pause(self, image: str = PAUSE_IMAGE, requests: Mapping[str, str] | None = None) -> Self:
        """The container :func:`make_pod` gives: ``c``, the pause image, ``requests`` or none."""
        return self.container("c", image=image, requests=requests or {})

    def req(self, requests: Mapping[str, str]) -> Self:
        """upstream's ``Req``: one more container requesting ``requests``."""
        return self.container(requests=requests)

    def init_container(
        self,
        name: str | None = None,
        *,
        image: str = "",
        requests: Mapping[str, str] | None = None,
        sidecar: bool = False,
        **fields: Any,
    ) -> Self:
        """One more init container (``i<i>`` unless named); a ``sidecar`` restarts Always."""
        containers = self._spec.setdefault("initContainers", [])
        if sidecar:
            fields = {"restartPolicy": "Always", **fields}
        containers.append(_container(name or f"i{len(containers)}", image, requests, fields))
        return self

    def ephemeral_container(self, name: str, *, image: str = "") -> Self:
        self._spec.setdefault("ephemeralContainers", []).append(_container(name, image, None, {}))
        return self

    def overhead(self, overhead: Mapping[str, str]) -> Self:
        self._spec["overhead"] = dict(overhead)
        return self

    def pod_requests(self, requests: Mapping[str, str]) -> Self:
        """Pod-level resources (``spec.resources.requests``)."""
        self._spec["resources"] = {"requests": dict(requests)}
        return self

    def node(self, node_name: str) -> Self:
        """``spec.nodeName``: bound to (or assigned) that node."""
        self._spec["nodeName"] = node_name
        return self

    def nominated(self, node_name: str) -> Self:
        self._status["nominatedNodeName"] = node_name
        return self

    def start_time(self, time: str) -> Self:
        self._status["startTime"] = time
        return self

    def priority(self, priority: int) -> Self:
        self._spec["priority"] = priority
        return self

    def preemption_policy(self, policy: str) -> Self:
        self._spec["preemptionPolicy"] = policy
        return self

    def node_selector(self, selector: Mapping[str, str]) -> Self:
        self._spec["nodeSelector"] = dict(selector)
        return self

    def affinity(self, affinity: Mapping[str, Any]) -> Self:
        """``spec.affinity`` as the API spells it (``nodeAffinity``, ``podAffinity``, ...)."""
        self._spec["affinity"] = dict(affinity)
        return self

    def tolerations(self, tolerations: Iterable[Mapping[str, Any]]) -> Self:
        self._spec.setdefault("tolerations", []).extend(dict(t) for t in tolerations)
        return self

    def spec(self, spec: Mapping[str, Any]) -> Self:
        """Anything else in the pod's spec, as the API spells it (merged)."""
        _merge(self._spec, spec)
        return self

    def status(self, status: Mapping[str, Any]) -> Self:
        """Anything in the pod's status, as the API spells it (merged)."""
        _merge(self._status, status)
        return self

    def resource_version(self, version: str) -> Self:
        self._metadata["resourceVersion"] = version
        return self

    def obj(self) -> Pod:
        raw = {"metadata": self._metadata, "spec": self._spec, "status": self._status}
        return msgspec.convert(raw, Pod)

    def manifest(self) -> Json:
        """The pod as the API takes and serves it: only what was set, as JSON."""
        return _manifest("Pod", self._metadata, self._spec, self._status)


def _container(
    name: str, image: str, requests: Mapping[str, str] | None, fields: Mapping[str, Any]
) -> Json:
    container: Json = {"name": name, **fields}
    if image:
        container["image"] = image
    if requests is not None:
        container["resources"] = {"requests": dict(requests)}
    return container


class NodeWrapper:
    """upstream's ``NodeWrapper``: each method sets one part and returns the builder."""

    def __init__(self, name: str = "") -> None:
        self._metadata: Json = {"name": name}
        self._spec: Json = {}
        self._status: Json = {}

    def name(self, name: str) -> Self:
        self._metadata["name"] = name
        return self

    def uid(self, uid: str) -> Self:
        self._metadata["uid"] = uid
        return self

    def labels(self, labels: Mapping[str, str]) -> Self:
        self._metadata.setdefault("labels", {}).update(labels)
        return self

    def label(self, key: str, value: str) -> Self:
        return self.labels({key: value})

    def annotations(self, annotations: Mapping[str, str]) -> Self:
        self._metadata.setdefault("annotations", {}).update(annotations)
        return self

    def capacity(self, resources: Mapping[str, str | int]) -> Self:
        """upstream's ``Capacity``: capacity and allocatable both ``resources``."""
        self.allocatable(resources)
        self._status["capacity"] = dict(self._status["allocatable"])
        return self

    def allocatable(self, resources: Mapping[str, str | int]) -> Self:
        """Allocatable only (quantities as strings, as the API serves them)."""
        self._status["allocatable"] = {k: str(v) for k, v in resources.items()}
        return self

    def taints(self, taints: Iterable[Mapping[str, str]]) -> Self:
        self._spec.setdefault("taints", []).extend(dict(t) for t in taints)
        return self

    def unschedulable(self, unschedulable: bool = True) -> Self:
        self._spec["unschedulable"] = unschedulable
        return self

    def images(self, images: Sequence[tuple[Sequence[str], int]]) -> Self:
        """Images present on the node: (names, size in bytes)."""
        listed = [{"names": list(names), "sizeBytes": size} for names, size in images]
        self._status.setdefault("images", []).extend(listed)
        return self

    def ready(self) -> Self:
        self._status.setdefault("conditions", []).append({"type": "Ready", "status": "True"})
        return self

    def obj(self) -> Node:
        raw = {"metadata": self._metadata, "spec": self._spec, "status": self._status}
        return msgspec.convert(raw, Node)

    def manifest(self) -> Json:
        """The node as the API takes and serves it: only what was set, as JSON."""
        return _manifest("Node", self._metadata, self._spec, self._status)


def _manifest(kind: str, metadata: Json, spec: Json, status: Json) -> Json:
    parts = {"metadata": metadata, "spec": spec, "status": status}
    kept = {key: copy.deepcopy(value) for key, value in parts.items() if value}
    return {"apiVersion": "v1", "kind": kind, **kept}


def make_node(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "32Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
    images: Sequence[tuple[Sequence[str], int]] = (),
    extra: Mapping[str, str] | None = None,
) -> Node:
    """A Ready node with allocatable = capacity."""
    capacity = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return (
        NodeWrapper(name)
        .uid(f"node-{name}")
        .labels(labels or {})
        .capacity(capacity)
        .taints(taints)
        .unschedulable(unschedulable)
        .ready()
        .images(images)
        .obj()
    )


def make_pod(
    name: str,
    *,
    namespace: str = "default",
    cpu: str | None = None,
    memory: str | None = None,
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    image: str = PAUSE_IMAGE,
    spec: Mapping[str, Any] | None = None,
    priority: int | None = None,
    uid: str | None = None,
) -> Pod:
    """A pod with one container; ``spec`` entries are merged into the pod's spec as JSON."""
    requests = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    pod = (
        PodWrapper(name)
        .namespace(namespace)
        .uid(uid or next_uid())
        .labels(labels or {})
        .annotations(annotations or {})
        .pause(image, requests)
        .node(node_name)
    )
    if priority is not None:
        pod.priority(priority)
    return pod.spec(spec or {}).obj()


def req_pod(
    *containers: Mapping[str, str],
    init: Sequence[Mapping[str, str]] = (),
    sidecars: Sequence[Mapping[str, str]] = (),
    overhead: Mapping[str, str] | None = None,
    pod_level: Mapping[str, str] | None = None,
    node_name: str = "",
    uid: str | None = None,
    nominated: str = "",
) -> Pod:
    """upstream's resource pods (``st.MakePod().Req(...)`` per container): each positional
    argument is one container's requests; ``sidecars`` are restartable init containers placed
    before the ordinary ``init`` ones. Named ``p<n>`` in ``default``, uid ``uid-<n>`` unless
    given."""
    n = next(_uids)
    built = (
        PodWrapper(f"p{n}")
        .namespace("default")
        .uid(uid or f"uid-{n}")
        .node(node_name)
        .nominated(nominated)
    )
    for requests in containers:
        built.req(requests)
    for i, requests in enumerate(sidecars):
        built.init_container(f"s{i}", requests=requests, sidecar=True)
    for i, requests in enumerate(init):
        built.init_container(f"i{i}", requests=requests)
    if overhead:
        built.overhead(overhead)
    if pod_level:
        built.pod_requests(pod_level)
    return built.obj()
