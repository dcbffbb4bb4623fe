"""Validation: every problem reported, each with kube-scheduler's path and wording."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.config import (
    ConfigError,
    DefaultPreemptionArgs,
    FeatureGates,
    FieldError,
    InterPodAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    PodTopologySpreadArgs,
    ResourceSpec,
    TopologySpreadConstraint,
    VolumeBindingArgs,
    default_config,
    load_config_from_dict,
    validate_args,
    validate_config,
)

DOC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def errors_of(doc: dict[str, Any], features: FeatureGates | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_from_dict({**DOC, **doc}, features=features)
    return [str(e) for e in info.value.errors]


def test_default_config_is_valid() -> None:
    validate_config(default_config())


def test_all_errors_are_collected_with_paths() -> None:
    got = errors_of(
        {
            "parallelism": 0,
            "percentageOfNodesToScore": 110,
            "podInitialBackoffSeconds": 0,
            "podMaxBackoffSeconds": -1,
            "clientConnection": {"burst": -1},
            "profiles": [
                {"schedulerName": "x"},
                {"schedulerName": "x", "percentageOfNodesToScore": -1},
                {},
            ],
        }
    )
    assert got == [
        "clientConnection.burst: Invalid value: -1: must be non-negative",
        "parallelism: Invalid value: 0: should be an integer value greater than zero",
        "profiles[1].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
        'profiles[1].schedulerName: Duplicate value: "x"',
        "profiles[2].schedulerName: Required value",
        "percentageOfNodesToScore: Invalid value: 110: not in valid range [0-100]",
        "podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
        "podMaxBackoffSeconds: Invalid value: -1: "
        "must be greater than or equal to PodInitialBackoffSeconds",
    ]


def test_max_backoff_below_initial() -> None:
    assert errors_of({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 4}) == [
        "podMaxBackoffSeconds: Invalid value: 4: "
        "must be greater than or equal to PodInitialBackoffSeconds"
    ]


def test_leader_election() -> None:
    got = errors_of(
        {
            "leaderElection": {
                "leaseDuration": "-1s",
                "renewDeadline": "2s",
                "retryPeriod": "2s",
                "resourceLock": "endpointsleases",
            }
        }
    )
    assert got == [
        "leaderElection.leaseDuration: Invalid value: -1s: must be greater than zero",
        "leaderElection.leaseDuration: Invalid value: -1s: must be greater than renewDeadline (2s)",
        "leaderElection.renewDeadline: Invalid value: 2s: "
        "must be greater than retryPeriod*JitterFactor (1.2 × 2s = 2.4s)",
        'leaderElection.resourceLock: Invalid value: "endpointsleases": '
        'resourceLock value must be "leases"',
    ]


def test_leader_election_checks_are_skipped_when_not_electing() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "leaderElection": {
                "leaderElect": False,
                "leaseDuration": "1s",
                "renewDeadline": "5s",
                "resourceLock": "configmaps",
            },
        }
    )
    assert cfg.leader_election.leader_elect is False


def test_queue_sort_must_match_across_profiles() -> None:
    got = errors_of(
        {
            "profiles": [
                {"schedulerName": "a"},
                {
                    "schedulerName": "b",
                    "plugins": {"queueSort": {"enabled": [{"name": "Other"}]}},
                },
            ]
        }
    )
    assert got == [
        'profiles[1].plugins.queueSort: Invalid value: {"enabled":["Other"],"disabled":[]}: '
        "queueSort must be the same for all profiles"
    ]


def test_queue_sort_args_must_match_across_profiles() -> None:
    qs = {"queueSort": {"enabled": [{"name": "Sorter"}], "disabled": [{"name": "*"}]}}
    got = errors_of(
        {
            "profiles": [
                {"schedulerName": "a", "plugins": qs, "pluginConfig": [{"name": "Sorter"}]},
                {
                    "schedulerName": "b",
                    "plugins": qs,
                    "pluginConfig": [{"name": "Sorter", "args": {"x": 1}}],
                },
            ]
        }
    )
    assert got == [
        "profiles[1].pluginConfig[0].args: "
        "Invalid value: queueSort must be the same for all profiles"
    ]


def test_only_one_queue_sort_plugin() -> None:
    got = errors_of(
        {"profiles": [{"plugins": {"queueSort": {"enabled": [{"name": "A"}, {"name": "B"}]}}}]}
    )
    assert got == [
        "profiles[0].plugins.queueSort.enabled: Invalid value: 2: "
        "only one queue sort plugin can be enabled"
    ]


def test_duplicate_plugin_config() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {"name": "Foo", "args": {}},
                        {"name": "Foo", "args": {}},
                    ]
                }
            ]
        }
    )
    assert got == ['profiles[0].pluginConfig[1]: Duplicate value: "Foo"']


def test_plugin_config_for_disabled_plugin_is_allowed_but_validated() -> None:
    profile = {
        "plugins": {"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}},
        "pluginConfig": [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}}],
    }
    cfg = load_config_from_dict({**DOC, "profiles": [profile]})
    assert cfg.profiles[0].plugin_args("InterPodAffinity") == InterPodAffinityArgs(
        hard_pod_affinity_weight=5
    )
    profile["pluginConfig"] = [{"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 500}}]
    assert errors_of({"profiles": [profile]}) == [
        "profiles[0].pluginConfig[0].args.hardPodAffinityWeight: Invalid value: 500: "
        "not in valid range [0, 100]"
    ]


def test_negative_plugin_weight_uses_the_written_position() -> None:
    got = errors_of(
        {"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Custom", "weight": -3}]}}}]}
    )
    assert got == [
        "profiles[0].plugins.multiPoint.enabled[0].weight: Invalid value: -3: must be non-negative"
    ]


def test_node_resources_fit_args_error_path() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {"name": "Other"},
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "ignoredResources": ["example.com/ok", "bad name"],
                                "ignoredResourceGroups": ["example.com/x"],
                                "scoringStrategy": {
                                    "type": "Most",
                                    "resources": [
                                        {"name": "cpu", "weight": 0},
                                        {"name": "memory", "weight": 101},
                                    ],
                                },
                            },
                        },
                    ]
                }
            ]
        }
    )
    args = "profiles[0].pluginConfig[1].args"
    assert got == [
        f'{args}.ignoredResources[1]: Invalid value: "bad name": name part must consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        f'{args}.ignoredResourceGroups[0]: Invalid value: "example.com/x": '
        "resource group name can't contain '/'",
        f'{args}.scoringStrategy.type: Unsupported value: "Most": supported values: '
        '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"',
        f"{args}.scoringStrategy.resources[1].weight: Invalid value: 101: "
        "resource weight of memory not in valid range (0, 100]",
    ]


def test_requested_to_capacity_ratio_shape() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {
                                "scoringStrategy": {
                                    "type": "RequestedToCapacityRatio",
                                    "requestedToCapacityRatio": {
                                        "shape": [
                                            {"utilization": 50, "score": 5},
                                            {"utilization": 10, "score": 11},
                                            {"utilization": 101, "score": 0},
                                        ]
                                    },
                                }
                            },
                        }
                    ]
                }
            ]
        }
    )
    shape = "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio.shape"
    assert got == [
        f"{shape}[1].utilization: Invalid value: 10: values must be sorted in increasing order",
        f"{shape}[1].score: Invalid value: 11: not in valid range [0, 10]",
        f"{shape}[2].utilization: Invalid value: 101: not in valid range [0, 100]",
    ]


def test_requested_to_capacity_ratio_needs_its_parameters() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
                        }
                    ]
                }
            ]
        }
    )
    assert got == [
        "profiles[0].pluginConfig[0].args.scoringStrategy.requestedToCapacityRatio: "
        "Required value: the RequestedToCapacityRatio strategy needs a shape"
    ]


def test_scoring_strategy_without_type_is_rejected() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"resources": []}}}
                    ]
                }
            ]
        }
    )
    assert got == [
        'profiles[0].pluginConfig[0].args.scoringStrategy.type: Unsupported value: "": '
        'supported values: "LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'
    ]


def test_extenders() -> None:
    got = errors_of(
        {
            "extenders": [
                {
                    "urlPrefix": "http://a",
                    "prioritizeVerb": "prioritize",
                    "bindVerb": "bind",
                    "managedResources": [
                        {"name": "example.com/foo"},
                        {"name": "cpu"},
                        {"name": "kubernetes.io/x"},
                        {"name": "a/b/c"},
                    ],
                },
                {
                    "urlPrefix": "http://b",
                    "prioritizeVerb": "prioritize",
                    "weight": 2,
                    "bindVerb": "bind",
                    "managedResources": [{"name": "example.com/foo"}],
                },
            ]
        }
    )
    assert got == [
        "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it",
        'extenders[0].managedResources[1].name: Invalid value: "cpu": '
        "is an invalid extended resource name",
        'extenders[0].managedResources[2].name: Invalid value: "kubernetes.io/x": '
        "is an invalid extended resource name",
        'extenders[0].managedResources[3].name: Invalid value: "a/b/c": a qualified name must '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
        "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
        "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        'extenders[1].managedResources[0].name: Invalid value: "example.com/foo": '
        "duplicate extender managed resource name",
        'extenders: Invalid value: "found 2 extenders implementing bind": '
        "only one extender can implement bind",
    ]


def test_deprecated_bind_addresses_are_checked_when_set() -> None:
    got = errors_of({"healthzBindAddress": "0.0.0.0", "metricsBindAddress": "[::]:0"})
    assert got == [
        'healthzBindAddress: Invalid value: "0.0.0.0": '
        "must be a valid socket address format, (e.g. 0.0.0.0:10254 or [::]:10254)",
        'metricsBindAddress: Invalid value: "[::]:0": must be between 1 and 65535, inclusive',
    ]
    cfg = load_config_from_dict({**DOC, "healthzBindAddress": "127.0.0.1:10251"})
    assert cfg.healthz_bind_address == "127.0.0.1:10251"


# Plugin args validators on their own (cases from upstream's validation_pluginargs_test.go).
@pytest.mark.parametrize(
    ("args", "want"),
    [
        (DefaultPreemptionArgs(), []),
        (
            DefaultPreemptionArgs(min_candidate_nodes_percentage=-1),
            ["minCandidateNodesPercentage: Invalid value: -1: not in valid range [0, 100]"],
        ),
        (
            DefaultPreemptionArgs(min_candidate_nodes_percentage=900),
            ["minCandidateNodesPercentage: Invalid value: 900: not in valid range [0, 100]"],
        ),
        (
            DefaultPreemptionArgs(min_candidate_nodes_absolute=-1),
            ["minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"],
        ),
        (
            DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=0),
            [
                "minCandidateNodesPercentage: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesAbsolute",
                "minCandidateNodesAbsolute: Invalid value: 0: "
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ],
        ),
        (
            InterPodAffinityArgs(hard_pod_affinity_weight=101),
            ["hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"],
        ),
        (
            NodeResourcesBalancedAllocationArgs(
                resources=[
                    ResourceSpec(name="cpu", weight=2),
                    ResourceSpec(name="memory", weight=1),
                ]
            ),
            ["resources[0].weight: Invalid value: 2: must be 1"],
        ),
        (
            NodeResourcesBalancedAllocationArgs(
                resources=[ResourceSpec(name="cpu", weight=1), ResourceSpec(name="cpu", weight=1)]
            ),
            ['resources[1].name: Duplicate value: "cpu"'],
        ),
        (
            PodTopologySpreadArgs(
                defaulting_type="List",
                default_constraints=[
                    TopologySpreadConstraint(
                        max_skew=-1, topology_key="node", when_unsatisfiable="DoNotSchedule"
                    )
                ],
            ),
            ["defaultConstraints[0].maxSkew: Invalid value: -1: not in valid range (0, inf)"],
        ),
        (
            PodTopologySpreadArgs(
                defaulting_type="List",
                default_constraints=[
                    TopologySpreadConstraint(max_skew=1, when_unsatisfiable="DoNotSchedule")
                ],
            ),
            ["defaultConstraints[0].topologyKey: Required value: can not be empty"],
        ),
        (
            PodTopologySpreadArgs(
                defaulting_type="List",
                default_constraints=[
                    TopologySpreadConstraint(
                        max_skew=1, topology_key="node", when_unsatisfiable="unknown action"
                    )
                ],
            ),
            [
                'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "unknown action": '
                'supported values: "DoNotSchedule", "ScheduleAnyway"'
            ],
        ),
        (
            PodTopologySpreadArgs(
                defaulting_type="List",
                default_constraints=[
                    TopologySpreadConstraint(
                        max_skew=1, topology_key="node", when_unsatisfiable="DoNotSchedule"
                    ),
                    TopologySpreadConstraint(
                        max_skew=2, topology_key="node", when_unsatisfiable="DoNotSchedule"
                    ),
                ],
            ),
            ['defaultConstraints[1]: Duplicate value: "{node, DoNotSchedule}"'],
        ),
        (
            PodTopologySpreadArgs(defaulting_type="unknown"),
            ['defaultingType: Unsupported value: "unknown": supported values: "System", "List"'],
        ),
        (
            PodTopologySpreadArgs(
                defaulting_type="System",
                default_constraints=[
                    TopologySpreadConstraint(
                        max_skew=1, topology_key="key", when_unsatisfiable="DoNotSchedule"
                    )
                ],
            ),
            ['defaultingType: Invalid value: "System": when .defaultConstraints are not empty'],
        ),
        (PodTopologySpreadArgs(defaulting_type="List"), []),
        (VolumeBindingArgs(bind_timeout_seconds=0), []),
        (
            VolumeBindingArgs(bind_timeout_seconds=-10),
            [
                "bindTimeoutSeconds: Invalid value: -10: "
                "invalid BindTimeoutSeconds, should not be a negative value"
            ],
        ),
    ],
)
def test_plugin_args_validation(args: Any, want: list[str]) -> None:
    assert [str(e) for e in validate_args(args, path="")] == want


def test_topology_spread_label_selector_forbidden() -> None:
    got = errors_of(
        {
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "PodTopologySpread",
                            "args": {
                                "defaultingType": "List",
                                "defaultConstraints": [
                                    {
                                        "maxSkew": 1,
                                        "topologyKey": "key",
                                        "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": {"matchLabels": {"a": "b"}},
                                    }
                                ],
                            },
                        }
                    ]
                }
            ]
        }
    )
    assert got == [
        "profiles[0].pluginConfig[0].args.defaultConstraints[0].labelSelector: Forbidden: "
        "constraint must not define a selector, as they deduced for each pod"
    ]


def test_node_affinity_args() -> None:
    added = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "invalid/label/key", "operator": "In", "values": ["v"]},
                        {"key": "n", "operator": "Gt", "values": ["x"]},
                        {"key": "n", "operator": "Exists", "values": ["x"]},
                        {"key": "n", "operator": "Like", "values": []},
                    ]
                }
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {
                    "matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": ["node-1", "node-2"]}
                    ]
                },
            },
            {  # weight 0: ignored, as kube-scheduler ignores it
                "weight": 0,
                "preference": {"matchFields": [{"key": "x", "operator": "Exists"}]},
            },
        ],
    }
    got = errors_of(
        {
            "profiles": [
                {"pluginConfig": [{"name": "NodeAffinity", "args": {"addedAffinity": added}}]}
            ]
        }
    )
    base = "profiles[0].pluginConfig[0].args.addedAffinity"
    terms = f"{base}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
    assert got == [
        f'{terms}.matchExpressions[0].key: Invalid value: "invalid/label/key": a qualified name '
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
        "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
        "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS "
        "subdomain prefix and '/' (e.g. 'example.com/MyName')",
        f'{terms}.matchExpressions[1].values[0]: Invalid value: "x": '
        "for 'Gt', 'Lt' operators, the value must be an integer",
        f'{terms}.matchExpressions[2].values: Invalid value: ["x"]: '
        "values set must be empty for exists and does not exist",
        f'{terms}.matchExpressions[3].operator: Unsupported value: "Like": supported values: '
        '"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"',
        f"{base}.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields[0]"
        '.values: Invalid value: ["node-1","node-2"]: must have one element',
    ]


def test_volume_binding_shape_needs_the_feature_gate() -> None:
    profile = {
        "pluginConfig": [
            {
                "name": "VolumeBinding",
                "args": {"shape": [{"utilization": 1, "score": 1}, {"utilization": 3, "score": 3}]},
            }
        ]
    }
    assert errors_of({"profiles": [profile]}) == [
        'profiles[0].pluginConfig[0].args.shape: Invalid value: [{"utilization":1,"score":1},'
        '{"utilization":3,"score":3}]: unexpected field `shape`, remove it or turn on the '
        "feature gate StorageCapacityScoring"
    ]
    cfg = load_config_from_dict(
        {**DOC, "profiles": [profile]}, features=FeatureGates(storage_capacity_scoring=True)
    )
    args = cfg.profiles[0].plugin_args("VolumeBinding")
    assert isinstance(args, VolumeBindingArgs)
    assert [(p.utilization, p.score) for p in args.shape or []] == [(1, 1), (3, 3)]


def test_dynamic_resources_filter_timeout() -> None:
    profile = {"pluginConfig": [{"name": "DynamicResources", "args": {"filterTimeout": "-1s"}}]}
    assert errors_of({"profiles": [profile]}) == [
        "profiles[0].pluginConfig[0].args.filterTimeout: Invalid value: -1s: "
        "must be zero or positive"
    ]
    profile = {"pluginConfig": [{"name": "DynamicResources", "args": {"filterTimeout": "5s"}}]}
    assert errors_of({"profiles": [profile]}, FeatureGates(dra_scheduler_filter_timeout=False)) == [
        "profiles[0].pluginConfig[0].args.filterTimeout: Forbidden: "
        "DRASchedulerFilterTimeout feature gate is disabled"
    ]


def test_validate_config_on_constructed_config() -> None:
    cfg = default_config()
    cfg.parallelism = -4
    cfg.profiles[0].scheduler_name = ""
    with pytest.raises(ConfigError) as info:
        validate_config(cfg)
    assert info.value.errors == (
        FieldError(
            "parallelism", "Invalid value: -4: should be an integer value greater than zero"
        ),
        FieldError("profiles[0].schedulerName", "Required value"),
    )


def test_config_error_str() -> None:
    err = ConfigError(
        [("a.b", "Required value"), FieldError.invalid("c", "x", "bad")], source="f.yaml"
    )
    assert str(err) == 'f.yaml: 2 errors:\n  a.b: Required value\n  c: Invalid value: "x": bad'
    assert str(ConfigError([("a", "Required value")])) == "a: Required value"
    assert err.errors[0] == ("a.b", "Required value")
