"""Agents: short names for extender profiles, as kube-safe-scheduler names its agents.

``kubesched extender --agents safe,congestion`` serves one profile made of the plugins of each
named agent. An agent is nothing but a name, a list of registered plugin names and, optionally,
their score weights, their args, and environment variables that set args (kube-safe-scheduler's
agents are configured through the environment): :data:`AGENTS` holds kubesched's own, and
:func:`register_agent` adds more. An agent whose plugins are not registered cannot be served;
asking for it fails with an error naming the missing plugin, before anything listens.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.config import (
    ConfigError,
    KubeSchedulerConfiguration,
    decode_args,
    load_config_from_dict,
)
from kubesched.extender._errors import ExtenderError

__all__ = ["AGENTS", "Agent", "AgentError", "agents_config", "register_agent"]


class AgentError(ExtenderError):
    """An unknown agent name, or an agent whose plugins are not registered."""


@dataclass(frozen=True, slots=True)
class Agent:
    """A named profile: ``plugins`` run at every extension point they implement, in order."""

    name: str
    plugins: tuple[str, ...]
    description: str = ""
    #: Score weight per plugin (1 when not given).
    weights: Mapping[str, int] = field(default_factory=dict)
    #: ``pluginConfig`` args per plugin (defaults when not given).
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Environment variable -> (plugin, arg) it sets when not empty.
    env: Mapping[str, tuple[str, str]] = field(default_factory=dict)


#: kubesched's agents by name. The plugins behind several of them live in packages of their own;
#: an agent can be served once its plugins are registered (``kubesched plugins`` lists them).
AGENTS: dict[str, Agent] = {}


def register_agent(agent: Agent) -> None:
    """Make ``agent`` available to ``--agents`` (replacing one of the same name)."""
    AGENTS[agent.name] = agent


for _agent in (
    Agent(
        "safe",
        ("SafeOverload", "SafeBalance"),
        "risk-aware placement from each node's measured usage (mean, deviation, forecast)",
        # kube-safe-scheduler's example weighs safe-balance 10 and safe-overload 1.
        weights={"SafeOverload": 1, "SafeBalance": 10},
    ),
    Agent("congestion", ("Congestion",), "prefer nodes with a low congestion factor"),
    Agent("pigeon", ("PigeonHole",), "pigeon-holing: pack pods onto nodes whose free shape fits"),
    Agent(
        "network-traffic",
        ("NetworkTraffic",),
        "prefer nodes with little network traffic, as Prometheus measures it",
        env={"PROMETHEUS_ADDRESS": ("NetworkTraffic", "prometheusAddress")},
    ),
    Agent(
        "image-compatibility",
        ("ImageCompatibility",),
        "only nodes whose features match the compatibility artifact attached to the image",
        env={"FAILURE_POLICY": ("ImageCompatibility", "failurePolicy")},
    ),
    Agent(
        "annotation-gate",
        ("AnnotationGate",),
        "refuse pods carrying configured annotations",
    ),
):
    register_agent(_agent)


def parse_agents(spec: str) -> list[str]:
    """``"safe, congestion"`` → ``["safe", "congestion"]`` (duplicates dropped, order kept)."""
    names = [n.strip() for n in spec.split(",")]
    return list(dict.fromkeys(n for n in names if n))


def _profile(name: str, agents: Iterable[Agent], environ: Mapping[str, str]) -> dict[str, Any]:
    enabled: list[dict[str, Any]] = []
    plugin_config: list[dict[str, Any]] = []
    seen: set[str] = set()
    for agent in agents:
        from_env: dict[str, dict[str, str]] = {}
        for var, (plugin, arg) in agent.env.items():
            if environ.get(var):
                from_env.setdefault(plugin, {})[arg] = environ[var]
        for plugin in agent.plugins:
            if plugin in seen:
                continue
            seen.add(plugin)
            entry: dict[str, Any] = {"name": plugin}
            if plugin in agent.weights:
                entry["weight"] = agent.weights[plugin]
            enabled.append(entry)
            args = {**agent.args.get(plugin, {}), **from_env.get(plugin, {})}
            if args:
                plugin_config.append({"name": plugin, "args": args})
    profile: dict[str, Any] = {
        "schedulerName": name,
        "plugins": {"multiPoint": {"enabled": enabled, "disabled": [{"name": "*"}]}},
    }
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    return profile


def agents_config(
    names: Iterable[str],
    registered: Collection[str],
    *,
    plugin_args_types: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> KubeSchedulerConfiguration:
    """The configuration serving ``names``: first one profile with every agent's plugins, named
    after the agents joined by ``+``; then, with more than one agent, one profile per agent.

    ``registered`` are the plugin names that exist; ``environ`` (default ``os.environ``) the
    environment the agents' variables are read from. Raises :class:`AgentError` naming every
    unknown agent and every missing plugin, or the args that are invalid and the variables that
    set them.
    """
    environ = os.environ if environ is None else environ
    wanted = list(dict.fromkeys(names))
    if not wanted:
        raise AgentError("no agent named; known agents: " + ", ".join(sorted(AGENTS)))
    problems: list[str] = []
    agents: list[Agent] = []
    for name in wanted:
        agent = AGENTS.get(name)
        if agent is None:
            problems.append(f"unknown agent {name!r} (known agents: {', '.join(sorted(AGENTS))})")
            continue
        missing = [p for p in agent.plugins if p not in registered]
        for plugin in missing:
            problems.append(
                f"agent {name!r} needs plugin {plugin!r}, which is not registered "
                "(see `kubesched plugins`)"
            )
        agents.append(agent)
    if problems:
        raise AgentError("; ".join(problems))
    profiles = [_profile("+".join(wanted), agents, environ)]
    if len(agents) > 1:
        profiles.extend(_profile(a.name, [a], environ) for a in agents)
    document = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": profiles,
    }
    try:
        config = load_config_from_dict(
            document, plugin_args_types=plugin_args_types, source="--agents " + ",".join(wanted)
        )
        # Plugins from other packages get their args defaulted and checked when the framework
        # builds them; check them now, so that a missing variable is named before anything runs.
        combined = profiles[0]
        given = {pc["name"]: pc["args"] for pc in combined.get("pluginConfig", [])}
        for entry in combined["plugins"]["multiPoint"]["enabled"]:
            args_type = (plugin_args_types or {}).get(entry["name"])
            if args_type is not None:
                decode_args(args_type, given.get(entry["name"]), f"{entry['name']} args")
    except ConfigError as e:
        variables = [
            f"{var} ({plugin}.{arg})" for a in agents for var, (plugin, arg) in a.env.items()
        ]
        hint = f"; set through the environment: {', '.join(variables)}" if variables else ""
        raise AgentError(f"invalid configuration: {e}{hint}") from e
    return config
