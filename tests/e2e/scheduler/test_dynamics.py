"""Behaviour between decisions, against the real kube-scheduler's recording.

Each scenario of ``tests/conformance/dynamics/`` runs here against ``kubesched run`` on a control
plane of its own (the scenarios empty the cluster between them), and must agree with what the
real kube-scheduler v1.34.4 did (``<scenario>.expected.yaml``): the same pods bound to the same
nodes, none later than kube-scheduler + 1 s after the event, moved out of unschedulablePods by
the same cluster events, the same final messages for the others, and for the scenarios whose
event must not retry a pod, no further attempt. A scenario with a ``divergence`` (kubesched's
deliberate differences, each explained there) must differ from the recording exactly as it
says instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from sched_e2e import SchedulerProcess, start_scheduler

from conformance.dynamics import Scenario, Scheduler, compare, diverged, load, names
from conformance.dynamics import run as run_scenario
from conformance.regenerate import Api
from kubesched import cluster
from kubesched.config import format_duration


@pytest.fixture(scope="module")
def dynamics_cluster() -> Iterator[cluster.ClusterInfo]:
    name = f"e2e-dynamics-{os.getpid()}"
    info = cluster.up(name)
    try:
        yield info
    finally:
        cluster.down(name)


class _Kubesched:
    def __init__(self, process: SchedulerProcess) -> None:
        self.process = process

    def metrics(self) -> str:
        code, body = self.process.get("/metrics")
        assert code == 200, body
        return body


@pytest.mark.parametrize("name", names())
def test_scenario_agrees_with_kube_scheduler(
    name: str, dynamics_cluster: cluster.ClusterInfo, tmp_path: Path
) -> None:
    scenario = load(name)
    expected = yaml.safe_load(scenario.expected_path.read_text())
    kubeconfig = dynamics_cluster.client_kubeconfig("system:kube-scheduler")

    @contextlib.contextmanager
    def launch(config: dict[str, Any], s: Scenario) -> Iterator[Scheduler]:
        extra = ["--log-level=DEBUG"]
        if s.max_in_unschedulable is not None:
            duration = format_duration(float(s.max_in_unschedulable))
            extra.append(f"--pod-max-in-unschedulable-pods-duration={duration}")
        process = start_scheduler(config, tmp_path, kubeconfig=kubeconfig, extra_args=extra)
        try:
            process.wait_ready()
            yield _Kubesched(process)
        finally:
            process.popen.terminate()
            process.wait_exit(30)
            print(process.log()[-20000:])

    got = run_scenario(Api(dynamics_cluster), scenario, launch)
    problems = compare(expected, got, scenario)
    if scenario.divergence is not None:
        # Strict, as the static suite's known divergences: agreeing fails until the divergence
        # is removed, and differing otherwise than it says fails too.
        assert problems, f"agrees with kube-scheduler now; remove the divergence: {scenario.name}"
        otherwise = compare(diverged(expected, scenario.divergence), got, scenario)
        assert not otherwise, f"{scenario.divergence['why']}\n" + "\n".join(otherwise)
        return
    assert not problems, f"{scenario.description}\n" + "\n".join(problems)
