"""nfd-master and other Go tools under hack/: pinned versions, the cache, a stand-in `go`."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from kubesched.cluster import NFD_MASTER, BinaryBuildError, GoNotFoundError, ensure_tool, find_tool
from kubesched.cluster._gotools import pinned
from kubesched.cluster._paths import gomod_dir


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# Writes an nfd-master that prints the version stamped by -X ...version=<v> in the ldflags.
FAKE_GO = """\
echo "$PWD|$*" >> "{log}"
out=""; prev=""; version=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then out="$arg"; fi
  case "$arg" in *pkg/version.version=*) version="${{arg##*version.version=}}" ;; esac
  prev="$arg"
done
echo "sigs.k8s.io/node-feature-discovery/cmd/nfd-master"
{fail}
printf '#!/bin/sh\\necho "nfd-master %s"\\n' "$version" > "${{out}}nfd-master"
chmod +x "${{out}}nfd-master"
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("KUBESCHED_CACHE_DIR", str(root))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    return root


def _fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: str = "") -> Path:
    log = tmp_path / "go-calls.log"
    log.touch()
    _script(tmp_path / "gobin" / "go", FAKE_GO.format(log=log, fail=fail))
    monkeypatch.setenv("PATH", str(tmp_path / "gobin"))
    return log


def test_the_version_is_the_one_hack_nfd_pins() -> None:
    pin = pinned(NFD_MASTER)
    gomod = (gomod_dir(name="nfd") / "go.mod").read_text()
    assert f"\t{NFD_MASTER.module} {pin.version}" in gomod
    assert pin.version.startswith("v0.")
    assert pin.path.parent.name == f"nfd-{pin.version}"
    assert pin.expected == (["-version"], f"nfd-master {pin.version}")


def test_an_installed_wheel_carries_hack_nfd_next_to_the_package(tmp_path: Path) -> None:
    package = tmp_path / "site" / "kubesched" / "cluster"
    (package / "_gomod_nfd").mkdir(parents=True)
    (package / "_gomod_nfd" / "go.mod").write_text("module x\n")
    assert gomod_dir(package, name="nfd") == package / "_gomod_nfd"


def test_builds_once_then_uses_the_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _fake_go(tmp_path, monkeypatch)
    assert find_tool(NFD_MASTER) is None
    built = ensure_tool(NFD_MASTER)
    version = pinned(NFD_MASTER).version
    assert built == cache / "bin" / f"nfd-{version}" / "nfd-master"
    [call] = log.read_text().splitlines()
    directory, argv = call.split("|")
    assert Path(directory) == gomod_dir(name="nfd")
    assert f"-X {NFD_MASTER.version_variable}={version}" in argv
    assert argv.endswith(NFD_MASTER.package)
    assert ensure_tool(NFD_MASTER) == built
    assert find_tool(NFD_MASTER) == built
    assert len(log.read_text().splitlines()) == 1
    assert not list((cache / "bin").glob(".build-*"))


def test_a_cached_binary_of_another_version_is_rebuilt(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pin = pinned(NFD_MASTER)
    _script(pin.path, 'echo "nfd-master v0.0.1"\n')
    log = _fake_go(tmp_path, monkeypatch)
    assert find_tool(NFD_MASTER) is None
    ensure_tool(NFD_MASTER)
    assert len(log.read_text().splitlines()) == 1
    assert find_tool(NFD_MASTER) == pin.path


def test_a_failed_build_leaves_no_cache_and_shows_go_output(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_go(tmp_path, monkeypatch, fail='echo "pkg/x.go:1: undefined: y"; exit 1')
    with pytest.raises(BinaryBuildError, match=r"building nfd-master failed(?s:.*)undefined: y"):
        ensure_tool(NFD_MASTER)
    assert find_tool(NFD_MASTER) is None
    assert not list((cache / "bin").glob(".build-*"))


def test_without_go_the_error_says_what_to_install(cache: Path) -> None:
    with pytest.raises(GoNotFoundError, match=r"install Go >= 1\.\d+.*nfd-master.*hack/nfd"):
        ensure_tool(NFD_MASTER)
