"""Finding and building the control-plane binaries, with a stand-in for `go`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kubesched.cluster import BinaryBuildError, GoNotFoundError, ensure_binaries, find_binaries
from kubesched.cluster._binaries import build_date, format_duration, kubernetes_ldflags
from kubesched.cluster._gomod import GoModules, read_modules
from kubesched.cluster._paths import gomod_dir

MODULES: GoModules = read_modules(gomod_dir())
KV = MODULES.kubernetes_version
EV = MODULES.etcd_version.removeprefix("v")


def _script(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _fake_binaries(directory: Path, kubernetes: str = KV, etcd: str = EV) -> None:
    for command in ("kube-apiserver", "kube-scheduler"):
        _script(directory / command, f'echo "Kubernetes {kubernetes}"\n')
    _script(directory / "kubectl", f'echo "Client Version: {kubernetes}"\n')
    _script(directory / "etcd", f'echo "etcd Version: {etcd}"\n')


FAKE_GO = """\
echo "$PWD|$*" >> "{log}"
out=""
prev=""
for arg in "$@"; do
  if [ "$prev" = "-o" ]; then out="$arg"; fi
  prev="$arg"
done
echo "k8s.io/some/package"
echo "k8s.io/other/package" >&2
case "$out" in
  */)
    for c in kube-apiserver kube-scheduler; do
      printf '#!/bin/sh\\necho "Kubernetes {kv}"\\n' > "$out$c"; chmod +x "$out$c"
    done
    printf '#!/bin/sh\\necho "Client Version: {kv}"\\n' > "${{out}}kubectl"
    chmod +x "${{out}}kubectl" ;;
  *)
    printf '#!/bin/sh\\necho "etcd Version: {ev}"\\n' > "$out"; chmod +x "$out" ;;
esac
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("KUBESCHED_CACHE_DIR", str(root))
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    return root


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> Path:
    """A `go` on PATH that "builds" binaries reporting the pinned versions; logs its calls."""
    log = tmp_path / "go-calls.log"
    log.touch()
    _script(tmp_path / "gobin" / "go", FAKE_GO.format(log=log, kv=KV, ev=EV))
    monkeypatch.setenv("PATH", str(tmp_path / "gobin"))
    return log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines()


def test_missing_go_is_a_clear_error(cache: Path) -> None:
    with pytest.raises(GoNotFoundError) as caught:
        ensure_binaries()

    message = str(caught.value)
    assert "`go` not found on PATH" in message
    assert f"install Go >= {MODULES.min_go}" in message
    assert not (cache / "bin" / KV).exists()


def test_builds_into_versioned_dirs_then_second_call_is_a_no_op(
    fake_go: Path, cache: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines: list[str] = []

    binaries = ensure_binaries(progress=lines.append)

    assert binaries.kube_apiserver == cache / "bin" / KV / "kube-apiserver"
    assert binaries.etcd == cache / "bin" / f"etcd-{MODULES.etcd_version}" / "etcd"
    calls = _calls(fake_go)
    assert len(calls) == 2
    kube_call, etcd_call = calls
    assert kube_call.startswith(f"{MODULES.kubernetes_dir}|build ")
    assert "-trimpath" in kube_call
    assert f"k8s.io/component-base/version.gitVersion={KV}" in kube_call
    assert "k8s.io/kubernetes/cmd/kube-apiserver" in kube_call
    assert "k8s.io/kubernetes/cmd/kubectl" in kube_call
    assert etcd_call.startswith(f"{MODULES.etcd_dir}|build ")
    assert any(line.startswith("building kube-apiserver") for line in lines)
    assert any("done in" in line for line in lines)
    assert sorted(p.name for p in (cache / "bin").iterdir()) == [
        ".lock",
        f"etcd-{MODULES.etcd_version}",
        KV,
    ]

    # No go at all now: the cache alone must satisfy the second call.
    monkeypatch.setenv("PATH", str(tmp_path / "empty-path"))
    assert ensure_binaries() == binaries
    assert find_binaries() == binaries
    assert len(_calls(fake_go)) == 2


def test_a_cached_binary_at_another_version_is_rebuilt(fake_go: Path, cache: Path) -> None:
    _fake_binaries(cache / "bin" / KV, kubernetes="v1.0.0")
    _fake_binaries(cache / "bin" / f"etcd-{MODULES.etcd_version}")
    assert find_binaries() is None

    binaries = ensure_binaries()

    calls = _calls(fake_go)
    assert len(calls) == 1  # etcd was current
    assert "k8s.io/kubernetes/cmd/kube-scheduler" in calls[0]
    assert f"Kubernetes {KV}" in os.popen(str(binaries.kube_scheduler)).read()


def test_a_version_prefix_does_not_count_as_the_version(cache: Path) -> None:
    _fake_binaries(cache / "bin" / KV, kubernetes=KV + "0")
    _fake_binaries(cache / "bin" / f"etcd-{MODULES.etcd_version}")

    assert find_binaries() is None


def test_module_download_failure_names_the_cause_and_shows_gos_output(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(
        tmp_path / "gobin" / "go",
        'echo "go: downloading k8s.io/kubernetes v1.34.4"\n'
        'echo "go: k8s.io/kubernetes@v1.34.4: Get \\"https://proxy.golang.org/k8s.io/'
        'kubernetes/@v/v1.34.4.zip\\": dial tcp: lookup proxy.golang.org: no such host" >&2\n'
        "exit 1\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "gobin"))

    with pytest.raises(BinaryBuildError) as caught:
        ensure_binaries()

    message = str(caught.value)
    assert "downloading the Go modules" in message
    assert "lookup proxy.golang.org: no such host" in message
    assert list((cache / "bin").iterdir()) == [cache / "bin" / ".lock"]


def test_a_failed_build_leaves_no_half_filled_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Writes one binary, then fails like a compile error would.
    _script(
        tmp_path / "gobin" / "go",
        'for a in "$@"; do last="$a"; done\n'
        'out=""; prev=""\n'
        'for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done\n'
        'echo junk > "${out}kube-apiserver"\n'
        'echo "cmd/kube-apiserver/app/server.go:1:1: syntax error" >&2\n'
        "exit 2\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "gobin"))

    with pytest.raises(BinaryBuildError) as caught:
        ensure_binaries()

    assert "go exited 2" in str(caught.value)
    assert "syntax error" in str(caught.value)
    assert list((cache / "bin").iterdir()) == [cache / "bin" / ".lock"]


def test_leftovers_of_a_killed_build_are_removed(fake_go: Path, cache: Path) -> None:
    leftover = cache / "bin" / f".build-{KV}-abc"
    leftover.mkdir(parents=True)
    (leftover / "kube-apiserver").write_text("half")

    ensure_binaries()

    assert not leftover.exists()


def test_ldflags_stamp_the_version_kube_apiserver_reports() -> None:
    flags = kubernetes_ldflags("v1.34.4", "2026-01-01T00:00:00Z")

    assert flags.startswith("-s -w ")
    for stamp in (
        "gitVersion=v1.34.4",
        "gitMajor=1",
        "gitMinor=34",
        "gitTreeState=clean",
        "buildDate=2026-01-01T00:00:00Z",
    ):
        assert f"-X k8s.io/component-base/version.{stamp}" in flags


def test_build_date_honours_source_date_epoch() -> None:
    assert build_date({"SOURCE_DATE_EPOCH": "1767225600"}) == "2026-01-01T00:00:00Z"
    assert build_date({}) == "1970-01-01T00:00:00Z"


def test_format_duration() -> None:
    assert format_duration(42.7) == "42s"
    assert format_duration(185) == "3m05s"
    assert format_duration(3720) == "1h02m"


def test_a_long_build_reports_elapsed_time_and_ctrl_c_cleans_up(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubesched.cluster import _binaries

    monkeypatch.setattr(_binaries, "_PROGRESS_EVERY", 0.2)
    _script(
        tmp_path / "gobin" / "go",
        'echo "go: downloading k8s.io/kubernetes v1.34.4"\n'
        'echo "k8s.io/apimachinery/pkg/util/sets"\n'
        "exec sleep 30\n",
    )
    monkeypatch.setenv("PATH", str(tmp_path / "gobin"))
    lines: list[str] = []

    def progress(line: str) -> None:
        lines.append(line)
        if "elapsed" in line:
            raise KeyboardInterrupt  # as if Ctrl-C arrived during the build

    with pytest.raises(KeyboardInterrupt):
        ensure_binaries(progress=progress)

    assert lines[-1].startswith("  kubernetes: ")
    assert lines[-1].endswith("s elapsed, 1 packages compiled, 1 modules downloaded")
    assert list((cache / "bin").iterdir()) == [cache / "bin" / ".lock"]
