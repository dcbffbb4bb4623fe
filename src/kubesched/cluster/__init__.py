"""A throwaway local control plane: etcd and kube-apiserver built from ``hack/k8s``.

``up`` starts one (or reuses the running one of that name), ``down`` stops it and removes its
state, ``status`` lists them. Binaries are built on first use and cached per version by
``ensure_binaries`` (``ensure_tool(NFD_MASTER)``: nfd-master, from ``hack/nfd``;
``ensure_tool`` of each of ``REGISTRIES``: the OCI registries, from ``hack/registry``;
``ensure_tool(BINDER)``: the benchmarks' binder that decides nothing, from ``hack/binder``).
``start_kube_scheduler`` / ``start_component`` run more processes tied to a cluster.
See docs/cluster.md.
"""

from kubesched.cluster._binaries import Binaries, Progress, ensure_binaries, find_binaries
from kubesched.cluster._binder import BINDER
from kubesched.cluster._certs import CertificateAuthority, KeyPair
from kubesched.cluster._components import (
    ComponentInfo,
    start_component,
    start_kube_scheduler,
    stop_component,
)
from kubesched.cluster._controlplane import (
    ClusterInfo,
    ClusterStatus,
    ProcessStatus,
    down,
    info,
    status,
    up,
)
from kubesched.cluster._errors import (
    BinaryBuildError,
    ClusterError,
    ClusterStartError,
    GoNotFoundError,
)
from kubesched.cluster._gotools import NFD_MASTER, GoTool, ensure_tool, find_tool
from kubesched.cluster._paths import cache_dir, state_dir
from kubesched.cluster._registry import DISTRIBUTION_REGISTRY, OCISERVER, REGISTRIES
from kubesched.cluster._state import DEFAULT_NAME

__all__ = [
    "BINDER",
    "DEFAULT_NAME",
    "DISTRIBUTION_REGISTRY",
    "NFD_MASTER",
    "OCISERVER",
    "REGISTRIES",
    "Binaries",
    "BinaryBuildError",
    "CertificateAuthority",
    "ClusterError",
    "ClusterInfo",
    "ClusterStartError",
    "ClusterStatus",
    "ComponentInfo",
    "GoNotFoundError",
    "GoTool",
    "KeyPair",
    "ProcessStatus",
    "Progress",
    "cache_dir",
    "down",
    "ensure_binaries",
    "ensure_tool",
    "find_binaries",
    "find_tool",
    "info",
    "start_component",
    "start_kube_scheduler",
    "state_dir",
    "status",
    "stop_component",
    "up",
]
