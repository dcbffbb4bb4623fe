"""A live cluster's objects, read once through list calls: nothing is written, nothing watched."""

from __future__ import annotations

from typing import Any, TypeVar

from kubesched.api import Node, ObjectList, Pod
from kubesched.kube import APIClient, Forbidden, NotFound
from kubesched.simulate._input import InputBuilder, Issue
from kubesched.simulate._objects import KINDS

T = TypeVar("T")

SOURCE = "cluster"
#: Pods the scheduler never sees (kube-scheduler's informer filter).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
PAGE_SIZE = 500


async def list_all(
    client: APIClient,
    path: str,
    item: type[T],
    *,
    field_selector: str | None = None,
    label_selector: str | None = None,
) -> list[T]:
    """Every object of a collection, page by page."""
    out: list[T] = []
    token: str | None = None
    while True:
        page: ObjectList[Any] = await client.list(
            path,
            type=ObjectList[item],  # type: ignore[valid-type]
            field_selector=field_selector,
            label_selector=label_selector,
            limit=PAGE_SIZE,
            continue_=token,
        )
        out.extend(page.items)
        token = page.metadata.continue_
        if not token:
            return out


async def read_cluster(client: APIClient, builder: InputBuilder, *, pending: bool) -> None:
    """Add the cluster's nodes, pods and other kept kinds to ``builder``.

    Pods bound to a node are added as running. Pending pods are added only with ``pending``,
    oldest first (roughly the order they entered kube-scheduler's queue). Kinds other than Nodes
    and Pods that the credentials may not list, or the server does not serve, are left out with a
    warning.
    """
    for node in await list_all(client, "/api/v1/nodes", Node):
        builder.add_node(node, SOURCE)
    pods = await list_all(client, "/api/v1/pods", Pod, field_selector=POD_FIELD_SELECTOR)
    waiting = [p for p in pods if not p.spec.node_name]
    for pod in pods:
        if pod.spec.node_name:
            builder.add_pod(pod, SOURCE)
    if pending:
        waiting.sort(key=lambda p: (p.metadata.creation_timestamp or "", p.key))
        for pod in waiting:
            builder.add_pod(pod, SOURCE)
    for kind, (_, cls, _, path) in KINDS.items():
        try:
            objects = await list_all(client, path, cls)
        except (Forbidden, NotFound) as e:
            message = f"cannot list {kind} ({type(e).__name__}: {e}); left out"
            builder.inputs.issues.append(Issue("warning", SOURCE, None, message))
            continue
        for obj in objects:
            builder.inputs.objects.add(obj)
    for watched in builder.watched.values():
        try:
            found = await list_all(
                client, watched.path, watched.type, label_selector=watched.label_selector
            )
        except (Forbidden, NotFound) as e:
            message = f"cannot list {watched.kind} ({type(e).__name__}: {e}); left out"
            builder.inputs.issues.append(Issue("warning", SOURCE, None, message))
            continue
        for obj in found:
            builder.inputs.objects.add_watched(watched.kind, obj)
