"""Converting ``v1beta1``, ``v1beta2`` and ``v1beta3`` documents to ``v1``, as plain data.

kube-scheduler v1.34 refuses the beta versions; here a document of those versions becomes the
``v1`` document that schedules the same way, and every field that had to change is reported as a
warning ``(path, message)`` naming the field as written in the file. Each conversion:
docs/configuration.md, "Older versions: v1beta1, v1beta2, v1beta3".
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from kubesched.config._errors import ConfigError, FieldError, child, format_value, index
from kubesched.config._legacy import (
    CONSTRAINING_ARGS,
    CONVERTED_VERSIONS,
    LEGACY_LOCKS,
    NETWORK_TRAFFIC,
    OLD_DEFAULT_WEIGHTS,
    REASON_FIT_NO_SCORE,
    REASON_LOCK,
    REASON_NT_DEVICE,
    REASON_NT_IP,
    REASON_NT_RANGE,
    REASON_SCORER,
    REASON_SCORER_ARGS,
    REASON_UNUSED_ARGS,
    REASON_VERSION,
    REASON_WEIGHTS,
    REMOVED_PLUGINS,
    RESOURCE_SCORERS,
    V1BETA1,
    V1BETA1_DEFAULT_RESOURCE_SCORER,
    V1BETA2,
)
from kubesched.config._types import API_VERSION

_FIT = "NodeResourcesFit"
_TYPE_META = ("apiVersion", "kind")


class Converted(NamedTuple):
    """A ``v1`` document and the warnings, one per field that was converted."""

    data: Any
    warnings: tuple[FieldError, ...]


def _name(entry: Any) -> str | None:
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
        return str(entry["name"])
    return None


def _list(owner: Any, key: str) -> list[Any]:
    """``owner[key]`` if it is a list (else an empty one, left for strict decoding to report)."""
    value = owner.get(key) if isinstance(owner, dict) else None
    return value if isinstance(value, list) else []


def _names(owner: Any, key: str) -> set[str]:
    return {n for n in map(_name, _list(owner, key)) if n is not None}


def _ensure(owner: dict[str, Any], key: str, kind: type[Any]) -> Any:
    """``owner[key]``, created empty when absent or null; ``None`` when it is something else."""
    if owner.get(key) is None:
        owner[key] = kind()
    value = owner[key]
    return value if isinstance(value, kind) else None


class _Converter:
    def __init__(self, version: str | None) -> None:
        self.version = version
        self.warnings: list[FieldError] = []
        self.errors: list[FieldError] = []

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(FieldError(path, message))

    # -- the document ---------------------------------------------------------------------

    def document(self, doc: dict[str, Any]) -> None:
        old = self.version in CONVERTED_VERSIONS
        if old:
            self.warn("apiVersion", f"{format_value(self.version)}: {REASON_VERSION}")
            doc["apiVersion"] = API_VERSION
            self.leader_election(doc)
            if self.version in (V1BETA1, V1BETA2) and not doc.get("profiles"):
                doc["profiles"] = [{}]  # the default profile, to keep its old weights
        for i, profile in enumerate(_list(doc, "profiles")):
            if isinstance(profile, dict):
                self.profile(profile, index("profiles", i), old)

    def leader_election(self, doc: dict[str, Any]) -> None:
        le = doc.get("leaderElection")
        if isinstance(le, dict) and le.get("resourceLock") in LEGACY_LOCKS:
            path = child("leaderElection", "resourceLock")
            self.warn(path, f"{format_value(le['resourceLock'])}: {REASON_LOCK}")
            le["resourceLock"] = "leases"

    def profile(self, profile: dict[str, Any], path: str, old: bool) -> None:
        if old:
            enabled_removed = self.removed_plugins(profile, path)
            self.removed_plugin_config(profile, path, enabled_removed)
            if self.version == V1BETA1:
                self.resource_scorers(profile, path)
            if self.version in (V1BETA1, V1BETA2):
                self.default_weights(profile, path)
            self.args_type_meta(profile, path)
        self.network_traffic_args(profile, path)

    # -- removed plugins ------------------------------------------------------------------

    def removed_plugins(self, profile: dict[str, Any], path: str) -> set[str]:
        """Drop removed plugins from every plugin set; the names that were enabled somewhere."""
        enabled: set[str] = set()
        plugins = profile.get("plugins")
        if not isinstance(plugins, dict):
            return enabled
        for point, pset in plugins.items():
            if not isinstance(pset, dict):
                continue
            for key in ("enabled", "disabled"):
                entries = _list(pset, key)
                kept = []
                for j, entry in enumerate(entries):
                    name = _name(entry)
                    if name not in REMOVED_PLUGINS:
                        kept.append(entry)
                        continue
                    if key == "enabled":
                        enabled.add(name)
                    where = index(child(child(child(path, "plugins"), str(point)), key), j)
                    self.warn(where, f"{format_value(name)} dropped: {REMOVED_PLUGINS[name]}")
                if len(kept) != len(entries):
                    pset[key] = kept
        return enabled

    def removed_plugin_config(
        self, profile: dict[str, Any], path: str, enabled_removed: set[str]
    ) -> None:
        entries = _list(profile, "pluginConfig")
        kept = []
        for j, entry in enumerate(entries):
            name = _name(entry)
            if name not in REMOVED_PLUGINS:
                kept.append(entry)
                continue
            where = index(child(path, "pluginConfig"), j)
            args = entry.get("args")
            constraining = [
                key
                for key in CONSTRAINING_ARGS.get(name, ())
                if isinstance(args, Mapping) and args.get(key)
            ]
            if constraining and name in enabled_removed:
                self.errors.extend(
                    FieldError.invalid(
                        child(child(where, "args"), key),
                        args[key],
                        f"{name} was {REMOVED_PLUGINS[name]}; converting would drop this "
                        f"constraint, so write it there",
                    )
                    for key in constraining
                )
            else:
                self.warn(where, f"{format_value(name)} dropped: {REMOVED_PLUGINS[name]}")
        if len(kept) != len(entries):
            profile["pluginConfig"] = kept

    # -- v1beta1's resource scorers -------------------------------------------------------

    def resource_scorers(self, profile: dict[str, Any], path: str) -> None:
        """v1beta1's resource Score plugins → NodeResourcesFit's scoring strategy.

        Which of them scored follows v1beta1's merge: the default NodeResourcesLeastAllocated
        unless disabled (by name or ``"*"``), a user entry of the same name replacing it, the
        user's others added.
        """
        plugins = profile.get("plugins")
        score = plugins.get("score") if isinstance(plugins, dict) else None
        score_path = child(child(path, "plugins"), "score")
        disabled = _names(score, "disabled")
        scoring: list[tuple[str, Any, int | None]] = []  # name, weight, index in enabled
        user = [
            (j, _name(e), e)
            for j, e in enumerate(_list(score, "enabled"))
            if _name(e) in RESOURCE_SCORERS
        ]
        default = V1BETA1_DEFAULT_RESOURCE_SCORER
        replaced = default in {n for _, n, _ in user}
        if "*" not in disabled and default not in disabled and not replaced:
            scoring.append((default, 1, None))
        scoring.extend((str(n), e.get("weight"), j) for j, n, e in user)
        if len(scoring) > 1:
            self.errors.append(
                FieldError.invalid(
                    child(score_path, "enabled"),
                    [n for n, _, _ in scoring],
                    f"these plugins were replaced by {_FIT}, which scores with one strategy; "
                    f"keep one of them",
                )
            )
            return
        chosen = scoring[0] if scoring else None
        strategy = self.scorer_args(profile, path, chosen[0] if chosen else None)
        if isinstance(score, dict):
            self.rewrite_score_set(score, score_path, chosen, disabled)
        if chosen is None:
            return
        name = chosen[0]
        if strategy is None and RESOURCE_SCORERS[name] != "LeastAllocated":
            strategy = {}
        if strategy is not None:
            strategy = {"type": RESOURCE_SCORERS[name], **strategy}
            self.set_fit_strategy(profile, path, strategy)

    def rewrite_score_set(
        self,
        score: dict[str, Any],
        score_path: str,
        chosen: tuple[str, Any, int | None] | None,
        disabled: set[str],
    ) -> None:
        enabled = []
        for j, entry in enumerate(_list(score, "enabled")):
            name = _name(entry)
            if name not in RESOURCE_SCORERS:
                enabled.append(entry)
                continue
            where = index(child(score_path, "enabled"), j)
            self.warn(where, REASON_SCORER.format(strategy=RESOURCE_SCORERS[name]))
            fit: dict[str, Any] = {"name": _FIT}
            if entry.get("weight") is not None:
                fit["weight"] = entry["weight"]
            enabled.append(fit)
        removed_disabled: list[tuple[int, Any]] = []
        kept_disabled: list[tuple[int, Any]] = []
        for j, entry in enumerate(_list(score, "disabled")):
            (removed_disabled if _name(entry) in RESOURCE_SCORERS else kept_disabled).append(
                (j, entry)
            )
        for j, _entry in removed_disabled:
            where = index(child(score_path, "disabled"), j)
            if chosen is None:
                self.warn(where, REASON_FIT_NO_SCORE)
            else:
                strategy = RESOURCE_SCORERS[chosen[0]]
                self.warn(where, f"dropped: {_FIT} scores with strategy {format_value(strategy)}")
        new_disabled = [e for _, e in kept_disabled]
        if chosen is None and "*" not in disabled:
            new_disabled.append({"name": _FIT})
        if "enabled" in score or enabled:
            score["enabled"] = enabled
        if "disabled" in score or new_disabled:
            score["disabled"] = new_disabled

    def scorer_args(
        self, profile: dict[str, Any], path: str, chosen: str | None
    ) -> dict[str, Any] | None:
        """Remove the resource scorers' pluginConfig entries; the chosen one's strategy fields."""
        entries = _list(profile, "pluginConfig")
        kept = []
        strategy: dict[str, Any] | None = None
        for j, entry in enumerate(entries):
            name = _name(entry)
            if name not in RESOURCE_SCORERS:
                kept.append(entry)
                continue
            where = index(child(path, "pluginConfig"), j)
            if name != chosen:
                self.warn(where, REASON_UNUSED_ARGS)
                continue
            args = entry.get("args")
            strategy = {}
            if isinstance(args, Mapping):
                for key, value in args.items():
                    if key == "resources":
                        strategy["resources"] = value
                    elif key == "shape" and name == "RequestedToCapacityRatio":
                        strategy["requestedToCapacityRatio"] = {"shape": value}
                    elif key not in _TYPE_META:
                        self.errors.append(
                            FieldError(child(child(where, "args"), str(key)), "Unknown field")
                        )
            self.warn(child(where, "args"), REASON_SCORER_ARGS)
        if len(kept) != len(entries):
            profile["pluginConfig"] = kept
        return strategy

    def set_fit_strategy(
        self, profile: dict[str, Any], path: str, strategy: dict[str, Any]
    ) -> None:
        configs = _ensure(profile, "pluginConfig", list)
        if configs is None:
            return
        for j, entry in enumerate(configs):
            if _name(entry) != _FIT:
                continue
            args = _ensure(entry, "args", dict)
            if args is None:
                return
            if "scoringStrategy" in args:
                args_path = child(index(child(path, "pluginConfig"), j), "args")
                where = child(args_path, "scoringStrategy")
                self.errors.append(
                    FieldError(where, "Unknown field: v1beta1's NodeResourcesFitArgs has none")
                )
                return
            args["scoringStrategy"] = strategy
            return
        configs.append({"name": _FIT, "args": {"scoringStrategy": strategy}})

    # -- v1beta1's and v1beta2's default weights ------------------------------------------

    def default_weights(self, profile: dict[str, Any], path: str) -> None:
        plugins = _ensure(profile, "plugins", dict)
        score = _ensure(plugins, "score", dict) if plugins is not None else None
        if score is None:
            return
        disabled = _names(score, "disabled")
        if "*" in disabled:
            return
        named = _names(score, "enabled")
        kept = [n for n in OLD_DEFAULT_WEIGHTS if n not in disabled and n not in named]
        enabled = _ensure(score, "enabled", list)
        if not kept or enabled is None:
            return
        enabled.extend({"name": n, "weight": OLD_DEFAULT_WEIGHTS[n][0]} for n in kept)
        version = str(self.version).rpartition("/")[2]
        old = ", ".join(f"{n} {OLD_DEFAULT_WEIGHTS[n][0]}" for n in kept)
        new = ", ".join(str(OLD_DEFAULT_WEIGHTS[n][1]) for n in kept)
        self.warn(
            child(child(path, "plugins"), "score"),
            REASON_WEIGHTS.format(version=version, old=old, new=new),
        )

    def args_type_meta(self, profile: dict[str, Any], path: str) -> None:
        for j, entry in enumerate(_list(profile, "pluginConfig")):
            args = entry.get("args") if isinstance(entry, dict) else None
            if isinstance(args, dict) and args.get("apiVersion") in CONVERTED_VERSIONS:
                where = child(child(index(child(path, "pluginConfig"), j), "args"), "apiVersion")
                self.warn(where, f"{format_value(args['apiVersion'])}: {REASON_VERSION}")
                args["apiVersion"] = API_VERSION

    # -- the network-traffic tutorial's args ----------------------------------------------

    def network_traffic_args(self, profile: dict[str, Any], path: str) -> None:
        for j, entry in enumerate(_list(profile, "pluginConfig")):
            args = entry.get("args") if _name(entry) == NETWORK_TRAFFIC else None
            if not isinstance(args, dict):
                continue
            where = child(index(child(path, "pluginConfig"), j), "args")
            self.rename(args, where, "ip", "prometheusAddress", lambda v: (v, REASON_NT_IP))
            self.rename(args, where, "deviceName", "networkInterface", _device_pattern)
            self.rename(args, where, "timeRange", "timeRangeInMinutes", _minutes)

    def rename(
        self,
        args: dict[str, Any],
        path: str,
        old: str,
        new: str,
        convert: Callable[[Any], tuple[Any, str]],
    ) -> None:
        if old not in args:
            return
        where = child(path, old)
        if new in args:
            self.errors.append(
                FieldError.forbidden(where, f"{old} is the tutorial's name of {new}; give one")
            )
            return
        try:
            value, reason = convert(args[old])
        except ValueError as exc:
            self.errors.append(FieldError.invalid(where, args[old], str(exc)))
            return
        del args[old]
        args[new] = value
        self.warn(where, reason)


def _device_pattern(value: Any) -> tuple[Any, str]:
    # networkInterface is a regular expression; the tutorial compared device names for equality.
    return (re.escape(value) if isinstance(value, str) else value), REASON_NT_DEVICE


def _minutes(value: Any) -> tuple[Any, str]:
    # The tutorial's plugin builds its PromQL window as time.Second * timeRange.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("expected a whole number of seconds")
    if value <= 0 or value % 60:
        raise ValueError(
            "timeRange counts seconds and NetworkTraffic's window is whole minutes: "
            "give timeRangeInMinutes instead"
        )
    minutes = value // 60
    return minutes, REASON_NT_RANGE.format(seconds=value, minutes=minutes)


def convert_config(data: Any) -> Converted:
    """Convert a ``v1beta1``/``v1beta2``/``v1beta3`` document (parsed YAML) to ``v1``.

    Returns the converted document (a copy; ``data`` is not changed) and one warning per field
    that changed. A ``v1`` document comes back as it is, unless it carries the network-traffic
    tutorial's args. Raises :class:`ConfigError` naming each field whose meaning cannot be
    kept. Anything the conversion does not understand is left for strict decoding to report.
    """
    if not isinstance(data, Mapping):
        return Converted(data, ())
    version = data.get("apiVersion")
    converter = _Converter(version if isinstance(version, str) else None)
    doc = copy.deepcopy(dict(data))
    converter.document(doc)
    if converter.errors:
        raise ConfigError(converter.errors)
    if not converter.warnings:
        return Converted(data, ())
    return Converted(doc, tuple(converter.warnings))
