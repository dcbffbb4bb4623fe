"""Image references as a container runtime reads them: Docker's grammar and normalization.

``nginx`` is ``docker.io/library/nginx:latest``; see docs/plugins/image-compatibility.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Docker Hub's names: images say ``docker.io``, its API answers at ``registry-1.docker.io``.
DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_LEGACY = "index.docker.io"

_HOST_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = re.compile(
    rf"(?:{_HOST_COMPONENT}(?:\.{_HOST_COMPONENT})*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?\Z"
)
_PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*\Z")
_TAG = re.compile(r"[\w][\w.-]{0,127}\Z")
_DIGEST = re.compile(r"[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}\Z")
_DIGEST_HEX = {"sha256": 64, "sha512": 128}
_MAX_NAME = 255


@dataclass(frozen=True)
class ImageReference:
    """An image name as a container runtime pulls it, normalized the way Docker does.

    ``nginx`` is ``docker.io/library/nginx:latest``; a digest reference keeps its tag if it has
    one (``tag`` is informational then: the digest is what is pulled).
    """

    registry: str  # "docker.io", "ghcr.io", "localhost:5000", "[::1]:5000"
    repository: str  # "library/nginx"
    tag: str | None
    digest: str | None  # "sha256:<64 hex>"

    @property
    def name(self) -> str:
        """``registry/repository``: what kubelet looks credentials up by."""
        return f"{self.registry}/{self.repository}"

    @property
    def reference(self) -> str:
        """What the manifest is fetched by: the digest if there is one, else the tag."""
        return self.digest or self.tag or "latest"

    def __str__(self) -> str:
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"


def _check_digest(digest: str, image: str) -> None:
    if not _DIGEST.match(digest):
        raise ValueError(f"invalid image reference {image!r}: malformed digest {digest!r}")
    algorithm, _, encoded = digest.partition(":")
    length = _DIGEST_HEX.get(algorithm)
    if length is None:
        raise ValueError(
            f"invalid image reference {image!r}: unsupported digest algorithm {algorithm!r} "
            f"(expected one of {', '.join(_DIGEST_HEX)})"
        )
    if len(encoded) != length or not re.fullmatch(r"[a-f0-9]+", encoded):
        raise ValueError(
            f"invalid image reference {image!r}: a {algorithm} digest is {length} lowercase "
            f"hex characters, got {encoded!r}"
        )


def _split_domain(name: str) -> tuple[str, str]:
    """Docker's rule: the first component is a registry host only if it looks like one."""
    first, slash, rest = name.partition("/")
    if not slash or (
        not any(c in first for c in ".:") and first != "localhost" and first.lower() == first
    ):
        registry, remainder = DOCKER_HUB, name
    else:
        registry, remainder = first, rest
    if registry == DOCKER_HUB_LEGACY:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in remainder:
        remainder = f"library/{remainder}"
    return registry, remainder


def parse_image_reference(image: str) -> ImageReference:
    """Parse a container image as a pod spec names it, with Docker's normalization.

    No registry host means Docker Hub (``docker.io``, also for ``index.docker.io``); a
    single-component Docker Hub name gets ``library/``; no tag and no digest means ``latest``.
    The first component is a host when it contains ``.`` or ``:`` or is ``localhost``.
    Raises ValueError naming the problem for anything a runtime would refuse to pull.
    """
    if not isinstance(image, str) or not image:
        raise ValueError("invalid image reference: empty")
    if image != image.strip() or any(c.isspace() for c in image):
        raise ValueError(f"invalid image reference {image!r}: contains whitespace")
    remainder, at, digest = image.partition("@")
    if at:
        _check_digest(digest, image)
    tag: str | None = None
    last = remainder.rfind("/")
    colon = remainder.rfind(":")
    if colon > last:
        remainder, tag = remainder[:colon], remainder[colon + 1 :]
        if not _TAG.match(tag):
            raise ValueError(
                f"invalid image reference {image!r}: malformed tag {tag!r} (letters, digits, "
                "'_', '.', '-', not starting with '.' or '-', at most 128 characters)"
            )
    if not remainder:
        raise ValueError(f"invalid image reference {image!r}: no repository name")
    registry, repository = _split_domain(remainder)
    if not _DOMAIN.match(registry):
        raise ValueError(f"invalid image reference {image!r}: malformed registry {registry!r}")
    for component in repository.split("/"):
        if not _PATH_COMPONENT.match(component):
            hint = " (must be lowercase)" if component.lower() != component else ""
            raise ValueError(
                f"invalid image reference {image!r}: malformed repository component "
                f"{component!r}{hint}"
            )
    if len(f"{registry}/{repository}") > _MAX_NAME:
        raise ValueError(
            f"invalid image reference {image!r}: the name is longer than {_MAX_NAME} characters"
        )
    if tag is None and not at:
        tag = "latest"
    return ImageReference(registry, repository, tag, digest if at else None)


def is_digest(text: str) -> bool:
    """Whether ``text`` is a digest of a supported algorithm (``sha256:<64 hex>``)."""
    try:
        _check_digest(text, text)
    except ValueError:
        return False
    return True
