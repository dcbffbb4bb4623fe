"""``kubesched extender``: option checks, HTTP_PORT and LOG_LEVEL, and a standalone process."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from extender_fakes import make_pod, nodes, nodes_body

from kubesched.cli import main
from kubesched.extender import TRACE, configure_logging
from kubesched.extender._command import CommandError, ExtenderCommand
from kubesched.plugins import default_registry

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: pool-blue
  plugins:
    multiPoint:
      enabled: [{name: NodeAffinity}]
      disabled: [{name: "*"}]
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [blue]}]
"""


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "extender.yaml"
    path.write_text(CONFIG)
    return str(path)


def test_exactly_one_of_config_and_agents() -> None:
    registry = default_registry()
    for command in (ExtenderCommand(), ExtenderCommand(config_path="x", agents="safe")):
        with pytest.raises(CommandError, match="exactly one of --config FILE and --agents"):
            command.configuration(registry)


def test_configuration_errors_name_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(CONFIG.replace("addedAffinity", "addedAffinty"))
    with pytest.raises(CommandError) as err:
        ExtenderCommand(config_path=str(bad)).configuration(default_registry())
    assert str(err.value).startswith("invalid configuration: ")
    assert "addedAffinty" in str(err.value)


def test_unknown_agent() -> None:
    with pytest.raises(CommandError, match="unknown agent 'nope'"):
        ExtenderCommand(agents="nope").configuration(default_registry())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tls_cert": "c"}, "--tls-cert and --tls-key go together"),
        ({"tls_key": "k"}, "--tls-cert and --tls-key go together"),
        ({"client_ca": "ca"}, "--client-ca needs --tls-cert and --tls-key"),
        ({"tls_cert": "/no/c", "tls_key": "/no/k"}, "cannot use the TLS files"),
        ({"port": 70000}, "--port 70000: not a port number"),
    ],
)
def test_option_errors(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        ExtenderCommand(**kwargs).options()  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "level"),
    [
        ("TRACE", TRACE),
        ("debug", logging.DEBUG),
        ("Info", logging.INFO),
        ("WARNING", logging.WARNING),
        ("ERROR", logging.ERROR),
        ("ALERT", logging.CRITICAL),
        ("alert", logging.CRITICAL),
        (None, logging.INFO),
        ("", logging.INFO),
    ],
)
def test_log_levels(value: str | None, level: int) -> None:
    assert configure_logging(value) == level
    assert logging.getLevelName(TRACE) == "TRACE"


def test_an_invalid_log_level_falls_back_to_info_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kubesched.extender"):
        assert configure_logging("LOUD") == logging.INFO
    assert 'LOG_LEVEL="LOUD" is invalid, falling back to "INFO"' in caplog.text


def _captured(monkeypatch: pytest.MonkeyPatch) -> list[ExtenderCommand]:
    seen: list[ExtenderCommand] = []

    def run(self: ExtenderCommand) -> int:
        seen.append(self)
        return 0

    monkeypatch.setattr(ExtenderCommand, "run", run)
    return seen


def test_http_port_and_log_level_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen = _captured(monkeypatch)
    runner = CliRunner()
    env = {"HTTP_PORT": "9123", "LOG_LEVEL": "DEBUG"}
    result = runner.invoke(main, ["extender", "--agents", "annotation-gate"], env=env)
    assert result.exit_code == 0, result.output
    assert (seen[0].port, seen[0].log_level) == (9123, "DEBUG")
    result = runner.invoke(main, ["extender", "--agents", "x", "--port", "9200"], env=env)
    assert seen[1].port == 9200  # the flag wins
    result = runner.invoke(main, ["extender", "--agents", "x"], env={"HTTP_PORT": ""})
    assert seen[2].port == 8888


def test_cli_reports_errors_without_a_traceback() -> None:
    result = CliRunner().invoke(main, ["extender", "--agents", "nope", "--standalone"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: unknown agent 'nope'")


def test_standalone_process_serves_until_sigterm(config_file: str) -> None:
    env = {**os.environ, "LOG_LEVEL": "INFO", "HTTP_PORT": "0"}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from kubesched.cli import main; main()",
            "extender",
            "--config",
            config_file,
            "--standalone",
            "--bind-address",
            "127.0.0.1",
        ],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        port = None
        deadline = time.monotonic() + 30
        while port is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if match := re.search(r"listening on http://127\.0\.0\.1:(\d+)", line):
                port = int(match.group(1))
        assert port is not None
        blue = nodes("blue-1", labels={"pool": "blue"})
        green = nodes("green-1", labels={"pool": "green"})
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/filter", data=nodes_body(make_pod("p"), blue + green)
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            out = json.loads(response.read())
        assert [i["metadata"]["name"] for i in out["Nodes"]["items"]] == ["blue-1"]
        assert out["FailedAndUnresolvableNodes"] == {
            "green-1": "node(s) didn't match scheduler-enforced node affinity"
        }
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_no_cluster_configuration_suggests_standalone(tmp_path: Path) -> None:
    env = {"KUBECONFIG": str(tmp_path / "missing"), "HTTP_PORT": "0"}
    result = CliRunner().invoke(main, ["extender", "--agents", "annotation-gate"], env=env)
    assert result.exit_code == 1
    assert "cannot load cluster configuration" in result.output
    assert "--standalone serves full Nodes bodies without a cluster" in result.output
