"""The real kube-scheduler v1.34.4 scheduling through ``kubesched extender`` processes.

The extender's profile does what the stock scheduler's default profile does not: NodeAffinity
with an ``addedAffinity`` (pods go to ``pool=blue`` nodes only) and AnnotationGate (pods with a
``mycompany.com/environment`` annotation go nowhere). Each test has two nodes, blue and green,
that only its pods can use; with the stock scheduler alone the pods would spread over both.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ext_e2e import (
    Extender,
    KubeScheduler,
    World,
    free_port,
    scheduler_config,
    scheduler_kubeconfig,
    wait_for,
)

from kubesched.cluster import CertificateAuthority, ClusterInfo
from kubesched.plugins.annotation_gate import ERR_REASON_ANNOTATED

EXTENDER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: blue-only
  plugins:
    multiPoint:
      enabled: [{name: NodeAffinity}, {name: AnnotationGate}]
      disabled: [{name: "*"}]
  pluginConfig:
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{key: pool, operator: In, values: [blue]}]
"""
ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
GATED = ERR_REASON_ANNOTATED.format(key="mycompany.com/environment")
PODS = 6

StartExtender = Callable[..., Extender]
StartScheduler = Callable[[dict[str, Any]], KubeScheduler]


@pytest.fixture
def config_file(tmp_path: Path) -> str:
    path = tmp_path / "extender.yaml"
    path.write_text(EXTENDER_CONFIG)
    return str(path)


def blue_and_green(world: World) -> tuple[str, str]:
    return world.node("blue", labels={"pool": "blue"}), world.node(
        "green", labels={"pool": "green"}
    )


def test_node_names_filter_steers_pods_reasons_reach_the_event_and_the_extender_binds(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
    config_file: str,
) -> None:
    blue, green = blue_and_green(world)
    ext = extender(["--config", config_file, "--kubeconfig", scheduler_kubeconfig(control_plane)])
    ext.wait_ready()
    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": ext.url,
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "preemptVerb": "preempt",
                    "bindVerb": "bind",
                    "weight": 1,
                    "nodeCacheCapable": True,
                }
            ],
        )
    )
    pods = [world.pod(f"steered-{i}") for i in range(PODS)]
    assert [world.wait_bound(p) for p in pods] == [blue] * PODS
    # kube-scheduler bound none of them itself: the extender did, through the Binding API.
    assert ext.metric("extender_request_duration_seconds_count", verb="bind", code="200") == PODS
    assert ext.metric("extender_request_duration_seconds_count", verb="filter", code="200") >= PODS
    scheduled = [e for e in world.events(pods[0]) if e["reason"] == "Scheduled"]
    assert scheduled
    assert blue in scheduled[0]["message"]

    world.pod("gated", annotations={"mycompany.com/environment": "legacy"})
    message = world.wait_unschedulable("gated")
    assert message.startswith("0/")
    assert f"2 {GATED}" in message
    condition = world.scheduled_condition("gated")
    assert condition is not None
    assert condition["reason"] == "Unschedulable"
    failed = wait_for(
        lambda: [e for e in world.events("gated") if e["reason"] == "FailedScheduling"],
        15,
        "a FailedScheduling event",
    )
    assert GATED in failed[0]["message"]

    world.pod("wants-green", nodeSelector={"ext-run": world.run, "pool": "green"})
    message = world.wait_unschedulable("wants-green")
    # kube-scheduler's own NodeAffinity rules out blue; the extender rules out green.
    assert "1 node(s) didn't match Pod's node affinity/selector" in message
    assert f"1 {ENFORCED}" in message
    assert green not in message


def test_node_list_bodies_without_informers_steer_pods_too(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    config_file: str,
) -> None:
    blue, _ = blue_and_green(world)
    ext = extender(["--config", config_file, "--standalone"])
    ext.wait_ready()
    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": ext.url + "/blue-only",
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 5,
                }
            ],
        )
    )
    pods = [world.pod(f"listed-{i}") for i in range(PODS)]
    assert [world.wait_bound(p) for p in pods] == [blue] * PODS
    assert ext.metric("extender_cache_nodes", source="body") >= 2
    world.pod("gated", annotations={"mycompany.com/environment": "x"})
    assert f"2 {GATED}" in world.wait_unschedulable("gated")


def test_an_extender_that_is_down_fails_scheduling_unless_ignorable(
    world: World, kube_scheduler: StartScheduler
) -> None:
    world.node("a")
    dead = f"http://127.0.0.1:{free_port()}"
    kube_scheduler(
        scheduler_config(
            world.profile,
            [{"urlPrefix": dead, "filterVerb": "filter", "nodeCacheCapable": True}],
        )
    )
    world.pod("blocked")
    message = world.wait_unschedulable("blocked")
    assert f'Post "{dead}/filter"' in message
    assert "connection refused" in message
    condition = world.scheduled_condition("blocked")
    assert condition is not None
    assert condition["reason"] == "SchedulerError"
    assert world.get_pod("blocked")["spec"].get("nodeName") is None


def test_an_ignorable_extender_that_is_down_is_skipped(
    world: World, kube_scheduler: StartScheduler
) -> None:
    node = world.node("a")
    dead = f"http://127.0.0.1:{free_port()}"
    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": dead,
                    "filterVerb": "filter",
                    "prioritizeVerb": "prioritize",
                    "weight": 1,
                    "nodeCacheCapable": True,
                    "ignorable": True,
                }
            ],
        )
    )
    world.pod("through")
    assert world.wait_bound("through") == node


def test_preemption_asks_the_extender_which_nodes_are_worth_it(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
    config_file: str,
) -> None:
    low, high = f"{world.run}-low", f"{world.run}-high"
    for name, value in ((low, 10), (high, 1000)):
        world.client.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "metadata": {"name": name}, "value": value},
        ).expect(201)
    try:
        blue = world.node("blue", labels={"pool": "blue"}, pods="1")
        green = world.node("green", labels={"pool": "green"}, pods="1")
        # Both nodes full with low-priority pods placed directly.
        world.pod("low-blue", priority_class=low, nodeName=blue)
        world.pod("low-green", priority_class=low, nodeName=green)
        ext = extender(
            ["--config", config_file, "--kubeconfig", scheduler_kubeconfig(control_plane)]
        )
        ext.wait_ready()
        kube_scheduler(
            scheduler_config(
                world.profile,
                [
                    {
                        "urlPrefix": ext.url,
                        "filterVerb": "filter",
                        "preemptVerb": "preempt",
                        "nodeCacheCapable": True,
                    }
                ],
            )
        )
        world.pod("urgent", priority_class=high)
        nominated = wait_for(
            lambda: world.get_pod("urgent").get("status", {}).get("nominatedNodeName"),
            30,
            "a nominated node for the preemptor",
        )
        # Evicting low-green would not help: the extender turns green down for every pod.
        assert nominated == blue
        assert ext.metric("extender_request_duration_seconds_count", verb="preempt") >= 1
        assert world.get_pod("low-blue")["metadata"].get("deletionTimestamp")
        assert not world.get_pod("low-green")["metadata"].get("deletionTimestamp")
    finally:
        for name in (low, high):
            world.client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, str]:
    ca = CertificateAuthority.generate("extender-e2e-ca")
    ca.write(tmp_path / "ca.crt", tmp_path / "ca.key")
    ca.issue_serving_cert(["localhost"], ["127.0.0.1"], "kubesched-extender").write(
        tmp_path / "tls.crt", tmp_path / "tls.key"
    )
    ca.issue_client_cert("kube-scheduler").write(tmp_path / "client.crt", tmp_path / "client.key")
    return {p.name: str(p) for p in tmp_path.iterdir() if p.suffix in (".crt", ".key")}


def test_mutual_tls_with_the_tls_config_the_docs_show(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
    config_file: str,
    pki: dict[str, str],
) -> None:
    blue, _ = blue_and_green(world)
    ext = extender(
        [
            "--config",
            config_file,
            "--kubeconfig",
            scheduler_kubeconfig(control_plane),
            "--tls-cert",
            pki["tls.crt"],
            "--tls-key",
            pki["tls.key"],
            "--client-ca",
            pki["ca.crt"],
        ]
    )
    probe = ssl.create_default_context(cafile=pki["ca.crt"])
    probe.load_cert_chain(pki["client.crt"], pki["client.key"])
    ext.wait_ready(scheme="https", context=probe)
    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": f"https://127.0.0.1:{ext.port}",
                    "filterVerb": "filter",
                    "nodeCacheCapable": True,
                    "enableHTTPS": True,
                    "tlsConfig": {
                        "caFile": pki["ca.crt"],
                        "certFile": pki["client.crt"],
                        "keyFile": pki["client.key"],
                    },
                }
            ],
        )
    )
    world.pod("over-tls")
    assert world.wait_bound("over-tls") == blue


def test_mutual_tls_turns_away_a_scheduler_without_a_client_certificate(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
    config_file: str,
    pki: dict[str, str],
) -> None:
    blue_and_green(world)
    ext = extender(
        [
            "--config",
            config_file,
            "--kubeconfig",
            scheduler_kubeconfig(control_plane),
            "--tls-cert",
            pki["tls.crt"],
            "--tls-key",
            pki["tls.key"],
            "--client-ca",
            pki["ca.crt"],
        ]
    )
    probe = ssl.create_default_context(cafile=pki["ca.crt"])
    probe.load_cert_chain(pki["client.crt"], pki["client.key"])
    ext.wait_ready(scheme="https", context=probe)
    kube_scheduler(
        scheduler_config(
            world.profile,
            [
                {
                    "urlPrefix": f"https://127.0.0.1:{ext.port}",
                    "filterVerb": "filter",
                    "nodeCacheCapable": True,
                    "enableHTTPS": True,
                    "tlsConfig": {"caFile": pki["ca.crt"]},
                }
            ],
        )
    )
    world.pod("no-cert")
    message = world.wait_unschedulable("no-cert")
    assert f'Post "https://127.0.0.1:{ext.port}/filter"' in message
    assert world.get_pod("no-cert")["spec"].get("nodeName") is None


def test_profiles_with_inter_pod_affinity_and_spreading_get_their_informers(
    world: World, extender: StartExtender, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    # kube-scheduler's whole default profile: namespaces and workload selectors are watched too,
    # with no more rights than kube-scheduler's.
    config = tmp_path / "defaults.yaml"
    config.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    )
    ext = extender(["--config", str(config), "--kubeconfig", scheduler_kubeconfig(control_plane)])
    ext.wait_ready()

    def synced_log() -> str:
        text = ext.log.read_text()
        return text if "informers synced" in text else ""

    # Ready once every informer has synced; the line saying so is written a turn later.
    log = wait_for(synced_log, 5, "the extender to log that its informers synced")
    assert "forbidden" not in log.lower()
