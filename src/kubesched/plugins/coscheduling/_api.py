"""The ``PodGroup`` custom resource of scheduler-plugins (``scheduling.x-k8s.io/v1alpha1``), and
the slim view of its member pods that Coscheduling watches."""

from __future__ import annotations

import msgspec

from kubesched.api import ObjectMeta, PodSchedulingGate
from kubesched.framework import WatchedKind

GROUP = "scheduling.x-k8s.io"
API_VERSION = f"{GROUP}/v1alpha1"
PLURAL = "podgroups"
#: The label that makes a pod a member of the PodGroup it names (same namespace).
POD_GROUP_LABEL = f"{GROUP}/pod-group"
#: PodGroup changes as cluster events, named as kube-scheduler names custom resources.
POD_GROUP_RESOURCE = f"{PLURAL}.v1alpha1.{GROUP}"
#: Changes of labelled member pods (their own informer, all phases).
MEMBER_RESOURCE = f"pods.v1.{GROUP}-members"

# PodGroup phases (``PodGroupPhase``).
PENDING = "Pending"
SCHEDULING = "Scheduling"
RUNNING = "Running"
FINISHED = "Finished"
FAILED = "Failed"
UNKNOWN = "Unknown"


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    pass


class PodGroupSpec(_Obj):
    #: How many members must be placed together; the CRD requires at least 1 when set.
    min_member: int = 0
    #: Resources the whole group needs (a ResourceList), checked against the free room.
    min_resources: dict[str, str | int | float] = {}
    #: How long placed members wait at Permit for the rest (overrides the plugin's default).
    schedule_timeout_seconds: int | None = None


class PodGroupStatus(_Obj):
    phase: str = ""
    occupied_by: str = ""
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: str | None = None


class PodGroup(_Obj, kw_only=True):
    api_version: str = API_VERSION
    kind: str = "PodGroup"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodGroupSpec = msgspec.field(default_factory=PodGroupSpec)
    status: PodGroupStatus = msgspec.field(default_factory=PodGroupStatus)


class MemberSpec(_Obj):
    node_name: str = ""
    scheduling_gates: list[PodSchedulingGate] = []


class MemberStatus(_Obj):
    phase: str = ""


class Member(_Obj, kw_only=True):
    """A pod labelled with :data:`POD_GROUP_LABEL`: only what group bookkeeping reads."""

    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: MemberSpec = msgspec.field(default_factory=MemberSpec)
    status: MemberStatus = msgspec.field(default_factory=MemberStatus)

    @property
    def terminal(self) -> bool:
        return self.status.phase in ("Succeeded", "Failed")


POD_GROUP_KIND = WatchedKind(
    type=PodGroup,
    api_version=API_VERSION,
    kind="PodGroup",
    path=f"/apis/{API_VERSION}/{PLURAL}",
    resource=POD_GROUP_RESOURCE,
)
#: Every member pod, in every phase (the PodGroup status counts finished ones too).
MEMBER_KIND = WatchedKind(
    type=Member,
    api_version="v1",
    kind="Pod",
    path="/api/v1/pods",
    resource=MEMBER_RESOURCE,
    label_selector=POD_GROUP_LABEL,
)
