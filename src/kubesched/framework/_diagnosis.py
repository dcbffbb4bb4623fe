"""Why a pod fits nowhere (kube-scheduler's ``Diagnosis``, ``FitError`` and ``NodeToStatus`` in
``framework/types.go``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kubesched.api import Pod
from kubesched.framework._errors import FrameworkError
from kubesched.framework._status import Code, Status
from kubesched.framework._table import IdArray, IntArray

if TYPE_CHECKING:
    from kubesched.framework._snapshot import Snapshot

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


@dataclass(slots=True)
class NodeGroup:
    """Nodes that failed Filter the same way: the first plugin to reject them and its status."""

    slots: IntArray
    status: Status


def groups_of(slots: IntArray, ids: IdArray, statuses: list[Status]) -> list[NodeGroup]:
    """The nodes of ``slots`` grouped by verdict: ``ids`` aligned with ``slots``, 0 passes,
    else the node failed with ``statuses[id - 1]``."""
    return [
        NodeGroup(slots[ids == sid], statuses[sid - 1]) for sid in np.unique(ids).tolist() if sid
    ]


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits nowhere: per-node statuses, grouped, and what the user is told."""

    num_all_nodes: int = 0
    groups: list[NodeGroup] = field(default_factory=list)
    #: Set when PreFilter rejected the pod: it then stands for every node.
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)

    def add(self, group: NodeGroup) -> None:
        """Nodes ruled out: their status, and its plugin among the ones whose events may make
        the pod schedulable (pending or unschedulable, by the code)."""
        self.groups.append(group)
        plugin = group.status.plugin
        if not plugin:
            return
        if group.status.code == Code.PENDING:
            self.pending_plugins.add(plugin)
        else:
            self.unschedulable_plugins.add(plugin)

    def node_statuses(self, snapshot: Snapshot) -> dict[str, Status]:
        """Node name -> the status that ruled it out (``NodeToStatus``)."""
        name_of = snapshot.table.names.__getitem__
        statuses: dict[str, Status] = {}
        for g in self.groups:
            # In C: a preemptor rejected everywhere maps every node of the cluster.
            statuses.update(dict.fromkeys(map(name_of, g.slots.tolist()), g.status))
        return statuses

    def rejected_count(self) -> int:
        return sum(len(g.slots) for g in self.groups)


class FitError(FrameworkError):
    """The pod fits on no node; ``str()`` is kube-scheduler's FailedScheduling message."""

    def __init__(self, pod: Pod, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(d.num_all_nodes) + ":"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            counts: dict[str, int] = {}
            for g in d.groups:
                n = len(g.slots)
                for reason in g.status.reasons:
                    counts[reason] = counts.get(reason, 0) + n
            histogram = sorted(f"{v} {k}" for k, v in counts.items())
            if histogram:
                msg += " " + ", ".join(histogram) + "."
        if d.post_filter_msg:
            # As it is: DefaultPreemption's part ("preemption: 0/N nodes are available: ...")
            # ends with its own period, DynamicResources' ("no new claims to deallocate") with
            # none.
            msg += f" {d.post_filter_msg}"
        return msg
