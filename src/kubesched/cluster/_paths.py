"""Where the binary cache, the cluster state and the Go modules live."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from kubesched.cluster._errors import BinaryBuildError

#: Directory name of ``hack/k8s`` inside an installed wheel (``tool.hatch`` force-include).
PACKAGED_GOMOD = "_gomod"


def _env_dir(env: Mapping[str, str], name: str) -> Path | None:
    """An absolute directory from the environment; empty or relative values count as unset."""
    value = env.get(name, "")
    if value and os.path.isabs(value):
        return Path(value)
    return None


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$KUBESCHED_CACHE_DIR``, else ``$XDG_CACHE_HOME/kubesched``, else ``~/.cache/kubesched``."""
    env = os.environ if env is None else env
    explicit = env.get("KUBESCHED_CACHE_DIR", "")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = _env_dir(env, "XDG_CACHE_HOME")
    return (xdg if xdg is not None else Path.home() / ".cache") / "kubesched"


def state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$KUBESCHED_STATE_DIR``, else ``$XDG_STATE_HOME/kubesched``, else
    ``~/.local/state/kubesched``."""
    env = os.environ if env is None else env
    explicit = env.get("KUBESCHED_STATE_DIR", "")
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = _env_dir(env, "XDG_STATE_HOME")
    return (xdg if xdg is not None else Path.home() / ".local" / "state") / "kubesched"


def clusters_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory holding one sub-directory per cluster."""
    return state_dir(env) / "clusters"


def bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """The directory holding one sub-directory per binary version."""
    return cache_dir(env) / "bin"


def gomod_dir(package_dir: Path | None = None, *, name: str = "k8s") -> Path:
    """The Go module ``hack/<name>``: ``hack/k8s`` pins Kubernetes, ``hack/nfd`` NFD.

    An installed wheel carries it next to this package (``_gomod`` for ``k8s``, ``_gomod_<name>``
    for the others); an editable install finds it at the repository root, walking up from this
    file.
    """
    here = package_dir if package_dir is not None else Path(__file__).resolve().parent
    packaged = here / (PACKAGED_GOMOD if name == "k8s" else f"{PACKAGED_GOMOD}_{name}")
    if (packaged / "go.mod").is_file():
        return packaged
    for parent in here.parents:
        candidate = parent / "hack" / name
        if (candidate / "go.mod").is_file():
            return candidate
    raise BinaryBuildError(
        f"cannot find the Go module hack/{name}: neither {packaged} nor a hack/{name}/go.mod "
        f"above {here} exists (reinstall kubesched, or run from a checkout)"
    )
