"""Defaulting matches kube-scheduler v1.34 (cases follow upstream's v1 defaults_test.go)."""

from __future__ import annotations

import pytest

from kubesched.config import (
    DEFAULT_PLUGINS,
    DefaultPreemptionArgs,
    DynamicResourcesArgs,
    FeatureGates,
    InterPodAffinityArgs,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    Plugin,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
    PodTopologySpreadArgs,
    ResourceSpec,
    ScoringStrategy,
    TopologySpreadConstraint,
    UtilizationShapePoint,
    VolumeBindingArgs,
    decode_args,
    default_config,
    default_plugin_refs,
    load_config_from_dict,
    set_defaults,
)

# kube-scheduler v1.34 getDefaultPlugins(), DynamicResourceAllocation on (GA, default in 1.34).
V134_DEFAULT_MULTI_POINT = [
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", None),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
]

DOC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def expected_plugin_configs() -> list[PluginConfig]:
    """upstream's ``pluginConfigs`` for v1, plus DynamicResources (on by default in v1.34)."""
    cpu_mem = [ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)]
    return [
        PluginConfig(
            name="DefaultPreemption",
            args=DefaultPreemptionArgs(
                min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100
            ),
        ),
        PluginConfig(name="DynamicResources", args=DynamicResourcesArgs(filter_timeout=10.0)),
        PluginConfig(
            name="InterPodAffinity", args=InterPodAffinityArgs(hard_pod_affinity_weight=1)
        ),
        PluginConfig(name="NodeAffinity", args=NodeAffinityArgs()),
        PluginConfig(
            name="NodeResourcesBalancedAllocation",
            args=NodeResourcesBalancedAllocationArgs(resources=list(cpu_mem)),
        ),
        PluginConfig(
            name="NodeResourcesFit",
            args=NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(type="LeastAllocated", resources=list(cpu_mem))
            ),
        ),
        PluginConfig(
            name="PodTopologySpread", args=PodTopologySpreadArgs(defaulting_type="System")
        ),
        PluginConfig(name="VolumeBinding", args=VolumeBindingArgs(bind_timeout_seconds=600)),
    ]


def multi_point(cfg: KubeSchedulerConfiguration, i: int = 0) -> list[tuple[str, int | None]]:
    return [(p.name, p.weight) for p in cfg.profiles[i].plugins.multi_point.enabled]


def test_default_plugin_list_is_v134() -> None:
    assert [tuple(r) for r in DEFAULT_PLUGINS] == V134_DEFAULT_MULTI_POINT


def test_default_plugins_without_dra_drop_dynamic_resources_only() -> None:
    refs = default_plugin_refs(FeatureGates(dynamic_resource_allocation=False))
    assert [tuple(r) for r in refs] == [
        p for p in V134_DEFAULT_MULTI_POINT if p[0] != "DynamicResources"
    ]
    assert PluginRef("DynamicResources") not in refs


def test_empty_config_defaults() -> None:
    cfg = default_config()
    assert cfg.parallelism == 16
    assert cfg.enable_profiling is True
    assert cfg.enable_contention_profiling is True
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.retry_period) == (
        True,
        15.0,
        10.0,
        2.0,
    )
    assert (le.resource_lock, le.resource_namespace, le.resource_name) == (
        "leases",
        "kube-system",
        "kube-scheduler",
    )
    cc = cfg.client_connection
    assert (cc.qps, cc.burst, cc.content_type) == (50.0, 100, "application/vnd.kubernetes.protobuf")
    assert cfg.percentage_of_nodes_to_score == 0
    assert cfg.pod_initial_backoff_seconds == 1
    assert cfg.pod_max_backoff_seconds == 10
    assert cfg.delay_cache_until_active is False
    assert len(cfg.profiles) == 1
    prof = cfg.profiles[0]
    assert prof.scheduler_name == "default-scheduler"
    assert prof.percentage_of_nodes_to_score is None
    assert multi_point(cfg) == V134_DEFAULT_MULTI_POINT
    assert prof.plugin_config == expected_plugin_configs()


def test_loading_minimal_document_equals_default_config() -> None:
    assert load_config_from_dict(dict(DOC)) == default_config()


def test_no_scheduler_name_single_profile_gets_default_name() -> None:
    cfg = set_defaults(KubeSchedulerConfiguration(profiles=[KubeSchedulerProfile()]))
    assert cfg.profiles[0].scheduler_name == "default-scheduler"


def test_two_profiles() -> None:
    cfg = set_defaults(
        KubeSchedulerConfiguration(
            profiles=[
                KubeSchedulerProfile(plugin_config=[PluginConfig(name="FooPlugin")]),
                KubeSchedulerProfile(
                    scheduler_name="custom-scheduler",
                    plugins=Plugins(
                        bind=PluginSet(
                            enabled=[Plugin(name="BarPlugin")],
                            disabled=[Plugin(name="DefaultBinder")],
                        )
                    ),
                ),
            ]
        )
    )
    first, second = cfg.profiles
    # Only a lone profile gets a default name; validation then requires one.
    assert first.scheduler_name is None
    assert first.plugin_config == [PluginConfig(name="FooPlugin"), *expected_plugin_configs()]
    assert second.scheduler_name == "custom-scheduler"
    assert multi_point(cfg, 1) == V134_DEFAULT_MULTI_POINT
    assert second.plugins.bind == PluginSet(
        enabled=[Plugin(name="BarPlugin")], disabled=[Plugin(name="DefaultBinder")]
    )
    assert second.plugin_config == expected_plugin_configs()


def test_set_defaults_does_not_modify_its_input() -> None:
    original = KubeSchedulerConfiguration(profiles=[KubeSchedulerProfile()])
    set_defaults(original)
    assert original.profiles[0].scheduler_name is None
    assert original.profiles[0].plugin_config == []


def test_set_defaults_is_idempotent() -> None:
    once = default_config()
    assert set_defaults(once) == once


@pytest.mark.parametrize(
    ("doc", "global_pct", "profile_pct"),
    [
        ({"percentageOfNodesToScore": 50}, 50, None),
        ({"profiles": [{"percentageOfNodesToScore": 50}]}, 0, 50),
        ({"percentageOfNodesToScore": 10, "profiles": [{"percentageOfNodesToScore": 50}]}, 10, 50),
    ],
)
def test_percentage_of_nodes_to_score(
    doc: dict[str, object], global_pct: int, profile_pct: int | None
) -> None:
    cfg = load_config_from_dict({**DOC, **doc})
    assert cfg.percentage_of_nodes_to_score == global_pct
    assert cfg.profiles[0].percentage_of_nodes_to_score == profile_pct


def test_non_default_parallelism_and_delay_cache() -> None:
    cfg = load_config_from_dict({**DOC, "parallelism": 8, "delayCacheUntilActive": True})
    assert cfg.parallelism == 8
    assert cfg.delay_cache_until_active is True


def test_zero_values_mean_unset_for_leader_election_and_client() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "leaderElection": {
                "leaseDuration": "0s",
                "renewDeadline": "0",
                "retryPeriod": "0s",
                "resourceLock": "",
                "resourceName": "",
                "resourceNamespace": "",
            },
            "clientConnection": {"qps": 0, "burst": 0, "contentType": ""},
        }
    )
    le = cfg.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (15.0, 10.0, 2.0)
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "kube-scheduler",
        "kube-system",
    )
    cc = cfg.client_connection
    assert (cc.qps, cc.burst, cc.content_type) == (50.0, 100, "application/vnd.kubernetes.protobuf")


def test_contention_profiling_follows_profiling() -> None:
    cfg = load_config_from_dict({**DOC, "enableProfiling": False})
    assert cfg.enable_profiling is False
    assert cfg.enable_contention_profiling is False
    cfg = load_config_from_dict(
        {**DOC, "enableProfiling": True, "enableContentionProfiling": False}
    )
    assert cfg.enable_contention_profiling is False


def test_plugin_config_only_for_enabled_in_tree_plugins() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {
                            "disabled": [{"name": "NodeResourcesFit"}, {"name": "VolumeBinding"}]
                        }
                    }
                }
            ],
        }
    )
    names = [pc.name for pc in cfg.profiles[0].plugin_config]
    assert "NodeResourcesFit" not in names
    assert "VolumeBinding" not in names
    assert "DefaultPreemption" in names


def test_plugin_enabled_at_a_specific_point_also_gets_default_args() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"disabled": [{"name": "*"}]},
                        "score": {"enabled": [{"name": "NodeResourcesFit", "weight": 5}]},
                        "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                        "bind": {"enabled": [{"name": "DefaultBinder"}]},
                    }
                }
            ],
        }
    )
    assert [pc.name for pc in cfg.profiles[0].plugin_config] == ["NodeResourcesFit"]
    assert cfg.profiles[0].plugins.multi_point.enabled == []


def test_user_args_are_defaulted_in_place_and_keep_their_position() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "profiles": [
                {
                    "pluginConfig": [
                        {"name": "Custom", "args": {"anything": [1, 2]}},
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "MostAllocated"}},
                        },
                    ]
                }
            ],
        }
    )
    pcs = cfg.profiles[0].plugin_config
    assert pcs[0] == PluginConfig(name="Custom", args={"anything": [1, 2]})
    assert pcs[1].name == "NodeResourcesFit"
    assert pcs[1].args == NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type="MostAllocated",
            resources=[ResourceSpec(name="cpu", weight=1), ResourceSpec(name="memory", weight=1)],
        )
    )
    assert [pc.name for pc in pcs[2:]] == [
        "DefaultPreemption",
        "DynamicResources",
        "InterPodAffinity",
        "NodeAffinity",
        "NodeResourcesBalancedAllocation",
        "PodTopologySpread",
        "VolumeBinding",
    ]


# TestPluginArgsDefaults, through decode_args (decoding applies the same defaulting).
@pytest.mark.parametrize(
    ("args_type", "raw", "want"),
    [
        (
            DefaultPreemptionArgs,
            {},
            DefaultPreemptionArgs(
                min_candidate_nodes_percentage=10, min_candidate_nodes_absolute=100
            ),
        ),
        (
            DefaultPreemptionArgs,
            {"minCandidateNodesPercentage": 50},
            DefaultPreemptionArgs(
                min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=100
            ),
        ),
        (InterPodAffinityArgs, {}, InterPodAffinityArgs(hard_pod_affinity_weight=1)),
        (
            InterPodAffinityArgs,
            {"hardPodAffinityWeight": 0},
            InterPodAffinityArgs(hard_pod_affinity_weight=0),
        ),
        (
            InterPodAffinityArgs,
            {"hardPodAffinityWeight": 5},
            InterPodAffinityArgs(hard_pod_affinity_weight=5),
        ),
        (
            NodeResourcesBalancedAllocationArgs,
            {},
            NodeResourcesBalancedAllocationArgs(
                resources=[
                    ResourceSpec(name="cpu", weight=1),
                    ResourceSpec(name="memory", weight=1),
                ]
            ),
        ),
        (
            NodeResourcesBalancedAllocationArgs,
            {"resources": [{"name": "scalar.io/scalar1", "weight": 1}]},
            NodeResourcesBalancedAllocationArgs(
                resources=[ResourceSpec(name="scalar.io/scalar1", weight=1)]
            ),
        ),
        (
            NodeResourcesBalancedAllocationArgs,
            {
                "resources": [
                    {"name": "cpu"},
                    {"name": "scalar.io/scalar0"},
                    {"name": "scalar.io/scalar1", "weight": 1},
                ]
            },
            NodeResourcesBalancedAllocationArgs(
                resources=[
                    ResourceSpec(name="cpu", weight=1),
                    ResourceSpec(name="scalar.io/scalar0", weight=1),
                    ResourceSpec(name="scalar.io/scalar1", weight=1),
                ]
            ),
        ),
        (PodTopologySpreadArgs, {}, PodTopologySpreadArgs(defaulting_type="System")),
        (
            PodTopologySpreadArgs,
            {"defaultingType": ""},
            PodTopologySpreadArgs(defaulting_type="System"),
        ),
        (
            NodeResourcesFitArgs,
            {"scoringStrategy": {"type": "MostAllocated"}},
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    type="MostAllocated",
                    resources=[
                        ResourceSpec(name="cpu", weight=1),
                        ResourceSpec(name="memory", weight=1),
                    ],
                )
            ),
        ),
        (
            NodeResourcesFitArgs,
            {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "gpu.io/x"}]}},
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    type="MostAllocated", resources=[ResourceSpec(name="gpu.io/x", weight=1)]
                )
            ),
        ),
        (VolumeBindingArgs, {}, VolumeBindingArgs(bind_timeout_seconds=600, shape=None)),
        (DynamicResourcesArgs, {}, DynamicResourcesArgs(filter_timeout=10.0)),
        (DynamicResourcesArgs, {"filterTimeout": "0s"}, DynamicResourcesArgs(filter_timeout=0.0)),
    ],
)
def test_plugin_args_defaults(args_type: type, raw: dict[str, object], want: object) -> None:
    assert decode_args(args_type, raw) == want


def test_topology_spread_constraints_are_kept() -> None:
    got = decode_args(
        PodTopologySpreadArgs,
        {
            "defaultingType": "List",
            "defaultConstraints": [
                {"topologyKey": "planet", "whenUnsatisfiable": "DoNotSchedule", "maxSkew": 2}
            ],
        },
    )
    assert got.default_constraints == [
        TopologySpreadConstraint(
            topology_key="planet", when_unsatisfiable="DoNotSchedule", max_skew=2
        )
    ]


def test_volume_binding_shape_default_with_storage_capacity_scoring() -> None:
    got = decode_args(VolumeBindingArgs, {}, features=FeatureGates(storage_capacity_scoring=True))
    assert got.shape == [
        UtilizationShapePoint(utilization=0, score=10),
        UtilizationShapePoint(utilization=100, score=0),
    ]


def test_dynamic_resources_filter_timeout_not_defaulted_when_gate_off() -> None:
    got = decode_args(
        DynamicResourcesArgs, {}, features=FeatureGates(dra_scheduler_filter_timeout=False)
    )
    assert got.filter_timeout is None


def test_default_config_without_dra_has_no_dynamic_resources_args() -> None:
    cfg = default_config(features=FeatureGates(dynamic_resource_allocation=False))
    names = [pc.name for pc in cfg.profiles[0].plugin_config]
    assert "DynamicResources" not in names
    assert "DynamicResources" not in [n for n, _ in multi_point(cfg)]
