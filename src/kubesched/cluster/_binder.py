"""The binder `kubesched bench e2e` measures as the API server's ceiling, as a :class:`GoTool`.

A small Go program on client-go (``hack/binder``, the same version line as the Kubernetes the
control plane is built from) that decides nothing: it binds each pending pod to the next node in
turn and records the ``Scheduled`` event kube-scheduler writes; a pod's ResourceClaims it writes
first as kube-scheduler does (a free device of the next node's pool for a claim not yet
allocated; the pod to the node of one that is). Cached like the other tools, its own sources in
the version:

    <cache>/bin/binder-v0.34.4+<digest>/binder
"""

from __future__ import annotations

from kubesched.cluster._gotools import GoTool

BINDER = GoTool(
    command="binder",
    hack="binder",
    module="k8s.io/client-go",
    package=".",
    prefix="binder",
    version_variable="main.version",
    version_args=("-version",),
    version_text="binder k8s.io/client-go {version}",
    own_source=True,
)
