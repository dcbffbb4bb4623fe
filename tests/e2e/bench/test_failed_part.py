"""bench e2e when one scheduler's API server stops answering mid-run: that run is reported as
failed, with what failed and where; the runs before and after it, each on a control plane of
its own, keep their figures in the JSON; the command exits 1. And when the bench itself is
stopped: its control plane goes with it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from kubesched import cluster

SCHEDULERS = ("kubesched", "kube-scheduler", "binder")
PODS = 100
#: The whole command takes well under a minute; one that hangs is killed after this.
DEADLINE_S = 240.0


def _apiserver_pid(name: str) -> int:
    [found] = [c for c in cluster.status() if c.name == name]
    [apiserver] = [p for p in found.processes if p.name == "kube-apiserver"]
    return apiserver.pid


def test_an_api_server_that_stops_answering_fails_that_run_only(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "from kubesched.cli import main; main()", "bench", "e2e"]
    argv += [
        "--workload=SchedulingBasic/5000Nodes_10000Pods",
        "--nodes=5",
        "--init-pods=0",
        f"--pods={PODS}",
        "--scheduler=both",
        "--stall-timeout=5",
        "-o",
        "json",
    ]
    stdout = tmp_path / "report.json"
    stopped: int | None = None
    progress: list[str] = []
    with stdout.open("w") as out:
        bench = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(DEADLINE_S, bench.kill)
    watchdog.start()
    try:
        assert bench.stderr is not None
        for line in bench.stderr:
            progress.append(line)
            # kube-scheduler is running and its measured pods are about to be created: from
            # now on its API server answers nothing (the process is stopped, its port open).
            if stopped is None and line.startswith("[kube-scheduler] measured pods bound"):
                stopped = _apiserver_pid(f"bench-kube-scheduler-{bench.pid}")
                os.kill(stopped, signal.SIGSTOP)
        returncode = bench.wait()
    finally:
        watchdog.cancel()
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stopped, signal.SIGCONT)
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for which in SCHEDULERS:
            cluster.down(f"bench-{which}-{bench.pid}")
    log = "".join(progress)[-4000:]
    assert stopped is not None, log
    assert returncode == 1, log
    document = json.loads(stdout.read_text())

    # The runs before and after the failed one have their figures.
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "binder"]
    for r in document["results"]:
        assert r["pods_bound"] == r["events_written"] == PODS, r["errors"]
        assert r["throughput_pods_per_s"] > 0

    # The failed one has its error instead: the API server stopped answering, while the bench
    # was creating the pods or waiting for them to be bound (whichever the stop caught).
    [failure] = document["failures"]
    assert failure["scheduler"] == "kube-scheduler"
    assert (failure["nodes"], failure["measured_pods"]) == (5, PODS)
    assert "throughput_pods_per_s" not in failure
    # What was known when it failed: kube-scheduler was running, its measured pods named.
    assert 0 <= failure["pods_bound"] <= PODS
    assert failure["peak_rss_bytes"] > 10_000_000
    error = failure["error"]
    assert error.startswith("the API server "), error
    assert "did not answer for 5 s while " in error, error
    assert any(
        doing in error
        for doing in (f"creating {PODS} pods", "waiting for the measured pods to be bound")
    ), error
    [comparison] = document["comparisons"]
    assert comparison["failed"] == ["kube-scheduler"]
    assert set(comparison["of_ceiling"]) == {"kubesched"}
    assert f"kube-scheduler failed: {error}" in log


def test_a_bench_stopped_by_sigterm_takes_its_control_plane_down() -> None:
    """Stopped with SIGTERM while its scheduler binds, as with Ctrl-C: the control plane it
    started (etcd, kube-apiserver, the scheduler) is gone when it exits."""
    argv = [sys.executable, "-c", "from kubesched.cli import main; main()", "bench", "e2e"]
    argv += ["--workload=small", "--scheduler=kubesched", "--no-ceiling", "--stall-timeout=30"]
    bench = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    name = f"bench-kubesched-{bench.pid}"
    watchdog = threading.Timer(DEADLINE_S, bench.kill)
    watchdog.start()
    pids: list[int] = []
    progress: list[str] = []
    try:
        assert bench.stderr is not None
        for line in bench.stderr:
            progress.append(line)
            if not pids and "pods bound" in line:
                [found] = [c for c in cluster.status() if c.name == name]
                pids = [p.pid for p in (*found.processes, *found.components)]
                bench.send_signal(signal.SIGTERM)
        returncode = bench.wait()
    finally:
        watchdog.cancel()
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        leftover = [c.name for c in cluster.status() if c.name == name]
        for c in leftover:
            cluster.down(c)
    log = "".join(progress)[-3000:]
    assert len(pids) >= 3, log  # etcd, kube-apiserver and kubesched were running
    assert returncode != 0, log
    assert leftover == [], log
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 0)
            raise AssertionError(f"process {pid} of {name} still runs\n{log}")
