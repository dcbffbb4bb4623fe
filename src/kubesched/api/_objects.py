"""Typed views of the Kubernetes objects the scheduler reads.

Only the fields a scheduler looks at are declared; everything else in the JSON is ignored on
decode, which keeps decoding a watch event to a few microseconds. Field names are the API's
camelCase names. An object from the API server is treated as a value: the cache
replaces it on update and nothing mutates it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic, TypeVar

import msgspec

T = TypeVar("T")

if TYPE_CHECKING:
    NullList = list
else:

    class NullList:
        """``NullList[X]``: a list the API server sends as ``null`` when it is empty (a Go slice
        without ``omitempty``: an empty list written comes back ``null`` once stored). Decoded
        as ``list[X] | None``; the struct's ``__post_init__`` makes ``None`` an empty list, so
        readers see a list, as the type checker does."""

        def __class_getitem__(cls, item: object) -> object:
            return list[item] | None


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """Base of every API struct: camelCase on the wire, defaults left out on encode.

    ``gc=False``: API objects never form reference cycles, so the garbage collector need not
    track the hundreds of thousands of them a large cluster's cache holds.
    """


class OwnerReference(_Obj):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(_Obj):
    name: str = ""
    generate_name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


class ListMeta(_Obj):
    resource_version: str = ""
    # Python keyword: the wire name is spelled out.
    continue_: str = msgspec.field(default="", name="continue")


# --- selectors -----------------------------------------------------------------------------


class LabelSelectorRequirement(_Obj):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(_Obj):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class NodeSelectorRequirement(_Obj):
    key: str
    operator: str
    values: list[str] = []


class NodeSelectorTerm(_Obj):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(_Obj):
    node_selector_terms: list[NodeSelectorTerm] = []


class PreferredSchedulingTerm(_Obj):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(_Obj):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = []


class PodAffinityTerm(_Obj):
    topology_key: str = ""
    label_selector: LabelSelector | None = None
    namespaces: list[str] = []
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] = []
    mismatch_label_keys: list[str] = []


class WeightedPodAffinityTerm(_Obj):
    weight: int
    pod_affinity_term: PodAffinityTerm


class PodAffinity(_Obj):
    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = []
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = []


class Affinity(_Obj):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


# --- taints and tolerations ------------------------------------------------------------------


class Taint(msgspec.Struct, rename="camel", omit_defaults=True, frozen=True, gc=False):
    """Frozen (hashable): the node table interns distinct taint sets."""

    key: str
    effect: str
    value: str = ""
    time_added: str | None = None


class Toleration(_Obj):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


# --- pods ------------------------------------------------------------------------------------


class ResourceRequirements(_Obj):
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}


class ContainerPort(_Obj):
    container_port: int = 0
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = msgspec.field(default="", name="hostIP")
    name: str = ""


class Container(_Obj):
    name: str = ""
    image: str = ""
    resources: ResourceRequirements = msgspec.field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = []
    # "Always" on an init container makes it a sidecar (restartable init container).
    restart_policy: str | None = None


#: ``whenUnsatisfiable`` of a topology spread constraint.
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
#: ``nodeAffinityPolicy`` and ``nodeTaintsPolicy`` (``NodeInclusionPolicy``): whether the
#: constraint counts only the nodes that pass the pod's node affinity, or its tolerations.
NODE_INCLUSION_POLICY_HONOR = "Honor"
NODE_INCLUSION_POLICY_IGNORE = "Ignore"


class TopologySpreadConstraint(_Obj):
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] = []


class PersistentVolumeClaimVolumeSource(_Obj):
    claim_name: str
    read_only: bool = False


# In-tree volume sources: VolumeRestrictions compares them between pods on a node, and
# NodeVolumeLimits counts the ones migrated to CSI drivers. PersistentVolumes use them too.


class GCEPersistentDiskVolumeSource(_Obj):
    pd_name: str = ""
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class AWSElasticBlockStoreVolumeSource(_Obj):
    volume_id: str = msgspec.field(default="", name="volumeID")
    fs_type: str = ""
    partition: int = 0
    read_only: bool = False


class AzureDiskVolumeSource(_Obj):
    disk_name: str = ""
    disk_uri: str = msgspec.field(default="", name="diskURI")
    read_only: bool | None = None


class RBDVolumeSource(_Obj):
    monitors: list[str] = []
    image: str = ""
    # The API server defaults the pool to "rbd".
    pool: str = "rbd"
    read_only: bool = False


class ISCSIVolumeSource(_Obj):
    target_portal: str = ""
    iqn: str = ""
    lun: int = 0
    read_only: bool = False


class Volume(_Obj):
    name: str
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: dict[str, object] | None = None
    gce_persistent_disk: GCEPersistentDiskVolumeSource | None = None
    aws_elastic_block_store: AWSElasticBlockStoreVolumeSource | None = None
    azure_disk: AzureDiskVolumeSource | None = None
    rbd: RBDVolumeSource | None = None
    iscsi: ISCSIVolumeSource | None = None


class PodSchedulingGate(_Obj):
    name: str


class LocalObjectReference(_Obj):
    name: str = ""


class PodResourceClaim(_Obj):
    """An entry of ``spec.resourceClaims``: a ResourceClaim (or a template for one) the pod's
    containers use (dynamic resource allocation)."""

    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PodSpec(_Obj):
    containers: list[Container] = []
    init_containers: list[Container] = []
    ephemeral_containers: list[Container] = []
    node_name: str = ""
    node_selector: dict[str, str] = {}
    scheduler_name: str = "default-scheduler"
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    overhead: dict[str, str] = {}
    # Pod-level resources (PodLevelResources, beta and on by default in v1.34).
    resources: ResourceRequirements | None = None
    scheduling_gates: list[PodSchedulingGate] = []
    topology_spread_constraints: list[TopologySpreadConstraint] = []
    volumes: list[Volume] = []
    host_network: bool = False
    image_pull_secrets: list[LocalObjectReference] = []
    termination_grace_period_seconds: int | None = None
    resource_claims: list[PodResourceClaim] = []


class PodCondition(_Obj):
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    last_probe_time: str | None = None


class PodResourceClaimStatus(_Obj):
    """An entry of ``status.resourceClaimStatuses``: the ResourceClaim the resourceclaim
    controller created from a template for the pod's claim ``name`` (``None``: none needed)."""

    name: str = ""
    resource_claim_name: str | None = None


class PodStatus(_Obj):
    phase: str = ""
    conditions: list[PodCondition] = []
    nominated_node_name: str = ""
    resource_claim_statuses: list[PodResourceClaimStatus] = []
    # RFC 3339; preemption prefers victims that started last.
    start_time: str | None = None


class Pod(_Obj, kw_only=True):
    api_version: str = "v1"
    kind: str = "Pod"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodSpec = msgspec.field(default_factory=PodSpec)
    status: PodStatus = msgspec.field(default_factory=PodStatus)

    @property
    def key(self) -> str:
        """``namespace/name``, the key kube-scheduler logs and caches pods by."""
        return f"{self.metadata.namespace}/{self.metadata.name}"


# --- nodes -----------------------------------------------------------------------------------


class NodeSpec(_Obj):
    unschedulable: bool = False
    taints: list[Taint] = []
    pod_cidr: str = msgspec.field(default="", name="podCIDR")
    provider_id: str = msgspec.field(default="", name="providerID")


class NodeCondition(_Obj):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class ContainerImage(_Obj):
    names: NullList[str] = []
    size_bytes: int = 0

    def __post_init__(self) -> None:
        if self.names is None:
            self.names = []


class NodeStatus(_Obj):
    capacity: dict[str, str] = {}
    allocatable: dict[str, str] = {}
    conditions: list[NodeCondition] = []
    images: list[ContainerImage] = []


class Node(_Obj, kw_only=True):
    api_version: str = "v1"
    kind: str = "Node"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeSpec = msgspec.field(default_factory=NodeSpec)
    status: NodeStatus = msgspec.field(default_factory=NodeStatus)


# --- lists and watch events ----------------------------------------------------------------


class ObjectList(_Obj, Generic[T], kw_only=True):
    """A ``PodList``, ``NodeList`` ...: what a list request returns."""

    api_version: str = "v1"
    kind: str = ""
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    items: list[T] = []


class WatchEvent(_Obj):
    """One line of a watch stream: ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.

    ``object`` stays raw so that an ERROR event (a ``Status``, not a ``T``) and a BOOKMARK (an
    object with only metadata) decode without failing; the reflector decodes it by type.
    """

    type: str
    object: msgspec.Raw
