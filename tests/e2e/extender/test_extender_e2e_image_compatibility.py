"""The image-compatibility agent behind the real kube-scheduler v1.34.4: the extender watches
NodeFeature objects (NFD's CRDs installed), fetches the artifacts attached to the pods' images
from a real registry, and kube-scheduler places pods on the only compatible node and reports the
extender's reason for the others; with the registry gone, a pod waits and the agent records a
Warning event on it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from ext_e2e import Extender, KubeScheduler, World, scheduler_config, wait_for

from compat_specs import AVX512_OR_NEW_KERNEL, NVIDIA_GPU
from e2e.nfd import install_nfd_crds
from kubesched.cluster import ClusterInfo
from oci import Registry, attach_artifact, push_image, start_distribution

if TYPE_CHECKING:
    from conftest import AdminClient

NODE_NAME_LABEL = "nfd.node.kubernetes.io/node-name"
EVENT_REASON = "ImageCompatibilityUnavailable"
AVX512 = {"flags": {"cpu.cpuid": {"elements": {"AVX512F": {}}}}}
OLD_KERNEL = {"attributes": {"kernel.version": {"elements": {"major": "5"}}}}


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    reg = start_distribution(tmp_path / "registry")
    try:
        yield reg
    finally:
        reg.stop()


def node_feature(client: AdminClient, namespace: str, node: str, features: Any) -> None:
    client.post(
        f"/apis/nfd.k8s-sigs.io/v1alpha1/namespaces/{namespace}/nodefeatures",
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {"name": node, "namespace": namespace, "labels": {NODE_NAME_LABEL: node}},
            "spec": {"features": features},
        },
    ).expect(201)


def test_kube_scheduler_places_pods_by_the_image_compatibility_agent(
    world: World,
    extender: Callable[..., Extender],
    kube_scheduler: Callable[[dict[str, Any]], KubeScheduler],
    control_plane: ClusterInfo,
    admin_client: AdminClient,
    registry: Registry,
    tmp_path: Path,
) -> None:
    install_nfd_crds(admin_client)
    avx, old = world.node("avx"), world.node("old")
    node_feature(admin_client, world.namespace, avx, AVX512)
    node_feature(admin_client, world.namespace, old, OLD_KERNEL)
    app = registry.image("app", "v1")
    attach_artifact(registry, "app", push_image(registry, "app", "v1"), AVX512_OR_NEW_KERNEL)
    gpu = registry.image("gpu", "v1")
    attach_artifact(registry, "gpu", push_image(registry, "gpu", "v1"), NVIDIA_GPU)
    push_image(registry, "late", "v1")
    late = registry.image("late", "v1")
    config = tmp_path / "agent.yaml"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "leaderElection": {"leaderElect": False},
                "profiles": [
                    {
                        "schedulerName": "image-compatibility",
                        "plugins": {
                            "multiPoint": {
                                "enabled": [{"name": "ImageCompatibility"}],
                                "disabled": [{"name": "*"}],
                            }
                        },
                        "pluginConfig": [
                            {
                                "name": "ImageCompatibility",
                                "args": {"plainHTTPRegistries": [registry.host]},
                            }
                        ],
                    }
                ],
            }
        )
    )
    # The administrator's identity: kube-scheduler's own may not read NodeFeatures.
    ext = extender(["--config", str(config), "--kubeconfig", str(control_plane.kubeconfig)])
    ext.wait_ready()

    # The agent cannot move kube-scheduler's pods back when a fetch ends, so the first look at
    # each image happens here: it answers "waiting" until the artifact is in its cache.
    def filtered(image: str) -> Any:
        pod = world.pod_manifest("probe", containers=[{"name": "c", "image": image}])
        return ext.call("filter", {"Pod": pod, "NodeNames": [avx, old]})

    first = filtered(app)
    assert first["FailedAndUnresolvableNodes"] == {
        avx: f"waiting for the image compatibility artifact of {app}",
        old: f"waiting for the image compatibility artifact of {app}",
    }
    answer = wait_for(lambda: (a := filtered(app))["NodeNames"] and a, 30, "the spec of app")
    assert answer["NodeNames"] == [avx]
    reason = f'image {app} not compatible: rule "avx512", rule "kernel"'
    assert answer["FailedAndUnresolvableNodes"] == {old: reason}
    wait_for(lambda: "waiting" not in json.dumps(filtered(gpu)), 30, "the spec of gpu")

    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": ext.url,
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 1,
                    "nodeCacheCapable": True,
                }
            ],
        )
    )
    world.pod("compatible", containers=[{"name": "c", "image": app}])
    assert world.wait_bound("compatible") == avx
    world.pod("gpu", containers=[{"name": "c", "image": gpu}])
    message = world.wait_unschedulable("gpu")
    assert f'image {gpu} not compatible: rule "gpu"' in message
    # The registry goes away before "late"'s artifact was looked up: the pod stays Pending
    # (failurePolicy Fail) and the agent says why in an event on it.
    registry.stop()
    world.pod("late", containers=[{"name": "c", "image": late}])
    warnings = wait_for(
        lambda: [e for e in world.events("late") if e["reason"] == EVENT_REASON],
        60,
        "the agent's warning about late",
    )
    assert warnings[0]["type"] == "Warning"
    assert f"cannot fetch the image compatibility artifact of {late}" in warnings[0]["message"]
    assert not world.get_pod("late")["spec"].get("nodeName")
