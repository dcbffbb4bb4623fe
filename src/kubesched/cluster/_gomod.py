"""Versions read from the Go modules in ``hack/k8s``, so they are written down only there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kubesched.cluster._errors import BinaryBuildError

KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_MODULE = "go.etcd.io/etcd/server/v3"

_GO_DIRECTIVE = re.compile(r"^go\s+(\d+(?:\.\d+)*)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class GoModules:
    """The two Go modules the local control plane is built from."""

    kubernetes_dir: Path
    etcd_dir: Path
    kubernetes_version: str  # "v1.34.4"
    etcd_version: str  # "v3.6.16"
    go_version: str  # the highest ``go`` directive of the two, "1.26.0"

    @property
    def min_go(self) -> str:
        """The Go release needed, as people say it: "1.26"."""
        return ".".join(self.go_version.split(".")[:2])


def required_version(gomod: str, module: str) -> str | None:
    """The version ``gomod`` (the text of a go.mod) requires of ``module``, or None.

    Handles both ``require mod v1`` and the block form; a ``replace`` is not a requirement.
    """
    pattern = re.compile(
        r"^\s*(?:require\s+)?" + re.escape(module) + r"\s+(v[0-9][^\s/]*)\s*(?://.*)?$",
        re.MULTILINE,
    )
    in_replace = False
    for line in gomod.splitlines():
        stripped = line.strip()
        if stripped.startswith("replace"):
            in_replace = stripped.endswith("(")
            continue
        if in_replace:
            if stripped == ")":
                in_replace = False
            continue
        match = pattern.match(line)
        if match:
            return match.group(1)
    return None


def go_directive(gomod: str) -> str | None:
    """The ``go`` directive of a go.mod text ("1.24.0"), or None."""
    match = _GO_DIRECTIVE.search(gomod)
    return match.group(1) if match else None


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def read_modules(kubernetes_dir: Path) -> GoModules:
    """Read ``hack/k8s/go.mod`` and ``hack/k8s/etcd/go.mod``."""
    etcd_dir = kubernetes_dir / "etcd"
    texts: dict[Path, str] = {}
    for directory in (kubernetes_dir, etcd_dir):
        path = directory / "go.mod"
        try:
            texts[directory] = path.read_text()
        except OSError as err:
            raise BinaryBuildError(f"cannot read {path}: {err}") from err
    kubernetes_version = required_version(texts[kubernetes_dir], KUBERNETES_MODULE)
    if kubernetes_version is None:
        raise BinaryBuildError(f"{kubernetes_dir / 'go.mod'} does not require {KUBERNETES_MODULE}")
    etcd_version = required_version(texts[etcd_dir], ETCD_MODULE)
    if etcd_version is None:
        raise BinaryBuildError(f"{etcd_dir / 'go.mod'} does not require {ETCD_MODULE}")
    go_versions = [v for v in (go_directive(t) for t in texts.values()) if v is not None]
    go_version = max(go_versions, key=_version_key) if go_versions else "1.24"
    return GoModules(
        kubernetes_dir=kubernetes_dir,
        etcd_dir=etcd_dir,
        kubernetes_version=kubernetes_version,
        etcd_version=etcd_version,
        go_version=go_version,
    )
