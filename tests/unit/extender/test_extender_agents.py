"""Agent names and the profiles they stand for; profiles completed with a queue sort and binder."""

from __future__ import annotations

import pytest
from extender_fakes import config, registry

from kubesched.config import default_config, expand_plugins
from kubesched.extender import (
    AGENTS,
    BINDER,
    QUEUE_SORT,
    Agent,
    AgentError,
    agents_config,
    complete_profiles,
    parse_agents,
    register_agent,
)
from kubesched.framework import Snapshot, build_frameworks, extension_points_of, plugin_args_types

KUBE_SAFE_SCHEDULER_AGENTS = {
    "safe",
    "congestion",
    "pigeon",
    "network-traffic",
    "image-compatibility",
    "annotation-gate",
}


ENVIRON = {"PROMETHEUS_ADDRESS": "http://prometheus.monitoring:9090"}


def build(names: list[str], environ: dict[str, str] | None = None) -> dict[str, object]:
    r = registry()
    cfg = agents_config(
        names, set(r), plugin_args_types=plugin_args_types(r), environ=environ or ENVIRON
    )
    return dict(build_frameworks(complete_profiles(cfg, r), r, Snapshot()))


def test_every_agent_is_known() -> None:
    assert set(AGENTS) >= KUBE_SAFE_SCHEDULER_AGENTS


def test_parse_agents() -> None:
    assert parse_agents(" safe, congestion ,,safe") == ["safe", "congestion"]


def test_annotation_gate_agent_runs_its_plugin_alone() -> None:
    frameworks = build(["annotation-gate"])
    assert list(frameworks) == ["annotation-gate"]
    fwk = frameworks["annotation-gate"]
    points = fwk.plugins_by_point()  # type: ignore[attr-defined]
    assert points["preFilter"] == [("AnnotationGate", 1)]
    assert points["queueSort"] == [(QUEUE_SORT, 1)]
    assert points["bind"] == [(BINDER, 1)]
    assert "filter" not in points


@pytest.mark.parametrize("name", sorted(KUBE_SAFE_SCHEDULER_AGENTS))
def test_an_agent_is_served_once_its_plugins_are_registered(name: str) -> None:
    r = registry()
    missing = [p for p in AGENTS[name].plugins if p not in r]
    if not missing:
        assert name in build([name])
        return
    with pytest.raises(AgentError) as err:
        agents_config([name], set(r), environ=ENVIRON)
    for plugin in missing:
        assert f"agent {name!r} needs plugin {plugin!r}, which is not registered" in str(err.value)


def test_missing_plugins_and_unknown_agents_are_all_named() -> None:
    register_agent(Agent("test-missing", ("NoSuchPlugin", "AnnotationGate")))
    try:
        with pytest.raises(AgentError) as err:
            agents_config(["test-missing", "nope"], set(registry()))
    finally:
        del AGENTS["test-missing"]
    message = str(err.value)
    assert "agent 'test-missing' needs plugin 'NoSuchPlugin', which is not registered" in message
    assert "AnnotationGate" not in message
    assert "unknown agent 'nope' (known agents: " in message


def test_args_from_the_environment_and_a_hint_when_they_are_missing() -> None:
    register_agent(
        Agent(
            "env-gate",
            ("AnnotationGate",),
            env={"GATE_ANNOTATION": ("AnnotationGate", "annotations")},
        )
    )
    r = registry()
    try:
        with pytest.raises(AgentError) as err:
            agents_config(
                ["env-gate"],
                set(r),
                plugin_args_types=plugin_args_types(r),
                environ={"GATE_ANNOTATION": "not a list"},
            )
        frameworks = build(["env-gate"], environ={"OTHER": "x"})
    finally:
        del AGENTS["env-gate"]
    assert 'args.annotations: Invalid value: "not a list"' in str(err.value)
    assert "set through the environment: GATE_ANNOTATION (AnnotationGate.annotations)" in str(
        err.value
    )
    plugin = frameworks["env-gate"].plugin("AnnotationGate")  # type: ignore[attr-defined]
    assert plugin.annotations == ("mycompany.com/environment",)


def test_network_traffic_reads_prometheus_address_from_the_environment() -> None:
    r = registry()
    if "NetworkTraffic" not in r:
        pytest.skip("NetworkTraffic is not registered")
    with pytest.raises(AgentError, match="PROMETHEUS_ADDRESS"):
        agents_config(
            ["network-traffic"], set(r), plugin_args_types=plugin_args_types(r), environ={}
        )
    frameworks = build(["network-traffic"])
    plugin = frameworks["network-traffic"].plugin("NetworkTraffic")  # type: ignore[attr-defined]
    assert plugin.args.prometheus_address == ENVIRON["PROMETHEUS_ADDRESS"]


def test_no_agent_is_an_error() -> None:
    with pytest.raises(AgentError, match="no agent named"):
        agents_config([], set(registry()))


def test_several_agents_make_one_combined_profile_then_one_per_agent() -> None:
    register_agent(Agent("digits", ("Digits",), weights={"Digits": 3}))
    register_agent(Agent("odd", ("RejectOdd",)))
    try:
        frameworks = build(["digits", "odd"])
    finally:
        del AGENTS["digits"], AGENTS["odd"]
    assert list(frameworks) == ["digits+odd", "digits", "odd"]
    combined = frameworks["digits+odd"].plugins_by_point()  # type: ignore[attr-defined]
    assert combined["score"] == [("Digits", 3)]
    assert combined["filter"] == [("RejectOdd", 1)]


def test_agent_args_reach_the_plugin() -> None:
    register_agent(
        Agent("gate", ("AnnotationGate",), args={"AnnotationGate": {"annotations": ["a.io/x"]}})
    )
    try:
        frameworks = build(["gate"])
    finally:
        del AGENTS["gate"]
    plugin = frameworks["gate"].plugin("AnnotationGate")  # type: ignore[attr-defined]
    assert plugin.annotations == ("a.io/x",)


def test_complete_profiles_adds_queue_sort_and_binder_only_where_missing() -> None:
    r = registry()

    def implements(name: str) -> list[str] | None:
        cls = r.get(name)
        return None if cls is None else extension_points_of(cls)

    bare = complete_profiles(config("RejectOdd"), r).profiles[0]
    expanded = expand_plugins(bare, implements)
    assert expanded.points["queueSort"] == (QUEUE_SORT,)
    assert expanded.points["bind"] == (BINDER,)
    assert expanded.points["filter"] == ("RejectOdd",)

    full = config("PrioritySort", "DefaultBinder", "RejectOdd")
    assert complete_profiles(full, r) == full
    stock = default_config()  # kube-scheduler's defaults include both
    assert complete_profiles(stock, r) == stock
