"""Plugin names of a configuration checked against the plugins that exist.

kube-scheduler refuses a profile that enables a plugin it does not have, but silently ignores
a name under ``disabled`` or ``pluginConfig`` that matches nothing: ``disabled: [{name:
TaintToleratio}]`` leaves TaintToleration running, and args under ``NodeResourcesFitt`` are never
read. Both are warnings here, naming the field and the registered name closest to the one
written. An enabled name that matches nothing stays an error, reported when the file is loaded so
that it reads like every other configuration error.
"""

from __future__ import annotations

from collections.abc import Collection

from kubesched.config._args import PLUGIN_ARGS_TYPES
from kubesched.config._decode import closest
from kubesched.config._errors import FieldError, child, format_value, index
from kubesched.config._plugins import DEFAULT_PLUGINS, not_registered
from kubesched.config._types import _EXTENSION_POINT_ATTRS, KubeSchedulerConfiguration

IGNORED_DISABLED = "no plugin with this name is registered, so this disables nothing"
IGNORED_ARGS = "no plugin with this name is registered, so these args are never read"


def _hint(name: str, known: Collection[str]) -> str:
    guess = closest(name, known)
    return f' (did you mean "{guess}"?)' if guess else ""


def check_plugin_names(
    cfg: KubeSchedulerConfiguration, registered: Collection[str]
) -> tuple[list[FieldError], list[FieldError]]:
    """Errors and warnings for the plugin names of ``cfg`` as decoded, before defaulting.

    Errors: enabled names not in ``registered``. Warnings: names under ``disabled`` that are
    neither registered nor kube-scheduler defaults, and ``pluginConfig`` names not registered.
    """
    known = set(registered)
    disablable = known | {ref.name for ref in DEFAULT_PLUGINS} | {"*"}
    configurable = known | set(PLUGIN_ARGS_TYPES)
    errors: list[FieldError] = []
    warnings: list[FieldError] = []
    for i, profile in enumerate(cfg.profiles):
        base = index("profiles", i)
        for point, attr in _EXTENSION_POINT_ATTRS.items():
            pset = getattr(profile.plugins, attr)
            point_path = child(child(base, "plugins"), point)
            for j, p in enumerate(pset.enabled):
                if p.name not in known:
                    path = index(child(point_path, "enabled"), j)
                    error = not_registered(path, p.name)
                    errors.append(error._replace(message=error.message + _hint(p.name, known)))
            for j, p in enumerate(pset.disabled):
                if p.name not in disablable:
                    warnings.append(
                        FieldError(
                            index(child(point_path, "disabled"), j),
                            f"{format_value(p.name)}: {IGNORED_DISABLED}{_hint(p.name, known)}",
                        )
                    )
        for j, pc in enumerate(profile.plugin_config):
            if pc.name not in configurable:
                warnings.append(
                    FieldError(
                        index(child(base, "pluginConfig"), j),
                        f"{format_value(pc.name)}: {IGNORED_ARGS}{_hint(pc.name, known)}",
                    )
                )
    return errors, warnings
