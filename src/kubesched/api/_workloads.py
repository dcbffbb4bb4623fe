"""Namespaces and the workloads that select pods, as far as scheduling plugins read them.

InterPodAffinity's ``namespaceSelector`` matches Namespace labels; PodTopologySpread's default
constraints apply to pods selected by a Service, ReplicationController, ReplicaSet or
StatefulSet, whose selectors these structs carry.
"""

from __future__ import annotations

import msgspec

from kubesched.api._objects import LabelSelector, ObjectMeta, _Obj

#: The label the API server puts on every Namespace, holding its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Namespace(_Obj, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)


class MapSelectorSpec(_Obj):
    """``spec.selector`` as a plain label map (Services, ReplicationControllers)."""

    selector: dict[str, str] | None = None


class LabelSelectorSpec(_Obj):
    """``spec.selector`` as a LabelSelector (ReplicaSets, StatefulSets)."""

    selector: LabelSelector | None = None


class Service(_Obj, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: MapSelectorSpec = msgspec.field(default_factory=MapSelectorSpec)


class ReplicationController(_Obj, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: MapSelectorSpec = msgspec.field(default_factory=MapSelectorSpec)


class ReplicaSet(_Obj, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: LabelSelectorSpec = msgspec.field(default_factory=LabelSelectorSpec)


class StatefulSet(_Obj, kw_only=True):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: LabelSelectorSpec = msgspec.field(default_factory=LabelSelectorSpec)


Workload = Service | ReplicationController | ReplicaSet | StatefulSet


def workload_selector(obj: Workload) -> LabelSelector | None:
    """The pod selector of a workload; ``None`` when it selects no pod (a Service without one)."""
    if isinstance(obj, (Service, ReplicationController)):
        labels = obj.spec.selector
        return LabelSelector(match_labels=dict(labels)) if labels else None
    return obj.spec.selector
