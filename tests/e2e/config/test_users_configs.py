"""The users' configuration files, as written for older kube-scheduler releases, run by
``kubesched run`` against the local control plane, as their tutorials describe:

- the network-traffic tutorial's v1beta1 profile against a real Prometheus (only its
  Prometheus address changed, to the one the tests run): pods go to the quietest node;
- the v1beta2 multi-profile example: both profiles bind pods;
- a v1beta1 profile scoring with NodeResourcesMostAllocated: the pods are packed;
- the PreFilter tutorial's v1beta3 file with its plugin, the example package
  ``examples/my-prefilter`` installed with pip: a pod with the annotation stays Pending with the
  plugin's message, one without is bound;
- the ``extenders`` that ``kubesched config convert --from-policy`` writes for
  kube-safe-scheduler's Policy, accepted by the real kube-scheduler v1.34.
"""

from __future__ import annotations

import contextlib
import importlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml

from e2e.annotator.field_e2e import (
    GROUP_LABEL,
    annotated_node,
    bound_node,
    namespace,
    new_group,
    nodes,
    pod_in_group,
    wait_for_log,
)
from e2e.annotator.prom_e2e import Monitoring, shared_prometheus
from e2e.scheduler.sched_e2e import (
    SchedulerProcess,
    condition,
    create_pod,
    eventually,
    get_pod,
    kubesched_argv,
    pod_manifest,
    start_scheduler,
    tail,
)
from kubesched import cluster
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient

ROOT = Path(__file__).parents[3]
CONFIGS = ROOT / "tests" / "configs"
EXAMPLE = ROOT / "examples" / "my-prefilter"
TUTORIAL_PROMETHEUS = "http://10.0.0.4:9090"


def users_file(name: str, directory: Path, **replace: str) -> Path:
    """The saved file, with only the given strings replaced (addresses of this machine)."""
    text = (CONFIGS / name).read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    path = directory / name
    path.write_text(text)
    return path


@contextlib.contextmanager
def scheduler(config: Path, directory: Path, kubeconfig: Path) -> Iterator[SchedulerProcess]:
    """``kubesched run --config <the file>``, ready; its log is printed if the test fails."""
    proc = start_scheduler(config, directory, kubeconfig=kubeconfig)
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()
        print(f"\n===== kubesched (exit {proc.popen.returncode}) =====\n{tail(proc.log(), 200)}")


def pod_for(ns: str, name: str, profile: str, group: str) -> dict[str, Any]:
    return pod_manifest(name, ns, profile, spec={"nodeSelector": {GROUP_LABEL: group}})


@pytest.fixture(scope="module")
def monitoring() -> Iterator[Monitoring]:
    with shared_prometheus() as m:
        yield m


def test_network_traffic_tutorial_places_pods_on_the_quietest_node(
    monitoring: Monitoring,
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    tmp_path: Path,
) -> None:
    group = new_group()
    rates = {"a": 1.0e6, "b": 3.0e6, "c": 5.0e6}
    names = {k: f"nt-users-{group}-{k}" for k in rates}
    for k, rate in rates.items():
        monitoring.exporter.node_traffic(names[k], "eth0", rate, instance=f"users-{group}-{k}")
    monitoring.prometheus.wait_for_samples(
        f'node_network_receive_bytes_total{{kubernetes_node=~"nt-users-{group}-.*"}}', 3
    )
    config = users_file(
        "network-traffic-v1beta1.yaml",
        tmp_path,
        **{TUTORIAL_PROMETHEUS: monitoring.prometheus.url},
    )
    with (
        nodes(admin_client, [annotated_node(n, group) for n in names.values()]),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        log = proc.log()
        assert "args.ip: renamed to prometheusAddress" in log
        assert "args.timeRange: 60 seconds, read as timeRangeInMinutes: 1" in log
        # The first pod starts the background query (and is scored 50 everywhere).
        pod_in_group(admin_client, ns, "custom-scheduler", "warm-up", group)
        bound_node(admin_client, ns, "warm-up", watch=proc)
        wait_for_log(proc, "NetworkTraffic: traffic of")
        for i in range(3):
            pod_in_group(admin_client, ns, "custom-scheduler", f"p{i}", group, cpu="100m")
        placed = [bound_node(admin_client, ns, f"p{i}", watch=proc) for i in range(3)]
        # score disabled "*": NetworkTraffic alone decides, and a is the quietest
        assert placed == [names["a"]] * 3


def test_multi_profile_v1beta2_binds_pods_of_both_profiles(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    group = new_group()
    config = users_file("multi-profile-v1beta2.yaml", tmp_path)
    manifests = [annotated_node(f"mp-{group}-{k}", group) for k in "ab"]
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        assert "kept v1beta2's default score weights" in proc.log()
        for profile in ("default-scheduler", "no-scoring-scheduler"):
            pod_in_group(admin_client, ns, profile, profile, group)
        placed = {
            bound_node(admin_client, ns, p, watch=proc)
            for p in ("default-scheduler", "no-scoring-scheduler")
        }
        assert placed <= {m["metadata"]["name"] for m in manifests}


BIN_PACKING_V1BETA1 = """\
apiVersion: kubescheduler.config.k8s.io/v1beta1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: {profile}
  plugins:
    score:
      disabled:
      - name: NodeResourcesLeastAllocated
      enabled:
      - name: NodeResourcesMostAllocated
        weight: 5
  pluginConfig:
  - name: NodeResourcesMostAllocated
    args:
      resources:
      - name: cpu
        weight: 1
      - name: memory
        weight: 1
"""


def test_v1beta1_most_allocated_packs_pods_onto_one_node(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    group = new_group()
    profile = f"pack-{group}"
    config = tmp_path / "pack.yaml"
    config.write_text(BIN_PACKING_V1BETA1.format(profile=profile))
    manifests = [annotated_node(f"pack-{group}-{k}", group, cpu="4", memory="8Gi") for k in "abc"]
    with (
        nodes(admin_client, manifests),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        assert 'converted to NodeResourcesFit with scoringStrategy type "MostAllocated"' in (
            proc.log()
        )
        placed = []
        for i in range(4):
            # cpu and memory in the nodes' proportion: BalancedAllocation ties everywhere
            pod_in_group(admin_client, ns, profile, f"p{i}", group, cpu="500m", memory="1Gi")
            placed.append(bound_node(admin_client, ns, f"p{i}", watch=proc))
        # LeastAllocated would spread them; MostAllocated puts each next to the first
        assert placed == [placed[0]] * 4


@pytest.fixture(scope="module")
def my_prefilter() -> Iterator[Any]:
    """examples/my-prefilter installed into this environment with pip, as a user installs it."""
    pip = [sys.executable, "-m", "pip"]
    subprocess.run(
        [*pip, "install", "--quiet", "--no-deps", "--no-build-isolation", str(EXAMPLE)],
        check=True,
    )
    try:
        importlib.invalidate_caches()
        yield importlib.import_module("my_prefilter")
    finally:
        subprocess.run(
            [*pip, "uninstall", "--quiet", "--yes", "kubesched-my-prefilter"], check=True
        )


def test_the_example_plugin_is_registered(my_prefilter: Any) -> None:
    out = subprocess.run(
        [*kubesched_argv(), "plugins"], check=True, capture_output=True, text=True
    ).stdout
    assert any(
        line.split()[:4] == ["MyPreFilter", "entry", "point", "(my_prefilter)"]
        for line in out.splitlines()
    ), out


def test_prefilter_tutorial_keeps_annotated_pods_pending(
    my_prefilter: Any,
    admin_client: AdminClient,
    control_plane: ClusterInfo,
    tmp_path: Path,
) -> None:
    group = new_group()
    config = users_file("my-prefilter-v1beta3.yaml", tmp_path)
    with (
        nodes(admin_client, [annotated_node(f"pf-{group}-{k}", group) for k in "ab"]),
        namespace(admin_client) as ns,
        scheduler(config, tmp_path, control_plane.kubeconfig) as proc,
    ):
        annotated = pod_for(ns, "annotated", "default-scheduler", group)
        annotated["metadata"]["annotations"] = {my_prefilter.ANNOTATION: "staging"}
        create_pod(admin_client, annotated)
        create_pod(admin_client, pod_for(ns, "plain", "default-scheduler", group))
        assert bound_node(admin_client, ns, "plain", watch=proc).startswith(f"pf-{group}-")
        pod = eventually(
            lambda: get_pod(admin_client, ns, "annotated"),
            lambda p: condition(p, "PodScheduled") is not None,
            timeout=30,
            what="the annotated pod's PodScheduled condition",
            watch=proc,
        )
        cond = condition(pod, "PodScheduled")
        assert cond is not None
        assert (cond["status"], cond["reason"]) == ("False", "Unschedulable")
        assert my_prefilter.ERR_REASON in cond["message"]
        assert not get_pod(admin_client, ns, "annotated")["spec"].get("nodeName")
        assert get_pod(admin_client, ns, "annotated")["status"]["phase"] == "Pending"
        # Removing the annotation is the update that lets it through.
        admin_client.patch(
            f"/api/v1/namespaces/{ns}/pods/annotated",
            {"metadata": {"annotations": {my_prefilter.ANNOTATION: None}}},
        ).expect(200)
        assert bound_node(admin_client, ns, "annotated", watch=proc).startswith(f"pf-{group}-")


def test_policy_extenders_are_what_kube_scheduler_reads(
    admin_client: AdminClient, control_plane: ClusterInfo, tmp_path: Path
) -> None:
    policy = CONFIGS / "kube-safe-scheduler-policy.cfg"
    converted = subprocess.run(
        [*kubesched_argv(), "config", "convert", "--from-policy", str(policy)],
        check=True,
        capture_output=True,
        text=True,
    )
    document = yaml.safe_load(converted.stdout)
    # The section goes into the scheduler's own file; this one elects no leader (tests share
    # the cluster) and names a profile no other test uses.
    profile = f"policy-{uuid.uuid4().hex[:6]}"
    document["leaderElection"] = {"leaderElect": False}
    document["profiles"] = [{"schedulerName": profile}]
    path = tmp_path / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(document))
    group = new_group()
    name = f"ks-{profile}"
    with (
        nodes(admin_client, [annotated_node(f"{profile}-a", group)]),
        namespace(admin_client) as ns,
    ):
        started = cluster.start_kube_scheduler(path, cluster=control_plane.name, name=name)
        try:
            create_pod(admin_client, pod_for(ns, "p", profile, group))
            # Nothing listens on the Policy's http://localhost/scheduler: kube-scheduler's
            # answer names the extender it called, so it did read the converted section.
            pod = eventually(
                lambda: get_pod(admin_client, ns, "p"),
                lambda p: condition(p, "PodScheduled") is not None,
                timeout=30,
                what="the pod's PodScheduled condition",
            )
        finally:
            log = started.log.read_text(errors="replace")
            cluster.stop_component(name, cluster=control_plane.name)
            print(f"\n===== kube-scheduler =====\n{tail(log, 100)}")
        cond = condition(pod, "PodScheduled")
        assert cond is not None
        assert cond["status"] == "False"
        assert "http://localhost/scheduler/predicates/safe-overload" in cond["message"]
