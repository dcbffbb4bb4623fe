"""v1beta1, v1beta2 and v1beta3 documents converted to v1: the users' files as written, each
conversion of kube-scheduler's with its warning, and what cannot be kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.config import (
    API_VERSION,
    ConfigError,
    FieldError,
    KubeSchedulerConfiguration,
    NodeResourcesFitArgs,
    convert_config,
    load_config,
    load_config_from_dict,
    parse_yaml,
)

CONFIGS = Path(__file__).parents[2] / "configs"


def load(name: str, **kwargs: Any) -> tuple[KubeSchedulerConfiguration, list[str]]:
    warnings: list[FieldError] = []
    cfg = load_config(CONFIGS / name, warn=warnings.append, **kwargs)
    return cfg, [str(w) for w in warnings]


def converted(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    data, warnings = convert_config(doc)
    return data, [str(w) for w in warnings]


def errors_of(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        convert_config(doc)
    return [str(e) for e in exc.value.errors]


def v1beta1(**profile: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
    }


def score_weights(cfg: KubeSchedulerConfiguration, profile: int = 0) -> dict[str, int | None]:
    plugins = cfg.profiles[profile].plugins
    return {p.name: p.weight for p in plugins.score.enabled}


# ---------------------------------------------------------------------------------------------
# The users' files, saved as they are


def test_network_traffic_tutorial_loads_with_a_warning_per_converted_field() -> None:
    cfg, warnings = load("network-traffic-v1beta1.yaml")
    args = cfg.profiles[0].plugin_args("NetworkTraffic")
    assert args == {
        "prometheusAddress": "http://10.0.0.4:9090",
        "networkInterface": "eth0",
        "timeRangeInMinutes": 1,
    }
    assert cfg.profiles[0].scheduler_name == "custom-scheduler"
    assert cfg.client_connection.kubeconfig == "/etc/srv/kubernetes/kube-scheduler/kubeconfig"
    assert warnings == [
        'apiVersion: "kubescheduler.config.k8s.io/v1beta1": converted to '
        "kubescheduler.config.k8s.io/v1",
        "profiles[0].pluginConfig[0].args.ip: renamed to prometheusAddress",
        "profiles[0].pluginConfig[0].args.deviceName: renamed to networkInterface "
        "(the device name, matched exactly)",
        "profiles[0].pluginConfig[0].args.timeRange: 60 seconds, read as timeRangeInMinutes: 1 "
        "(the tutorial's plugin counts timeRange in seconds)",
    ]


def test_multi_profile_v1beta2_keeps_its_default_weights() -> None:
    cfg, warnings = load("multi-profile-v1beta2.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler", "no-scoring-scheduler"]
    assert score_weights(cfg, 0) == {
        "TaintToleration": 1,
        "NodeAffinity": 1,
        "InterPodAffinity": 1,
    }
    no_scoring = cfg.profiles[1].plugins
    assert [p.name for p in no_scoring.score.disabled] == ["*"]
    assert [p.name for p in no_scoring.pre_score.disabled] == ["*"]
    assert not no_scoring.score.enabled
    assert warnings == [
        'apiVersion: "kubescheduler.config.k8s.io/v1beta2": converted to '
        "kubescheduler.config.k8s.io/v1",
        "profiles[0].plugins.score: kept v1beta2's default score weights TaintToleration 1, "
        "NodeAffinity 1, InterPodAffinity 1 (v1's defaults are 3, 2, 2)",
    ]


def test_custom_plugins_v1beta1_names_the_missing_plugins_after_the_file() -> None:
    path = CONFIGS / "custom-plugins-v1beta1.yaml"
    with pytest.raises(ConfigError) as exc:
        load_config(path, plugin_names={"TaintToleration", "NodeAffinity", "InterPodAffinity"})
    assert str(exc.value) == (
        f"{path}: 2 errors:\n"
        '  profiles[0].plugins.score.enabled[0]: Not found: "MyCustomPluginA": '
        "no plugin with this name is registered\n"
        '  profiles[0].plugins.score.enabled[1]: Not found: "MyCustomPluginB": '
        "no plugin with this name is registered"
    )


def test_custom_plugins_v1beta1_converts_with_its_weights() -> None:
    cfg, _ = load("custom-plugins-v1beta1.yaml")
    assert score_weights(cfg) == {
        "MyCustomPluginA": 2,
        "MyCustomPluginB": 1,
        "TaintToleration": 1,
        "NodeAffinity": 1,
        "InterPodAffinity": 1,
    }
    assert [p.name for p in cfg.profiles[0].plugins.score.disabled] == ["PodTopologySpread"]


def test_prefilter_tutorial_v1beta3_changes_only_its_version() -> None:
    raw = parse_yaml((CONFIGS / "my-prefilter-v1beta3.yaml").read_text())
    data, warnings = converted(raw)
    assert data == {**raw, "apiVersion": API_VERSION}
    assert warnings == [
        'apiVersion: "kubescheduler.config.k8s.io/v1beta3": converted to '
        "kubescheduler.config.k8s.io/v1"
    ]
    cfg = load_config_from_dict(data)
    assert cfg.leader_election.leader_elect
    assert cfg.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert [p.name for p in cfg.profiles[0].plugins.multi_point.enabled][-1] == "MyPreFilter"


def test_a_v1_document_is_left_alone() -> None:
    doc = {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration", "profiles": [{}]}
    data, warnings = convert_config(doc)
    assert data is doc
    assert warnings == ()


def test_conversion_does_not_change_its_input() -> None:
    raw = parse_yaml((CONFIGS / "network-traffic-v1beta1.yaml").read_text())
    before = repr(raw)
    convert_config(raw)
    assert repr(raw) == before


def test_a_v1beta1_document_without_profiles_keeps_the_old_weights() -> None:
    doc = v1beta1()
    del doc["profiles"]
    cfg = load_config_from_dict(doc, warn=lambda _: None)
    assert cfg.profiles[0].scheduler_name == "default-scheduler"
    assert score_weights(cfg)["TaintToleration"] == 1


def test_alpha_versions_are_still_refused() -> None:
    with pytest.raises(ConfigError, match=r"v1alpha1.*no longer served"):
        load_config_from_dict(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1alpha1",
                "kind": "KubeSchedulerConfiguration",
            }
        )


# ---------------------------------------------------------------------------------------------
# v1beta1's resource scorers become NodeResourcesFit's scoring strategy


def test_most_allocated_becomes_the_fit_strategy_with_its_resources_and_weight() -> None:
    doc = v1beta1(
        plugins={
            "score": {
                "disabled": [{"name": "NodeResourcesLeastAllocated"}],
                "enabled": [{"name": "NodeResourcesMostAllocated", "weight": 5}],
            }
        },
        pluginConfig=[
            {
                "name": "NodeResourcesMostAllocated",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                    "kind": "NodeResourcesMostAllocatedArgs",
                    "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                },
            }
        ],
    )
    data, warnings = converted(doc)
    profile = data["profiles"][0]
    assert profile["plugins"]["score"] == {
        "disabled": [],
        "enabled": [
            {"name": "NodeResourcesFit", "weight": 5},
            {"name": "TaintToleration", "weight": 1},
            {"name": "NodeAffinity", "weight": 1},
            {"name": "InterPodAffinity", "weight": 1},
        ],
    }
    assert profile["pluginConfig"] == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
                }
            },
        }
    ]
    assert warnings[1:4] == [
        "profiles[0].pluginConfig[0].args: moved to NodeResourcesFit's args.scoringStrategy",
        "profiles[0].plugins.score.enabled[0]: converted to NodeResourcesFit with "
        'scoringStrategy type "MostAllocated"',
        "profiles[0].plugins.score.disabled[0]: dropped: NodeResourcesFit scores with "
        'strategy "MostAllocated"',
    ]
    cfg = load_config_from_dict(data)
    fit = cfg.profiles[0].plugin_args("NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFitArgs)
    assert fit.scoring_strategy is not None
    assert fit.scoring_strategy.type == "MostAllocated"
    resources = fit.scoring_strategy.resources
    assert [(r.name, r.weight) for r in resources] == [("cpu", 2), ("memory", 1)]


def test_requested_to_capacity_ratio_keeps_its_shape() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    doc = v1beta1(
        plugins={
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "RequestedToCapacityRatio", "weight": 2}],
            }
        },
        pluginConfig=[
            {"name": "RequestedToCapacityRatio", "args": {"shape": shape}},
            {"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}},
        ],
    )
    data, _ = converted(doc)
    cfg = load_config_from_dict(data)
    fit = cfg.profiles[0].plugin_args("NodeResourcesFit")
    assert isinstance(fit, NodeResourcesFitArgs)
    assert fit.ignored_resources == ["example.com/foo"]
    assert fit.scoring_strategy is not None
    assert fit.scoring_strategy.type == "RequestedToCapacityRatio"
    assert fit.scoring_strategy.requested_to_capacity_ratio is not None
    points = fit.scoring_strategy.requested_to_capacity_ratio.shape
    assert [(p.utilization, p.score) for p in points] == [(0, 0), (100, 10)]
    # "*" disabled the defaults: the converted plugin scores, and only it
    assert score_weights(cfg) == {"NodeResourcesFit": 2}


def test_the_default_least_allocated_needs_nothing() -> None:
    data, warnings = converted(v1beta1(plugins={"filter": {"disabled": [{"name": "NodePorts"}]}}))
    assert "NodeResourcesFit" not in str(data)
    assert not [w for w in warnings if "NodeResourcesFit" in w]


def test_least_allocated_args_alone_become_the_default_strategy_resources() -> None:
    doc = v1beta1(
        pluginConfig=[
            {
                "name": "NodeResourcesLeastAllocated",
                "args": {"resources": [{"name": "cpu", "weight": 1}]},
            }
        ]
    )
    data, _ = converted(doc)
    assert data["profiles"][0]["pluginConfig"] == [
        {
            "name": "NodeResourcesFit",
            "args": {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 1}],
                }
            },
        }
    ]


def test_disabling_least_allocated_stops_fit_from_scoring() -> None:
    data, warnings = converted(
        v1beta1(plugins={"score": {"disabled": [{"name": "NodeResourcesLeastAllocated"}]}})
    )
    assert data["profiles"][0]["plugins"]["score"]["disabled"] == [{"name": "NodeResourcesFit"}]
    assert warnings[1] == (
        "profiles[0].plugins.score.disabled[0]: NodeResourcesFit disabled at score: in v1beta1 it "
        "only filtered, and NodeResourcesLeastAllocated, which scored, is disabled"
    )
    cfg = load_config_from_dict(data)
    assert "NodeResourcesFit" in {p.name for p in cfg.profiles[0].plugins.score.disabled}


def test_two_resource_scorers_cannot_be_kept() -> None:
    doc = v1beta1(plugins={"score": {"enabled": [{"name": "NodeResourcesMostAllocated"}]}})
    assert errors_of(doc) == [
        "profiles[0].plugins.score.enabled: Invalid value: "
        '["NodeResourcesLeastAllocated","NodeResourcesMostAllocated"]: these plugins were '
        "replaced by NodeResourcesFit, which scores with one strategy; keep one of them"
    ]


def test_resource_scorers_are_v1beta1_only() -> None:
    doc = {**v1beta1(plugins={"score": {"enabled": [{"name": "NodeResourcesMostAllocated"}]}})}
    doc["apiVersion"] = "kubescheduler.config.k8s.io/v1beta2"
    data, _ = converted(doc)
    enabled = data["profiles"][0]["plugins"]["score"]["enabled"]
    assert enabled[0] == {"name": "NodeResourcesMostAllocated"}


# ---------------------------------------------------------------------------------------------
# Removed plugins, leader election, args type meta


def test_removed_plugins_are_dropped_with_their_reason() -> None:
    doc = v1beta1(
        plugins={
            "score": {
                "disabled": [{"name": "NodePreferAvoidPods"}, {"name": "SelectorSpread"}],
            },
            "filter": {"enabled": [{"name": "NodeLabel"}]},
        },
        pluginConfig=[{"name": "ServiceAffinity", "args": {"affinityLabels": ["zone"]}}],
    )
    data, warnings = converted(doc)
    profile = data["profiles"][0]
    assert profile["plugins"]["filter"] == {"enabled": []}
    assert "pluginConfig" not in profile or profile["pluginConfig"] == []
    assert warnings[1:5] == [
        'profiles[0].plugins.score.disabled[0]: "NodePreferAvoidPods" dropped: removed in '
        "v1beta3; the scheduler.alpha.kubernetes.io/preferAvoidPods annotation is no longer read",
        'profiles[0].plugins.score.disabled[1]: "SelectorSpread" dropped: removed in v1; '
        "PodTopologySpread's system default constraints spread the pods of a Service or workload",
        'profiles[0].plugins.filter.enabled[0]: "NodeLabel" dropped: removed in v1beta3; '
        "NodeAffinity matches node labels (its addedAffinity applies to every pod of the profile)",
        'profiles[0].pluginConfig[0]: "ServiceAffinity" dropped: removed in v1beta3; pod affinity '
        "in the pods' specs (InterPodAffinity) does its work",
    ]
    load_config_from_dict(data)


def test_an_enabled_node_label_with_labels_cannot_be_kept() -> None:
    doc = v1beta1(
        plugins={"filter": {"enabled": [{"name": "NodeLabel"}]}},
        pluginConfig=[{"name": "NodeLabel", "args": {"presentLabels": ["gpu"]}}],
    )
    assert errors_of(doc) == [
        'profiles[0].pluginConfig[0].args.presentLabels: Invalid value: ["gpu"]: NodeLabel was '
        "removed in v1beta3; NodeAffinity matches node labels (its addedAffinity applies to every "
        "pod of the profile); converting would drop this constraint, so write it there"
    ]


def test_legacy_locks_become_leases_and_args_type_meta_v1() -> None:
    doc = v1beta1(
        pluginConfig=[
            {
                "name": "InterPodAffinity",
                "args": {
                    "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
                    "kind": "InterPodAffinityArgs",
                    "hardPodAffinityWeight": 5,
                },
            }
        ]
    )
    doc["leaderElection"] = {"leaderElect": True, "resourceLock": "endpointsleases"}
    data, warnings = converted(doc)
    assert data["leaderElection"]["resourceLock"] == "leases"
    assert warnings[1] == (
        'leaderElection.resourceLock: "endpointsleases": read as "leases": kube-scheduler v1.34 '
        "elects its leader on a Lease only, and the endpoints and configmaps locks no longer exist"
    )
    assert warnings[-1] == (
        'profiles[0].pluginConfig[0].args.apiVersion: "kubescheduler.config.k8s.io/v1beta1": '
        "converted to kubescheduler.config.k8s.io/v1"
    )
    load_config_from_dict(data)


# ---------------------------------------------------------------------------------------------
# The network-traffic tutorial's args


def nt_profile(**args: Any) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "NetworkTraffic", "args": args}]}],
    }


def test_tutorial_args_are_renamed_in_a_v1_document_too() -> None:
    data, warnings = converted(nt_profile(ip="http://p:9090", deviceName="eth0.100", timeRange=180))
    assert data["profiles"][0]["pluginConfig"][0]["args"] == {
        "prometheusAddress": "http://p:9090",
        "networkInterface": r"eth0\.100",
        "timeRangeInMinutes": 3,
    }
    assert len(warnings) == 3


@pytest.mark.parametrize(
    ("args", "want"),
    [
        (
            {"timeRange": 90},
            "profiles[0].pluginConfig[0].args.timeRange: Invalid value: 90: timeRange counts "
            "seconds and NetworkTraffic's window is whole minutes: give timeRangeInMinutes instead",
        ),
        (
            {"timeRange": "60"},
            'profiles[0].pluginConfig[0].args.timeRange: Invalid value: "60": expected a whole '
            "number of seconds",
        ),
        (
            {"ip": "http://a:9090", "prometheusAddress": "http://b:9090"},
            "profiles[0].pluginConfig[0].args.ip: Forbidden: ip is the tutorial's name of "
            "prometheusAddress; give one",
        ),
    ],
)
def test_tutorial_args_that_cannot_be_kept(args: dict[str, Any], want: str) -> None:
    assert errors_of(nt_profile(**args)) == [want]


def test_conversion_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nt.yaml"
    path.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1beta1\nkind: KubeSchedulerConfiguration\n"
        "profiles:\n- pluginConfig:\n  - name: NetworkTraffic\n    args: {timeRange: 30}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_config(path, warn=lambda _: None)
    assert str(exc.value).startswith(f"{path}: profiles[0].pluginConfig[0].args.timeRange: ")


# ---------------------------------------------------------------------------------------------
# Names that match no plugin


REGISTERED = {"TaintToleration", "NodeResourcesFit", "NodeAffinity", "PrioritySort"}


def test_unknown_names_under_disabled_and_plugin_config_are_warnings() -> None:
    doc = {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "plugins": {"filter": {"disabled": [{"name": "TaintToleratio"}, {"name": "*"}]}},
                "pluginConfig": [
                    {"name": "NodeResourcesFitt", "args": {}},
                    {"name": "Zzz", "args": {}},
                ],
            }
        ],
    }
    warnings: list[FieldError] = []
    load_config_from_dict(doc, plugin_names=REGISTERED, warn=warnings.append)
    assert [str(w) for w in warnings] == [
        'profiles[0].plugins.filter.disabled[0]: "TaintToleratio": no plugin with this name is '
        'registered, so this disables nothing (did you mean "TaintToleration"?)',
        'profiles[0].pluginConfig[0]: "NodeResourcesFitt": no plugin with this name is '
        'registered, so these args are never read (did you mean "NodeResourcesFit"?)',
        'profiles[0].pluginConfig[1]: "Zzz": no plugin with this name is registered, so these '
        "args are never read",
    ]


def test_disabling_a_default_plugin_kubesched_lacks_is_no_warning() -> None:
    doc = {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}}}],
    }
    warnings: list[FieldError] = []
    load_config_from_dict(doc, plugin_names=REGISTERED, warn=warnings.append)
    assert warnings == []


def test_without_plugin_names_nothing_is_looked_up() -> None:
    doc = {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"plugins": {"score": {"enabled": [{"name": "Nope"}]}}}],
    }
    warnings: list[FieldError] = []
    load_config_from_dict(doc, warn=warnings.append)
    assert warnings == []


def test_warnings_are_logged_with_the_file_by_default(caplog: pytest.LogCaptureFixture) -> None:
    load_config(CONFIGS / "my-prefilter-v1beta3.yaml")
    assert f"{CONFIGS / 'my-prefilter-v1beta3.yaml'}: apiVersion: " in caplog.text
