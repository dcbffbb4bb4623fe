"""Extra processes tied to a running cluster (kube-scheduler for comparisons, for instance).

A component is recorded in the cluster's ``state.json``; ``down`` stops it with the rest.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.cluster import _http
from kubesched.cluster._binaries import Progress, ensure_binaries
from kubesched.cluster._controlplane import info, launch
from kubesched.cluster._errors import ClusterError
from kubesched.cluster._paths import clusters_dir
from kubesched.cluster._ports import LOOPBACK
from kubesched.cluster._process import DEFAULT_GRACE, ProcessRecord, is_running, terminate
from kubesched.cluster._state import (
    DEFAULT_NAME,
    Layout,
    cluster_lock,
    load_state,
    save_state,
    validate_name,
)

KUBE_SCHEDULER_USER = "system:kube-scheduler"
_SETTLE = 1.0
_METRICS_WAIT = 10.0


@dataclass(frozen=True)
class ComponentInfo:
    """A component process started by :func:`start_component`."""

    cluster: str
    name: str
    pid: int
    port: int | None
    log: Path
    directory: Path

    @property
    def url(self) -> str | None:
        """``https://127.0.0.1:<port>`` when the component serves on a port."""
        return None if self.port is None else f"https://{LOOPBACK}:{self.port}"


def start_component(
    name: str,
    argv: Sequence[str] | Callable[[int], Sequence[str]],
    *,
    cluster: str = DEFAULT_NAME,
    health_path: str = "/healthz",
    health_scheme: str = "https",
    timeout: float = 60.0,
    progress: Progress | None = None,
) -> ComponentInfo:
    """Start a process tied to ``cluster`` and record it so that ``down`` stops it too.

    ``argv`` is either a fixed command line (ready once it has stayed alive for a second) or a
    function of a free loopback port, in which case the component is ready when
    ``<health_scheme>://127.0.0.1:<port><health_path>`` answers 200 (TLS not verified), and is
    restarted on another port if that one was taken meanwhile. Its output goes to
    ``<state dir>/components/<name>/<name>.log``.
    """
    cluster = validate_name(cluster)
    name = validate_name(name)
    layout = Layout(clusters_dir() / cluster)
    with cluster_lock(layout.root.parent, cluster, progress):
        state = load_state(layout)
        if state is None or not state.processes or not all(is_running(p) for p in state.processes):
            raise ClusterError(
                f"cluster {cluster!r} is not running; start it with "
                f"`kubesched cluster up --name {cluster}`"
            )
        for existing in state.components:
            if existing.name == name and is_running(existing):
                raise ClusterError(
                    f"component {name!r} of cluster {cluster!r} is already running "
                    f"(pid {existing.pid}); stop it first"
                )
        state.components = [c for c in state.components if c.name != name]
        directory = layout.components / name
        directory.mkdir(parents=True, exist_ok=True)

        def record(process: ProcessRecord | None) -> None:
            state.components = [c for c in state.components if c.name != name]
            if process is not None:
                state.components.append(process)
            save_state(layout, state)

        if callable(argv):
            command = argv
            context = _http.insecure_context()

            def ready_for(ports: list[int]) -> Callable[[], bool]:
                url = f"{health_scheme}://{LOOPBACK}:{ports[0]}{health_path}"
                return lambda: _http.probe(url, context) is not None

            process, ports = launch(
                name,
                1,
                lambda p: command(p[0]),
                directory / f"{name}.log",
                ready_for,
                timeout=timeout,
                on_spawn=record,
                progress=progress,
                cwd=directory,
            )
            port: int | None = ports[0]
        else:
            fixed = list(argv)

            def settled(_: list[int]) -> Callable[[], bool]:
                since = time.monotonic()
                return lambda: time.monotonic() - since >= _SETTLE

            process, _ = launch(
                name,
                0,
                lambda _: fixed,
                directory / f"{name}.log",
                settled,
                timeout=timeout,
                on_spawn=record,
                progress=progress,
                cwd=directory,
            )
            port = None
        process.extra["port"] = port
        save_state(layout, state)
        return ComponentInfo(cluster, name, process.pid, port, Path(process.log), directory)


def stop_component(name: str, *, cluster: str = DEFAULT_NAME, grace: float = DEFAULT_GRACE) -> bool:
    """Stop a component (SIGTERM, SIGKILL after ``grace``); False if there was none."""
    cluster = validate_name(cluster)
    layout = Layout(clusters_dir() / cluster)
    with cluster_lock(layout.root.parent, cluster):
        state = load_state(layout)
        if state is None:
            return False
        mine = [c for c in state.components if c.name == name]
        if not mine:
            return False
        terminate(mine, grace=grace)
        state.components = [c for c in state.components if c.name != name]
        save_state(layout, state)
        return True


def scheduler_config(config: Path | None, kubeconfig: Path) -> dict[str, Any]:
    """A KubeSchedulerConfiguration (from ``config`` or empty) that connects with
    ``kubeconfig``: with ``--config``, kube-scheduler ignores its ``--kubeconfig`` flag."""
    document: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
    }
    if config is not None:
        loaded = yaml.safe_load(config.read_text())
        if not isinstance(loaded, dict):
            raise ClusterError(f"{config} is not a KubeSchedulerConfiguration document")
        document = loaded
    connection = document.get("clientConnection") or {}
    document["clientConnection"] = {**connection, "kubeconfig": str(kubeconfig)}
    return document


def start_kube_scheduler(
    config: Path | None = None,
    *,
    cluster: str = DEFAULT_NAME,
    kubeconfig: Path | None = None,
    name: str = "kube-scheduler",
    extra_args: Sequence[str] = (),
    timeout: float = 60.0,
    progress: Progress | None = None,
) -> ComponentInfo:
    """Run the built kube-scheduler against ``cluster`` with a KubeSchedulerConfiguration.

    ``config`` is copied with ``clientConnection.kubeconfig`` set to ``kubeconfig`` (default: a
    kubeconfig for ``system:kube-scheduler``, minted on the spot). It serves HTTPS (health,
    metrics) on a free loopback port and delegates authentication and authorization to the
    apiserver, so the cluster's admin certificate can read its ``/metrics``.
    """
    running = info(cluster)
    if running is None:
        raise ClusterError(
            f"cluster {cluster!r} is not running; start it with "
            f"`kubesched cluster up --name {cluster}`"
        )
    binaries = ensure_binaries(progress)
    if kubeconfig is None:
        kubeconfig = running.client_kubeconfig(KUBE_SCHEDULER_USER)
    directory = running.state_dir / "components" / validate_name(name)
    directory.mkdir(parents=True, exist_ok=True)
    config_file = directory / "config.yaml"
    config_file.write_text(yaml.safe_dump(scheduler_config(config, kubeconfig), sort_keys=False))

    def argv(port: int) -> list[str]:
        return [
            str(binaries.kube_scheduler),
            f"--config={config_file}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            *extra_args,
        ]

    started = start_component(name, argv, cluster=cluster, timeout=timeout, progress=progress)
    # /healthz answers before kube-scheduler has loaded the client CA from the apiserver; until
    # then /metrics turns the admin certificate away. Give it a few seconds (best effort: a
    # kubeconfig without delegation rights never gets there).
    context = running.ssl_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    deadline = time.monotonic() + _METRICS_WAIT
    while time.monotonic() < deadline:
        if _http.probe(f"{started.url}/metrics", context) is not None:
            break
        time.sleep(0.2)
    return started
