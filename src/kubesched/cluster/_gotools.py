"""More commands built from pinned Go modules under ``hack/``, cached like the control plane's.

A :class:`GoTool` names one command of one module (``nfd-master`` of
``sigs.k8s.io/node-feature-discovery``, pinned in ``hack/nfd/go.mod``). :func:`ensure_tool`
finds it in the cache or builds it with the same machinery as :func:`ensure_binaries`: under the
cache's build lock, into a temporary directory renamed into place once the binary reports the
pinned version, with go's progress and the tail of its output on failure:

    <cache>/bin/nfd-v0.19.0/nfd-master

A command whose source is written here rather than pinned upstream (``own_source``) also has a
digest of its module's files in its version, so that editing it builds it again:

    <cache>/bin/binder-v0.34.4+3f2a9c1d0b7e/binder
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kubesched.cluster._binaries import (
    Progress,
    _build_into,
    _build_lock,
    _remove_leftovers,
    _run_go,
    reports_version,
    which_go,
)
from kubesched.cluster._errors import BinaryBuildError
from kubesched.cluster._gomod import go_directive, required_version
from kubesched.cluster._paths import bin_dir, gomod_dir


@dataclass(frozen=True)
class GoTool:
    """One command built from the Go module ``hack/<hack>``."""

    #: The command's name, and the binary's file name.
    command: str
    #: The directory under ``hack/`` holding the go.mod that pins it.
    hack: str
    #: The module whose pinned version names the cache directory and is stamped in.
    module: str
    #: The main package to build.
    package: str
    #: The cache directory is ``<cache>/bin/<prefix>-<version>``.
    prefix: str
    #: ``-X`` target of the version string (``<package path>.<variable>``).
    version_variable: str
    #: The arguments that make the command print its version...
    version_args: tuple[str, ...]
    #: ... and what it prints then, ``{version}`` filled in.
    version_text: str
    #: The main package is written here: a digest of the module's sources joins the version.
    own_source: bool = False


NFD_MASTER = GoTool(
    command="nfd-master",
    hack="nfd",
    module="sigs.k8s.io/node-feature-discovery",
    package="sigs.k8s.io/node-feature-discovery/cmd/nfd-master",
    prefix="nfd",
    version_variable="sigs.k8s.io/node-feature-discovery/pkg/version.version",
    version_args=("-version",),
    version_text="nfd-master {version}",
)


@dataclass(frozen=True)
class PinnedTool:
    """A :class:`GoTool` at the version its go.mod pins, and where it is (to be) cached."""

    tool: GoTool
    version: str
    module_dir: Path
    go_version: str
    path: Path

    @property
    def expected(self) -> tuple[list[str], str]:
        return list(self.tool.version_args), self.tool.version_text.format(version=self.version)


def pinned(tool: GoTool, env: Mapping[str, str] | None = None) -> PinnedTool:
    """Read ``hack/<tool.hack>/go.mod``: the version of ``tool.module`` it requires."""
    module_dir = gomod_dir(name=tool.hack)
    path = module_dir / "go.mod"
    try:
        text = path.read_text()
    except OSError as err:
        raise BinaryBuildError(f"cannot read {path}: {err}") from err
    version = required_version(text, tool.module)
    if version is None:
        raise BinaryBuildError(f"{path} does not require {tool.module}")
    if tool.own_source:
        version = f"{version}+{sources_digest(module_dir)}"
    return PinnedTool(
        tool=tool,
        version=version,
        module_dir=module_dir,
        go_version=go_directive(text) or "1.24",
        path=bin_dir(env) / f"{tool.prefix}-{version}" / tool.command,
    )


_MODULE_FILES = ("go.mod", "go.sum")


def sources_digest(module_dir: Path) -> str:
    """12 hex digits of SHA-256 over the module's Go files, go.mod and go.sum (names and bytes)."""
    digest = hashlib.sha256()
    files = [p for p in module_dir.rglob("*") if p.suffix == ".go" or p.name in _MODULE_FILES]
    for file in sorted(files):
        digest.update(file.relative_to(module_dir).as_posix().encode() + b"\0")
        digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def find_tool(tool: GoTool, env: Mapping[str, str] | None = None) -> Path | None:
    """The cached binary if it reports the pinned version; never builds."""
    pin = pinned(tool, env)
    return pin.path if reports_version(pin.path, *pin.expected) else None


def ensure_tool(
    tool: GoTool, progress: Progress | None = None, *, env: Mapping[str, str] | None = None
) -> Path:
    """The binary at the version pinned in ``hack/<tool.hack>``: from the cache, else built."""
    pin = pinned(tool, env)
    if reports_version(pin.path, *pin.expected):
        return pin.path
    go = which_go(".".join(pin.go_version.split(".")[:2]), tool.command, pin.module_dir, env)
    root = bin_dir(env)
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root, progress):
        _remove_leftovers(root)
        if reports_version(pin.path, *pin.expected):  # built by another process meanwhile
            return pin.path
        if progress is not None:
            progress(
                f"building {tool.command} {pin.version} from {pin.module_dir} into "
                f"{pin.path.parent} (progress every 15s)"
            )
        ldflags = f"-s -w -X {tool.version_variable}={pin.version}"

        def build(tmp: Path) -> None:
            argv = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"{tmp}{os.sep}"]
            _run_go([*argv, tool.package], pin.module_dir, tool.command, progress, tool.command)

        _build_into(pin.path.parent, build, {tool.command: pin.expected})
    return pin.path
