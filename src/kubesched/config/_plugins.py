"""kube-scheduler v1.34's default plugin set, how a profile's plugins are merged with it, and how
``multiPoint`` is expanded onto the individual extension points.

Three steps turn what a user writes under ``profiles[].plugins`` into the plugins that run:

1. **Defaults.** kube-scheduler's default set is a single ``multiPoint`` list
   (:data:`DEFAULT_PLUGINS`): each plugin in it runs at every extension point it implements.
2. **Merge** (at load time, :func:`merge_plugins`). For each extension point, including
   ``multiPoint``, the user's ``enabled``/``disabled`` lists are merged with the defaults of that
   point: ``disabled: [{name: "*"}]`` drops every default of the point, a disabled name drops that
   default, a user-enabled plugin with the name of a remaining default replaces it in place
   (keeping the default's position; this is how weights are changed), and the other
   user-enabled plugins are appended in the order given. ``disabled`` is kept, because step 3
   needs it.
3. **Expansion** (when the framework builds the profile, :func:`expand_plugins`). Each
   ``multiPoint`` plugin is added to the points it implements, unless disabled there; a plugin
   also enabled explicitly at a point keeps that explicit entry (and, for Score, its weight).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import NamedTuple

from kubesched.config._errors import ConfigError, FieldError, child, format_value, index
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._types import (
    _EXTENSION_POINT_ATTRS,
    EXTENSION_POINTS,
    KubeSchedulerProfile,
    Plugin,
    Plugins,
    PluginSet,
)


class PluginRef(NamedTuple):
    """A plugin name and its score weight (``None``: not given, which the framework reads as 1)."""

    name: str
    weight: int | None = None


_DEFAULT_MULTI_POINT: tuple[PluginRef, ...] = (
    PluginRef("SchedulingGates"),
    PluginRef("PrioritySort"),
    PluginRef("NodeUnschedulable"),
    PluginRef("NodeName"),
    PluginRef("TaintToleration", 3),
    PluginRef("NodeAffinity", 2),
    PluginRef("NodePorts"),
    PluginRef("NodeResourcesFit", 1),
    PluginRef("VolumeRestrictions"),
    PluginRef("NodeVolumeLimits"),
    PluginRef("VolumeBinding"),
    PluginRef("VolumeZone"),
    PluginRef("PodTopologySpread", 2),
    PluginRef("InterPodAffinity", 2),
    PluginRef("DefaultPreemption"),
    PluginRef("NodeResourcesBalancedAllocation", 1),
    PluginRef("ImageLocality", 1),
    PluginRef("DefaultBinder"),
)


def default_plugin_refs(features: FeatureGates | None = None) -> tuple[PluginRef, ...]:
    """The default ``multiPoint`` list for the given feature gates.

    With ``DynamicResourceAllocation`` on (the v1.34 default) ``DynamicResources`` is inserted
    just before ``DefaultPreemption``: when a pod does not fit, freeing an idle device claim is
    preferred to evicting a running pod.
    """
    features = features or DEFAULT_FEATURE_GATES
    refs = list(_DEFAULT_MULTI_POINT)
    if features.dynamic_resource_allocation:
        at = next(i for i, r in enumerate(refs) if r.name == "DefaultPreemption")
        refs.insert(at, PluginRef("DynamicResources"))
    return tuple(refs)


DEFAULT_PLUGINS: tuple[PluginRef, ...] = default_plugin_refs()
"""kube-scheduler v1.34's default plugins, all enabled through ``multiPoint``, in order, with their
score weights (TaintToleration 3; NodeAffinity, PodTopologySpread, InterPodAffinity 2;
NodeResourcesFit, NodeResourcesBalancedAllocation, ImageLocality 1), for the default gates."""


def default_plugins(features: FeatureGates | None = None) -> Plugins:
    """A fresh :class:`Plugins` holding the default set in ``multiPoint``."""
    return Plugins(
        multi_point=PluginSet(
            enabled=[Plugin(name=r.name, weight=r.weight) for r in default_plugin_refs(features)]
        )
    )


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """Merge the user's plugin set for one extension point into the default one.

    Follows kube-scheduler's ``mergePluginSet`` exactly:

    - ``disabled`` of the result is the user's disabled names followed by the default's.
    - Unless ``"*"`` is disabled, each default plugin that is not disabled is kept in order; if
      the user also enabled it, the user's entry (the *last* one with that name) takes its place.
    - Every user-enabled entry that did not replace a default is appended in the user's order,
      duplicates included (the framework rejects a plugin registered twice at one point).
    """
    disabled = [Plugin(name=p.name) for p in custom.disabled] + [
        Plugin(name=p.name) for p in default.disabled
    ]
    disabled_names = {p.name for p in disabled}
    last_custom: dict[str, int] = {p.name: i for i, p in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[Plugin] = []
    if "*" not in disabled_names:
        for plugin in default.enabled:
            if plugin.name in disabled_names:
                continue
            chosen = plugin
            i = last_custom.get(plugin.name)
            if i is not None:
                replaced.add(i)
                chosen = custom.enabled[i]
            enabled.append(Plugin(name=chosen.name, weight=chosen.weight))
    enabled.extend(
        Plugin(name=p.name, weight=p.weight)
        for i, p in enumerate(custom.enabled)
        if i not in replaced
    )
    return PluginSet(enabled=enabled, disabled=disabled)


def merge_plugins(default: Plugins, custom: Plugins | None) -> Plugins:
    """Merge a profile's ``plugins`` into the defaults, point by point (``multiPoint`` too)."""
    if custom is None:
        return Plugins(
            **{attr: _copy_set(getattr(default, attr)) for attr in _EXTENSION_POINT_ATTRS.values()}
        )
    return Plugins(
        **{
            attr: merge_plugin_set(getattr(default, attr), getattr(custom, attr))
            for attr in _EXTENSION_POINT_ATTRS.values()
        }
    )


def _copy_set(ps: PluginSet) -> PluginSet:
    return PluginSet(
        enabled=[Plugin(name=p.name, weight=p.weight) for p in ps.enabled],
        disabled=[Plugin(name=p.name) for p in ps.disabled],
    )


class EnabledPlugins(NamedTuple):
    """A profile's plugins after merging with the defaults, before multi-point expansion.

    ``points`` maps each specific extension point (JSON spelling, see
    :data:`~kubesched.config.EXTENSION_POINTS`) to the plugins enabled explicitly there, in order;
    ``multi_point`` lists the plugins enabled through ``multiPoint`` (kube-scheduler's defaults
    live here); ``disabled`` maps each extension point, ``multiPoint`` included, to the names
    disabled there, ``"*"`` meaning all. Use :func:`expand_plugins` to get the final per-point
    lists once the plugins' implemented extension points are known.
    """

    points: Mapping[str, tuple[PluginRef, ...]]
    multi_point: tuple[PluginRef, ...]
    disabled: Mapping[str, frozenset[str]]


def enabled_plugins(profile: KubeSchedulerProfile) -> EnabledPlugins:
    """The plugins of a defaulted profile (from ``load_config`` or ``set_defaults``), by point.

    The result keeps ``multiPoint`` separate, as the configuration does; expanding it needs to
    know which extension points each plugin implements, which only the framework knows. The
    contract for that expansion, kube-scheduler's ``expandMultiPointPlugins``, is implemented by
    :func:`expand_plugins`.
    """
    plugins = profile.plugins
    points = {
        point: tuple(PluginRef(p.name, p.weight) for p in plugins.extension_point(point).enabled)
        for point in EXTENSION_POINTS
    }
    disabled = {
        point: frozenset(p.name for p in plugins.extension_point(point).disabled)
        for point in (*EXTENSION_POINTS, "multiPoint")
    }
    return EnabledPlugins(
        points=points,
        multi_point=tuple(PluginRef(p.name, p.weight) for p in plugins.multi_point.enabled),
        disabled=disabled,
    )


def enabled_plugin_names(profile: KubeSchedulerProfile) -> list[str]:
    """Every plugin the profile enables, at any extension point or ``multiPoint``, sorted."""
    names: set[str] = set()
    for attr in _EXTENSION_POINT_ATTRS.values():
        names.update(p.name for p in getattr(profile.plugins, attr).enabled)
    return sorted(names)


def not_registered(path: str, name: str) -> FieldError:
    """kube-scheduler's error for a profile enabling a plugin it does not have."""
    return FieldError(
        path, f"Not found: {format_value(name)}: no plugin with this name is registered"
    )


class ExpandedPlugins(NamedTuple):
    """The plugins that run at each extension point, and the weight of each Score plugin.

    ``points`` maps every specific extension point to plugin names in the order they run.
    ``score_weights`` maps each plugin in ``points["score"]`` to its weight (at least 1).
    """

    points: Mapping[str, tuple[str, ...]]
    score_weights: Mapping[str, int]


def expand_plugins(
    profile: KubeSchedulerProfile,
    implements: Callable[[str], Collection[str] | None],
    *,
    path: str = "plugins",
) -> ExpandedPlugins:
    """Expand ``multiPoint`` onto the extension points, as kube-scheduler's framework does.

    ``implements(name)`` returns the extension points (JSON spelling: ``"filter"``, ``"score"``,
    ...) that plugin ``name`` implements, or ``None`` if no such plugin is registered. ``path``
    prefixes error paths (pass ``profiles[i].plugins``). The rules, from kube-scheduler's
    ``NewFramework``/``expandMultiPointPlugins``/``getScoreWeights``:

    1. Plugins enabled explicitly at a point are placed there first; each must exist, must
       implement the point, and may appear only once.
    2. If the point disables ``"*"``, nothing is added to it from ``multiPoint``.
    3. Otherwise each ``multiPoint`` plugin that implements the point is considered, in order:
       skipped if disabled at that point; if it is also enabled explicitly there, the explicit
       entry wins (an *override*); a second ``multiPoint`` entry of the same name is an error.
    4. The point's final order: overrides (in their explicit order), then ``multiPoint``-only
       plugins, then the remaining explicit plugins.
    5. Score weight: the explicit ``score`` entry's weight if there is one, else the
       ``multiPoint`` weight; an unset or zero weight is 1.
    6. The result must have exactly one ``queueSort`` plugin and at least one ``bind`` plugin.

    Problems are raised together as a :class:`ConfigError`.
    """
    errors: list[FieldError] = []
    plugins = profile.plugins
    multi = plugins.multi_point.enabled
    impl_cache: dict[str, Collection[str] | None] = {}

    def points_of(name: str) -> Collection[str] | None:
        if name not in impl_cache:
            impl_cache[name] = implements(name)
        return impl_cache[name]

    result: dict[str, tuple[str, ...]] = {}
    for point in EXTENSION_POINTS:
        pset = plugins.extension_point(point)
        point_path = child(path, point)
        explicit: list[str] = []
        for i, p in enumerate(pset.enabled):
            p_path = index(child(point_path, "enabled"), i)
            implemented = points_of(p.name)
            if implemented is None:
                errors.append(not_registered(p_path, p.name))
            elif point not in implemented:
                errors.append(
                    FieldError.invalid(p_path, p.name, f"plugin does not implement {point}")
                )
            elif p.name in explicit:
                errors.append(FieldError.duplicate(p_path, p.name))
            else:
                explicit.append(p.name)
        disabled = {p.name for p in pset.disabled}
        if "*" in disabled:
            result[point] = tuple(explicit)
            continue
        overrides: list[str] = []
        multi_only: list[str] = []
        for i, p in enumerate(multi):
            implemented = points_of(p.name)
            if implemented is None:
                if point == EXTENSION_POINTS[0]:
                    p_path = index(child(child(path, "multiPoint"), "enabled"), i)
                    errors.append(not_registered(p_path, p.name))
                continue
            if point not in implemented or p.name in disabled:
                continue
            if p.name in explicit:
                if p.name not in overrides:
                    overrides.append(p.name)
                continue
            if p.name in multi_only:
                p_path = index(child(child(path, "multiPoint"), "enabled"), i)
                errors.append(FieldError.duplicate(p_path, p.name))
                continue
            multi_only.append(p.name)
        ordered = [n for n in explicit if n in overrides]
        ordered += multi_only
        ordered += [n for n in explicit if n not in overrides]
        result[point] = tuple(ordered)

    if not errors:
        queue_sort = result["queueSort"]
        if len(queue_sort) != 1:
            errors.append(
                FieldError.invalid(
                    child(path, "queueSort"),
                    list(queue_sort),
                    f"exactly one queue sort plugin is required, got {len(queue_sort)}",
                )
            )
        if not result["bind"]:
            errors.append(
                FieldError.required(child(path, "bind"), "at least one bind plugin is needed")
            )

    weights: dict[str, int] = {}
    score_plugins = set(result["score"])
    for p in [*plugins.score.enabled, *multi]:
        if p.name in score_plugins and p.name not in weights:
            weights[p.name] = p.weight or 1
    if errors:
        raise ConfigError(dict.fromkeys(errors))  # one report per entry, not per point
    return ExpandedPlugins(points=result, score_weights=weights)
