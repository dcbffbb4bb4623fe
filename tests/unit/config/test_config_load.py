"""Loading files: a realistic multi-profile configuration, YAML problems, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubesched.config import (
    ConfigError,
    DynamicResourcesArgs,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    InterPodAffinityArgs,
    NodeResourcesFitArgs,
    PluginRef,
    PodTopologySpreadArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    TopologySpreadConstraint,
    UtilizationShapePoint,
    config_to_dict,
    enabled_plugins,
    load_config,
    load_config_from_dict,
    parse_yaml,
)

REALISTIC = """\
# Two schedulers: the default one tuned for spreading, and a bin-packing one for batch jobs.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/kubernetes/scheduler.conf
  qps: 100
  burst: 200
leaderElection:
  leaderElect: true
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
percentageOfNodesToScore: 100
podMaxBackoffSeconds: 30
profiles:
  - schedulerName: default-scheduler
    pluginConfig:
      - name: PodTopologySpread
        args:
          defaultingType: List
          defaultConstraints:
            - maxSkew: 1
              topologyKey: topology.kubernetes.io/zone
              whenUnsatisfiable: ScheduleAnyway
      - name: InterPodAffinity
        args:
          hardPodAffinityWeight: 5
  - schedulerName: batch
    percentageOfNodesToScore: 50
    plugins:
      multiPoint:
        enabled:
          - name: NetworkTraffic
            weight: 4
      score:
        disabled:
          - name: NodeResourcesBalancedAllocation
          - name: ImageLocality
        enabled:
          - name: NodeResourcesFit
            weight: 10
      postFilter:
        disabled:
          - name: "*"
    pluginConfig:
      - name: NodeResourcesFit
        args:
          ignoredResourceGroups: [example.com]
          scoringStrategy:
            type: RequestedToCapacityRatio
            resources:
              - name: cpu
                weight: 3
              - name: nvidia.com/gpu
                weight: 5
            requestedToCapacityRatio:
              shape:
                - utilization: 0
                  score: 0
                - utilization: 100
                  score: 10
      - name: NetworkTraffic
        args:
          prometheusAddress: http://prometheus:9090
          timeRangeInMinutes: 3
      - name: DynamicResources
        args:
          filterTimeout: 2.5s
extenders:
  - urlPrefix: https://gpu-extender.kube-system.svc:8443/scheduler
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 2
    enableHTTPS: true
    httpTimeout: 3s
    nodeCacheCapable: true
    ignorable: true
    tlsConfig:
      serverName: gpu-extender
      caData: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t
    managedResources:
      - name: example.com/fpga
        ignoredByScheduler: true
"""


@pytest.fixture
def realistic_file(tmp_path: Path) -> Path:
    path = tmp_path / "scheduler.yaml"
    path.write_text(REALISTIC)
    return path


def test_realistic_multi_profile_config(realistic_file: Path) -> None:
    cfg = load_config(realistic_file)
    assert cfg.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (100.0, 200)
    assert cfg.leader_election.lease_duration == 30.0
    assert cfg.percentage_of_nodes_to_score == 100
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 30)
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler", "batch"]

    default, batch = cfg.profiles
    assert default.plugin_args("PodTopologySpread") == PodTopologySpreadArgs(
        defaulting_type="List",
        default_constraints=[
            TopologySpreadConstraint(
                max_skew=1,
                topology_key="topology.kubernetes.io/zone",
                when_unsatisfiable="ScheduleAnyway",
            )
        ],
    )
    assert default.plugin_args("InterPodAffinity") == InterPodAffinityArgs(
        hard_pod_affinity_weight=5
    )
    assert default.plugin_args("NodeResourcesFit") == NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type="LeastAllocated",
            resources=[ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)],
        )
    )

    assert batch.percentage_of_nodes_to_score == 50
    view = enabled_plugins(batch)
    assert view.multi_point[-1] == PluginRef("NetworkTraffic", 4)
    assert view.points["score"] == (PluginRef("NodeResourcesFit", 10),)
    assert view.disabled["score"] == frozenset({"NodeResourcesBalancedAllocation", "ImageLocality"})
    assert view.disabled["postFilter"] == frozenset({"*"})
    assert batch.plugin_args("NodeResourcesFit") == NodeResourcesFitArgs(
        ignored_resource_groups=["example.com"],
        scoring_strategy=ScoringStrategy(
            type="RequestedToCapacityRatio",
            resources=[
                ResourceSpec(name="cpu", weight=3),
                ResourceSpec(name="nvidia.com/gpu", weight=5),
            ],
            requested_to_capacity_ratio=RequestedToCapacityRatioParam(
                shape=[
                    UtilizationShapePoint(utilization=0, score=0),
                    UtilizationShapePoint(utilization=100, score=10),
                ]
            ),
        ),
    )
    # An out-of-tree plugin's args stay raw until the plugin decodes them.
    assert batch.plugin_args("NetworkTraffic") == {
        "prometheusAddress": "http://prometheus:9090",
        "timeRangeInMinutes": 3,
    }
    assert batch.plugin_args("DynamicResources") == DynamicResourcesArgs(filter_timeout=2.5)

    assert cfg.extenders == [
        Extender(
            url_prefix="https://gpu-extender.kube-system.svc:8443/scheduler",
            filter_verb="filter",
            prioritize_verb="prioritize",
            weight=2,
            enable_https=True,
            http_timeout=3.0,
            node_cache_capable=True,
            ignorable=True,
            tls_config=ExtenderTLSConfig(
                server_name="gpu-extender", ca_data=b"-----BEGIN CERTIFICATE-----"
            ),
            managed_resources=[
                ExtenderManagedResource(name="example.com/fpga", ignored_by_scheduler=True)
            ],
        )
    ]


def test_round_trip_through_plain_data(realistic_file: Path) -> None:
    cfg = load_config(realistic_file)
    data = config_to_dict(cfg)
    assert data["leaderElection"]["leaseDuration"] == "30s"
    assert data["extenders"][0]["tlsConfig"]["caData"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
    assert data["extenders"][0]["enableHTTPS"] is True
    text = yaml.safe_dump(data)
    assert load_config_from_dict(yaml.safe_load(text)) == cfg


def test_json_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(
        '{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",'
        ' "parallelism": 4}'
    )
    assert load_config(path).parallelism == 4


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: cannot read the file: No such file or directory"
    assert info.value.source == str(path)


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert str(info.value) == f"{tmp_path}: cannot read the file: Is a directory"


def test_yaml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "profiles:\n"
        "  - schedulerName: a\n"
        "   plugins: {}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (err,) = info.value.errors
    assert err.path == ""
    assert err.message.startswith("invalid YAML at line 5, column 4: ")
    assert str(info.value).startswith(f"{path}: invalid YAML at line 5")


def test_duplicate_key_is_an_error_with_its_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert str(info.value) == (
        "invalid YAML at line 4, column 3: found duplicate key 'c' (while constructing a mapping)"
    )


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bin.yaml"
    path.write_bytes(b"apiVersion: \x81\x82\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: invalid YAML: invalid leading UTF-8 octet (character 0x81 at byte 12)"
    )


def test_a_scalar_document_is_not_a_configuration(tmp_path: Path) -> None:
    path = tmp_path / "scalar.yaml"
    path.write_text("just some text\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == f"{path}: expected a KubeSchedulerConfiguration object, got string"


def test_timestamps_stay_strings() -> None:
    cfg = load_config_from_dict(
        parse_yaml(
            "apiVersion: kubescheduler.config.k8s.io/v1\n"
            "kind: KubeSchedulerConfiguration\n"
            "profiles: [{schedulerName: 2024-01-01}]\n"
        )
    )
    assert cfg.profiles[0].scheduler_name == "2024-01-01"


def test_errors_from_a_file_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\n"
        "kind: KubeSchedulerConfiguration\n"
        "parallelism: 0\n"
        "profiles:\n"
        "  - schedulerName: a\n"
        "  - schedulerName: a\n"
    )
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value) == (
        f"{path}: 2 errors:\n"
        "  parallelism: Invalid value: 0: should be an integer value greater than zero\n"
        '  profiles[1].schedulerName: Duplicate value: "a"'
    )


def test_lookup_helpers(realistic_file: Path) -> None:
    cfg = load_config(realistic_file)
    assert cfg.profile("batch").percentage_of_nodes_to_score == 50
    with pytest.raises(KeyError):
        cfg.profile("nope")
    plugins = cfg.profile("batch").plugins
    assert plugins.extension_point("postFilter") is plugins.post_filter
    assert plugins.extension_point("multiPoint") is plugins.multi_point
    with pytest.raises(KeyError):
        plugins.extension_point("normalizeScore")
