"""Registry credentials from image pull secrets, matched to an image the way kubelet does.

kubelet's docker config keyring (``pkg/credentialprovider``): keys normalized as
``BasicDockerKeyring.Add`` does, matched with ``URLsMatchStr``, the most specific key first.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubesched.plugins.image_compatibility._reference import (
    DOCKER_HUB,
    DOCKER_HUB_LEGACY,
    ImageReference,
)


@dataclass(frozen=True)
class Credential:
    """A username and password for the registries ``registry`` matches.

    ``registry`` is the key of a docker config normalized as kubelet normalizes it: scheme
    dropped, a ``/v1/`` or ``/v2/`` path dropped, any other path kept (it then only matches
    repositories under it), and host components may be globs (``*.example.com``).
    """

    registry: str
    username: str
    password: str

    def __repr__(self) -> str:
        return f"Credential(registry={self.registry!r}, username={self.username!r}, password=***)"


def _registry_key(location: str) -> str:
    """kubelet's key for a docker config entry (``BasicDockerKeyring.Add``)."""
    value = location if location.startswith(("https://", "http://")) else f"https://{location}"
    parsed = urllib.parse.urlsplit(value)
    path = parsed.path
    if path.startswith(("/v2/", "/v1/")):
        path = path[3:]
    return parsed.netloc + path if path and path != "/" else parsed.netloc


def _decode_auth(field: str) -> tuple[str, str]:
    """The ``auth`` field: base64 of ``username:password``, padded or not."""
    text = field.strip()
    try:
        decoded = base64.b64decode(text + "=" * (-len(text) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as err:
        raise ValueError("the auth field is not base64") from err
    username, colon, password = decoded.partition(":")
    if not colon:
        raise ValueError("the auth field must be base64 of username:password")
    return username, password


def _entries(config: Any, what: str) -> list[Credential]:
    if not isinstance(config, dict):
        raise ValueError(f"{what}: expected a JSON object of registries")
    found: list[Credential] = []
    for location, entry in config.items():
        if not isinstance(entry, dict):
            raise ValueError(f"{what}: the entry for {location!r} is not an object")
        username, password = entry.get("username") or "", entry.get("password") or ""
        if not isinstance(username, str) or not isinstance(password, str):
            raise ValueError(f"{what}: username and password of {location!r} must be strings")
        auth = entry.get("auth")
        if auth:
            if not isinstance(auth, str):
                raise ValueError(f"{what}: the auth field of {location!r} must be a string")
            try:
                username, password = _decode_auth(auth)
            except ValueError as err:
                raise ValueError(f"{what}: {location!r}: {err}") from None
        found.append(Credential(_registry_key(location), username, password))
    return found


def credentials_from_secrets(secrets: Iterable[Mapping[str, Any]]) -> list[Credential]:
    """The registry credentials in image pull secrets, as the API serves them (base64 ``data``).

    Reads ``kubernetes.io/dockerconfigjson`` secrets (``.dockerconfigjson``: ``{"auths": {...}}``)
    and ``kubernetes.io/dockercfg`` ones (``.dockercfg``: the registry map itself); each entry
    has ``auth`` (base64 ``username:password``, which wins, as in kubelet) or ``username`` and
    ``password``. Secrets of other types, or without the key, are skipped as kubelet skips them.
    Like kubelet, which fails the pull on a secret it cannot parse, raises ValueError naming the
    secret when one is malformed.
    """
    found: list[Credential] = []
    for secret in secrets:
        metadata = secret.get("metadata") or {}
        what = f"image pull secret {metadata.get('namespace', '')}/{metadata.get('name', '')}"
        kind = secret.get("type")
        key = {
            "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
            "kubernetes.io/dockercfg": ".dockercfg",
        }.get(kind if isinstance(kind, str) else "")
        data = secret.get("data") or {}
        if key is None or not isinstance(data, dict) or not data.get(key):
            continue
        try:
            config = json.loads(base64.b64decode(data[key], validate=True))
        except (TypeError, ValueError, binascii.Error) as err:
            raise ValueError(f"{what}: {key} is not base64-encoded JSON: {err}") from None
        if key == ".dockerconfigjson":
            if not isinstance(config, dict):
                raise ValueError(f"{what}: {key} is not a JSON object")
            config = config.get("auths") or {}
        found.extend(_entries(config, what))
    return found


def _split_host(netloc: str) -> tuple[list[str], str]:
    host, colon, port = netloc.rpartition(":")
    if not colon or "]" in port:
        host, port = netloc, ""
    return host.split("."), port


def _urls_match(glob: str, target: str) -> bool:
    """kubelet's ``URLsMatchStr``: same port, as many host parts, each a glob match, path a
    prefix (a plain string prefix, as in kubelet)."""
    glob_url = urllib.parse.urlsplit(f"https://{glob}")
    target_url = urllib.parse.urlsplit(f"https://{target}")
    glob_parts, glob_port = _split_host(glob_url.netloc)
    target_parts, target_port = _split_host(target_url.netloc)
    if glob_port != target_port or len(glob_parts) != len(target_parts):
        return False
    if not target_url.path.startswith(glob_url.path):
        return False
    return all(fnmatch.fnmatchcase(t, g) for g, t in zip(glob_parts, target_parts, strict=True))


def _is_docker_hub(name: str) -> bool:
    """kubelet's ``isDefaultRegistryMatch`` on a normalized ``registry/repository``."""
    first, slash, _ = name.partition("/")
    if not first:
        return False
    return (
        not slash or first in (DOCKER_HUB, DOCKER_HUB_LEGACY) or not any(c in first for c in ".:")
    )


def matching_credentials(
    ref: ImageReference, credentials: Sequence[Credential]
) -> list[Credential]:
    """The credentials kubelet would try for ``ref``, in its order.

    Keys are tried in reverse lexical order (so ``quay.io/team`` before ``quay.io``); when none
    matches, a Docker Hub image takes those for ``index.docker.io`` (``https://index.docker.io/v1/``
    in a docker config).
    """
    keys = sorted({c.registry for c in credentials}, reverse=True)
    matched = [k for k in keys if _urls_match(k, ref.name)]
    if not matched and _is_docker_hub(ref.name) and DOCKER_HUB_LEGACY in keys:
        matched = [DOCKER_HUB_LEGACY]
    return [c for k in matched for c in credentials if c.registry == k]
