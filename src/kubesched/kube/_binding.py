"""Binding a pod to a node, as kube-scheduler's DefaultBinder does."""

from __future__ import annotations

import msgspec

from kubesched.kube._client import APIClient, api_path

__all__ = ["bind"]


class _BindingMeta(msgspec.Struct, omit_defaults=True):
    name: str
    namespace: str
    uid: str = ""


class _Target(msgspec.Struct):
    kind: str
    name: str


class _Binding(msgspec.Struct, rename="camel"):
    metadata: _BindingMeta
    target: _Target
    api_version: str = "v1"
    kind: str = "Binding"


async def bind(
    client: APIClient, pod_namespace: str, pod_name: str, pod_uid: str, node_name: str
) -> None:
    """POST a ``v1 Binding`` of the pod to ``node_name`` (``pods/{name}/binding``).

    ``pod_uid`` goes into ``metadata.uid`` and is checked by the API server as a precondition,
    so a pod deleted and re-created under the same name is not bound by mistake: the server
    answers 409 and :class:`~kubesched.kube.Conflict` is raised. A pod already bound elsewhere
    also gives ``Conflict``; a pod that no longer exists gives :class:`~kubesched.kube.NotFound`.
    Not retried here: a bind is not idempotent (a repeat of a successful bind is a conflict).
    """
    body = _Binding(
        metadata=_BindingMeta(name=pod_name, namespace=pod_namespace, uid=pod_uid),
        target=_Target(kind="Node", name=node_name),
    )
    path = api_path("pods", namespace=pod_namespace, name=pod_name, subresource="binding")
    await client.post(path, body)
