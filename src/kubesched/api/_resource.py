"""Dynamic resource allocation objects (``resource.k8s.io/v1``): ResourceClaims, their
templates, DeviceClasses and ResourceSlices, with the small rules of Kubernetes'
``dynamic-resource-allocation/resourceclaim`` package.

As in :mod:`kubesched.api._objects`, only what a scheduler reads is declared, except for the
parts of a claim's status that the scheduler writes (the allocation), which are complete so that
a written allocation is the one kube-scheduler would write. Opaque driver configuration is kept
as plain JSON.
"""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched import KubeschedError
from kubesched.api._objects import NodeSelector, NullList, ObjectMeta, Pod

GROUP = "resource.k8s.io"
API_VERSION = "resource.k8s.io/v1"

#: ``resourceapi.Finalizer``: set by the scheduler on a claim it allocates.
FINALIZER = "resource.kubernetes.io/delete-protection"
#: Annotation the resourceclaim controller puts on a claim made from a template.
ANN_POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
#: ``ResourceClaimReservedForMaxSize``: pods that may share one claim.
RESERVED_FOR_MAX_SIZE = 256
#: ``AllocationResultsMaxSize``: devices in one claim's allocation.
ALLOCATION_RESULTS_MAX_SIZE = 32

ALLOCATION_MODE_EXACT_COUNT = "ExactCount"
ALLOCATION_MODE_ALL = "All"
CONFIG_SOURCE_CLASS = "FromClass"
CONFIG_SOURCE_CLAIM = "FromClaim"


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """As :mod:`kubesched.api._objects`' base: camelCase, defaults left out, untracked by GC."""


# --- slices ------------------------------------------------------------------------------------


class DeviceAttribute(_Obj):
    """Exactly one of the four is set (``int`` and ``bool`` are Python names: spelled out)."""

    int_: int | None = msgspec.field(default=None, name="int")
    bool_: bool | None = msgspec.field(default=None, name="bool")
    string: str | None = None
    version: str | None = None


class DeviceCapacity(_Obj):
    value: str = "0"


class DeviceTaint(_Obj):
    key: str = ""
    value: str = ""
    effect: str = ""


class Device(_Obj):
    name: str = ""
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    #: Partitionable devices (alpha in v1.34): a device that consumes counters is not allocated.
    consumes_counters: list[dict[str, Any]] = []
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    #: Device taints (alpha in v1.34, off): read only to say they are not honored.
    taints: list[DeviceTaint] = []
    #: Binding conditions (alpha in v1.34, off): a device with them is never allocated.
    binding_conditions: list[str] = []


class ResourcePool(_Obj):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class ResourceSliceSpec(_Obj):
    driver: str = ""
    pool: ResourcePool = msgspec.field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    #: Partitionable devices (alpha in v1.34): such slices are skipped with the gate off.
    per_device_node_selection: bool | None = None
    devices: NullList[Device] = []

    def __post_init__(self) -> None:
        if self.devices is None:
            self.devices = []


class ResourceSlice(_Obj, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "ResourceSlice"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceSliceSpec = msgspec.field(default_factory=ResourceSliceSpec)


# --- classes -----------------------------------------------------------------------------------


class CELDeviceSelector(_Obj):
    expression: str = ""


class DeviceSelector(_Obj):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(_Obj):
    driver: str = ""
    parameters: Any = None


class DeviceClassConfiguration(_Obj):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassSpec(_Obj):
    selectors: list[DeviceSelector] = []
    config: list[DeviceClassConfiguration] = []


class DeviceClass(_Obj, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "DeviceClass"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: DeviceClassSpec = msgspec.field(default_factory=DeviceClassSpec)


# --- claims ------------------------------------------------------------------------------------


class DeviceToleration(_Obj):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class ExactDeviceRequest(_Obj):
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    #: The API server defaults it to ``ExactCount``; manifests may leave it out.
    allocation_mode: str = ""
    #: Defaulted to 1 for ``ExactCount``.
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] = []


class DeviceSubRequest(_Obj):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] = []
    allocation_mode: str = ""
    count: int | None = None
    tolerations: list[DeviceToleration] = []


class DeviceRequest(_Obj):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] = []


class DeviceConstraint(_Obj):
    requests: list[str] = []
    match_attribute: str | None = None


class DeviceClaimConfiguration(_Obj):
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClaim(_Obj):
    requests: NullList[DeviceRequest] = []
    constraints: list[DeviceConstraint] = []
    config: list[DeviceClaimConfiguration] = []

    def __post_init__(self) -> None:
        if self.requests is None:
            self.requests = []


class ResourceClaimSpec(_Obj):
    devices: DeviceClaim = msgspec.field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(_Obj):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None


class DeviceAllocationConfiguration(_Obj):
    source: str = ""
    requests: list[str] = []
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceAllocationResult(_Obj):
    results: list[DeviceRequestAllocationResult] = []
    config: list[DeviceAllocationConfiguration] = []


class AllocationResult(_Obj):
    devices: DeviceAllocationResult = msgspec.field(default_factory=DeviceAllocationResult)
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(_Obj):
    api_group: str = ""
    resource: str = ""
    name: str = ""
    uid: str = ""


class ResourceClaimStatus(_Obj):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] = []


class ResourceClaim(_Obj, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "ResourceClaim"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus = msgspec.field(default_factory=ResourceClaimStatus)


class ResourceClaimTemplateSpec(_Obj):
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimSpec = msgspec.field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(_Obj, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "ResourceClaimTemplate"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: ResourceClaimTemplateSpec = msgspec.field(default_factory=ResourceClaimTemplateSpec)


# --- the resourceclaim package's rules ------------------------------------------------------------


class ClaimNameError(KubeschedError):
    """A pod's claim whose ResourceClaim cannot be named (yet)."""


def resource_claim_name(pod: Pod, index: int) -> tuple[str | None, bool]:
    """``resourceclaim.Name`` for ``pod.spec.resourceClaims[index]``: the ResourceClaim's name
    (``None``: none was made, nothing to do) and whether it must be checked to be the pod's own.
    """
    pc = pod.spec.resource_claims[index]
    if pc.resource_claim_name is not None:
        return pc.resource_claim_name, False
    meta = pod.metadata
    if pc.resource_claim_template_name is not None:
        for status in pod.status.resource_claim_statuses:
            if status.name == pc.name:
                return status.resource_claim_name, True
        raise ClaimNameError(f'pod "{meta.namespace}/{meta.name}": ResourceClaim not created yet')
    raise ClaimNameError(
        f'pod "{meta.namespace}/{meta.name}", spec.resourceClaim "{pc.name}": '
        "none of the supported fields are set"
    )


def claim_is_for_pod(pod: Pod, claim: ResourceClaim) -> str | None:
    """``resourceclaim.IsForPod``: ``None``, or why ``claim`` is not the pod's own."""
    meta = claim.metadata
    owned = any(r.controller and r.uid == pod.metadata.uid for r in meta.owner_references)
    if meta.namespace != pod.metadata.namespace or not owned:
        return (
            f"ResourceClaim {meta.namespace}/{meta.name} was not created for pod "
            f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)"
        )
    return None


def claim_reserved_for_pod(pod: Pod, claim: ResourceClaim) -> bool:
    """``resourceclaim.IsReservedForPod``."""
    uid = pod.metadata.uid
    return any(r.uid == uid for r in claim.status.reserved_for)


def claim_can_be_reserved(claim: ResourceClaim) -> bool:
    """``resourceclaim.CanBeReserved``: room left in ``reservedFor``."""
    return len(claim.status.reserved_for) < RESERVED_FOR_MAX_SIZE
