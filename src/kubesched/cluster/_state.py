"""The on-disk state of one cluster: its directory layout and ``state.json``."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kubesched.cluster._binaries import Progress
from kubesched.cluster._errors import ClusterError
from kubesched.cluster._process import ProcessRecord

DEFAULT_NAME = "kubesched"
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")
_STATE_VERSION = 1


def validate_name(name: str) -> str:
    """A cluster name is a directory name: lower-case letters, digits, ``.``, ``_``, ``-``."""
    if not _NAME.match(name):
        raise ClusterError(
            f"invalid cluster name {name!r}: use 1 to 63 lower-case letters, digits, '.', '_' "
            "or '-', starting and ending with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class Layout:
    """Where each file of a cluster lives under its state directory."""

    root: Path

    @property
    def name(self) -> str:
        return self.root.name

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def ca_cert(self) -> Path:
        return self.pki / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.pki / "ca.key"

    @property
    def apiserver_cert(self) -> Path:
        return self.pki / "apiserver.crt"

    @property
    def apiserver_key(self) -> Path:
        return self.pki / "apiserver.key"

    @property
    def admin_cert(self) -> Path:
        return self.pki / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.pki / "admin.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.pki / "front-proxy-ca.crt"

    @property
    def front_proxy_ca_key(self) -> Path:
        return self.pki / "front-proxy-ca.key"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.pki / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.pki / "front-proxy-client.key"

    @property
    def sa_public_key(self) -> Path:
        return self.pki / "sa.pub"

    @property
    def sa_private_key(self) -> Path:
        return self.pki / "sa.key"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def users(self) -> Path:
        return self.root / "users"

    @property
    def components(self) -> Path:
        return self.root / "components"


@dataclass
class ClusterState:
    """What ``state.json`` records, so that ``down`` and ``status`` work from any process."""

    name: str
    created: str
    kubernetes_version: str
    etcd_version: str
    server: str = ""
    apiserver_port: int = 0
    etcd_client_port: int = 0
    etcd_peer_port: int = 0
    apiserver_args: list[str] = field(default_factory=list)
    etcd_args: list[str] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    components: list[ProcessRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": _STATE_VERSION,
            "name": self.name,
            "created": self.created,
            "kubernetes_version": self.kubernetes_version,
            "etcd_version": self.etcd_version,
            "server": self.server,
            "apiserver_port": self.apiserver_port,
            "etcd_client_port": self.etcd_client_port,
            "etcd_peer_port": self.etcd_peer_port,
            "apiserver_args": self.apiserver_args,
            "etcd_args": self.etcd_args,
            "processes": [p.to_json() for p in self.processes],
            "components": [c.to_json() for c in self.components],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        return cls(
            name=str(data["name"]),
            created=str(data.get("created", "")),
            kubernetes_version=str(data.get("kubernetes_version", "")),
            etcd_version=str(data.get("etcd_version", "")),
            server=str(data.get("server", "")),
            apiserver_port=int(data.get("apiserver_port", 0)),
            etcd_client_port=int(data.get("etcd_client_port", 0)),
            etcd_peer_port=int(data.get("etcd_peer_port", 0)),
            apiserver_args=[str(a) for a in data.get("apiserver_args", [])],
            etcd_args=[str(a) for a in data.get("etcd_args", [])],
            processes=[ProcessRecord.from_json(p) for p in data.get("processes", [])],
            components=[ProcessRecord.from_json(c) for c in data.get("components", [])],
        )


def load_state(layout: Layout) -> ClusterState | None:
    """The recorded state, or None if there is none or it cannot be read."""
    try:
        data = json.loads(layout.state_file.read_text())
        return ClusterState.from_json(data)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_state(layout: Layout, state: ClusterState) -> None:
    """Write ``state.json`` atomically (temporary file, then rename)."""
    layout.root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=layout.root)
    with os.fdopen(fd, "w") as handle:
        json.dump(state.to_json(), handle, indent=2)
        handle.write("\n")
    os.replace(tmp, layout.state_file)


def _lock_file(path: Path, progress: Progress | None, what: str) -> IO[str]:
    """Open and lock ``path``; retry if it was unlinked by the holder while we waited."""
    waiting_said = False
    while True:
        handle = open(path, "a")  # noqa: SIM115 (returned locked, closed by the caller)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress is not None and not waiting_said:
                progress(f"waiting for another command on {what} to finish")
                waiting_said = True
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                return handle
        except FileNotFoundError:
            pass
        handle.close()


@contextlib.contextmanager
def cluster_lock(clusters: Path, name: str, progress: Progress | None = None) -> Iterator[None]:
    """Serialize ``up``, ``down`` and component changes of one cluster across processes.

    The lock file sits next to the cluster directories (``.<name>.lock``). It is removed, while
    still held, once the cluster directory is gone; a process that was waiting on the removed
    file sees that and locks the new one.
    """
    clusters.mkdir(parents=True, exist_ok=True)
    path = clusters / f".{name}.lock"
    handle = _lock_file(path, progress, f"cluster {name!r}")
    try:
        yield
    finally:
        if not (clusters / name).exists():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        handle.close()
