"""PigeonHole in ``kubesched run`` on a real apiserver, one profile per policy, each on three
nodes of its own already running pods of 1, 2 and 3 CPUs. The scores for a 1-CPU pod, worked by
hand in tests/unit/plugins/test_pigeon.py from the documented objectives:

- LOAD_BALANCE (4-CPU nodes): 100, 40, 1: the emptiest node.
- CONSOLIDATE (4-CPU nodes): 1, 50, 100: the fullest node that has room.
- A_BINPACK, cpu only (8-CPU nodes), first pod of the profile: 100, 40, 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.annotator.field_e2e import (
    GROUP_LABEL,
    annotated_node,
    bound_node,
    namespace,
    new_group,
    nodes,
    pod_in_group,
    scheduler,
)
from e2e.scheduler.sched_e2e import create_pod, pod_manifest, scheduler_config
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

POLICIES = {
    "LOAD_BALANCE": ({"policy": "LOAD_BALANCE"}, "4", "a"),
    "CONSOLIDATE": ({"policy": "CONSOLIDATE"}, "4", "c"),
    "A_BINPACK": ({"policy": "A_BINPACK", "numResources": 1}, "8", "a"),
}


def test_each_policy_places_the_pod_where_its_objective_says(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    g = new_group()
    profiles: list[dict[str, Any]] = []
    manifests = []
    groups = {}
    for policy, (args, cpu, _) in POLICIES.items():
        group = f"{g}-{policy.lower().replace('_', '')}"
        groups[policy] = group
        for k in "abc":
            manifests.append(annotated_node(f"pg-{group}-{k}", group, cpu=cpu))
        profiles.append(
            {
                "schedulerName": f"pg-{group}",
                "plugins": {
                    "score": {"disabled": [{"name": "*"}], "enabled": [{"name": "PigeonHole"}]}
                },
                "pluginConfig": [{"name": "PigeonHole", "args": args}],
            }
        )
    config = scheduler_config(f"pg-{g}-unused")
    config["profiles"] = profiles
    with nodes(admin_client, manifests), namespace(admin_client) as ns:
        # pods already running: 1, 2 and 3 CPUs on a, b and c of every group
        for policy, group in groups.items():
            for cpus, k in zip((1, 2, 3), "abc", strict=True):
                create_pod(
                    admin_client,
                    pod_manifest(
                        f"running-{policy.lower().replace('_', '-')}-{k}",
                        ns,
                        "default-scheduler",
                        cpu=str(cpus),
                        node_name=f"pg-{group}-{k}",
                        spec={"nodeSelector": {GROUP_LABEL: group}},
                    ),
                )
        with scheduler(config, tmp_path, control_plane.kubeconfig) as proc:
            for policy, (_, _, want) in POLICIES.items():
                group = groups[policy]
                name = f"new-{policy.lower().replace('_', '-')}"
                pod_in_group(admin_client, ns, f"pg-{group}", name, group, cpu="1", memory="1Gi")
                assert bound_node(admin_client, ns, name, watch=proc) == f"pg-{group}-{want}", (
                    policy
                )
