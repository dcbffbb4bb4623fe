"""Plugin merging (upstream's TestMergePlugins), the enabled-plugins view, multiPoint expansion."""

from __future__ import annotations

from collections.abc import Collection

import pytest

from kubesched.config import (
    ConfigError,
    KubeSchedulerProfile,
    Plugin,
    PluginRef,
    Plugins,
    PluginSet,
    enabled_plugins,
    expand_plugins,
    load_config_from_dict,
    merge_plugins,
)

DOC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def ps(*enabled: str | tuple[str, int], disabled: tuple[str, ...] = ()) -> PluginSet:
    plugins = [
        Plugin(name=e) if isinstance(e, str) else Plugin(name=e[0], weight=e[1]) for e in enabled
    ]
    return PluginSet(enabled=plugins, disabled=[Plugin(name=d) for d in disabled])


MERGE_CASES = [
    (
        "AppendCustomPlugin",
        Plugins(filter=ps("CustomPlugin")),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin")),
    ),
    (
        "InsertAfterDefaultPlugins2",
        Plugins(filter=ps("CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",))),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(
            filter=ps(
                "DefaultPlugin1", "CustomPlugin", "DefaultPlugin2", disabled=("DefaultPlugin2",)
            )
        ),
    ),
    (
        "InsertBeforeAllPlugins",
        Plugins(filter=ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",))),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(filter=ps("CustomPlugin", "DefaultPlugin1", "DefaultPlugin2", disabled=("*",))),
    ),
    (
        "ReorderDefaultPlugins",
        Plugins(filter=ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",))),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(filter=ps("DefaultPlugin2", "DefaultPlugin1", disabled=("*",))),
    ),
    (
        "ApplyNilCustomPlugin",
        None,
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(filter=ps("DefaultPlugin1", "DefaultPlugin2")),
    ),
    (
        "CustomPluginOverrideDefaultPlugin",
        Plugins(filter=ps(("Plugin1", 2), ("Plugin3", 3))),
        Plugins(filter=ps("Plugin1", "Plugin2", "Plugin3")),
        Plugins(filter=ps(("Plugin1", 2), "Plugin2", ("Plugin3", 3))),
    ),
    (
        "OrderPreserveAfterOverride",
        Plugins(filter=ps(("Plugin2", 2), ("Plugin1", 1))),
        Plugins(filter=ps("Plugin1", "Plugin2", "Plugin3")),
        Plugins(filter=ps(("Plugin1", 1), ("Plugin2", 2), "Plugin3")),
    ),
    (
        "RepeatedCustomPlugin",
        Plugins(filter=ps("Plugin1", ("Plugin2", 2), "Plugin3", ("Plugin2", 4))),
        Plugins(filter=ps("Plugin1", "Plugin2", "Plugin3")),
        Plugins(filter=ps("Plugin1", ("Plugin2", 4), "Plugin3", ("Plugin2", 2))),
    ),
    (
        "Append custom MultiPoint plugin",
        Plugins(multi_point=ps("CustomPlugin")),
        Plugins(multi_point=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(multi_point=ps("DefaultPlugin1", "DefaultPlugin2", "CustomPlugin")),
    ),
    (
        "Append disabled Multipoint plugins",
        Plugins(
            multi_point=ps("CustomPlugin", "CustomPlugin2", disabled=("DefaultPlugin2",)),
            score=ps(disabled=("CustomPlugin2",)),
        ),
        Plugins(multi_point=ps("DefaultPlugin1", "DefaultPlugin2")),
        Plugins(
            multi_point=ps(
                "DefaultPlugin1", "CustomPlugin", "CustomPlugin2", disabled=("DefaultPlugin2",)
            ),
            score=ps(disabled=("CustomPlugin2",)),
        ),
    ),
    (
        "override default MultiPoint plugins with custom value",
        Plugins(multi_point=ps(("DefaultPlugin", 5))),
        Plugins(multi_point=ps("DefaultPlugin")),
        Plugins(multi_point=ps(("DefaultPlugin", 5))),
    ),
    (
        "disabled MultiPoint plugin in default set",
        Plugins(multi_point=ps("CustomPlugin")),
        Plugins(multi_point=ps("DefaultPlugin", disabled=("DefaultPlugin2",))),
        Plugins(multi_point=ps("DefaultPlugin", "CustomPlugin", disabled=("DefaultPlugin2",))),
    ),
    (
        "disabled MultiPoint plugin in default set for specific extension point",
        Plugins(multi_point=ps("CustomPlugin")),
        Plugins(multi_point=ps("DefaultPlugin"), score=ps(disabled=("DefaultPlugin2",))),
        Plugins(
            multi_point=ps("DefaultPlugin", "CustomPlugin"), score=ps(disabled=("DefaultPlugin2",))
        ),
    ),
    (
        "multipoint with only disabled gets merged",
        Plugins(multi_point=ps(disabled=("DefaultPlugin",))),
        Plugins(multi_point=ps("DefaultPlugin")),
        Plugins(multi_point=ps(disabled=("DefaultPlugin",))),
    ),
]


@pytest.mark.parametrize(
    ("custom", "default", "expected"),
    [c[1:] for c in MERGE_CASES],
    ids=[c[0] for c in MERGE_CASES],
)
def test_merge_plugins(custom: Plugins | None, default: Plugins, expected: Plugins) -> None:
    assert merge_plugins(default, custom) == expected


def test_merge_does_not_share_objects_with_inputs() -> None:
    default = Plugins(filter=ps("A"))
    merged = merge_plugins(default, None)
    merged.filter.enabled.append(Plugin(name="B"))
    assert default.filter == ps("A")


def profile_from(plugins: dict[str, object]) -> KubeSchedulerProfile:
    cfg = load_config_from_dict({**DOC, "profiles": [{"plugins": plugins}]})
    return cfg.profiles[0]


def test_disable_all_default_scores_and_enable_own() -> None:
    prof = profile_from(
        {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "NodeResourcesFit", "weight": 5}, {"name": "Custom"}],
            }
        }
    )
    view = enabled_plugins(prof)
    assert view.points["score"] == (PluginRef("NodeResourcesFit", 5), PluginRef("Custom", None))
    assert view.disabled["score"] == frozenset({"*"})
    assert PluginRef("TaintToleration", 3) in view.multi_point
    assert view.points["filter"] == ()


# A registry for expansion tests: which extension points each plugin implements (v1.34 in-tree).
IMPLEMENTS: dict[str, set[str]] = {
    "SchedulingGates": {"preEnqueue"},
    "PrioritySort": {"queueSort"},
    "NodeUnschedulable": {"filter"},
    "NodeName": {"filter"},
    "TaintToleration": {"filter", "preScore", "score"},
    "NodeAffinity": {"preFilter", "filter", "preScore", "score"},
    "NodePorts": {"preFilter", "filter"},
    "NodeResourcesFit": {"preFilter", "filter", "preScore", "score"},
    "VolumeRestrictions": {"preFilter", "filter"},
    "NodeVolumeLimits": {"preFilter", "filter"},
    "VolumeBinding": {"preFilter", "filter", "reserve", "preBind", "preScore", "score"},
    "VolumeZone": {"preFilter", "filter"},
    "PodTopologySpread": {"preFilter", "filter", "preScore", "score"},
    "InterPodAffinity": {"preFilter", "filter", "preScore", "score"},
    "DynamicResources": {"preEnqueue", "preFilter", "filter", "postFilter", "reserve", "preBind"},
    "DefaultPreemption": {"postFilter"},
    "NodeResourcesBalancedAllocation": {"preScore", "score"},
    "ImageLocality": {"score"},
    "DefaultBinder": {"bind"},
    "Custom": {"filter", "score"},
}


def implements(name: str) -> Collection[str] | None:
    return IMPLEMENTS.get(name)


def test_expand_default_profile() -> None:
    got = expand_plugins(profile_from({}), implements)
    assert got.points["score"] == (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "VolumeBinding",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    )
    assert dict(got.score_weights) == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "VolumeBinding": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert got.points["queueSort"] == ("PrioritySort",)
    assert got.points["bind"] == ("DefaultBinder",)
    assert got.points["postFilter"] == ("DynamicResources", "DefaultPreemption")
    assert got.points["preEnqueue"] == ("SchedulingGates", "DynamicResources")


def test_expand_specific_weight_overrides_multipoint_weight() -> None:
    prof = profile_from({"score": {"enabled": [{"name": "ImageLocality", "weight": 7}]}})
    got = expand_plugins(prof, implements)
    assert got.score_weights["ImageLocality"] == 7
    # an override keeps its explicit position: first, ahead of the multiPoint plugins
    assert got.points["score"][0] == "ImageLocality"
    assert got.points["score"].count("ImageLocality") == 1


def test_expand_disabled_at_specific_point_only() -> None:
    prof = profile_from({"score": {"disabled": [{"name": "TaintToleration"}]}})
    got = expand_plugins(prof, implements)
    assert "TaintToleration" not in got.points["score"]
    assert "TaintToleration" in got.points["filter"]
    assert "TaintToleration" not in got.score_weights


def test_expand_star_disables_multipoint_at_that_point() -> None:
    prof = profile_from(
        {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": "Custom", "weight": 4}]}}
    )
    got = expand_plugins(prof, implements)
    assert got.points["score"] == ("Custom",)
    assert dict(got.score_weights) == {"Custom": 4}
    assert "Custom" not in got.points["filter"]  # enabled for score only, not via multiPoint
    assert "TaintToleration" in got.points["filter"]  # multiPoint still expands elsewhere


def test_expand_custom_multipoint_plugin_with_zero_weight_scores_with_weight_one() -> None:
    prof = profile_from({"multiPoint": {"enabled": [{"name": "Custom", "weight": 0}]}})
    got = expand_plugins(prof, implements)
    assert got.points["filter"][-1] == "Custom"
    assert got.score_weights["Custom"] == 1


def test_expand_errors_name_the_entries() -> None:
    prof = profile_from(
        {
            "filter": {"enabled": [{"name": "Nope"}, {"name": "ImageLocality"}]},
            "score": {"enabled": [{"name": "Custom"}, {"name": "Custom"}]},
            "multiPoint": {"enabled": [{"name": "Custom"}, {"name": "Custom"}]},
        }
    )
    with pytest.raises(ConfigError) as info:
        expand_plugins(prof, implements, path="profiles[0].plugins")
    assert [str(e) for e in info.value.errors] == [
        'profiles[0].plugins.filter.enabled[0]: Not found: "Nope": '
        "no plugin with this name is registered",
        'profiles[0].plugins.filter.enabled[1]: Invalid value: "ImageLocality": '
        "plugin does not implement filter",
        'profiles[0].plugins.multiPoint.enabled[20]: Duplicate value: "Custom"',
        'profiles[0].plugins.score.enabled[1]: Duplicate value: "Custom"',
    ]


def test_expand_requires_one_queue_sort_and_a_binder() -> None:
    prof = profile_from(
        {
            "multiPoint": {"disabled": [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]},
        }
    )
    with pytest.raises(ConfigError) as info:
        expand_plugins(prof, implements, path="profiles[0].plugins")
    assert [str(e) for e in info.value.errors] == [
        "profiles[0].plugins.queueSort: Invalid value: []: "
        "exactly one queue sort plugin is required, got 0",
        "profiles[0].plugins.bind: Required value: at least one bind plugin is needed",
    ]
