"""Custom resources as plain JSON: list, create, delete and patch the status of, for plugins
that manage CRs.

The image-compatibility plugin's NodeFeatureGroup mode creates ``NodeFeatureGroup`` objects
and reads their status through these; Coscheduling writes ``PodGroup`` status. A front end
exposes them on the framework's API client (the ``CustomObjectsAPIClient`` shape). "Already
there" and "already gone" are answers, not errors, so a controller that retries stays
idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from kubesched.kube._client import APIClient, api_path
from kubesched.kube._errors import AlreadyExists, NotFound


def _decode_object(raw: bytes) -> dict[str, Any]:
    decoded = msgspec.json.decode(raw)
    return decoded if isinstance(decoded, dict) else {}


async def list_custom_objects(
    client: APIClient,
    group_version: str,
    plural: str,
    *,
    namespace: str,
    label_selector: str | None = None,
) -> list[dict[str, Any]]:
    """Every object of ``plural`` in ``namespace`` (all pages), as the API server returns it."""
    path = api_path(plural, group_version=group_version, namespace=namespace)
    items: list[dict[str, Any]] = []
    continue_: str | None = None
    while True:
        page = _decode_object(
            await client.list(path, label_selector=label_selector, limit=500, continue_=continue_)
        )
        items.extend(item for item in page.get("items") or [] if isinstance(item, dict))
        continue_ = (page.get("metadata") or {}).get("continue") or None
        if continue_ is None:
            return items


async def create_custom_object(
    client: APIClient, group_version: str, plural: str, body: Mapping[str, Any], *, namespace: str
) -> dict[str, Any] | None:
    """Create ``body``; the object as stored, or ``None`` if one of that name already exists."""
    path = api_path(plural, group_version=group_version, namespace=namespace)
    try:
        return _decode_object(await client.post(path, dict(body)))
    except AlreadyExists:
        return None


async def delete_custom_object(
    client: APIClient, group_version: str, plural: str, name: str, *, namespace: str
) -> bool:
    """Delete ``name``; ``False`` if there was no such object."""
    path = api_path(plural, group_version=group_version, namespace=namespace, name=name)
    try:
        await client.delete(path)
    except NotFound:
        return False
    return True


async def patch_custom_object_status(
    client: APIClient,
    group_version: str,
    plural: str,
    name: str,
    status: Mapping[str, Any],
    *,
    namespace: str,
) -> bool:
    """Merge ``status`` into the object's ``status`` subresource; ``False`` if there is no such
    object."""
    path = api_path(
        plural, group_version=group_version, namespace=namespace, name=name, subresource="status"
    )
    try:
        await client.patch(path, {"status": dict(status)})
    except NotFound:
        return False
    return True
