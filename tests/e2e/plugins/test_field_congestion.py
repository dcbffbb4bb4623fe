"""Congestion in ``kubesched run`` on a real apiserver: pods go to the least congested node by
``round(100 * (1 - min(cf, 100) / 100))``, and a changed ``congestion-factor`` annotation moves
the next pod."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from e2e.annotator.field_e2e import (
    annotated_node,
    bound_node,
    namespace,
    new_group,
    nodes,
    pod_in_group,
    profile_config,
    scheduler,
)
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient


def test_pods_avoid_congested_nodes(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    # a: cf 40 -> 60; b: cf 15 -> 85; c: cf 90 -> 10; d: cf 250, above the max -> 0
    g = new_group()
    factors = {"a": "40", "b": "15", "c": "90", "d": "250"}
    names = {k: f"cg-{g}-{k}" for k in factors}
    manifests = [
        annotated_node(names[k], g, annotations={"congestion-factor": f})
        for k, f in factors.items()
    ]
    profile = f"cg-{g}"
    config = profile_config(profile, score=[("Congestion", 1)])
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        for i in range(2):
            pod_in_group(admin_client, ns, profile, f"first-{i}", g)
            assert bound_node(admin_client, ns, f"first-{i}", watch=proc) == names["b"]
        # b gets congested (95 -> 5): a (60) is now the best
        admin_client.patch(
            f"/api/v1/nodes/{names['b']}",
            {"metadata": {"annotations": {"congestion-factor": "95"}}},
        ).expect(200)
        time.sleep(2)  # for the scheduler's node watch to deliver the update
        pod_in_group(admin_client, ns, profile, "second", g)
        assert bound_node(admin_client, ns, "second", watch=proc) == names["a"]
