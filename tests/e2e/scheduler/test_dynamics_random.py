"""Random dynamics scenarios of a few fixed seeds, against the real kube-scheduler, live.

``tests/conformance/dynamics_fuzz.py`` makes them (pending pods pinned to nodes of their own,
kept off by random blockers, then random changes with a pause after each). Each seed runs here
against the real kube-scheduler v1.34.4 and then ``kubesched run`` on the same control plane;
they must agree on which pods end up bound, none later than kube-scheduler + 1.75 s after the
last change, the final messages of the others, the first decision of each pod and the cluster
events that moved pods out of unschedulablePods. The seeds are ones with many changes and many
kinds of moving events; the script runs any others.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sched_e2e import scenario_launcher

from conformance.dynamics import KubeSchedulerLauncher, run
from conformance.dynamics_fuzz import compare, generate
from conformance.regenerate import Api
from kubesched import cluster

#: Seeds whose scenarios move pods by node labels, taints and additions, bound pods' deletions,
#: additions and label changes, pending pods' tolerations and removed scheduling gates.
SEEDS = (9, 11, 17, 24)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_scenario_agrees_with_kube_scheduler(
    seed: int, dynamics_cluster: cluster.ClusterInfo, tmp_path: Path
) -> None:
    scenario = generate(seed)
    api = Api(dynamics_cluster)
    expected = run(api, scenario, KubeSchedulerLauncher(api, dynamics_cluster.name))
    kubeconfig = dynamics_cluster.client_kubeconfig("system:kube-scheduler")
    got = run(api, scenario, scenario_launcher(kubeconfig, tmp_path, show_log=True))
    problems = compare(expected, got)
    assert not problems, f"seed {seed}: kube-scheduler {expected}\nkubesched {got}\n" + "\n".join(
        problems
    )
