"""Start, reuse, inspect and stop a throwaway control plane: etcd and kube-apiserver."""

from __future__ import annotations

import base64
import datetime
import os
import shutil
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.cluster import _http
from kubesched.cluster._binaries import Binaries, Progress, ensure_binaries, format_duration
from kubesched.cluster._certs import (
    ADMIN_GROUPS,
    ADMIN_USER,
    CertificateAuthority,
    generate_service_account_keys,
)
from kubesched.cluster._errors import ClusterStartError
from kubesched.cluster._paths import clusters_dir
from kubesched.cluster._ports import LOOPBACK, free_ports
from kubesched.cluster._process import (
    DEFAULT_GRACE,
    ProcessRecord,
    is_running,
    log_tail,
    spawn,
    terminate,
)
from kubesched.cluster._state import (
    DEFAULT_NAME,
    ClusterState,
    Layout,
    cluster_lock,
    load_state,
    save_state,
    validate_name,
)

DEFAULT_TIMEOUT = 120.0
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
FRONT_PROXY_CLIENT = "front-proxy-client"
DISABLED_ADMISSION_PLUGINS = ("ServiceAccount", "TaintNodesByCondition")
_PORT_ATTEMPTS = 4
_LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class ClusterInfo:
    """A running control plane and how to reach it as its administrator."""

    name: str
    state_dir: Path
    kubeconfig: Path
    server: str
    ca_file: Path
    admin_cert: Path
    admin_key: Path
    version: str
    etcd_version: str
    etcd_endpoint: str
    apiserver_port: int
    reused: bool = False

    def ssl_context(self) -> ssl.SSLContext:
        """TLS context trusting the cluster CA and presenting the admin client certificate."""
        context = ssl.create_default_context(cafile=str(self.ca_file))
        context.load_cert_chain(str(self.admin_cert), str(self.admin_key))
        return context

    def client_kubeconfig(self, user: str, groups: Sequence[str] = ()) -> Path:
        """A kubeconfig for ``user`` in ``groups``, with a client certificate minted for it.

        ``client_kubeconfig("system:kube-scheduler")`` runs a scheduler with kube-scheduler's
        own bootstrap RBAC rights. The files go to ``<state dir>/users/``.
        """
        return write_client_kubeconfig(Layout(self.state_dir), self.server, user, groups)


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int
    running: bool
    log: Path


@dataclass(frozen=True)
class ClusterStatus:
    """One cluster found under the state directory."""

    name: str
    state: str  # "running", "degraded" (some processes died) or "stopped"
    state_dir: Path
    kubeconfig: Path | None
    server: str
    apiserver_port: int
    etcd_client_port: int
    version: str
    processes: tuple[ProcessStatus, ...]
    components: tuple[ProcessStatus, ...]

    @property
    def running(self) -> bool:
        return self.state == "running"


# --- kubeconfig ------------------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def kubeconfig_yaml(
    cluster: str, server: str, *, ca_pem: bytes, user: str, cert_pem: bytes, key_pem: bytes
) -> str:
    """A self-contained kubeconfig (certificates embedded) with one context named ``cluster``."""
    config: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": cluster,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
        "preferences": {},
    }
    return yaml.safe_dump(config, sort_keys=False)


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


def _file_safe(user: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in user)


def write_client_kubeconfig(
    layout: Layout, server: str, user: str, groups: Sequence[str] = ()
) -> Path:
    """Mint a client certificate for ``user``/``groups`` and write a kubeconfig using it."""
    ca = CertificateAuthority.load(layout.ca_cert, layout.ca_key)
    pair = ca.issue_client_cert(user, groups)
    stem = _file_safe(user) + "".join(f"+{_file_safe(g)}" for g in groups)
    pair.write(layout.users / f"{stem}.crt", layout.users / f"{stem}.key")
    path = layout.users / f"{stem}.kubeconfig"
    text = kubeconfig_yaml(
        layout.name,
        server,
        ca_pem=ca.cert_pem,
        user=user,
        cert_pem=pair.cert_pem,
        key_pem=pair.key_pem,
    )
    _write_private(path, text)
    return path


# --- starting processes ----------------------------------------------------------------------


def wait_until(
    record: ProcessRecord,
    what: str,
    ready: Callable[[], bool],
    timeout: float,
    interval: float = 0.2,
) -> None:
    """Poll ``ready`` until true; fail with the log tail if the process exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        if not is_running(record):
            tail = log_tail(record.log, _LOG_TAIL_LINES)
            raise ClusterStartError(
                f"{what} exited while starting; last lines of {record.log}:\n{tail}",
                port_in_use="address already in use" in tail,
            )
        if ready():
            return
        if time.monotonic() >= deadline:
            tail = log_tail(record.log, _LOG_TAIL_LINES)
            raise ClusterStartError(
                f"{what} not ready after {format_duration(timeout)}; last lines of "
                f"{record.log}:\n{tail}"
            )
        time.sleep(interval)


def launch(
    what: str,
    port_count: int,
    argv_for: Callable[[list[int]], Sequence[str]],
    log: Path,
    ready_for: Callable[[list[int]], Callable[[], bool]],
    *,
    timeout: float,
    on_spawn: Callable[[ProcessRecord | None], None],
    progress: Progress | None,
    cwd: Path | None = None,
) -> tuple[ProcessRecord, list[int]]:
    """Start a process on fresh loopback ports and wait until it is ready.

    If it dies because a port got taken in between, try again on other ports. ``on_spawn`` is
    told about the process as soon as it exists (to record it) and with None once it is gone.
    A process that does not come up is stopped before the error propagates.
    """
    for attempt in range(1, _PORT_ATTEMPTS + 1):
        ports = free_ports(port_count)
        record = spawn(what, argv_for(ports), log, cwd=cwd)
        on_spawn(record)
        try:
            wait_until(record, what, ready_for(ports), timeout)
        except ClusterStartError as err:
            terminate([record], grace=2.0)
            on_spawn(None)
            if err.port_in_use and attempt < _PORT_ATTEMPTS:
                if progress is not None:
                    progress(f"  a port of {what} was taken meanwhile; retrying on other ports")
                continue
            raise
        except BaseException:
            terminate([record], grace=2.0)
            on_spawn(None)
            raise
        return record, ports
    raise AssertionError("unreachable")  # pragma: no cover


def _etcd_argv(
    binaries: Binaries, layout: Layout, client: int, peer: int, extra: Sequence[str]
) -> list[str]:
    client_url = f"http://{LOOPBACK}:{client}"
    peer_url = f"http://{LOOPBACK}:{peer}"
    return [
        str(binaries.etcd),
        "--name=kubesched",
        f"--data-dir={layout.etcd_data}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=kubesched={peer_url}",
        "--initial-cluster-state=new",
        "--unsafe-no-fsync=true",
        *extra,
    ]


def _apiserver_argv(
    binaries: Binaries, layout: Layout, port: int, etcd_client: int, extra: Sequence[str]
) -> list[str]:
    return [
        str(binaries.kube_apiserver),
        f"--etcd-servers=http://{LOOPBACK}:{etcd_client}",
        f"--advertise-address={LOOPBACK}",
        f"--bind-address={LOOPBACK}",
        f"--secure-port={port}",
        f"--cert-dir={layout.pki}",
        f"--tls-cert-file={layout.apiserver_cert}",
        f"--tls-private-key-file={layout.apiserver_key}",
        f"--client-ca-file={layout.ca_cert}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={layout.sa_public_key}",
        f"--service-account-signing-key-file={layout.sa_private_key}",
        f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
        # The front-proxy (request-header) CA: components that delegate authentication to the
        # apiserver (kube-scheduler's /metrics) wait for it, and aggregated APIs need it.
        f"--requestheader-client-ca-file={layout.front_proxy_ca_cert}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={layout.front_proxy_client_cert}",
        f"--proxy-client-key-file={layout.front_proxy_client_key}",
        "--authorization-mode=Node,RBAC",
        "--allow-privileged=true",
        # No controller-manager runs: nothing creates the "default" service account of a
        # namespace (ServiceAccount would reject every pod), and nothing lifts the not-ready
        # taint TaintNodesByCondition puts on each new node (no pod would ever fit).
        f"--disable-admission-plugins={','.join(DISABLED_ADMISSION_PLUGINS)}",
        *extra,
    ]


def _write_pki(layout: Layout) -> CertificateAuthority:
    ca = CertificateAuthority.generate()
    ca.write(layout.ca_cert, layout.ca_key)
    ca.issue_serving_cert().write(layout.apiserver_cert, layout.apiserver_key)
    ca.issue_client_cert(ADMIN_USER, ADMIN_GROUPS).write(layout.admin_cert, layout.admin_key)
    generate_service_account_keys().write(layout.sa_public_key, layout.sa_private_key)
    front_proxy = CertificateAuthority.generate("kubesched-front-proxy-ca")
    front_proxy.write(layout.front_proxy_ca_cert, layout.front_proxy_ca_key)
    front_proxy.issue_client_cert(FRONT_PROXY_CLIENT).write(
        layout.front_proxy_client_cert, layout.front_proxy_client_key
    )
    return ca


def _admin_context(layout: Layout) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(layout.ca_cert))
    context.load_cert_chain(str(layout.admin_cert), str(layout.admin_key))
    return context


def _apiserver_ready(server: str, context: ssl.SSLContext) -> bool:
    return _http.probe(f"{server}/readyz", context) == b"ok"


def _default_namespace_exists(server: str, context: ssl.SSLContext) -> bool:
    return _http.probe(f"{server}/api/v1/namespaces/default", context) is not None


def _info(state: ClusterState, layout: Layout, *, reused: bool) -> ClusterInfo:
    return ClusterInfo(
        name=state.name,
        state_dir=layout.root,
        kubeconfig=layout.kubeconfig,
        server=state.server,
        ca_file=layout.ca_cert,
        admin_cert=layout.admin_cert,
        admin_key=layout.admin_key,
        version=state.kubernetes_version,
        etcd_version=state.etcd_version,
        etcd_endpoint=f"http://{LOOPBACK}:{state.etcd_client_port}",
        apiserver_port=state.apiserver_port,
        reused=reused,
    )


def _start(
    layout: Layout,
    binaries: Binaries,
    *,
    apiserver_args: Sequence[str],
    etcd_args: Sequence[str],
    timeout: float,
    progress: Progress | None,
) -> ClusterInfo:
    started = time.monotonic()
    layout.root.mkdir(parents=True)
    state = ClusterState(
        name=layout.name,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        kubernetes_version=binaries.kubernetes_version,
        etcd_version=binaries.etcd_version,
        apiserver_args=list(apiserver_args),
        etcd_args=list(etcd_args),
    )
    save_state(layout, state)

    def recorder(index: int) -> Callable[[ProcessRecord | None], None]:
        def record(process: ProcessRecord | None) -> None:
            del state.processes[index:]
            if process is not None:
                state.processes.append(process)
            save_state(layout, state)

        return record

    try:
        ca = _write_pki(layout)
        context = _admin_context(layout)

        if progress is not None:
            progress(f"starting etcd {binaries.etcd_version}")
        _, (client, peer) = launch(
            "etcd",
            2,
            lambda p: _etcd_argv(binaries, layout, p[0], p[1], etcd_args),
            layout.logs / "etcd.log",
            lambda p: lambda: _http.probe(f"http://{LOOPBACK}:{p[0]}/health") is not None,
            timeout=timeout,
            on_spawn=recorder(0),
            progress=progress,
            cwd=layout.root,
        )
        state.etcd_client_port, state.etcd_peer_port = client, peer
        save_state(layout, state)

        if progress is not None:
            progress(f"etcd is up on {LOOPBACK}:{client}; starting kube-apiserver")
        _, (port,) = launch(
            "kube-apiserver",
            1,
            lambda p: _apiserver_argv(binaries, layout, p[0], client, apiserver_args),
            layout.logs / "kube-apiserver.log",
            lambda p: lambda: _apiserver_ready(f"https://{LOOPBACK}:{p[0]}", context),
            timeout=timeout,
            on_spawn=recorder(1),
            progress=progress,
            cwd=layout.root,
        )
        state.apiserver_port = port
        state.server = f"https://{LOOPBACK}:{port}"
        save_state(layout, state)
        # /readyz is "ok" a moment before the namespace controller has created "default".
        wait_until(
            state.processes[-1],
            "kube-apiserver",
            lambda: _default_namespace_exists(state.server, context),
            timeout,
        )
        admin_cert = layout.admin_cert.read_bytes()
        admin_key = layout.admin_key.read_bytes()
        _write_private(
            layout.kubeconfig,
            kubeconfig_yaml(
                layout.name,
                state.server,
                ca_pem=ca.cert_pem,
                user=ADMIN_USER,
                cert_pem=admin_cert,
                key_pem=admin_key,
            ),
        )
    except BaseException:
        terminate(list(reversed(state.processes)), grace=2.0)
        shutil.rmtree(layout.etcd_data, ignore_errors=True)
        save_state(layout, state)
        raise
    if progress is not None:
        progress(
            f"cluster {layout.name!r} is up in {time.monotonic() - started:.1f}s: kube-apiserver "
            f"{binaries.kubernetes_version} at {state.server}, etcd {binaries.etcd_version} at "
            f"{LOOPBACK}:{state.etcd_client_port}"
        )
    return _info(state, layout, reused=False)


def _stop(state: ClusterState, grace: float) -> None:
    """Components first (newest first), then kube-apiserver, then etcd."""
    terminate([*reversed(state.components), *reversed(state.processes)], grace=grace)


def _is_up(state: ClusterState, layout: Layout, timeout: float) -> bool:
    """Whether the recorded etcd and kube-apiserver are alive and the apiserver gets ready."""
    if not (state.server and state.processes and all(is_running(p) for p in state.processes)):
        return False
    if not layout.kubeconfig.exists():
        return False
    context = _admin_context(layout)
    try:
        wait_until(
            state.processes[-1],
            "kube-apiserver",
            lambda: _apiserver_ready(state.server, context),
            timeout,
        )
    except ClusterStartError:
        return False
    return True


# --- public operations -----------------------------------------------------------------------


def up(
    name: str = DEFAULT_NAME,
    *,
    apiserver_args: Sequence[str] = (),
    etcd_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    progress: Progress | None = None,
) -> ClusterInfo:
    """Start the cluster ``name``, or reuse it if it is already running.

    The binaries are built first if they are not cached. ``apiserver_args`` and ``etcd_args``
    come after the defaults, so they add flags or override defaults (the last value of a flag
    wins). A running cluster is reused as it is, with the flags it was started with; a cluster
    whose processes died is cleaned up and started afresh. If etcd or kube-apiserver does not
    come up within ``timeout`` seconds, everything started is stopped and the error carries the
    tail of the failing log; the state directory stays (without etcd data) for its logs.
    """
    name = validate_name(name)
    layout = Layout(clusters_dir() / name)
    with cluster_lock(layout.root.parent, name, progress):
        existing = load_state(layout)
        if existing is not None and _is_up(existing, layout, timeout):
            if progress is not None:
                progress(
                    f"cluster {name!r} is already running at {existing.server}; reusing it "
                    f"(kubeconfig {layout.kubeconfig})"
                )
                if (list(apiserver_args), list(etcd_args)) != (
                    existing.apiserver_args,
                    existing.etcd_args,
                ):
                    progress(
                        "  note: it keeps the flags it was started with "
                        f"({' '.join(existing.apiserver_args) or 'no extra flags'}); run "
                        f"`kubesched cluster down --name {name}` first to change them"
                    )
            return _info(existing, layout, reused=True)
        if layout.root.exists():
            if progress is not None:
                progress(f"cluster {name!r} left stale state in {layout.root}; cleaning it up")
            if existing is not None:
                _stop(existing, DEFAULT_GRACE)
            shutil.rmtree(layout.root)
        binaries = ensure_binaries(progress)
        return _start(
            layout,
            binaries,
            apiserver_args=apiserver_args,
            etcd_args=etcd_args,
            timeout=timeout,
            progress=progress,
        )


def down(name: str = DEFAULT_NAME, *, grace: float = DEFAULT_GRACE) -> bool:
    """Stop every process of cluster ``name`` and remove its state directory.

    Each process group gets SIGTERM, then SIGKILL after ``grace`` seconds. Returns False if
    there was no such cluster.
    """
    name = validate_name(name)
    layout = Layout(clusters_dir() / name)
    with cluster_lock(layout.root.parent, name):
        if not layout.root.exists():
            return False
        state = load_state(layout)
        if state is not None:
            _stop(state, grace)
        shutil.rmtree(layout.root)
        return True


def info(name: str = DEFAULT_NAME) -> ClusterInfo | None:
    """The running cluster ``name`` (without starting anything), or None."""
    layout = Layout(clusters_dir() / validate_name(name))
    state = load_state(layout)
    if state is None or not state.server or not state.processes:
        return None
    if not all(is_running(p) for p in state.processes):
        return None
    return _info(state, layout, reused=True)


def _process_status(record: ProcessRecord) -> ProcessStatus:
    return ProcessStatus(record.name, record.pid, is_running(record), Path(record.log))


def status() -> list[ClusterStatus]:
    """Every cluster under the state directory, sorted by name."""
    root = clusters_dir()
    if not root.is_dir():
        return []
    found: list[ClusterStatus] = []
    for directory in sorted(root.iterdir()):
        if not directory.is_dir() or directory.name.startswith("."):
            continue
        layout = Layout(directory)
        state = load_state(layout)
        processes = tuple(_process_status(p) for p in state.processes) if state else ()
        components = tuple(_process_status(c) for c in state.components) if state else ()
        alive = [p.running for p in processes]
        if state is not None and state.server and alive and all(alive):
            condition = "running"
        elif any(alive):
            condition = "degraded"
        else:
            condition = "stopped"
        found.append(
            ClusterStatus(
                name=directory.name,
                state=condition,
                state_dir=directory,
                kubeconfig=layout.kubeconfig if layout.kubeconfig.exists() else None,
                server=state.server if state else "",
                apiserver_port=state.apiserver_port if state else 0,
                etcd_client_port=state.etcd_client_port if state else 0,
                version=state.kubernetes_version if state else "",
                processes=processes,
                components=components,
            )
        )
    return found
