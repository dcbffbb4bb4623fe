"""``kubesched simulate`` end to end in-process: options, exit codes, the built-in example."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kubesched.cli import main
from kubesched.simulate import ProgressLine, example_paths

CLUSTER = textwrap.dedent("""
    kind: Node
    metadata: {name: a}
    status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: b}
    status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
    """)

PODS = textwrap.dedent("""
    kind: Pod
    metadata: {name: p1}
    spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
    ---
    kind: Pod
    metadata: {name: p2}
    spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
    """)


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, ["simulate", *args], catch_exceptions=False)


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    pods = tmp_path / "pods.yaml"
    pods.write_text(PODS)
    return str(cluster), str(pods)


def test_built_in_example() -> None:
    result = _invoke("--seed", "1")
    assert result.exit_code == 0, result.output
    assert "simulating the built-in example" in result.stderr
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines()[1:] if line}
    assert rows["default/checkout"] != "unschedulable"
    assert rows["ml/train"] == "gpu-b1"
    assert rows["default/cache"] == "highmem-a1"
    assert rows["default/api-zone-a"] in ("general-a1", "highmem-a1")
    assert rows["ml/notebook"] == "unschedulable"
    assert rows["default/huge-batch"] == "unschedulable"
    assert rows["default/report"] == "gated"
    # The high-priority pod, last in the file, is tried first.
    assert result.stdout.splitlines()[1].startswith("default/checkout")
    assert all(p.exists() for p in example_paths())


def test_json_output_and_seed(files: tuple[str, str]) -> None:
    first = _invoke("-f", files[0], "-f", files[1], "-o", "json", "--seed", "3")
    second = _invoke("-f", files[0], "-f", files[1], "-o", "json", "--seed", "3")
    assert first.exit_code == 0
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    assert [p["name"] for p in doc["pods"]] == ["p1", "p2"]
    # The second pod avoids the node the first one took.
    assert {p["node"] for p in doc["pods"]} == {"a", "b"}


def test_explain(files: tuple[str, str]) -> None:
    result = _invoke("-f", files[0], "-f", files[1], "--explain", "--seed", "0")
    assert result.exit_code == 0
    assert "default/p1 -> " in result.stdout
    assert "TOTAL" in result.stdout
    assert "NodeResourcesFit" in result.stdout


def test_invalid_objects_exit_1_after_printing_the_rest(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        CLUSTER + "---\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, "
        "resources: {requests: {cpu: lots}}}]}\n---\n" + PODS
    )
    result = _invoke("-f", str(bad))
    assert result.exit_code == 1
    assert f"error: {bad}, document 3: Pod default/x: " in result.stderr
    assert "1 invalid object(s) skipped" in result.stderr
    assert "default/p1" in result.stdout


def test_unknown_kinds_only_warn(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(CLUSTER + "---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: s}\n")
    result = _invoke("-f", str(path))
    assert result.exit_code == 0
    assert "warning:" in result.stderr
    assert "kind ConfigMap is not simulated" in result.stderr


def test_config_picks_profiles(tmp_path: Path, files: tuple[str, str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent("""
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: only-this
        """)
    )
    result = _invoke("-f", files[0], "-f", files[1], "--config", str(config))
    assert result.exit_code == 0
    rows = [line.split()[:3] for line in result.stdout.splitlines()[1:3]]
    assert rows == [["default/p1", "not", "handled"], ["default/p2", "not", "handled"]]


def test_invalid_config(tmp_path: Path, files: tuple[str, str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- plugins: {filter: {enabled: [{name: NoSuchPlugin}]}}\n"
    )
    result = _invoke("-f", files[0], "--config", str(config))
    assert result.exit_code == 1
    assert "NoSuchPlugin" in result.stderr
    assert "Traceback" not in result.output


def test_kubeconfig_needs_from_cluster(files: tuple[str, str]) -> None:
    result = _invoke("-f", files[0], "--kubeconfig", files[0])
    assert result.exit_code == 2
    assert "--from-cluster" in result.stderr


def test_missing_file() -> None:
    result = _invoke("-f", "/nonexistent/manifests.yaml")
    assert result.exit_code == 2


def test_from_cluster_with_a_bad_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not: a kubeconfig\n")
    result = _invoke("--from-cluster", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "Traceback" not in result.output


def test_no_progress_for_short_runs(files: tuple[str, str]) -> None:
    result = _invoke("-f", files[0], "-f", files[1])
    assert "scheduling:" not in result.stderr


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_progress_line_on_a_terminal() -> None:
    stream = _Stream(tty=True)
    progress = ProgressLine(stream)
    progress(10, 100, 0.5)  # too early: nothing
    progress(20, 100, 1.2)
    progress(21, 100, 1.3)  # too soon after the last line
    progress(60, 100, 2.0)
    progress(100, 100, 2.5)
    assert stream.getvalue() == (
        "\rscheduling: 20/100 pods (1.2s, 17 pods/s)"
        "\rscheduling: 60/100 pods (2.0s, 30 pods/s)"
        "\rscheduling: 100/100 pods (2.5s, 40 pods/s)\n"
    )


def test_progress_lines_in_a_log() -> None:
    stream = _Stream(tty=False)
    progress = ProgressLine(stream)
    for i in range(1, 41):
        progress(i, 40, i * 0.2)
    lines = stream.getvalue().splitlines()
    assert lines[-1] == "scheduling: 40/40 pods (8.0s, 5 pods/s)"
    assert 2 <= len(lines) <= 4
