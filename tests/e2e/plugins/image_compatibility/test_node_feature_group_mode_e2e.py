"""ImageCompatibility in ``mode: NodeFeatureGroup`` in ``kubesched run``: a real nfd-master
evaluates the compatibility sets, the scheduler places pods on the nodes it names.

Three nodes: ``both`` has AVX2 and kernel 6, ``avx2`` only AVX2, ``kernel`` only kernel 6. The
image's one set needs both (two rules). nfd-master ORs the rules of a group, so a group holding
the set's rules as they are would name all three; the plugin's groups name ``both`` only:

* a pod of that image lands on ``both``;
* the same pod kept off ``both`` (node affinity) stays Pending, not placed on a node with half
  the features, its message saying nfd-master's group did not name the node;
* a pod whose image no node satisfies stays Pending too (an empty group counts once settled);
* the groups are in nfd-master's namespace, labelled with the scheduler's owner, one rule each,
  and gone once the scheduler stops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.annotator.field_e2e import GROUP_LABEL, annotated_node, new_group, nodes, scheduler
from e2e.nfd import NFD_API_VERSION, NFD_GROUP, NFD_NAMESPACE, NfdMaster
from e2e.plugins.image_compatibility.test_image_compatibility_e2e import (
    bound,
    config,
    pod_with_image,
    unschedulable_message,
)
from e2e.scheduler.sched_e2e import create_pod, pod_manifest
from kubesched.cluster import ClusterInfo
from kubesched.plugins.image_compatibility._group import (
    MANAGED_BY,
    MANAGED_BY_LABEL,
    OWNER_LABEL,
    owner_label_value,
)
from oci import Registry, attach_artifact, push_image

if TYPE_CHECKING:
    from conftest import AdminClient

NAMESPACE_PREFIX = "imgcompat-nfg-e2e"
GV = f"{NFD_GROUP}/{NFD_API_VERSION}"
NODE_FEATURES = f"/apis/{GV}/namespaces/{NFD_NAMESPACE}/nodefeatures"
GROUPS = f"/apis/{GV}/namespaces/{NFD_NAMESPACE}/nodefeaturegroups"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"

FEATURES: dict[str, dict[str, Any]] = {
    "both": {
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "6"}}},
    },
    "avx2": {
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "4"}}},
    },
    "kernel": {
        "flags": {"cpu.cpuid": {"elements": {"SSE4": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "6"}}},
    },
}

#: One set of two rules: all must match.
AVX2_AND_KERNEL_6 = b"""
version: v1alpha1
compatibilities:
- tag: avx2-and-kernel-6
  weight: 10
  rules:
  - name: avx2
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions:
        AVX2: {op: Exists}
  - name: kernel
    matchFeatures:
    - feature: kernel.version
      matchExpressions:
        major: {op: Ge, value: ["6"]}
"""

SVE_ONLY = b"""
version: v1alpha1
compatibilities:
- rules:
  - name: sve
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions:
        SVE: {op: Exists}
"""


@contextlib.contextmanager
def node_features(client: AdminClient, names: Mapping[str, str]) -> Iterator[None]:
    """NodeFeature objects as nfd-worker writes them: in nfd-master's namespace, with the
    ``system.name`` attribute by which nfd-master names the node in a group's status."""
    try:
        for key, features in FEATURES.items():
            node = names[key]
            attributes = {
                **features["attributes"],
                "system.name": {"elements": {"nodename": node}},
            }
            client.post(
                NODE_FEATURES,
                {
                    "apiVersion": GV,
                    "kind": "NodeFeature",
                    "metadata": {"name": node, "labels": {NODE_NAME_LABEL: node}},
                    "spec": {"features": {**features, "attributes": attributes}},
                },
            ).expect(201)
        yield
    finally:
        for node in names.values():
            client.delete(f"{NODE_FEATURES}/{node}")


def pod_kept_off(
    client: AdminClient, ns: str, profile: str, name: str, image: str, group: str, node: str
) -> None:
    """A pod of ``image`` on the nodes of ``group``, kept off ``node`` by node affinity."""
    off = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": [node]}]}
    spec = {
        "nodeSelector": {GROUP_LABEL: group},
        "containers": [{"name": "c", "image": image}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [off]}
            }
        },
    }
    create_pod(client, pod_manifest(name, ns, profile, spec=spec))


def test_pods_land_on_the_nodes_nfd_master_names(
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    namespace: str,
    tmp_path: Path,
    nfd_master: NfdMaster,
    oci_registry: Registry,
) -> None:
    g = new_group()
    profile = f"nfg-{g}"
    names = {key: f"nfg-{g}-{key}" for key in FEATURES}
    selector = f"{MANAGED_BY_LABEL}={MANAGED_BY},{OWNER_LABEL}={owner_label_value(profile)}"
    repo_and, repo_none = f"nfg-{g}/and", f"nfg-{g}/none"
    attach_artifact(oci_registry, repo_and, push_image(oci_registry, repo_and), AVX2_AND_KERNEL_6)
    attach_artifact(oci_registry, repo_none, push_image(oci_registry, repo_none), SVE_ONLY)
    both_image = oci_registry.image(repo_and, "latest")
    none_image = oci_registry.image(repo_none, "latest")
    try:
        with (
            nodes(admin_client, [annotated_node(n, g) for n in names.values()]),
            node_features(admin_client, names),
            scheduler(
                config(profile, oci_registry, mode="NodeFeatureGroup", nfdNamespace=NFD_NAMESPACE),
                tmp_path,
                control_plane.kubeconfig,
            ) as proc,
        ):
            pod_with_image(admin_client, namespace, profile, "on-both", both_image, g)
            avoid = names["both"]
            pod_kept_off(admin_client, namespace, profile, "not-on-both", both_image, g, avoid)
            pod_with_image(admin_client, namespace, profile, "nowhere", none_image, g)

            assert bound(admin_client, namespace, "on-both", proc) == names["both"]
            message = unschedulable_message(
                admin_client,
                namespace,
                "not-on-both",
                proc,
                f"image {both_image} not compatible",
            )
            assert 'not in the NodeFeatureGroup of set 0 "avx2-and-kernel-6"' in message
            unschedulable_message(
                admin_client, namespace, "nowhere", proc, f"image {none_image} not compatible"
            )

            groups = admin_client.get(GROUPS, labelSelector=selector).expect(200).json()["items"]
            assert len(groups) == 2, groups
            statuses = {
                tuple(n["name"] for n in (item.get("status") or {}).get("nodes") or [])
                for item in groups
            }
            assert statuses == {(names["both"],), ()}
            assert all(len(item["spec"]["featureGroupRules"]) == 1 for item in groups)
        # A scheduler that stops deletes the groups it created.
        left = admin_client.get(GROUPS, labelSelector=selector).expect(200).json()["items"]
        assert left == []
    finally:
        admin_client.request("DELETE", GROUPS, params={"labelSelector": selector})
