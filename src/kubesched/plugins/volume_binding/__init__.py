"""VolumeBinding: a pod's PersistentVolumeClaims decide, and are decided with, its node.

Bound claims need their PV reachable from the node; unbound WaitForFirstConsumer claims each take
the smallest fitting PV on a node, or must be provisionable there; other unbound claims hold the
pod until the PV controller binds them. Reserve assumes the chosen bindings and PreBind writes
them, waiting until every claim is bound. The rules and the messages: docs/plugins/volumes.md.

Filter is vectorized: each PV's node affinity and each class's allowed topologies are evaluated
once per distinct label value over the node table, and the greedy PV choice runs over all nodes
with masks.
"""

from kubesched.plugins.volume_binding._binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    Finder,
    PodVolumeClaims,
    PodVolumes,
)
from kubesched.plugins.volume_binding._plugin import (
    ERR_REASON_UNBOUND_IMMEDIATE,
    NAME,
    STATE_KEY,
    VolumeBinding,
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_REASON_UNBOUND_IMMEDIATE",
    "NAME",
    "STATE_KEY",
    "Finder",
    "PodVolumeClaims",
    "PodVolumes",
    "VolumeBinding",
]
