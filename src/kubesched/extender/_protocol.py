"""kube-scheduler's ``extender/v1`` wire types, as ``msgspec`` structs.

The JSON uses the Go field names (``Pod``, ``NodeNames``, ``FailedAndUnresolvableNodes``): the
types in ``k8s.io/kube-scheduler/extender/v1`` have no JSON tags. The Kubernetes objects inside
(``Pod``, the items of a ``NodeList``) use the API's own camelCase names and decode into
:mod:`kubesched.api` structs.

A ``NodeList`` body is kept as one :class:`msgspec.Raw` per item: a filter answer in that mode must
echo the nodes that passed, and writing the original bytes back costs nothing, where re-encoding
decoded nodes would both cost time and drop the fields the scheduler does not read.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from kubesched.api import Pod

#: ``MaxExtenderPriority``: prioritize scores are 0..10; kube-scheduler multiplies them by the
#: extender's weight and by ``MaxNodeScore / MaxExtenderPriority`` (10).
MAX_EXTENDER_PRIORITY: Final = 10
MIN_EXTENDER_PRIORITY: Final = 0


class _Go(msgspec.Struct, rename="pascal"):
    """A struct with Go's exported field names on the wire."""


class RawNodeList(msgspec.Struct):
    """A ``v1.NodeList`` with its items left undecoded (``items`` is ``null`` when empty)."""

    items: list[msgspec.Raw] | None = None


class ExtenderArgs(_Go):
    """``ExtenderArgs``: the body of filter and prioritize.

    ``nodes`` is set when the extender is not ``nodeCacheCapable``; ``node_names`` when it is.
    ``node_names`` stays raw here (``null`` when absent): kube-scheduler sends the same list
    again and again, and the extender reuses what it resolved for identical bytes (see
    :data:`node_names_decoder` for the list itself).
    """

    pod: Pod | None = None
    nodes: RawNodeList | None = None
    node_names: msgspec.Raw = msgspec.Raw(b"null")


class NodeListOut(msgspec.Struct):
    """A ``v1.NodeList`` made of raw items, for a filter answer in ``Nodes`` mode."""

    items: list[msgspec.Raw]
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ExtenderFilterResult(_Go):
    """``ExtenderFilterResult``: the answer to filter.

    Nodes in ``failed_and_unresolvable_nodes`` are ones preemption cannot help; the scheduler
    gives that map precedence over ``failed_nodes``. A non-empty ``error`` fails the filter call.
    """

    nodes: NodeListOut | None = None
    node_names: list[str] | None = None
    failed_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    failed_and_unresolvable_nodes: dict[str, str] = msgspec.field(default_factory=dict)
    error: str = ""


class ExtenderFilterResultNames(_Go):
    """An :class:`ExtenderFilterResult` whose ``NodeNames`` list and failure maps are already
    JSON."""

    node_names: msgspec.Raw
    failed_nodes: msgspec.Raw
    failed_and_unresolvable_nodes: msgspec.Raw
    nodes: None = None
    error: str = ""


class HostPriority(_Go, gc=False):
    """One entry of ``HostPriorityList``, the answer to prioritize."""

    host: str
    score: int


class ExtenderBindingArgs(_Go):
    """``ExtenderBindingArgs``: the body of bind."""

    pod_name: str = ""
    pod_namespace: str = ""
    pod_uid: str = msgspec.field(default="", name="PodUID")
    node: str = ""


class ExtenderBindingResult(_Go):
    """``ExtenderBindingResult``: the answer to bind; a non-empty ``error`` fails the binding."""

    error: str = ""


class MetaPod(_Go):
    """``MetaPod``: a pod named by its UID."""

    uid: str = msgspec.field(default="", name="UID")


class MetaVictims(_Go):
    """``MetaVictims``: the pods to preempt on one node, by UID."""

    pods: list[MetaPod] | None = None
    num_pdb_violations: int = msgspec.field(default=0, name="NumPDBViolations")


class Victims(_Go):
    """``Victims``: the pods to preempt on one node, in full."""

    pods: list[Pod] | None = None
    num_pdb_violations: int = msgspec.field(default=0, name="NumPDBViolations")


class ExtenderPreemptionArgs(_Go):
    """``ExtenderPreemptionArgs``: the body of preempt.

    A ``nodeCacheCapable`` extender gets ``node_name_to_meta_victims`` (UIDs), any other one
    ``node_name_to_victims`` (whole pods).
    """

    pod: Pod | None = None
    node_name_to_victims: dict[str, Victims | None] | None = None
    node_name_to_meta_victims: dict[str, MetaVictims | None] | None = None


class ExtenderPreemptionResult(_Go):
    """``ExtenderPreemptionResult``: the victims the extender accepts, per node."""

    node_name_to_meta_victims: dict[str, MetaVictims] = msgspec.field(default_factory=dict)


class _PeekMeta(msgspec.Struct, rename="camel"):
    name: str = ""
    uid: str = ""
    resource_version: str = ""


class NodePeek(msgspec.Struct):
    """Just enough of a Node to tell whether a cached copy is still current."""

    metadata: _PeekMeta = msgspec.field(default_factory=_PeekMeta)


args_decoder: Final = msgspec.json.Decoder(ExtenderArgs)
node_names_decoder: Final = msgspec.json.Decoder(list[str] | None)
binding_args_decoder: Final = msgspec.json.Decoder(ExtenderBindingArgs)
preemption_args_decoder: Final = msgspec.json.Decoder(ExtenderPreemptionArgs)
peek_decoder: Final = msgspec.json.Decoder(NodePeek)
encoder: Final = msgspec.json.Encoder()
