"""ImageCompatibility in ``kubesched run`` on the real apiserver, with a real OCI registry holding
artifacts attached as ``oras attach`` does and NodeFeature objects (NFD's CRDs installed):

* a pod whose image's spec only one node satisfies lands there;
* a pod whose image no node satisfies stays Pending, its FailedScheduling message naming the
  image and the failed rule;
* a pod whose image has no artifact schedules;
* with the registry stopped, a pod whose image's artifact was never fetched stays Pending under
  ``failurePolicy: Fail`` and schedules under ``Ignore``, with a Warning event either way;
* a registry behind auth is read with the pod's image pull secret.

``NodeFeatureGroup`` mode with the real nfd-master: test_node_feature_group_mode_e2e.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compat_specs import AVX512_OR_NEW_KERNEL, NVIDIA_GPU
from e2e.annotator.field_e2e import GROUP_LABEL, annotated_node, new_group, nodes, scheduler
from e2e.nfd import install_nfd_crds
from e2e.scheduler.sched_e2e import (
    SchedulerProcess,
    condition,
    create_pod,
    events_about,
    eventually,
    get_pod,
    list_events,
    pod_manifest,
    scheduler_config,
)
from kubesched.cluster import ClusterInfo
from oci import Registry, attach_artifact, push_image, start_distribution

if TYPE_CHECKING:
    from conftest import AdminClient

NAMESPACE_PREFIX = "imgcompat-e2e"
NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
NODE_FEATURES = "/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{ns}/nodefeatures"
EVENT_REASON = "ImageCompatibilityUnavailable"

FEATURES: dict[str, dict[str, Any] | None] = {
    "old": {"attributes": {"kernel.version": {"elements": {"major": "5", "minor": "15"}}}},
    "avx": {
        "flags": {"cpu.cpuid": {"elements": {"AVX512F": {}, "AVX2": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "5", "minor": "4"}}},
    },
    "bare": None,  # no NodeFeature at all
}
#: A PCI device as nfd-worker publishes an NVIDIA GPU.
GPU = {"attributes": {"vendor": "10de", "class": "0300", "device": "20b0"}}


@contextlib.contextmanager
def registry_at(workdir: Path) -> Iterator[Registry]:
    reg = start_distribution(workdir)
    try:
        yield reg
    finally:
        reg.stop()


def node_features(client: AdminClient, ns: str, names: Mapping[str, str]) -> list[str]:
    """A NodeFeature per node that has features, named after it, in ``ns``; nfd-worker always
    publishes ``system.name``'s ``nodename``, which is how nfd-master names the node."""
    created = []
    for key, features in FEATURES.items():
        if features is None:
            continue
        node = names[key]
        attributes = {
            **features.get("attributes", {}),
            "system.name": {"elements": {"nodename": node}},
        }
        client.post(
            NODE_FEATURES.format(ns=ns),
            {
                "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
                "kind": "NodeFeature",
                "metadata": {"name": node, "namespace": ns, "labels": {NODE_NAME_LABEL: node}},
                "spec": {"features": {**features, "attributes": attributes}},
            },
        ).expect(201)
        created.append(node)
    return created


def config(profile: str, reg: Registry, **args: Any) -> dict[str, Any]:
    return scheduler_config(
        profile,
        profile_fields={
            "plugins": {"multiPoint": {"enabled": [{"name": "ImageCompatibility"}]}},
            "pluginConfig": [
                {
                    "name": "ImageCompatibility",
                    "args": {"plainHTTPRegistries": [reg.host], "registryTimeout": "2s", **args},
                }
            ],
        },
    )


def pod_with_image(
    client: AdminClient,
    ns: str,
    profile: str,
    name: str,
    image: str,
    group: str,
    *,
    pull_secret: str = "",
) -> None:
    spec: dict[str, Any] = {
        "nodeSelector": {GROUP_LABEL: group},
        "containers": [{"name": "c", "image": image}],
    }
    if pull_secret:
        spec["imagePullSecrets"] = [{"name": pull_secret}]
    create_pod(client, pod_manifest(name, ns, profile, spec=spec))


def bound(client: AdminClient, ns: str, name: str, proc: SchedulerProcess) -> str:
    pod = eventually(
        lambda: get_pod(client, ns, name),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=60,
        what=f"pod {name} to be bound",
        watch=proc,
    )
    return str(pod["spec"]["nodeName"])


def unschedulable_message(
    client: AdminClient, ns: str, name: str, proc: SchedulerProcess, contains: str
) -> str:
    pod = eventually(
        lambda: get_pod(client, ns, name),
        lambda p: contains in str((condition(p, "PodScheduled") or {}).get("message", "")),
        timeout=60,
        what=f"pod {name}'s PodScheduled condition to say {contains!r}",
        watch=proc,
    )
    assert not pod["spec"].get("nodeName")
    return str((condition(pod, "PodScheduled") or {})["message"])


def warning_event(client: AdminClient, ns: str, pod: str, proc: SchedulerProcess) -> str:
    events = eventually(
        lambda: events_about(list_events(client, ns), pod, EVENT_REASON),
        bool,
        timeout=60,
        what=f"a {EVENT_REASON} event about {pod}",
        watch=proc,
    )
    assert events[0]["type"] == "Warning"
    return str(events[0]["note"])


@dataclass
class Setup:
    """Three nodes of a group of their own with their NodeFeatures, and a profile."""

    group: str
    names: dict[str, str]
    profile: str


@contextlib.contextmanager
def setup(client: AdminClient, features_ns: str, prefix: str) -> Iterator[Setup]:
    """Nodes and NodeFeatures (in ``features_ns``), deleted at the end."""
    install_nfd_crds(client)
    g = new_group()
    names = {k: f"{prefix}-{g}-{k}" for k in FEATURES}
    with nodes(client, [annotated_node(n, g) for n in names.values()]):
        created = node_features(client, features_ns, names)
        try:
            yield Setup(g, names, f"{prefix}-{g}")
        finally:
            for name in created:
                client.delete(f"{NODE_FEATURES.format(ns=features_ns)}/{name}")


def test_pods_land_only_on_compatible_nodes(
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    namespace: str,
    tmp_path: Path,
) -> None:
    with (
        registry_at(tmp_path / "registry") as reg,
        setup(admin_client, namespace, "ic") as s,
    ):
        g, names, profile = s.group, s.names, s.profile
        compatible = push_image(reg, "app", "v1")
        attach_artifact(reg, "app", compatible, AVX512_OR_NEW_KERNEL)
        gpu = push_image(reg, "gpu-app", "v1")
        attach_artifact(reg, "gpu-app", gpu, NVIDIA_GPU)
        push_image(reg, "plain", "v1")
        push_image(reg, "late", "v1")
        late_image = reg.image("late", "v1")
        with scheduler(config(profile, reg), tmp_path, control_plane.kubeconfig) as proc:
            pod_with_image(
                admin_client, namespace, profile, "compatible", reg.image("app", "v1"), g
            )
            pod_with_image(admin_client, namespace, profile, "plain", reg.image("plain", "v1"), g)
            gpu_image = reg.image("gpu-app", "v1")
            pod_with_image(admin_client, namespace, profile, "gpu", gpu_image, g)
            # Only "avx" has AVX-512, and no node has kernel 6.
            assert bound(admin_client, namespace, "compatible", proc) == names["avx"]
            assert bound(admin_client, namespace, "plain", proc) in names.values()
            message = unschedulable_message(
                admin_client, namespace, "gpu", proc, f"image {gpu_image} not compatible"
            )
            assert f'3 image {gpu_image} not compatible: rule "gpu"' in message
            # nfd-worker finds an NVIDIA GPU on "old": the NodeFeature update (which
            # ImageCompatibility registered) retries "gpu", and it fits there now.
            admin_client.patch(
                f"{NODE_FEATURES.format(ns=namespace)}/{names['old']}",
                {"spec": {"features": {"instances": {"pci.device": {"elements": [GPU]}}}}},
            ).expect(200)
            assert bound(admin_client, namespace, "gpu", proc) == names["old"]
            # The registry goes away before "late"'s artifact was ever looked up: under
            # failurePolicy Fail the pod waits, retried, and a Warning event says why.
            reg.stop()
            pod_with_image(admin_client, namespace, profile, "late", late_image, g)
            unschedulable_message(
                admin_client,
                namespace,
                "late",
                proc,
                f"cannot fetch the image compatibility artifact of {late_image}",
            )
            note = warning_event(admin_client, namespace, "late", proc)
            assert "failurePolicy Fail" in note
            assert not get_pod(admin_client, namespace, "late")["spec"].get("nodeName")


def test_ignore_policy_schedules_when_the_registry_is_down(
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    namespace: str,
    tmp_path: Path,
) -> None:
    with (
        registry_at(tmp_path / "registry") as reg,
        setup(admin_client, namespace, "ii") as s,
    ):
        g, profile = s.group, s.profile
        image = push_image(reg, "app", "v1")
        attach_artifact(reg, "app", image, NVIDIA_GPU)
        reg.stop()
        cfg = config(profile, reg, failurePolicy="Ignore")
        with scheduler(cfg, tmp_path, control_plane.kubeconfig) as proc:
            # No node has the GPU the spec asks for, but the spec cannot be read: Ignore lets
            # the pod schedule, and says so.
            pod_with_image(admin_client, namespace, profile, "p", reg.image("app", "v1"), g)
            assert bound(admin_client, namespace, "p", proc) in s.names.values()
            note = warning_event(admin_client, namespace, "p", proc)
            assert "failurePolicy Ignore" in note


def test_a_pods_pull_secret_opens_a_registry_behind_auth(
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    namespace: str,
    tmp_path: Path,
    oci_auth_registry: Registry,
    unique_repo: str,
) -> None:
    reg = oci_auth_registry
    secret = reg.dockerconfigjson_secret("pull", namespace)
    admin_client.post(f"/api/v1/namespaces/{namespace}/secrets", secret).expect(201)
    image = reg.image(unique_repo, "v1")
    attach_artifact(reg, unique_repo, push_image(reg, unique_repo, "v1"), AVX512_OR_NEW_KERNEL)
    other_repo = f"{unique_repo}-other"
    other = reg.image(other_repo, "v1")
    attach_artifact(reg, other_repo, push_image(reg, other_repo, "v1"), AVX512_OR_NEW_KERNEL)
    with (
        setup(admin_client, namespace, "ia") as s,
        scheduler(config(s.profile, reg), tmp_path, control_plane.kubeconfig) as proc,
    ):
        pod_with_image(
            admin_client, namespace, s.profile, "with-secret", image, s.group, pull_secret="pull"
        )
        assert bound(admin_client, namespace, "with-secret", proc) == s.names["avx"]
        # Without a secret the registry refuses: the pod waits (failurePolicy Fail). (A spec
        # once fetched serves every pod of the image: whether a pod may pull it is kubelet's
        # business, so this pod asks for an image not looked up yet.)
        pod_with_image(admin_client, namespace, s.profile, "without", other, s.group)
        message = unschedulable_message(
            admin_client,
            namespace,
            "without",
            proc,
            f"cannot fetch the image compatibility artifact of {other}",
        )
        assert "no image pull secret matches" in message
