"""VolumeBinding: a pod's PersistentVolumeClaims decide, and are decided with, its node.

A pod's claims fall into three kinds (PreFilter):

- **bound** (``spec.volumeName`` set and the binding complete): the PV must be reachable from the
  node, i.e. the node's labels must satisfy the PV's ``spec.nodeAffinity``
  (``node(s) had volume node affinity conflict``); a PV that does not exist rules out every node
  (``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``);
- **unbound with a WaitForFirstConsumer class**: the scheduler chooses. On each node, the claims
  (smallest request first) each take the smallest available PV of their class that fits
  (capacity, access modes, volume mode, attributes class, selector, node affinity); a claim
  without such a PV must be provisionable there (the class has a provisioner, its
  ``allowedTopologies`` admit the node), else ``node(s) didn't find available persistent
  volumes to bind``;
- **unbound otherwise** (Immediate class, no class, or prebound to a PV): the PV controller binds
  them, and until it does the pod is rejected: ``pod has unbound immediate
  PersistentVolumeClaims``. A claim that does not exist: ``persistentvolumeclaim "x" not found``.

Reserve assumes the chosen node's bindings in the plugin's assume cache, so the next pods see
those PVs as taken; Unreserve reverts them. PreBind writes them: the PV's ``claimRef`` (with the
resourceVersion the decision was made on), the selected-node annotation on claims to provision,
then, as the PV controller would, the claim's ``volumeName`` and the ``Bound`` phases; it waits
(``bindTimeoutSeconds``) until every claim is fully bound.

Filter is vectorized: each PV's node affinity and each class's allowed topologies are evaluated
once per distinct label value over the node table, and the greedy PV choice runs over all nodes
with masks. Pods without claims are skipped at PreFilter.

Scoring (PreScore, Score) works only with the ``StorageCapacityScoring`` gate, which gives the
args a ``shape``; without it PreScore skips.
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
