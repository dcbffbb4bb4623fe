"""Reading a Secret, for the plugins that pull from registries with a pod's imagePullSecrets."""

from __future__ import annotations

from typing import Any

import msgspec

from kubesched.kube._client import APIClient, api_path
from kubesched.kube._errors import NotFound


async def get_secret(client: APIClient, namespace: str, name: str) -> dict[str, Any] | None:
    """The Secret ``namespace/name`` as the API server returns it (``data`` base64-encoded), or
    ``None`` if there is none."""
    try:
        raw = await client.get(api_path("secrets", namespace=namespace, name=name))
    except NotFound:
        return None
    secret = msgspec.json.decode(raw)
    return secret if isinstance(secret, dict) else None
