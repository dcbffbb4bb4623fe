"""Errors raised by the local control plane."""

from __future__ import annotations

from kubesched import KubeschedError


class ClusterError(KubeschedError):
    """Something about the local control plane went wrong; the message says what to do."""


class BinaryBuildError(ClusterError):
    """kube-apiserver, kube-scheduler, kubectl or etcd could not be found or built."""


class GoNotFoundError(BinaryBuildError):
    """No Go toolchain on PATH, so the binaries cannot be built."""


class ClusterStartError(ClusterError):
    """etcd, kube-apiserver or a component did not come up.

    ``port_in_use`` is set when the process died because its port was taken meanwhile, so the
    caller may retry on another port.
    """

    def __init__(self, message: str, *, port_in_use: bool = False) -> None:
        super().__init__(message)
        self.port_in_use = port_in_use
