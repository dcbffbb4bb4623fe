"""Profiles for the extender: a KubeSchedulerConfiguration's profiles, runnable as extenders.

kube-scheduler keeps the queue and binds; an extender profile usually names only the plugins that
filter or score. The framework still wants exactly one queue sort plugin and a binder, so a
profile that ends up with none gets ``PrioritySort`` (never used here) and ``DefaultBinder``
(used by the bind verb) added at those two points. Everything else is exactly what
``kubesched run`` would build from the same profile.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import msgspec

from kubesched.config import (
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    Plugin,
    PluginSet,
)
from kubesched.framework import Registry, extension_points_of

#: Added to a profile without a queue sort plugin (the framework requires one).
QUEUE_SORT = "PrioritySort"
#: Added to a profile without a bind plugin; serves the bind verb.
BINDER = "DefaultBinder"


def _lands(profile: KubeSchedulerProfile, point: str, implements: Callable[[str], bool]) -> bool:
    """Whether any plugin would run at ``point`` once ``multiPoint`` is expanded."""
    pset = profile.plugins.extension_point(point)
    if pset.enabled:
        return True
    disabled = {p.name for p in pset.disabled}
    if "*" in disabled:
        return False
    return any(
        p.name not in disabled and implements(p.name) for p in profile.plugins.multi_point.enabled
    )


def _with_plugin(profile: KubeSchedulerProfile, attr: str, name: str) -> KubeSchedulerProfile:
    current: PluginSet = getattr(profile.plugins, attr)
    added = msgspec.structs.replace(current, enabled=[*current.enabled, Plugin(name=name)])
    plugins = msgspec.structs.replace(profile.plugins, **{attr: added})
    return msgspec.structs.replace(profile, plugins=plugins)


def complete_profiles(
    config: KubeSchedulerConfiguration, registry: Registry
) -> KubeSchedulerConfiguration:
    """``config`` with a queue sort plugin and a binder added to profiles that lack them."""

    def implementing(point: str) -> Callable[[str], bool]:
        def implements(name: str) -> bool:
            cls = registry.get(name)
            points: Collection[str] = extension_points_of(cls) if cls is not None else ()
            return point in points

        return implements

    profiles = []
    for configured in config.profiles:
        profile = configured
        if not _lands(profile, "queueSort", implementing("queueSort")):
            profile = _with_plugin(profile, "queue_sort", QUEUE_SORT)
        if not _lands(profile, "bind", implementing("bind")):
            profile = _with_plugin(profile, "bind", BINDER)
        profiles.append(profile)
    return msgspec.structs.replace(config, profiles=profiles)
