"""A real Prometheus scraping a test exporter, for the end-to-end tests of NetworkTraffic, the
safe plugins and ``kubesched annotate-nodes``.

* :class:`Exporter`: an HTTP server on loopback serving ``/metrics`` in the text format. Tests
  add series (a counter growing at a set rate, a gauge, or any function of time) and change
  them while it runs. Every sample carries its own timestamp (the time the scrape is answered),
  and a counter's value is exactly ``rate * (timestamp - start)``, so ``rate()`` over the scraped
  samples is the set rate.
* :class:`PrometheusServer`: Debian's ``prometheus`` binary on a free 127.0.0.1 port with a
  temporary data directory, scraping the exporter every second with ``honor_labels`` (the
  series' own ``instance`` labels are kept, for joins on ``node_uname_info``).
* :func:`shared_prometheus`: one exporter and one Prometheus for the whole session, started by
  the first test that needs them and stopped when the last module using them is done.

The node exporter's series names are the real ones; the node name is carried in
``kubernetes_node`` as the plugins and the annotator read by default.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODE_LABEL = "kubernetes_node"
SCRAPE_INTERVAL = 1.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True)
class _Key:
    name: str
    labels: tuple[tuple[str, str], ...]


class Exporter:
    """Series whose values the test controls, served at ``http://127.0.0.1:<port>/metrics``."""

    def __init__(self) -> None:
        self._series: dict[_Key, Callable[[int], float]] = {}
        self._types: dict[str, str] = {}
        self._lock = threading.Lock()
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = exporter.render(time.time()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set(
        self, name: str, labels: Mapping[str, str], value: Callable[[int], float], kind: str
    ) -> None:
        """``value`` of the sample's timestamp in milliseconds."""
        with self._lock:
            self._types[name] = kind
            self._series[_Key(name, tuple(sorted(labels.items())))] = value

    def counter(self, name: str, labels: Mapping[str, str], rate: float) -> None:
        """A counter growing by ``rate`` per second from now (so ``rate()`` gives ``rate``)."""
        start = int(time.time() * 1000)
        self.set(name, labels, lambda ms: rate * (ms - start) / 1000, "counter")

    def gauge(self, name: str, labels: Mapping[str, str], value: float) -> None:
        self.set(name, labels, lambda ms: value, "gauge")

    def remove(self, **labels: str) -> None:
        """Every series having all of these labels."""
        with self._lock:
            for key in list(self._series):
                have = dict(key.labels)
                if all(have.get(k) == v for k, v in labels.items()):
                    del self._series[key]

    def render(self, now: float) -> str:
        stamp = int(now * 1000)
        lines: list[str] = []
        with self._lock:
            series = sorted(self._series.items(), key=lambda kv: (kv[0].name, kv[0].labels))
            types = dict(self._types)
        typed: set[str] = set()
        for key, value in series:
            if key.name not in typed:
                lines.append(f"# TYPE {key.name} {types[key.name]}")
                typed.add(key.name)
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in key.labels)
            lines.append(f"{key.name}{{{labels}}} {value(stamp):.17g} {stamp}")
        return "\n".join(lines) + "\n"

    # -- the node exporter's series --------------------------------------------------------------

    def node_traffic(self, node: str, device: str, rate: float, instance: str = "") -> None:
        labels = {"device": device, NODE_LABEL: node}
        if instance:
            labels["instance"] = instance
        self.counter("node_network_receive_bytes_total", labels, rate)

    def node_uname(self, instance: str, nodename: str) -> None:
        self.gauge(
            "node_uname_info", {"instance": instance, "nodename": nodename, "sysname": "Linux"}, 1
        )

    def node_idle_cpu(self, node: str, cores: float, cpus: int = 2) -> None:
        """``node_cpu_seconds_total{mode="idle"}`` over ``cpus`` CPUs adding up to ``cores``."""
        for cpu in range(cpus):
            labels = {"cpu": str(cpu), "mode": "idle", NODE_LABEL: node}
            self.counter("node_cpu_seconds_total", labels, cores / cpus)
        # busy time too, which the annotator must not count
        self.counter("node_cpu_seconds_total", {"cpu": "0", "mode": "user", NODE_LABEL: node}, 0.7)

    def node_free_memory(self, node: str, value: float | Callable[[int], float]) -> None:
        """Free memory in bytes: fixed, or a function of the sample's time in milliseconds."""
        if callable(value):
            self.set("node_memory_MemAvailable_bytes", {NODE_LABEL: node}, value, "gauge")
        else:
            self.gauge("node_memory_MemAvailable_bytes", {NODE_LABEL: node}, value)


class PrometheusServer:
    """``prometheus`` scraping ``targets`` every second; with ``rules`` (groups of recording
    rules, as a rule file holds them) evaluated every second too."""

    def __init__(
        self,
        targets: list[str],
        directory: Path,
        rules: list[dict[str, Any]] | None = None,
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            pytest.fail(
                "prometheus is not installed: `make test` installs Debian's package "
                "(apt-get install prometheus)"
            )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = directory / "prometheus.yml"
        settings: dict[str, Any] = {
            "global": {
                "scrape_interval": "1s",
                "scrape_timeout": "1s",
                "evaluation_interval": "1s",
            },
            "scrape_configs": [
                {
                    "job_name": "test-exporter",
                    "honor_labels": True,
                    "static_configs": [{"targets": targets}],
                }
            ],
        }
        if rules:
            rule_file = directory / "rules.yml"
            rule_file.write_text(json.dumps({"groups": rules}))
            settings["rule_files"] = [str(rule_file)]
        config.write_text(json.dumps(settings))
        self.log_path = directory / "prometheus.log"
        with open(self.log_path, "wb") as log:
            self.popen = subprocess.Popen(
                [
                    binary,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--storage.tsdb.retention.time=1h",
                    "--log.level=warn",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                pytest.fail(f"prometheus exited with {self.popen.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=1) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        pytest.fail(f"prometheus not ready after {timeout}s:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-5000:]
        except OSError:
            return ""

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = urllib.parse.urlencode({"query": expr}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=10) as a:
            doc = json.loads(a.read())
        assert doc["status"] == "success", doc
        result: list[dict[str, Any]] = doc["data"]["result"]
        return result

    def wait_for_samples(self, selector: str, count: int, timeout: float = 60.0) -> None:
        """Until every series of ``selector`` holds at least ``count`` samples of the last
        minute (and there is at least one series)."""
        expr = f"min(count_over_time({selector}[1m]))"
        deadline = time.monotonic() + timeout
        have: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            have = self.query(expr)
            if have and float(have[0]["value"][1]) >= count:
                return
            time.sleep(0.25)
        pytest.fail(f"{selector}: fewer than {count} samples after {timeout}s ({have})")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


@dataclass
class Monitoring:
    exporter: Exporter
    prometheus: PrometheusServer


class _Shared:
    """One exporter and one Prometheus for the session, reference-counted by module."""

    def __init__(self) -> None:
        self.users = 0
        self.monitoring: Monitoring | None = None
        self.directory: Path | None = None

    def acquire(self) -> Monitoring:
        if self.monitoring is None:
            self.directory = Path(tempfile.mkdtemp(prefix="kubesched-prometheus-"))
            exporter = Exporter()
            try:
                server = PrometheusServer([exporter.target], self.directory)
            except BaseException:
                exporter.close()
                raise
            self.monitoring = Monitoring(exporter, server)
        self.users += 1
        return self.monitoring

    def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.monitoring is not None:
            self.monitoring.prometheus.stop()
            self.monitoring.exporter.close()
            self.monitoring = None
            if self.directory is not None:
                shutil.rmtree(self.directory, ignore_errors=True)


_SHARED = _Shared()


@contextlib.contextmanager
def shared_prometheus() -> Iterator[Monitoring]:
    """The session's exporter and Prometheus (use from a module- or session-scoped fixture)."""
    monitoring = _SHARED.acquire()
    try:
        yield monitoring
    finally:
        _SHARED.release()
