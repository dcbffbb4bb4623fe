"""Versions come from the go.mod files; paths of the cache, the state and the modules."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.cluster import BinaryBuildError
from kubesched.cluster._gomod import go_directive, read_modules, required_version
from kubesched.cluster._paths import cache_dir, gomod_dir, state_dir

GOMOD = """\
module example.local/k8s

go 1.24.0

require k8s.io/kubernetes v1.34.4

require (
\tk8s.io/api v0.0.0 // indirect
\tgo.etcd.io/etcd/server/v3 v3.6.16 // indirect
)

replace (
\tk8s.io/api => k8s.io/api v0.34.4
\tk8s.io/kubernetes => k8s.io/kubernetes v9.9.9
)
"""


def test_required_version_reads_single_line_and_block_requires_not_replaces() -> None:
    assert required_version(GOMOD, "k8s.io/kubernetes") == "v1.34.4"
    assert required_version(GOMOD, "go.etcd.io/etcd/server/v3") == "v3.6.16"
    assert required_version(GOMOD, "k8s.io/api") == "v0.0.0"
    assert required_version(GOMOD, "k8s.io/absent") is None
    assert go_directive(GOMOD) == "1.24.0"


def test_the_repository_modules_pin_kubernetes_and_etcd() -> None:
    modules = read_modules(gomod_dir())

    assert modules.kubernetes_version.startswith("v1.")
    assert modules.etcd_version.startswith("v3.")
    assert modules.etcd_dir == modules.kubernetes_dir / "etcd"
    assert (modules.etcd_dir / "main.go").is_file()


def test_packaged_modules_come_first_then_a_checkout(tmp_path: Path) -> None:
    package = tmp_path / "site" / "kubesched" / "cluster"
    (package / "_gomod").mkdir(parents=True)
    (package / "_gomod" / "go.mod").write_text(GOMOD)
    assert gomod_dir(package) == package / "_gomod"

    checkout = tmp_path / "repo"
    (checkout / "hack" / "k8s").mkdir(parents=True)
    (checkout / "hack" / "k8s" / "go.mod").write_text(GOMOD)
    inner = checkout / "src" / "kubesched" / "cluster"
    inner.mkdir(parents=True)
    assert gomod_dir(inner) == checkout / "hack" / "k8s"

    lonely = tmp_path / "nowhere" / "kubesched" / "cluster"
    lonely.mkdir(parents=True)
    with pytest.raises(BinaryBuildError, match="hack/k8s"):
        gomod_dir(lonely)


def test_cache_and_state_dirs_follow_the_environment() -> None:
    home = Path.home()
    assert cache_dir({}) == home / ".cache" / "kubesched"
    assert cache_dir({"XDG_CACHE_HOME": "/x/cache"}) == Path("/x/cache/kubesched")
    assert cache_dir({"XDG_CACHE_HOME": "relative"}) == home / ".cache" / "kubesched"
    assert cache_dir({"KUBESCHED_CACHE_DIR": "/k", "XDG_CACHE_HOME": "/x"}) == Path("/k")
    assert state_dir({}) == home / ".local" / "state" / "kubesched"
    assert state_dir({"XDG_STATE_HOME": "/x/state"}) == Path("/x/state/kubesched")
    assert state_dir({"KUBESCHED_STATE_DIR": "/s"}) == Path("/s")
