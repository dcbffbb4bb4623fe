"""Detached processes, the state file, status and down, without real binaries."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from kubesched import cluster
from kubesched.cli import main
from kubesched.cluster import ClusterError
from kubesched.cluster._process import (
    ProcessRecord,
    is_running,
    log_tail,
    spawn,
    terminate,
)
from kubesched.cluster._state import ClusterState, Layout, load_state, save_state, validate_name


@pytest.fixture
def state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KUBESCHED_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


_STARTED: list[ProcessRecord] = []


@pytest.fixture(autouse=True)
def _no_leftover_processes() -> Iterator[None]:
    yield
    terminate(_STARTED, grace=1)
    _STARTED.clear()


def _sleeper(tmp_path: Path, name: str = "sleeper") -> ProcessRecord:
    # A process group: the shell and the sleeps it forks.
    record = spawn(name, ["/bin/sh", "-c", "sleep 300 & sleep 300"], tmp_path / f"{name}.log")
    _STARTED.append(record)
    return record


def _group_members(pgid: int) -> list[int]:
    out = subprocess.run(
        ["ps", "-eo", "pid=,pgid=,stat="], check=True, capture_output=True, text=True
    )
    return [
        int(pid)
        for pid, group, stat in (line.split() for line in out.stdout.splitlines())
        if int(group) == pgid and not stat.startswith("Z")
    ]


def test_spawned_process_is_detached_and_terminate_stops_its_whole_group(
    tmp_path: Path,
) -> None:
    record = _sleeper(tmp_path)
    deadline = time.monotonic() + 5
    while len(_group_members(record.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)

    assert is_running(record)
    assert os.getsid(record.pid) == record.pid
    assert len(_group_members(record.pid)) >= 2

    terminate([record], grace=5)

    assert not is_running(record)
    assert _group_members(record.pid) == []


def test_sigkill_follows_when_sigterm_is_ignored(tmp_path: Path) -> None:
    record = spawn(
        "stubborn",
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(300)",
        ],
        tmp_path / "stubborn.log",
    )
    _STARTED.append(record)
    deadline = time.monotonic() + 10
    while "ready" not in log_tail(record.log) and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()

    terminate([record], grace=0.5)

    assert not is_running(record)
    assert time.monotonic() - started < 5


def test_a_record_read_back_from_another_process_is_checked_by_start_time(
    tmp_path: Path,
) -> None:
    record = _sleeper(tmp_path)
    copy = ProcessRecord.from_json(record.to_json())
    assert is_running(copy)

    reused_pid = ProcessRecord.from_json({**record.to_json(), "start_time": "1"})
    assert not is_running(reused_pid)  # same pid, another process: never ours
    terminate([reused_pid], grace=0.1)
    assert is_running(record)

    terminate([copy], grace=5)
    assert not is_running(record)


def test_log_tail_returns_the_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)))

    assert log_tail(log, 3) == "line 97\nline 98\nline 99"
    assert log_tail(tmp_path / "missing.log") == ""


def test_cluster_names_are_directory_names() -> None:
    assert validate_name("e2e-1234") == "e2e-1234"
    for bad in ("", "UPPER", "../x", "a/b", "-x", "x" * 64):
        with pytest.raises(ClusterError):
            validate_name(bad)


def test_state_round_trips(tmp_path: Path) -> None:
    layout = Layout(tmp_path / "c")
    state = ClusterState(
        name="c",
        created="2026-01-01T00:00:00+00:00",
        kubernetes_version="v1.34.4",
        etcd_version="v3.6.16",
        server="https://127.0.0.1:1234",
        apiserver_port=1234,
        apiserver_args=["--max-requests-inflight=800"],
        processes=[ProcessRecord("etcd", 1, "5", ["etcd"], "etcd.log")],
    )
    save_state(layout, state)

    assert load_state(layout) == state
    assert [p.name for p in layout.root.iterdir()] == ["state.json"]


def test_status_and_down_of_a_cluster_whose_processes_died(
    state_root: Path, tmp_path: Path
) -> None:
    record = _sleeper(tmp_path, "kube-apiserver")
    layout = Layout(state_root / "clusters" / "stale")
    save_state(
        layout,
        ClusterState(
            name="stale",
            created="",
            kubernetes_version="v1.34.4",
            etcd_version="v3.6.16",
            server="https://127.0.0.1:1",
            processes=[record],
        ),
    )
    [found] = cluster.status()
    assert (found.name, found.state, found.running) == ("stale", "running", True)

    os.killpg(record.pid, 9)
    deadline = time.monotonic() + 5
    while is_running(record) and time.monotonic() < deadline:
        time.sleep(0.05)
    [found] = cluster.status()
    assert found.state == "stopped"
    assert cluster.info("stale") is None

    assert cluster.down("stale") is True
    assert not layout.root.exists()
    assert cluster.down("stale") is False
    assert cluster.status() == []


def test_down_stops_the_recorded_processes(state_root: Path, tmp_path: Path) -> None:
    etcd = _sleeper(tmp_path, "etcd")
    apiserver = _sleeper(tmp_path, "kube-apiserver")
    component = _sleeper(tmp_path, "kube-scheduler")
    layout = Layout(state_root / "clusters" / "c1")
    save_state(
        layout,
        ClusterState(
            name="c1",
            created="",
            kubernetes_version="v1.34.4",
            etcd_version="v3.6.16",
            processes=[etcd, apiserver],
            components=[component],
        ),
    )

    assert cluster.down("c1", grace=5)

    assert not any(is_running(r) for r in (etcd, apiserver, component))
    assert not layout.root.exists()


def test_cli_status_down_and_version(state_root: Path) -> None:
    runner = CliRunner()

    result = runner.invoke(main, ["--version"])
    assert result.exit_code == 0
    assert "kubesched, version" in result.output

    result = runner.invoke(main, ["cluster", "status"])
    assert result.exit_code == 0
    assert "no clusters" in result.output

    result = runner.invoke(main, ["cluster", "down", "--name", "nope"])
    assert result.exit_code == 0
    assert "does not exist" in result.output

    result = runner.invoke(main, ["cluster", "down", "--name", "Bad/Name"])
    assert result.exit_code == 1
    assert "invalid cluster name" in result.output


def test_cli_up_reports_a_missing_go_clearly(
    state_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBESCHED_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))

    result = CliRunner().invoke(main, ["cluster", "up", "--name", "nogo"])

    assert result.exit_code == 1
    assert "`go` not found on PATH" in result.output
    assert "KUBECONFIG=" not in result.output


def test_the_lock_file_goes_with_the_cluster_and_waiters_lock_a_fresh_one(
    tmp_path: Path,
) -> None:
    import threading

    from kubesched.cluster._state import cluster_lock

    clusters = tmp_path / "clusters"
    (clusters / "c").mkdir(parents=True)
    order: list[str] = []

    def second() -> None:
        with cluster_lock(clusters, "c"):
            order.append("second")
            assert (clusters / ".c.lock").exists()

    with cluster_lock(clusters, "c"):
        waiter = threading.Thread(target=second)
        waiter.start()
        time.sleep(0.2)
        order.append("first")
        (clusters / "c").rmdir()  # as `down` does
    waiter.join(timeout=5)

    assert order == ["first", "second"]
    assert not (clusters / ".c.lock").exists()
