"""Pull secrets read and matched to images as kubelet reads and matches them."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from kubesched.plugins.image_compatibility._credentials import (
    Credential,
    credentials_from_secrets,
    matching_credentials,
)
from kubesched.plugins.image_compatibility._reference import parse_image_reference


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(kind: str, key: str, config: Any, name: str = "pull") -> dict[str, Any]:
    payload = config if isinstance(config, str) else json.dumps(config)
    return {
        "metadata": {"namespace": "ns", "name": name},
        "type": kind,
        "data": {key: _b64(payload)},
    }


def test_credentials_from_dockerconfigjson_and_dockercfg() -> None:
    found = credentials_from_secrets(
        [
            secret(
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                {
                    "auths": {
                        "https://index.docker.io/v1/": {"auth": _b64("hub:pw:with:colons")},
                        "http://127.0.0.1:5000": {"username": "u", "password": "p"},
                        "ghcr.io/org": {"auth": _b64("o:q").rstrip("=")},  # unpadded, as kubelet
                        "https://quay.io/v2/": {
                            "username": "x",
                            "password": "y",
                            "auth": _b64("a:b"),
                        },
                    }
                },
            ),
            secret(
                "kubernetes.io/dockercfg", ".dockercfg", {"*.example.com": {"auth": _b64("e:f")}}
            ),
            secret("Opaque", ".dockerconfigjson", {"auths": {"skipped.io": {"auth": _b64("s:t")}}}),
        ]
    )
    assert found == [
        Credential("index.docker.io", "hub", "pw:with:colons"),
        Credential("127.0.0.1:5000", "u", "p"),
        Credential("ghcr.io/org", "o", "q"),
        Credential("quay.io", "a", "b"),  # auth wins over username/password
        Credential("*.example.com", "e", "f"),
    ]
    assert "'p'" not in repr(found[1])
    assert "***" in repr(found[1])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {
                "type": "kubernetes.io/dockerconfigjson",
                "data": {".dockerconfigjson": "%%%"},
                "metadata": {"namespace": "ns", "name": "broken"},
            },
            "ns/broken: .dockerconfigjson is not base64-encoded JSON",
        ),
        (
            secret("kubernetes.io/dockerconfigjson", ".dockerconfigjson", "{not json", "broken"),
            "ns/broken: .dockerconfigjson is not base64-encoded JSON",
        ),
        (
            secret(
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                {"auths": {"r.io": {"auth": _b64("nocolon")}}},
                "broken",
            ),
            "ns/broken: 'r.io': the auth field must be base64 of username:password",
        ),
        (
            secret("kubernetes.io/dockercfg", ".dockercfg", {"r.io": "text"}, "broken"),
            "ns/broken: the entry for 'r.io' is not an object",
        ),
    ],
)
def test_malformed_pull_secrets_are_named(bad: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        credentials_from_secrets([bad])


def test_secret_without_its_key_is_skipped() -> None:
    assert credentials_from_secrets([{"type": "kubernetes.io/dockerconfigjson", "data": {}}]) == []


def _users(image: str, credentials: list[Credential]) -> list[str]:
    return [c.username for c in matching_credentials(parse_image_reference(image), credentials)]


def test_credentials_match_images_as_kubelet_matches_them() -> None:
    creds = [
        Credential("index.docker.io", "hub", ""),
        Credential("quay.io", "quay", ""),
        Credential("quay.io/team", "team", ""),
        Credential("*.example.com", "glob", ""),
        Credential("127.0.0.1:5000", "local", ""),
    ]
    assert _users("nginx", creds) == ["hub"]
    assert _users("docker.io/team/app", creds) == ["hub"]
    assert _users("quay.io/team/app", creds) == ["team", "quay"]  # more specific first
    assert _users("quay.io/other/app", creds) == ["quay"]
    assert _users("r.example.com/app", creds) == ["glob"]
    assert _users("a.r.example.com/app", creds) == []  # a glob matches one host component
    assert _users("127.0.0.1:5000/app", creds) == ["local"]
    assert _users("127.0.0.1:5001/app", creds) == []  # ports must match
    assert _users("ghcr.io/app", creds) == []
    assert _users("nginx", [Credential("docker.io", "d", "")]) == ["d"]
