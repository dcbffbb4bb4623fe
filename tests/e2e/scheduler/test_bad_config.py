"""A bad configuration is refused before ``kubesched run`` talks to any cluster.

The kubeconfig points at a TCP listener of the test's own that records every connection: the
refusal must name the field, exit non-zero, and leave the listener untouched.
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from sched_e2e import (
    create_pod,
    free_port,
    get_pod,
    kubesched_argv,
    pod_manifest,
    scheduler_config,
)

from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from sched_e2e import Client

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


class Listener:
    """Accepts TCP connections on a loopback port and counts them."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    try:
        yield found
    finally:
        found.close()


@pytest.fixture
def trap_kubeconfig(control_plane: ClusterInfo, listener: Listener, tmp_path: Path) -> Path:
    """The admin kubeconfig (valid credentials), with the server moved to the listener."""
    config: dict[str, Any] = yaml.safe_load(control_plane.kubeconfig.read_text())
    for entry in config["clusters"]:
        entry["cluster"]["server"] = f"https://127.0.0.1:{listener.port}"
    path = tmp_path / "trap.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def _run(config_text: str, kubeconfig: Path, tmp_path: Path) -> tuple[int, str, float]:
    config = tmp_path / "bad.yaml"
    config.write_text(config_text)
    started = time.monotonic()
    done = subprocess.run(
        [
            *kubesched_argv(),
            "run",
            f"--config={config}",
            f"--kubeconfig={kubeconfig}",
            f"--port={free_port()}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


UNKNOWN_PLUGIN = (
    "profiles:\n- schedulerName: a\n  plugins:\n    filter:\n      enabled:\n"
    "      - name: NoSuchPlugin\n"
)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param("parallelizm: 3\n", "parallelizm", id="unknown-field"),
        pytest.param("podMaxBackoffSeconds: 0\n", "podMaxBackoffSeconds", id="invalid-value"),
        pytest.param(
            "leaderElection:\n  leaseDuration: 15\n",
            "leaderElection.leaseDuration",
            id="bare-number-duration",
        ),
        pytest.param(
            "leaderElection:\n  leaseDuration: 1s\n  renewDeadline: 2s\n",
            "leaderElection.leaseDuration",
            id="lease-shorter-than-renew-deadline",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- schedulerName: a\n",
            "profiles[1].schedulerName",
            id="duplicate-profile",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: NodeResourcesFit\n"
            "    args:\n      scoringStrategy:\n        type: Nope\n",
            "profiles[0].pluginConfig[0].args.scoringStrategy.type",
            id="plugin-args",
        ),
        pytest.param(
            UNKNOWN_PLUGIN,
            "profiles[0].plugins.filter.enabled[0]",
            id="unknown-plugin",
        ),
    ],
)
def test_bad_config_is_refused_naming_the_field_without_contacting_the_cluster(
    trap_kubeconfig: Path, listener: Listener, tmp_path: Path, body: str, field: str
) -> None:
    code, output, took = _run(HEADER + body, trap_kubeconfig, tmp_path)

    assert code != 0, output
    assert field in output, output
    assert listener.connections == 0, "no connection to the cluster at all"
    assert took < 20, "refused at once, not after connection attempts"
    assert "invalid configuration" in output, output
    assert "Traceback" not in output, output


def test_bad_config_leaves_a_real_cluster_untouched(
    control_plane: ClusterInfo, admin_client: Client, namespace: str, tmp_path: Path
) -> None:
    """On the real apiserver: no Lease taken, no pod bound, no event written."""
    profile = "bad-config"
    config = scheduler_config(
        profile, leader_elect=True, lease_name="bad-config-lease", lease_namespace=namespace
    )
    config["podMaxBackoffSeconds"] = 0
    create_pod(admin_client, pod_manifest("waiting", namespace, profile))

    code, output, _ = _run(yaml.safe_dump(config), control_plane.kubeconfig, tmp_path)

    assert code != 0
    assert "podMaxBackoffSeconds" in output
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/bad-config-lease"
    assert admin_client.get(lease).status == 404
    assert not get_pod(admin_client, namespace, "waiting")["spec"].get("nodeName")
    events = admin_client.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events").json()
    assert events["items"] == []
