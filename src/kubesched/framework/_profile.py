"""Profiles of a KubeSchedulerConfiguration turned into running :class:`Framework` instances."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping

import msgspec

from kubesched.config import (
    PLUGIN_ARGS_TYPES,
    ConfigError,
    FieldError,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    decode_args,
    default_plugin_refs,
    expand_plugins,
)
from kubesched.framework._interface import APIClient, extension_points_of
from kubesched.framework._metrics import Metrics
from kubesched.framework._registry import Registry
from kubesched.framework._runtime import Framework
from kubesched.framework._snapshot import Snapshot

log = logging.getLogger(__name__)


def plugin_args_types(registry: Registry) -> dict[str, type[msgspec.Struct]]:
    """Args types of the registry's plugins that the configuration package does not know
    (out-of-tree plugins), for ``load_config(plugin_args_types=...)``."""
    return {
        name: cls.args_type
        for name, cls in registry.items()
        if cls.args_type is not None and name not in PLUGIN_ARGS_TYPES
    }


def build_frameworks(
    config: KubeSchedulerConfiguration,
    registry: Registry,
    snapshot: Snapshot,
    *,
    client: APIClient | None = None,
    rng: random.Random | None = None,
    metrics: Metrics | None = None,
) -> dict[str, Framework]:
    """One :class:`Framework` per profile, keyed by schedulerName, sharing ``snapshot``.

    Unknown plugins, plugins enabled at points they do not implement, and bad args are raised
    together as a :class:`ConfigError` naming each field, before anything contacts a cluster.
    """
    errors: list[FieldError] = []
    out: dict[str, Framework] = {}
    rng = rng or random.Random()

    def implements(name: str) -> list[str] | None:
        cls = registry.get(name)
        return None if cls is None else extension_points_of(cls)

    for i, configured_profile in enumerate(config.profiles):
        path = f"profiles[{i}]"
        profile = _without_unavailable_defaults(configured_profile, registry)
        try:
            expanded = expand_plugins(profile, implements, path=f"{path}.plugins")
        except ConfigError as e:
            errors.extend(e.errors)
            continue
        configured = {pc.name: (j, pc.args) for j, pc in enumerate(profile.plugin_config)}
        args: dict[str, object] = {}
        enabled = {name for names in expanded.points.values() for name in names}
        for name in sorted(enabled):
            cls = registry[name]
            if cls.args_type is None:
                continue
            j, raw = configured.get(name, (None, None))
            where = f"{path}.pluginConfig[{j}].args" if j is not None else f"{path}.pluginConfig"
            try:
                args[name] = decode_args(cls.args_type, _as_raw(raw), where)
            except ConfigError as e:
                errors.extend(e.errors)
        pct = profile.percentage_of_nodes_to_score
        if pct is None:
            pct = config.percentage_of_nodes_to_score
        plugins: Mapping[str, list[tuple[str, int]]] = {
            point: [(n, expanded.score_weights.get(n, 1) if point == "score" else 1) for n in names]
            for point, names in expanded.points.items()
            if names
        }
        name = profile.scheduler_name or "default-scheduler"
        out[name] = Framework(
            profile_name=name,
            registry=registry,
            plugins=plugins,
            plugin_args=args,
            snapshot=snapshot,
            client=client,
            percentage_of_nodes_to_score=pct,
            rng=rng,
            metrics=metrics,
        )
    if errors:
        raise ConfigError(errors)
    return out


def _without_unavailable_defaults(
    profile: KubeSchedulerProfile, registry: Registry
) -> KubeSchedulerProfile:
    """Drop kube-scheduler default plugins this build does not implement from multiPoint.

    The defaulted profile lists every plugin of kube-scheduler's default profile; the ones
    kubesched has not ported yet are left out (with a warning) instead of failing the profile.
    A plugin the user enables by name must still exist.
    """
    defaults = {ref.name for ref in default_plugin_refs()}
    multi = profile.plugins.multi_point
    missing = [p.name for p in multi.enabled if p.name in defaults and p.name not in registry]
    if not missing:
        return profile
    log.warning(
        "profile %s runs without kube-scheduler default plugins not available in kubesched: %s",
        profile.scheduler_name,
        ", ".join(missing),
    )
    kept = [p for p in multi.enabled if p.name not in missing]
    plugins = msgspec.structs.replace(
        profile.plugins, multi_point=msgspec.structs.replace(multi, enabled=kept)
    )
    return msgspec.structs.replace(profile, plugins=plugins)


def _as_raw(value: object) -> Mapping[str, object] | msgspec.Struct | None:
    if value is None or isinstance(value, (Mapping, msgspec.Struct)):
        return value
    raise ConfigError([FieldError.invalid("args", value, "must be an object")])
