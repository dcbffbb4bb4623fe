"""The legacy scheduler Policy file (``--policy-config-file``) as a ``v1`` configuration.

kube-scheduler read a ``Policy`` (JSON, ``kind: Policy``, ``apiVersion: v1``) until v1.22; setups
such as kube-safe-scheduler's wire the stock scheduler to their extenders with one. Its
``extenders`` carry over field for field to ``KubeSchedulerConfiguration.extenders``; the Go
names differ in two places (``enableHttps`` is ``enableHTTPS``; ``httpTimeout`` was nanoseconds
and is a duration string). Predicates and priorities have no place in ``v1``, whose profiles
name plugins instead: they are reported, not converted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kubesched.config._convert import Converted
from kubesched.config._decode import type_name
from kubesched.config._duration import format_duration
from kubesched.config._errors import ConfigError, FieldError, child, format_value, index
from kubesched.config._types import API_VERSION, KIND

POLICY_KIND: Final = "Policy"

# LegacyExtender's JSON names → v1 Extender's. Go matches JSON keys without regard to case.
_EXTENDER_FIELDS: Final = {
    name.lower(): (name, v1)
    for name, v1 in (
        ("urlPrefix", "urlPrefix"),
        ("filterVerb", "filterVerb"),
        ("preemptVerb", "preemptVerb"),
        ("prioritizeVerb", "prioritizeVerb"),
        ("weight", "weight"),
        ("bindVerb", "bindVerb"),
        ("enableHttps", "enableHTTPS"),
        ("tlsConfig", "tlsConfig"),
        ("httpTimeout", "httpTimeout"),
        ("nodeCacheCapable", "nodeCacheCapable"),
        ("managedResources", "managedResources"),
        ("ignorable", "ignorable"),
    )
}

NOT_CONVERTED: Final = {
    "predicates": "not converted: v1 profiles name plugins instead of predicates; without "
    "profiles kube-scheduler's default plugins run",
    "priorities": "not converted: v1 profiles name Score plugins and weights instead of "
    "priorities; without profiles kube-scheduler's default plugins run",
    "hardPodAffinitySymmetricWeight": "not converted: it is InterPodAffinity's "
    "hardPodAffinityWeight in a profile's pluginConfig now",
    "alwaysCheckAllPredicates": "not converted: kube-scheduler no longer has it",
}
_TOP_FIELDS: Final = {k.lower(): k for k in ("kind", "apiVersion", "extenders", *NOT_CONVERTED)}


def _extender(raw: Any, path: str, errors: list[FieldError]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(raw, Mapping):
        errors.append(FieldError.invalid(path, raw, f"expected an object, got {type_name(raw)}"))
        return out
    for key, value in raw.items():
        known = _EXTENDER_FIELDS.get(str(key).lower())
        if known is None:
            errors.append(FieldError(child(path, str(key)), "Unknown field"))
            continue
        if value in (None, "", 0, False, [], {}):
            continue  # omitempty, as Go wrote them
        if known[0] == "httpTimeout":
            if isinstance(value, bool) or not isinstance(value, int):
                errors.append(
                    FieldError.invalid(
                        child(path, str(key)), value, "expected nanoseconds, as Go encodes it"
                    )
                )
                continue
            out[known[1]] = format_duration(value / 1e9)
            continue
        out[known[1]] = value
    return out


def policy_to_config(data: Any) -> Converted:
    """The ``v1`` ``KubeSchedulerConfiguration`` holding a Policy's extenders.

    ``data`` is the parsed Policy file. Fields with no ``v1`` place (predicates, priorities,
    hardPodAffinitySymmetricWeight, alwaysCheckAllPredicates) are warnings; an unknown field or
    a value of the wrong shape raises :class:`ConfigError`. Validation of the result is
    :func:`load_config_from_dict`'s.
    """
    if not isinstance(data, Mapping):
        raise ConfigError([FieldError("", f"expected a Policy object, got {type_name(data)}")])
    errors: list[FieldError] = []
    warnings: list[FieldError] = []
    fields = {}
    for key, value in data.items():
        name = _TOP_FIELDS.get(str(key).lower())
        if name is None:
            errors.append(FieldError(str(key), "Unknown field"))
        else:
            fields[name] = value
    kind = fields.get("kind")
    if kind not in (None, "", POLICY_KIND):
        errors.append(FieldError.not_supported("kind", kind, [POLICY_KIND]))
    for name, reason in NOT_CONVERTED.items():
        value = fields.get(name)
        if value:
            shown = "" if isinstance(value, (list, dict)) else f"{format_value(value)}: "
            warnings.append(FieldError(name, shown + reason))
    raw_extenders = fields.get("extenders") or []
    if not isinstance(raw_extenders, list):
        errors.append(
            FieldError.invalid(
                "extenders", raw_extenders, f"expected an array, got {type_name(raw_extenders)}"
            )
        )
        raw_extenders = []
    extenders = [
        _extender(raw, index("extenders", i), errors) for i, raw in enumerate(raw_extenders)
    ]
    if errors:
        raise ConfigError(errors)
    doc: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "extenders": extenders}
    return Converted(doc, tuple(warnings))
