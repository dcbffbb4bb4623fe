"""DefaultBinder: tell the API server which node a pod goes to.

Binding is the last step of the binding cycle: a ``Binding`` subresource is created for the pod
(``POST /api/v1/namespaces/<ns>/pods/<name>/binding`` with the node as target), which sets
``spec.nodeName``; the kubelet on that node then starts the pod. The pod's UID is sent along, so
a pod deleted and re-created under the same name in the meantime is not bound by mistake.

The call goes through the handle's API client (the scheduler loop and the extender provide
one); without a client (an in-memory simulation) binding fails with an Error status, because
there is nowhere to bind to.
"""

from __future__ import annotations

from kubesched.api import Pod
from kubesched.framework import BindPlugin, Code, CycleState, Status

NAME = "DefaultBinder"

#: The Error reason when the framework runs without an API server.
ERR_NO_CLIENT = "no API client to bind pods with"


class DefaultBinder(BindPlugin):
    """Binds the pod to the chosen node through the API server."""

    name = NAME

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        client = self.handle.client
        if client is None:
            return Status(Code.ERROR, ERR_NO_CLIENT)
        meta = pod.metadata
        try:
            await client.bind(meta.namespace, meta.name, meta.uid, node_name)
        except Exception as e:  # any failure of the call is this pod's binding error
            return Status.as_error(e)
        return None
