"""Coscheduling: scheduler-plugins' gang scheduling over the ``PodGroup`` custom resource.

Batch and training operators (Kubeflow's training operator, mpi-operator, LeaderWorkerSet ...)
create a ``PodGroup`` (``scheduling.x-k8s.io/v1alpha1``) and label its pods
``scheduling.x-k8s.io/pod-group: <name>``. This plugin places such a group all together or not
at all, as scheduler-plugins' ``Coscheduling`` does:

- **QueueSort**: higher priority first, then the older group (its PodGroup's creation, or its
  last failure, so a failing group does not block the queue's head), then namespace/name: the
  members of a group come out of the queue one after the other.
- **PreFilter** turns a member away (UnschedulableAndUnresolvable, so no preemption) when its
  group failed within ``podGroupBackoffSeconds``, has fewer pods than ``minMember``, too many
  gated ones, or when the cluster's free room cannot hold ``minResources``.
- **PostFilter**: a member that fits nowhere rejects the waiting members of its group, unless
  enough are placed already.
- **Permit** holds each placed member until ``minMember`` are placed, at most
  ``scheduleTimeoutSeconds`` (else ``permitWaitingTimeSeconds``); **Unreserve** of one member
  rejects the others.
- The PodGroup's status (phase, running, succeeded, failed, scheduleStartTime) is written as
  scheduler-plugins' controller writes it, unless ``updatePodGroupStatus: false``.

The CRD ships as ``deploy/crds/scheduling.x-k8s.io_podgroups.yaml``. See
docs/plugins/coscheduling.md.
"""

from kubesched.plugins.coscheduling._api import (
    API_VERSION,
    MEMBER_KIND,
    POD_GROUP_KIND,
    POD_GROUP_LABEL,
    Member,
    PodGroup,
    PodGroupSpec,
    PodGroupStatus,
)
from kubesched.plugins.coscheduling._args import CoschedulingArgs
from kubesched.plugins.coscheduling._manager import resource_gap
from kubesched.plugins.coscheduling._plugin import NAME, Coscheduling
from kubesched.plugins.coscheduling._status import desired_status

__all__ = [
    "API_VERSION",
    "MEMBER_KIND",
    "NAME",
    "POD_GROUP_KIND",
    "POD_GROUP_LABEL",
    "Coscheduling",
    "CoschedulingArgs",
    "Member",
    "PodGroup",
    "PodGroupSpec",
    "PodGroupStatus",
    "desired_status",
    "resource_gap",
]
