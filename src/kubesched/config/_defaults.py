"""kube-scheduler's v1 defaulting (``SetDefaults_KubeSchedulerConfiguration``).

Defaulting happens after decoding and before validation. Most scalar defaults are already the
struct fields' defaults; this step adds what depends on the rest of the document:

- no profiles → one empty profile; a lone profile without a name → ``default-scheduler``;
- each profile's plugins are merged with the default plugin set (see ``_plugins``);
- each in-tree plugin's args in ``pluginConfig`` are decoded and defaulted, and every enabled
  in-tree plugin that takes args and has no entry gets one with default args, appended in
  name order;
- zero values that kube-scheduler treats as "not set" get their defaults: leader election
  durations, lock kind and names, client ``contentType``/``qps``/``burst``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import msgspec

from kubesched.config._args import PLUGIN_ARGS_TYPES, decode_args
from kubesched.config._errors import ConfigError, FieldError, child, index
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._plugins import default_plugins, enabled_plugin_names, merge_plugins
from kubesched.config._types import (
    _EXTENSION_POINT_ATTRS,
    DEFAULT_SCHEDULER_NAME,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    PluginConfig,
)


def args_types_for(
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None,
) -> Mapping[str, type[msgspec.Struct]]:
    """The in-tree args types plus the caller's; a caller may not redefine an in-tree plugin's."""
    if not plugin_args_types:
        return PLUGIN_ARGS_TYPES
    clash = sorted(set(plugin_args_types) & set(PLUGIN_ARGS_TYPES))
    if clash:
        raise ValueError(f"args types of in-tree plugins cannot be replaced: {', '.join(clash)}")
    return {**PLUGIN_ARGS_TYPES, **plugin_args_types}


def check_user_plugins(config: KubeSchedulerConfiguration) -> list[FieldError]:
    """Checks that must see the plugin lists as written, before the merge moves entries.

    Weights must not be negative (the framework multiplies node scores by them).
    """
    errors: list[FieldError] = []
    for i, profile in enumerate(config.profiles):
        base = child(index("profiles", i), "plugins")
        for point, attr in _EXTENSION_POINT_ATTRS.items():
            for j, p in enumerate(getattr(profile.plugins, attr).enabled):
                if p.weight is not None and p.weight < 0:
                    path = child(index(child(child(base, point), "enabled"), j), "weight")
                    errors.append(FieldError.invalid(path, p.weight, "must be non-negative"))
    return errors


def _default_profile(
    profile: KubeSchedulerProfile,
    path: str,
    features: FeatureGates,
    args_types: Mapping[str, type[msgspec.Struct]],
    errors: list[FieldError],
) -> None:
    profile.plugins = merge_plugins(default_plugins(features), profile.plugins)
    configured: set[str] = set()
    for j, pc in enumerate(profile.plugin_config):
        configured.add(pc.name)
        args_type = args_types.get(pc.name)
        if args_type is None:
            continue
        args_path = child(index(child(path, "pluginConfig"), j), "args")
        try:
            pc.args = decode_args(args_type, pc.args, args_path, features=features, validate=False)
        except ConfigError as exc:
            errors.extend(exc.errors)
    for name in enabled_plugin_names(profile):
        if name in configured or name not in PLUGIN_ARGS_TYPES:
            continue
        args = decode_args(PLUGIN_ARGS_TYPES[name], None, features=features, validate=False)
        profile.plugin_config.append(PluginConfig(name=name, args=args))


def set_defaults(
    config: KubeSchedulerConfiguration,
    *,
    features: FeatureGates | None = None,
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None = None,
) -> KubeSchedulerConfiguration:
    """A copy of ``config`` with kube-scheduler v1.34's defaults applied.

    ``features`` are the feature gates to default for (v1.34's defaults when omitted).
    ``plugin_args_types`` maps names of plugins outside this package to their args types, so
    their ``pluginConfig`` entries are decoded too (their defaults are their struct defaults).
    Raises :class:`ConfigError` if some plugin's args cannot be decoded.
    """
    features = features or DEFAULT_FEATURE_GATES
    args_types = args_types_for(plugin_args_types)
    cfg = copy.deepcopy(config)
    errors: list[FieldError] = []

    if not cfg.profiles:
        cfg.profiles.append(KubeSchedulerProfile())
    if len(cfg.profiles) == 1 and cfg.profiles[0].scheduler_name is None:
        cfg.profiles[0].scheduler_name = DEFAULT_SCHEDULER_NAME
    for i, profile in enumerate(cfg.profiles):
        _default_profile(profile, index("profiles", i), features, args_types, errors)

    le = cfg.leader_election
    if not le.resource_lock:
        le.resource_lock = "leases"
    if not le.resource_namespace:
        le.resource_namespace = "kube-system"
    if not le.resource_name:
        le.resource_name = "kube-scheduler"
    if le.lease_duration == 0:
        le.lease_duration = 15.0
    if le.renew_deadline == 0:
        le.renew_deadline = 10.0
    if le.retry_period == 0:
        le.retry_period = 2.0

    cc = cfg.client_connection
    if not cc.content_type:
        cc.content_type = "application/vnd.kubernetes.protobuf"
    if cc.qps == 0:
        cc.qps = 50.0
    if cc.burst == 0:
        cc.burst = 100

    if cfg.enable_contention_profiling is None:
        cfg.enable_contention_profiling = cfg.enable_profiling

    if errors:
        raise ConfigError(errors)
    return cfg
