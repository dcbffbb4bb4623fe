"""What a front end hands the framework as its API client: the calls plugins may make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.kube._binding import bind
from kubesched.kube._client import APIClient
from kubesched.kube._custom_objects import (
    create_custom_object,
    delete_custom_object,
    list_custom_objects,
)
from kubesched.kube._secrets import get_secret


class PluginAPIClient:
    """Binding (the DefaultBinder), Secrets (image pull secrets), and custom objects as plain
    JSON (ImageCompatibility's NodeFeatureGroups), on a real API server.

    It has the shapes of the framework's ``APIClient``, ``SecretsAPIClient`` and the
    NodeFeatureGroup controller's ``CustomObjectsAPIClient``; ``kubesched run`` adds
    VolumeBinding's writes.
    """

    def __init__(self, client: APIClient) -> None:
        self._client = client

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        await bind(self._client, namespace, name, uid, node)

    async def get_secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return await get_secret(self._client, namespace, name)

    async def list_custom_objects(
        self,
        group_version: str,
        plural: str,
        *,
        namespace: str,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        return await list_custom_objects(
            self._client, group_version, plural, namespace=namespace, label_selector=label_selector
        )

    async def create_custom_object(
        self, group_version: str, plural: str, body: Mapping[str, Any], *, namespace: str
    ) -> dict[str, Any] | None:
        return await create_custom_object(
            self._client, group_version, plural, body, namespace=namespace
        )

    async def delete_custom_object(
        self, group_version: str, plural: str, name: str, *, namespace: str
    ) -> bool:
        return await delete_custom_object(
            self._client, group_version, plural, name, namespace=namespace
        )
