"""The framework's errors, under one root; the type says what becomes of the pod.

As kube-scheduler's ``handleSchedulingFailure``: a pod that fits nowhere (``FitError``,
:class:`NoNodesAvailableError`: reason ``Unschedulable``) waits for a cluster event that may make
it fit; a plugin that returned Error (:class:`PluginError`: reason ``SchedulerError``) fails the
attempt, and the pod is tried again after its backoff.
"""

from __future__ import annotations

from kubesched import KubeschedError
from kubesched.framework._status import Status


class FrameworkError(KubeschedError):
    """The root of the framework's errors."""


class ProfileError(FrameworkError):
    """A profile that cannot be built: unknown plugin, plugin at a point it does not implement."""


class NoNodesAvailableError(FrameworkError):
    """``ErrNoNodesAvailable``: the cluster has no nodes at all; the pod waits for one."""

    def __init__(self) -> None:
        super().__init__("no nodes available to schedule pods")


class PluginError(FrameworkError):
    """A plugin returned Error: the attempt fails and the pod backs off."""

    def __init__(self, plugin: str, status: Status) -> None:
        super().__init__(status.message)
        self.plugin = plugin
        self.status = status


class FilterError(PluginError):
    """A PreFilter or Filter plugin returned Error."""


class ScoreError(PluginError):
    """A PreScore, Score or NormalizeScore plugin returned Error."""
