"""Image references: Docker's grammar and normalization."""

from __future__ import annotations

import pytest

from kubesched.plugins.image_compatibility._reference import ImageReference, parse_image_reference

SHA = "sha256:" + "a" * 64


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("nginx", ("docker.io", "library/nginx", "latest", None)),
        ("nginx:1.27", ("docker.io", "library/nginx", "1.27", None)),
        ("bitnami/redis", ("docker.io", "bitnami/redis", "latest", None)),
        ("docker.io/nginx", ("docker.io", "library/nginx", "latest", None)),
        ("index.docker.io/team/app:v1", ("docker.io", "team/app", "v1", None)),
        ("localhost/app", ("localhost", "app", "latest", None)),
        ("localhost:5000/app:dev", ("localhost:5000", "app", "dev", None)),
        ("127.0.0.1:5000/a/b/c", ("127.0.0.1:5000", "a/b/c", "latest", None)),
        ("[::1]:5000/app", ("[::1]:5000", "app", "latest", None)),
        ("ghcr.io/org/img@" + SHA, ("ghcr.io", "org/img", None, SHA)),
        ("ghcr.io/org/img:v2@" + SHA, ("ghcr.io", "org/img", "v2", SHA)),
        ("quay.io/a_b/c__d/e-f.g", ("quay.io", "a_b/c__d/e-f.g", "latest", None)),
        ("Registry.Example.com/app", ("Registry.Example.com", "app", "latest", None)),
    ],
)
def test_parse_image_reference_normalizes_like_docker(
    image: str, expected: tuple[str, str, str | None, str | None]
) -> None:
    assert parse_image_reference(image) == ImageReference(*expected)


@pytest.mark.parametrize(
    ("image", "message"),
    [
        ("", "empty"),
        ("nginx:", "malformed tag"),
        ("nginx:-x", "malformed tag"),
        (":tag", "no repository"),
        ("Nginx", "must be lowercase"),
        ("team/App", "must be lowercase"),
        ("a//b", "malformed repository component"),
        ("ghcr.io/", "malformed repository component"),
        ("nginx@sha256:abc", "malformed digest"),
        ("nginx@md5:" + "a" * 32, "unsupported digest algorithm"),
        ("nginx@sha256:" + "A" * 64, "lowercase hex"),
        ("nginx @" + SHA, "whitespace"),
        ("bad_host:5000/app", "malformed registry"),
        ("x/" + "a" * 260, "longer than 255"),
    ],
)
def test_parse_image_reference_rejects_malformed(image: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_image_reference(image)


def test_reference_renders_back() -> None:
    ref = parse_image_reference("ghcr.io/org/img:v2@" + SHA)
    assert str(ref) == f"ghcr.io/org/img:v2@{SHA}"
    assert ref.reference == SHA
    assert parse_image_reference("nginx").reference == "latest"
