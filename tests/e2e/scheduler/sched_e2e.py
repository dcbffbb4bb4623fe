"""Helpers for the end-to-end tests of ``kubesched run`` against a real kube-apiserver.

* :class:`SchedulerProcess`: the real ``kubesched run`` as a subprocess, its log, its health
  listener and its metrics.
* Manifests (built from ``tests/builders.py``) and small API shortcuts on the admin client.
* :func:`eventually`: poll until a condition holds, failing with what was last seen.
* :class:`RestartableAPIServer`: stop and start the kube-apiserver of a cluster of its own
  (``kubesched.cluster`` has no restart of its own).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec
import pytest
from prometheus_client.parser import text_string_to_metric_families

from builders import make_node, make_pod
from kubesched.cluster import ClusterInfo
from kubesched.config import format_duration

T = TypeVar("T")

#: Label on every node these tests create, so leftovers of an interrupted run can be found.
OWNER_LABEL = "e2e.kubesched.io/suite"
OWNER = "scheduler"

REPO = Path(__file__).resolve().parents[3]


class Response(Protocol):
    """An answer of the admin client (``tests/e2e/conftest.py``)."""

    @property
    def status(self) -> int: ...

    @property
    def body(self) -> bytes: ...

    def json(self) -> Any: ...

    def expect(self, *statuses: int) -> Response: ...


class Client(Protocol):
    """The ``admin_client`` fixture's client, as these helpers use it."""

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Response: ...

    def get(self, path: str, **params: str) -> Response: ...

    def post(self, path: str, body: Any) -> Response: ...

    def patch(self, path: str, body: Any) -> Response: ...

    def delete(self, path: str) -> Response: ...


def client_for(info: ClusterInfo, like: Client) -> Client:
    """A client of the same kind as ``like``, for another cluster (as its admin)."""
    make: Callable[[str, ssl.SSLContext], Client] = type(like)
    return make(info.server, info.ssl_context())


MakeNodes = Callable[[list[dict[str, Any]]], None]
"""The ``make_nodes`` fixture: create these node manifests, delete them after the test."""


# --- the scheduler process --------------------------------------------------------------------


def kubesched_argv() -> list[str]:
    """How to start the ``kubesched`` command of this interpreter's installation."""
    script = Path(sys.executable).parent / "kubesched"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from kubesched.cli import main; sys.exit(main())"]


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def scheduler_config(
    profile: str,
    *,
    leader_elect: bool = False,
    lease_name: str = "kubesched-e2e",
    lease_namespace: str = "default",
    lease_duration: str = "15s",
    renew_deadline: str = "10s",
    retry_period: str = "2s",
    qps: int = 500,
    burst: int = 1000,
    profile_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A KubeSchedulerConfiguration with one profile named ``profile``."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": leader_elect,
            "resourceName": lease_name,
            "resourceNamespace": lease_namespace,
            "leaseDuration": lease_duration,
            "renewDeadline": renew_deadline,
            "retryPeriod": retry_period,
        },
        "clientConnection": {"qps": qps, "burst": burst},
        "profiles": [{"schedulerName": profile, **(profile_fields or {})}],
    }


@dataclass
class SchedulerProcess:
    """One ``kubesched run`` process; its output goes to ``log_path``."""

    name: str
    argv: list[str]
    port: int
    log_path: Path
    popen: subprocess.Popen[bytes]
    host: str = "127.0.0.1"
    started: float = field(default_factory=time.monotonic)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def get(self, path: str, timeout: float = 5.0, host: str | None = None) -> tuple[int, str]:
        """``GET`` on the health listener: the status and the body."""
        url = f"http://{host or self.host}:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                return int(answer.status), answer.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until ``/readyz`` answers 200; fail with the log if the process exits first."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if not self.alive():
                pytest.fail(
                    f"{self.name} exited with {self.popen.returncode} before it was ready:\n"
                    + tail(self.log())
                )
            try:
                code, body = self.get("/readyz", timeout=2.0)
            except OSError as err:
                last = str(err)
            else:
                if code == 200:
                    return
                last = f"{code} {body}"
            time.sleep(0.1)
        pytest.fail(f"{self.name} not ready after {timeout}s ({last}):\n" + tail(self.log()))

    def wait_exit(self, timeout: float) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {timeout}s:\n" + tail(self.log()))

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (a clean stop: leases released, events flushed), SIGKILL if it hangs."""
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return int(self.popen.returncode)

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind, as when a node dies."""
        if self.alive():
            self.popen.kill()
        self.popen.wait(10)

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        """The ``/metrics`` samples by name (``scheduler_schedule_attempts_total``, ...)."""
        code, body = self.get("/metrics")
        assert code == 200, body
        samples: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(body):
            for sample in family.samples:
                samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
        return samples

    def metric(self, name: str, **labels: str) -> float | None:
        """The value of the one sample of ``name`` with these labels, or None."""
        found = [
            value
            for have, value in self.metrics().get(name, [])
            if all(have.get(k) == v for k, v in labels.items())
        ]
        assert len(found) <= 1, (name, labels, found)
        return found[0] if found else None


class StartScheduler(Protocol):
    """The `kubesched` fixture: start a scheduler with this configuration."""

    def __call__(
        self,
        config: Mapping[str, Any] | Path,
        *,
        kubeconfig: Path | None = None,
        name: str = "kubesched",
        identity: str | None = None,
        wait_ready: bool = True,
    ) -> SchedulerProcess: ...


def start_scheduler(
    config: Mapping[str, Any] | Path,
    directory: Path,
    *,
    kubeconfig: Path,
    name: str = "kubesched",
    identity: str | None = None,
    extra_args: Sequence[str] = (),
) -> SchedulerProcess:
    """Start ``kubesched run`` on a free loopback port (not waiting for it to be ready)."""
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(config, Path):
        config_file = config
    else:
        config_file = directory / f"{name}.yaml"
        config_file.write_text(json.dumps(config, indent=2))
    port = free_port()
    log_path = directory / f"{name}.log"
    argv = [
        *kubesched_argv(),
        "run",
        f"--config={config_file}",
        f"--kubeconfig={kubeconfig}",
        f"--port={port}",
        "--log-level=INFO",
        *([f"--identity={identity}"] if identity else []),
        *extra_args,
    ]
    with open(log_path, "ab") as out:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    return SchedulerProcess(name, argv, port, log_path, popen)


class Runner:
    """Starts schedulers for one test (or module) and stops them all at the end."""

    def __init__(self, directory: Path, kubeconfig: Path) -> None:
        self.directory = directory
        self.kubeconfig = kubeconfig
        self.started: list[SchedulerProcess] = []

    def __call__(
        self,
        config: Mapping[str, Any] | Path,
        *,
        kubeconfig: Path | None = None,
        name: str = "kubesched",
        identity: str | None = None,
        wait_ready: bool = True,
    ) -> SchedulerProcess:
        proc = start_scheduler(
            config,
            self.directory,
            kubeconfig=kubeconfig or self.kubeconfig,
            name=name,
            identity=identity,
        )
        self.started.append(proc)
        if wait_ready:
            proc.wait_ready()
        return proc

    def close(self) -> None:
        for proc in self.started:
            proc.stop()
        for proc in self.started:
            # Captured: pytest shows it for a failed test only.
            print(f"\n===== {proc.name} (exit {proc.popen.returncode}), {proc.log_path} =====")
            print(tail(proc.log(), 300))


def tail(text: str, lines: int = 150) -> str:
    kept = text.splitlines()[-lines:]
    return "\n".join(kept)


# --- kube-scheduler's messages --------------------------------------------------------------

#: DefaultPreemption's reasons per node, when it runs as PostFilter.
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


#: DynamicResources' PostFilter part for a pod without resource claims, before preemption's.
NO_CLAIMS = "no new claims to deallocate"


def fit_error(nodes: int, reasons: Mapping[str, int], preemption: Mapping[str, int]) -> str:
    """kube-scheduler's FitError message for ``nodes`` nodes with the default profile, as
    v1.34.4 writes it for a pod without resource claims.

    ``0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match ....``, then the
    PostFilter plugins' parts: DynamicResources' ``no new claims to deallocate``, and
    DefaultPreemption's ``preemption: 0/3 nodes are available: 3 Preemption is not helpful for
    scheduling.`` Reasons are sorted as strings, counts included, as kube-scheduler sorts them.
    """

    def histogram(counts: Mapping[str, int]) -> str:
        return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))

    return (
        f"0/{nodes} nodes are available: {histogram(reasons)}. {NO_CLAIMS}, "
        f"preemption: 0/{nodes} nodes are available: {histogram(preemption)}."
    )


# --- manifests ------------------------------------------------------------------------------


def node_manifest(
    name: str,
    *,
    cpu: str = "4",
    memory: str = "8Gi",
    pods: str = "110",
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    unschedulable: bool = False,
) -> dict[str, Any]:
    """A Ready node (``make_node``) as the API takes it, labelled as ours."""
    node = make_node(
        name,
        cpu=cpu,
        memory=memory,
        pods=pods,
        labels={"kubernetes.io/hostname": name, OWNER_LABEL: OWNER, **(labels or {})},
        taints=taints,
        unschedulable=unschedulable,
    )
    body: dict[str, Any] = json.loads(msgspec.json.encode(node))
    body["metadata"].pop("uid", None)
    return {"apiVersion": "v1", "kind": "Node", **body}


def pod_manifest(
    name: str,
    namespace: str,
    scheduler_name: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
    node_name: str = "",
    host_port: int | None = None,
    spec: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod (``make_pod``) for ``scheduler_name``, as the API takes it."""
    pod = make_pod(
        name,
        namespace=namespace,
        cpu=cpu,
        memory=memory,
        node_name=node_name,
        labels=labels,
        spec={"schedulerName": scheduler_name, **(spec or {})},
    )
    body: dict[str, Any] = json.loads(msgspec.json.encode(pod))
    body["metadata"].pop("uid", None)
    body.pop("status", None)
    if host_port is not None:
        body["spec"]["containers"][0]["ports"] = [
            {"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}
        ]
    return {"apiVersion": "v1", "kind": "Pod", **body}


# --- API shortcuts --------------------------------------------------------------------------


def create_node(client: Client, manifest: Mapping[str, Any]) -> None:
    client.post("/api/v1/nodes", manifest).expect(201)


def create_pod(client: Client, manifest: Mapping[str, Any]) -> None:
    namespace = manifest["metadata"]["namespace"]
    client.post(f"/api/v1/namespaces/{namespace}/pods", manifest).expect(201)


def create_all(
    client: Client,
    create: Callable[[Client, Mapping[str, Any]], None],
    manifests: Iterable[Mapping[str, Any]],
    workers: int = 8,
) -> None:
    """Create many objects over a few connections at once (one at a time is slow)."""
    with ThreadPoolExecutor(workers) as pool:
        for _ in pool.map(lambda m: create(client, m), manifests):
            pass


def get_pod(client: Client, namespace: str, name: str) -> dict[str, Any]:
    pod: dict[str, Any] = (
        client.get(f"/api/v1/namespaces/{namespace}/pods/{name}").expect(200).json()
    )
    return pod


def list_pods(client: Client, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = (
        client.get(f"/api/v1/namespaces/{namespace}/pods").expect(200).json()["items"]
    )
    return items


def list_nodes(client: Client, **params: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = client.get("/api/v1/nodes", **params).expect(200).json()["items"]
    return items


def list_events(client: Client, namespace: str) -> list[dict[str, Any]]:
    """``events.k8s.io/v1`` Events of a namespace."""
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    items: list[dict[str, Any]] = client.get(path).expect(200).json()["items"]
    return items


def events_about(
    events: Iterable[Mapping[str, Any]], pod: str, reason: str
) -> list[Mapping[str, Any]]:
    return [e for e in events if e["regarding"]["name"] == pod and e["reason"] == reason]


def occurrences(event: Mapping[str, Any]) -> int:
    """How many times an Event happened (its series count, or once)."""
    series = event.get("series") or {}
    return int(series.get("count", 1))


def condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in pod.get("status", {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return None


def node_of(client: Client, namespace: str, name: str) -> str:
    return str(get_pod(client, namespace, name)["spec"].get("nodeName", ""))


def delete_pods(client: Client, namespace: str) -> None:
    """Every pod of the namespace, at once (no kubelet would ever finish a graceful delete)."""
    client.request(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods", params={"gracePeriodSeconds": "0"}
    )


def delete_node(client: Client, name: str) -> None:
    client.delete(f"/api/v1/nodes/{name}")


# --- waiting --------------------------------------------------------------------------------


def eventually(
    probe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    what: str,
    interval: float = 0.2,
    watch: SchedulerProcess | Sequence[SchedulerProcess] = (),
) -> T:
    """Poll ``probe()`` until ``done`` holds for its value, which is returned.

    Fails after ``timeout`` seconds with ``what`` and the last value; also as soon as one of
    the ``watch``ed schedulers exits, with its log.
    """
    watched = [watch] if isinstance(watch, SchedulerProcess) else list(watch)
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        for proc in watched:
            if not proc.alive():
                pytest.fail(
                    f"{proc.name} exited with {proc.popen.returncode} while waiting for "
                    f"{what}:\n{tail(proc.log())}"
                )
        if time.monotonic() >= deadline:
            shown = repr(value)
            pytest.fail(f"timed out after {timeout}s waiting for {what}; last seen: {shown[:3000]}")
        time.sleep(interval)


def bound(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pods if p["spec"].get("nodeName")]


def requests_of(pod: Mapping[str, Any]) -> dict[str, int]:
    """cpu (millicores) and memory (bytes) a pod requests: containers summed (no init ones)."""
    total = {"cpu": 0, "memory": 0}
    for c in pod["spec"]["containers"]:
        req = (c.get("resources") or {}).get("requests") or {}
        total["cpu"] += parse_cpu(req.get("cpu", "0"))
        total["memory"] += parse_memory(req.get("memory", "0"))
    return total


def parse_cpu(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_memory(q: str) -> int:
    for suffix, factor in _BINARY.items():
        if q.endswith(suffix):
            return int(q[: -len(suffix)]) * factor
    return int(q)


# --- a kube-apiserver that can be restarted ---------------------------------------------------


class RestartableAPIServer:
    """Stop and start again the kube-apiserver of a cluster this test started for itself.

    The apiserver's command line and log come from the cluster's ``state.json``. The restarted
    process is this object's child; :meth:`close` stops it, so call it before
    ``cluster.down`` (which stops etcd and the processes it recorded).
    """

    def __init__(self, info: ClusterInfo) -> None:
        self.info = info
        state = json.loads((info.state_dir / "state.json").read_text())
        [record] = [p for p in state["processes"] if p["name"] == "kube-apiserver"]
        self.argv: list[str] = list(record["argv"])
        self.log = Path(record["log"])
        self._pid: int = int(record["pid"])
        self._popen: subprocess.Popen[bytes] | None = None
        context = ssl.create_default_context(cafile=str(info.ca_file))
        context.load_cert_chain(str(info.admin_cert), str(info.admin_key))
        self._context = context

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.info.server}/readyz", timeout=2, context=self._context
            ) as answer:
                return bool(answer.read() == b"ok")
        except (OSError, urllib.error.URLError):
            return False

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 5.0) -> None:
        """SIGTERM as on a rolling restart, or SIGKILL as in a crash.

        After SIGTERM, kube-apiserver closes its listener at once but keeps open watches until
        its shutdown times out; like a kubelet at the end of the grace period, SIGKILL follows
        after ``timeout``.
        """
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._pid, signum)
        if not _gone(self._pid, self._popen, timeout):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pid, signal.SIGKILL)
            _gone(self._pid, self._popen, 10.0)

    def start(self, timeout: float = 60.0) -> None:
        """The same command line again (same port, certificates and etcd)."""
        with open(self.log, "ab") as out:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.info.state_dir,
                start_new_session=True,
            )
        self._pid = self._popen.pid
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self._popen.poll() is not None:
                pytest.fail(f"kube-apiserver did not restart:\n{tail(self.log.read_text())}")
            if time.monotonic() > deadline:
                pytest.fail(f"kube-apiserver not ready after {timeout}s")
            time.sleep(0.1)

    def close(self) -> None:
        if self._popen is not None and self._popen.poll() is None:
            self.stop()


def _gone(pid: int, popen: subprocess.Popen[bytes] | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen is not None:
            if popen.poll() is not None:
                return True
        else:
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return True
            if stat[stat.rfind(")") + 2 :].split(" ", 1)[0] in ("Z", "X"):
                return True
        time.sleep(0.05)
    return False


@contextlib.contextmanager
def apiserver_restarter(info: ClusterInfo) -> Iterator[RestartableAPIServer]:
    server = RestartableAPIServer(info)
    try:
        yield server
    finally:
        server.close()


class _ScenarioScheduler:
    """A running ``kubesched run`` as the dynamics scenarios read it: its metrics."""

    def __init__(self, process: SchedulerProcess) -> None:
        self.process = process

    def metrics(self) -> str:
        code, body = self.process.get("/metrics")
        if code != 200:
            raise RuntimeError(f"/metrics answered {code}: {body}")
        return body


def scenario_launcher(
    kubeconfig: Path, directory: Path, *, show_log: bool = False
) -> Callable[[Mapping[str, Any], Any], contextlib.AbstractContextManager[_ScenarioScheduler]]:
    """A launcher of ``kubesched run`` (at DEBUG) for ``conformance.dynamics.run``: started with
    a scenario's configuration and ``podMaxInUnschedulablePodsDuration``, stopped when the
    scenario ends (printing the end of its log if ``show_log``)."""

    @contextlib.contextmanager
    def launch(config: Mapping[str, Any], scenario: Any) -> Iterator[_ScenarioScheduler]:
        extra = ["--log-level=DEBUG"]
        if scenario.max_in_unschedulable is not None:
            duration = format_duration(float(scenario.max_in_unschedulable))
            extra.append(f"--pod-max-in-unschedulable-pods-duration={duration}")
        process = start_scheduler(
            config, directory / scenario.name, kubeconfig=kubeconfig, extra_args=extra
        )
        try:
            process.wait_ready()
            yield _ScenarioScheduler(process)
        finally:
            process.popen.terminate()
            process.wait_exit(30)
            if show_log:
                print(process.log()[-20000:])

    return launch
