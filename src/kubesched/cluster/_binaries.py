"""Find or build kube-apiserver, kube-scheduler, kubectl and etcd.

They are built from the Go modules in ``hack/k8s`` (Kubernetes with its staging replaces) and
``hack/k8s/etcd`` (a wrapper main around ``etcdmain.Main``) and cached per version:

    <cache>/bin/v1.34.4/{kube-apiserver,kube-scheduler,kubectl}
    <cache>/bin/etcd-v3.6.16/etcd

A cached directory is used when every binary in it exists and reports the expected version.
A build goes to a temporary directory next to the final one and is renamed into place once its
binaries check out, so an interrupted build never leaves a half-filled cache. A file lock keeps
two builds of the same cache from running at once.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kubesched.cluster._errors import BinaryBuildError, GoNotFoundError
from kubesched.cluster._gomod import KUBERNETES_MODULE, GoModules, read_modules
from kubesched.cluster._paths import bin_dir, gomod_dir

Progress = Callable[[str], None]

KUBERNETES_COMMANDS = ("kube-apiserver", "kube-scheduler", "kubectl")
ETCD_COMMAND = "etcd"

#: Kubernetes' own default when no build date is stamped; keeps builds reproducible.
DEFAULT_BUILD_DATE = "1970-01-01T00:00:00Z"
_VERSION_PACKAGE = "k8s.io/component-base/version"
_PROGRESS_EVERY = 15.0
_TAIL_LINES = 40
_PROBE_TIMEOUT = 60.0

# What go prints when it cannot fetch a module: proxy, DNS, TLS, checksum database, go.sum.
_DOWNLOAD_FAILURE = re.compile(
    r"dial tcp|no such host|i/o timeout|connection refused|connection reset|TLS handshake"
    r"|proxy\.golang\.org|sum\.golang\.org|unrecognized import path|missing go\.sum entry"
    r"|verifying .*(?:checksum mismatch|SECURITY ERROR)|reading .*: \d{3} |: Get \"https?://"
    r"|GOPROXY|GOFLAGS=-mod=mod|module lookup disabled"
)


@dataclass(frozen=True)
class Binaries:
    """Paths of the four binaries, and the versions they were built at."""

    kube_apiserver: Path
    kube_scheduler: Path
    kubectl: Path
    etcd: Path
    kubernetes_version: str
    etcd_version: str

    @property
    def kubernetes_dir(self) -> Path:
        """The cache directory holding kube-apiserver, kube-scheduler and kubectl."""
        return self.kube_apiserver.parent

    @property
    def etcd_dir(self) -> Path:
        """The cache directory holding etcd."""
        return self.etcd.parent

    def paths(self) -> dict[str, Path]:
        """Each binary by its command name."""
        return {
            "etcd": self.etcd,
            "kube-apiserver": self.kube_apiserver,
            "kube-scheduler": self.kube_scheduler,
            "kubectl": self.kubectl,
        }


def _expected_binaries(modules: GoModules, env: Mapping[str, str] | None) -> Binaries:
    root = bin_dir(env)
    kube = root / modules.kubernetes_version
    return Binaries(
        kube_apiserver=kube / "kube-apiserver",
        kube_scheduler=kube / "kube-scheduler",
        kubectl=kube / "kubectl",
        etcd=root / f"etcd-{modules.etcd_version}" / ETCD_COMMAND,
        kubernetes_version=modules.kubernetes_version,
        etcd_version=modules.etcd_version,
    )


# --- version probes ------------------------------------------------------------------------


def _probe(command: str, kubernetes_version: str, etcd_version: str) -> tuple[list[str], str]:
    """The arguments that make ``command`` print its version, and the text expected."""
    if command == "kubectl":
        return ["version", "--client"], f"Client Version: {kubernetes_version}"
    if command == ETCD_COMMAND:
        return ["--version"], f"etcd Version: {etcd_version.removeprefix('v')}"
    return ["--version"], f"Kubernetes {kubernetes_version}"


def reports_version(binary: Path, args: Sequence[str], expected: str) -> bool:
    """Whether ``binary args`` runs and prints ``expected`` (a whole version, not a prefix)."""
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    try:
        done = subprocess.run(
            [str(binary), *args],
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    output = done.stdout + done.stderr
    return re.search(re.escape(expected) + r"(?![\w.+-])", output) is not None


def _all_current(paths: Mapping[str, Path], kubernetes_version: str, etcd_version: str) -> bool:
    """Whether every binary exists and reports its expected version (probed in parallel)."""
    if not all(p.is_file() for p in paths.values()):
        return False
    with ThreadPoolExecutor(max_workers=len(paths)) as pool:
        checks = [
            pool.submit(reports_version, path, *_probe(command, kubernetes_version, etcd_version))
            for command, path in paths.items()
        ]
        return all(check.result() for check in checks)


def _kubernetes_paths(binaries: Binaries) -> dict[str, Path]:
    return {
        "kube-apiserver": binaries.kube_apiserver,
        "kube-scheduler": binaries.kube_scheduler,
        "kubectl": binaries.kubectl,
    }


def _etcd_paths(binaries: Binaries) -> dict[str, Path]:
    return {ETCD_COMMAND: binaries.etcd}


def find_binaries(env: Mapping[str, str] | None = None) -> Binaries | None:
    """The cached binaries if they are all there at the pinned versions; never builds."""
    binaries = _expected_binaries(read_modules(gomod_dir()), env)
    paths = {**_kubernetes_paths(binaries), **_etcd_paths(binaries)}
    if _all_current(paths, binaries.kubernetes_version, binaries.etcd_version):
        return binaries
    return None


# --- building ------------------------------------------------------------------------------


def find_go(modules: GoModules, env: Mapping[str, str] | None = None) -> str:
    """The ``go`` executable on PATH, or a clear error saying what to install."""
    return which_go(
        modules.min_go,
        "kube-apiserver, kube-scheduler, kubectl and etcd",
        modules.kubernetes_dir,
        env,
    )


def which_go(min_go: str, what: str, directory: Path, env: Mapping[str, str] | None) -> str:
    """The ``go`` executable on PATH; else an error naming ``what`` needs it, built where."""
    path = (os.environ if env is None else env).get("PATH", os.defpath)
    go = shutil.which("go", path=path)
    if go is None:
        raise GoNotFoundError(
            f"`go` not found on PATH; install Go >= {min_go} (https://go.dev/dl/) "
            f"and put its bin directory on PATH: {what} are built from the Go modules in "
            f"{directory}"
        )
    return go


def build_date(env: Mapping[str, str] | None = None) -> str:
    """``$SOURCE_DATE_EPOCH`` as RFC 3339 if set, else Kubernetes' default build date."""
    epoch = (os.environ if env is None else env).get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return DEFAULT_BUILD_DATE


def kubernetes_ldflags(version: str, date: str) -> str:
    """Linker flags stamping the version that ``--version`` and ``/version`` report."""
    match = re.match(r"v(\d+)\.(\d+)", version)
    if match is None:
        raise BinaryBuildError(f"cannot read major.minor from Kubernetes version {version!r}")
    stamps = {
        "gitVersion": version,
        "gitMajor": match.group(1),
        "gitMinor": match.group(2),
        "gitTreeState": "clean",
        "buildDate": date,
    }
    return " ".join(["-s", "-w", *(f"-X {_VERSION_PACKAGE}.{k}={v}" for k, v in stamps.items())])


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class _GoOutput:
    """Reads go's combined output on a thread: counts packages and downloads, keeps a tail."""

    def __init__(self, stream: Iterator[str]) -> None:
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self.packages = 0
        self.downloads = 0
        self._stream = stream
        self._thread = threading.Thread(target=self._read, name="go-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for raw in self._stream:
            line = raw.rstrip("\n")
            self.tail.append(line)
            if line.startswith("go: downloading"):
                self.downloads += 1
            elif line and not line.startswith(("go: ", "#", " ", "\t")):
                self.packages += 1  # `go build -v` names each package it compiles

    def join(self) -> None:
        self._thread.join(timeout=5)


def _run_go(
    argv: Sequence[str], cwd: Path, label: str, progress: Progress | None, what: str
) -> None:
    env = {**os.environ, "GOWORK": "off"}
    started = time.monotonic()
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    assert process.stdout is not None
    output = _GoOutput(iter(process.stdout))
    try:
        next_report = started + _PROGRESS_EVERY
        while True:
            try:
                returncode = process.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if progress is not None and now >= next_report:
                next_report = now + _PROGRESS_EVERY
                counts = f"{output.packages} packages compiled"
                if output.downloads:
                    counts += f", {output.downloads} modules downloaded"
                progress(f"  {label}: {format_duration(now - started)} elapsed, {counts}")
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        output.join()
        process.stdout.close()
    elapsed = format_duration(time.monotonic() - started)
    if returncode != 0:
        tail = "\n".join(output.tail)
        if _DOWNLOAD_FAILURE.search(tail):
            raise BinaryBuildError(
                f"downloading the Go modules for {what} failed (a first build needs the Go "
                f"module proxy, see GOPROXY); go exited {returncode} after {elapsed} in "
                f"{cwd}. Last lines of its output:\n{tail}"
            )
        raise BinaryBuildError(
            f"building {what} failed: go exited {returncode} after {elapsed} in {cwd}. "
            f"Last lines of its output:\n{tail}"
        )
    if progress is not None:
        progress(f"  {label}: done in {elapsed}")


def _replace_dir(built: Path, final: Path) -> None:
    """Move ``built`` to ``final`` with renames; an old ``final`` is moved aside, then removed."""
    built.chmod(0o755)
    old: Path | None = None
    if final.exists():
        old = final.with_name(f".old-{final.name}-{uuid.uuid4().hex[:8]}")
        final.rename(old)
    built.rename(final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _build_into(
    final: Path,
    build: Callable[[Path], None],
    expected: Mapping[str, tuple[list[str], str]],
) -> None:
    """Run ``build(tmp)``, check the binaries in tmp, then rename tmp to ``final``."""
    tmp = Path(tempfile.mkdtemp(prefix=f".build-{final.name}-", dir=final.parent))
    try:
        build(tmp)
        for command, (args, text) in expected.items():
            if not reports_version(tmp / command, args, text):
                raise BinaryBuildError(
                    f"the freshly built {tmp / command} does not report {text!r} "
                    f"(run it with {' '.join(args)} to see what it says)"
                )
        _replace_dir(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_kubernetes(
    go: str, modules: GoModules, binaries: Binaries, progress: Progress | None
) -> None:
    version = modules.kubernetes_version
    commands = ", ".join(KUBERNETES_COMMANDS)
    if progress is not None:
        progress(
            f"building {commands} {version} from {modules.kubernetes_dir} into "
            f"{binaries.kubernetes_dir} (a first build with a cold Go cache takes many minutes; "
            "progress every 15s)"
        )
    ldflags = kubernetes_ldflags(version, build_date())
    packages = [f"{KUBERNETES_MODULE}/cmd/{command}" for command in KUBERNETES_COMMANDS]

    def build(tmp: Path) -> None:
        argv = [go, "build", "-v", "-trimpath", "-ldflags", ldflags, "-o", f"{tmp}{os.sep}"]
        _run_go([*argv, *packages], modules.kubernetes_dir, "kubernetes", progress, commands)

    expected = {c: _probe(c, version, modules.etcd_version) for c in KUBERNETES_COMMANDS}
    _build_into(binaries.kubernetes_dir, build, expected)


def _build_etcd(go: str, modules: GoModules, binaries: Binaries, progress: Progress | None) -> None:
    if progress is not None:
        progress(
            f"building etcd {modules.etcd_version} from {modules.etcd_dir} into {binaries.etcd_dir}"
        )

    def build(tmp: Path) -> None:
        argv = [go, "build", "-v", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp / ETCD_COMMAND)]
        _run_go([*argv, "."], modules.etcd_dir, "etcd", progress, "etcd")

    expected = {
        ETCD_COMMAND: _probe(ETCD_COMMAND, modules.kubernetes_version, modules.etcd_version)
    }
    _build_into(binaries.etcd_dir, build, expected)


@contextlib.contextmanager
def _build_lock(root: Path, progress: Progress | None) -> Iterator[None]:
    with open(root / ".lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress is not None:
                progress(f"waiting for another build into {root} to finish")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_leftovers(root: Path) -> None:
    """Temporary directories of builds that were killed (only called under the build lock)."""
    for leftover in root.glob(".build-*"):
        shutil.rmtree(leftover, ignore_errors=True)
    for leftover in root.glob(".old-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def ensure_binaries(
    progress: Progress | None = None, *, env: Mapping[str, str] | None = None
) -> Binaries:
    """The four binaries at the versions pinned in ``hack/k8s``: from the cache, else built.

    A second call is a no-op apart from asking each binary its version. ``progress`` receives
    human-readable lines while building (a cold build takes many minutes).
    """
    modules = read_modules(gomod_dir())
    binaries = _expected_binaries(modules, env)
    kube_ok = _all_current(
        _kubernetes_paths(binaries), modules.kubernetes_version, modules.etcd_version
    )
    etcd_ok = _all_current(_etcd_paths(binaries), modules.kubernetes_version, modules.etcd_version)
    if kube_ok and etcd_ok:
        return binaries

    go = find_go(modules, env)
    root = bin_dir(env)
    root.mkdir(parents=True, exist_ok=True)
    with _build_lock(root, progress):
        _remove_leftovers(root)
        # Another process may have built while we waited for the lock.
        if not kube_ok and not _all_current(
            _kubernetes_paths(binaries), modules.kubernetes_version, modules.etcd_version
        ):
            _build_kubernetes(go, modules, binaries, progress)
        if not etcd_ok and not _all_current(
            _etcd_paths(binaries), modules.kubernetes_version, modules.etcd_version
        ):
            _build_etcd(go, modules, binaries, progress)
    return binaries
