"""Reading a configuration file: YAML → conversion → strict decoding → defaulting → validation.

The steps are kube-scheduler's: the document must be ``kubescheduler.config.k8s.io/v1`` /
``KubeSchedulerConfiguration`` (``v1beta1`` to ``v1beta3`` are converted to it first, with a
warning per converted field); it is decoded strictly (unknown or repeated fields are errors),
including the args of in-tree plugins; defaults are applied; the result is validated. Problems are
collected across a step and raised together as a :class:`ConfigError`; no step raises anything
else for bad input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Hashable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import yaml

from kubesched.config._convert import convert_config
from kubesched.config._decode import decode_struct, to_builtins, type_name
from kubesched.config._defaults import args_types_for, check_user_plugins, set_defaults
from kubesched.config._errors import ConfigError, FieldError
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._legacy import RETIRED_VERSIONS
from kubesched.config._registered import check_plugin_names
from kubesched.config._types import API_VERSION, KIND, KubeSchedulerConfiguration
from kubesched.config._validation import collect_errors

log = logging.getLogger(__name__)

Warn = Callable[[FieldError], None]
"""Receives each warning: a field converted from an older version, a name that matches no plugin."""


def _log_warning(source: str | None) -> Warn:
    def warn(warning: FieldError) -> None:
        log.warning("%s%s", f"{source}: " if source else "", warning)

    return warn


_BaseLoader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[misc]
    """YAML's safe loader (the C one when available), made strict like Kubernetes' YAML decoding:
    a key repeated in a mapping is an error, and timestamps stay strings."""


def _construct_mapping(loader: Any, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found unhashable key",
                key_node.start_mark,
            )
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


def _construct_str(loader: Any, node: yaml.ScalarNode) -> str:
    return str(loader.construct_scalar(node))


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _construct_str)


def _yaml_error(exc: yaml.YAMLError) -> FieldError:
    if isinstance(exc, yaml.reader.ReaderError):
        char = exc.character
        shown = f"0x{char:02x}" if isinstance(char, int) else repr(char)
        return FieldError(
            "", f"invalid YAML: {exc.reason} (character {shown} at byte {exc.position})"
        )
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        return FieldError(
            "",
            f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {problem}{context}",
        )
    return FieldError("", f"invalid YAML: {exc}")


def parse_yaml(text: str | bytes) -> Any:
    """Parse one YAML (or JSON) document strictly; :class:`ConfigError` with the line on failure."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_error(exc)]) from None
    except (ValueError, TypeError) as exc:  # e.g. undecodable bytes
        raise ConfigError([FieldError("", f"invalid YAML: {exc}")]) from None


def _check_type_meta(data: Mapping[str, Any]) -> list[FieldError]:
    errors: list[FieldError] = []
    api_version = data.get("apiVersion")
    kind = data.get("kind")
    if api_version in (None, ""):
        errors.append(FieldError.required("apiVersion", f"must be {API_VERSION}"))
    elif api_version in RETIRED_VERSIONS:
        errors.append(
            FieldError.invalid(
                "apiVersion",
                api_version,
                f"this version is no longer served by kube-scheduler v1.34, which reads only "
                f"{API_VERSION}; convert the file to {API_VERSION}",
            )
        )
    elif api_version != API_VERSION:
        errors.append(FieldError.not_supported("apiVersion", api_version, [API_VERSION]))
    if kind in (None, ""):
        errors.append(FieldError.required("kind", f"must be {KIND}"))
    elif kind != KIND:
        errors.append(FieldError.not_supported("kind", kind, [KIND]))
    return errors


def load_config_from_dict(
    data: Any,
    *,
    features: FeatureGates | None = None,
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None = None,
    plugin_names: Collection[str] | None = None,
    warn: Warn | None = None,
    source: str | None = None,
) -> KubeSchedulerConfiguration:
    """Decode, default and validate a configuration given as plain data (parsed YAML or JSON).

    ``data`` must carry ``apiVersion: kubescheduler.config.k8s.io/v1`` (or ``v1beta1`` to
    ``v1beta3``, converted first: see :func:`convert_config`) and
    ``kind: KubeSchedulerConfiguration``. ``features`` are the feature gates to behave as
    (v1.34 defaults when omitted). ``plugin_args_types`` maps names of plugins outside this
    package to their args types, so their ``pluginConfig`` entries are decoded and validated with
    the same error paths (see :func:`decode_args`). ``plugin_names``, the registered plugins,
    makes an enabled name outside them an error here, and a name under ``disabled`` or
    ``pluginConfig`` outside them a warning. ``warn`` receives each warning (default: logged).
    ``source`` names the origin in messages. Raises :class:`ConfigError` listing every problem.
    """
    warn = warn or _log_warning(source)
    features = features or DEFAULT_FEATURE_GATES
    args_types_for(plugin_args_types)  # reject a clash with an in-tree plugin early
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            [FieldError("", f"expected a {KIND} object, got {type_name(data)}")],
            source=source,
        )
    try:
        data, converted = convert_config(data)
    except ConfigError as exc:
        raise ConfigError(exc.errors, source=source) from None
    for warning in converted:
        warn(warning)
    errors = _check_type_meta(data)
    if errors:
        raise ConfigError(errors, source=source)

    decoded, errors = decode_struct(KubeSchedulerConfiguration, data, "")
    if decoded is None:
        raise ConfigError(errors, source=source)
    try:
        cfg = set_defaults(decoded, features=features, plugin_args_types=plugin_args_types)
    except ConfigError as exc:
        errors.extend(exc.errors)
        raise ConfigError(errors, source=source) from None
    if errors:  # strict decoding errors stop here, before validation, as in kube-scheduler
        raise ConfigError(errors, source=source)

    # Weights are checked on the lists as written, so that paths match the file.
    errors = check_user_plugins(decoded)
    if plugin_names is not None:
        name_errors, name_warnings = check_plugin_names(decoded, plugin_names)
        errors.extend(name_errors)
        for warning in name_warnings:
            warn(warning)
    errors.extend(collect_errors(cfg, features=features, plugin_args_types=plugin_args_types))
    if errors:
        raise ConfigError(errors, source=source)
    return cfg


def load_config(
    path: str | Path,
    *,
    features: FeatureGates | None = None,
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None = None,
    plugin_names: Collection[str] | None = None,
    warn: Warn | None = None,
) -> KubeSchedulerConfiguration:
    """Read a ``KubeSchedulerConfiguration`` YAML (or JSON) file; decode, default and validate it.

    A missing or unreadable file, YAML that does not parse (the message gives line and column),
    a wrong ``apiVersion`` or ``kind`` (``v1alpha1`` and ``v1alpha2`` included; ``v1beta1`` to
    ``v1beta3`` are converted), a conversion that cannot keep a field's meaning, an unknown
    field, a value of the wrong type, and every validation problem all raise
    :class:`ConfigError`, whose ``source`` is the file path. See :func:`load_config_from_dict`
    for the other arguments.
    """
    source = str(path)
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            [FieldError("", f"cannot read the file: {reason}")], source=source
        ) from None
    try:
        data = parse_yaml(text)
    except ConfigError as exc:
        raise exc.with_source(source) from None
    return load_config_from_dict(
        data,
        features=features,
        plugin_args_types=plugin_args_types,
        plugin_names=plugin_names,
        warn=warn,
        source=source,
    )


def default_config(*, features: FeatureGates | None = None) -> KubeSchedulerConfiguration:
    """The configuration kube-scheduler v1.34 runs with when given an empty one.

    One profile, ``default-scheduler``, with the default plugins and their default args.
    """
    return set_defaults(KubeSchedulerConfiguration(), features=features)


def config_to_dict(cfg: KubeSchedulerConfiguration) -> dict[str, Any]:
    """The configuration as plain data, ready for ``yaml.safe_dump`` or JSON.

    Field names are camelCase, durations are Go duration strings, unset optional fields are left
    out; loading the result gives back an equal configuration.
    """
    out = to_builtins(cfg)
    assert isinstance(out, dict)
    return out
