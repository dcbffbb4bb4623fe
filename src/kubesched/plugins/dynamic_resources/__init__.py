"""DynamicResources: kube-scheduler's dynamic resource allocation plugin (v1.34, DRA GA).

A pod asks for devices through ``spec.resourceClaims``: each names a ResourceClaim, or a
ResourceClaimTemplate from which the resourceclaim controller makes one for the pod (named in
the pod's ``status.resourceClaimStatuses``). Drivers publish devices in ResourceSlices;
DeviceClasses select kinds of devices with CEL. The plugin:

- PreEnqueue keeps a pod out of the queue until each of its claims exists (and, if made from a
  template, is owned by the pod);
- PreFilter rejects the pod if a claim is in use by as many pods as it may be shared with, being
  allocated for another pod, or asks for a class that does not exist; it sets up the allocator
  (:mod:`._allocator`) for the claims not allocated yet, with every allocated device taken;
- Filter asks the allocator about each node ("cannot allocate all claims") and checks that the
  devices of claims already allocated are reachable ("resourceclaim not available on the node");
- PostFilter, for a pod without claims, says ``no new claims to deallocate``; for one whose
  allocated claim is out of reach and used by no other pod, deallocates that claim;
- Reserve marks the allocation chosen for the node as in flight (its devices count as taken for
  every other pod), Unreserve forgets it (and takes the pod out of ``reservedFor``);
- PreBind writes the finalizer, then the allocation and the pod in ``reservedFor`` to the claim's
  status.

Rejections are UnschedulableAndUnresolvable, as kube-scheduler's, so preemption does not try to
make room for devices. A claim or class the allocator cannot work with (a CEL selector that does
not compile or fails on a device) aborts the pod's attempt with kube-scheduler's error; other
pods are not affected.
"""

from kubesched.plugins.dynamic_resources._plugin import (
    ERR_CANNOT_ALLOCATE,
    ERR_IN_USE,
    ERR_NOT_AVAILABLE,
    ERR_STATE_NOT_FOUND,
    MSG_NO_CLAIMS_TO_DEALLOCATE,
    MSG_STILL_NOT_SCHEDULABLE,
    NAME,
    DynamicResources,
    ResourceClaimAPIClient,
)

__all__ = [
    "ERR_CANNOT_ALLOCATE",
    "ERR_IN_USE",
    "ERR_NOT_AVAILABLE",
    "ERR_STATE_NOT_FOUND",
    "MSG_NO_CLAIMS_TO_DEALLOCATE",
    "MSG_STILL_NOT_SCHEDULABLE",
    "NAME",
    "DynamicResources",
    "ResourceClaimAPIClient",
]
