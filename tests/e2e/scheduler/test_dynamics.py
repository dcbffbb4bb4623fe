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

from pathlib import Path

import pytest
import yaml
from sched_e2e import scenario_launcher

from conformance.dynamics import compare, diverged, load, names
from conformance.dynamics import run as run_scenario
from conformance.regenerate import Api
from kubesched import cluster


@pytest.mark.parametrize("name", names())
def test_scenario_agrees_with_kube_scheduler(
    name: str, dynamics_cluster: cluster.ClusterInfo, tmp_path: Path
) -> None:
    scenario = load(name)
    expected = yaml.safe_load(scenario.expected_path.read_text())
    kubeconfig = dynamics_cluster.client_kubeconfig("system:kube-scheduler")

    launch = scenario_launcher(kubeconfig, tmp_path, show_log=True)
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
