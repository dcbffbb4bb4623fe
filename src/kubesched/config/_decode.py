"""Strict decoding of plain data (parsed YAML or JSON) into ``msgspec.Struct`` types.

kube-scheduler decodes its configuration *strictly*: a field name it does not know (a typo such as
``enabeld``), a field given twice, or a value of the wrong type is an error, not something to
ignore. ``msgspec`` can decode strictly too, but it stops at the first problem and reports it
relative to the value being decoded. This module walks the target type itself so it can

- report **every** problem, not only the first;
- name each problem by its full path in the document (``profiles[0].plugins.filter.enabeld``);
- read Go duration strings (``"15s"``) into seconds for fields typed :data:`Duration`;
- treat an explicit ``null`` for a field as if the field were absent, as Go's JSON decoding does
  (``plugins:`` with nothing under it is common in hand-written YAML).

It works for any ``msgspec.Struct``: field names come from the struct's encoded names (so
``rename="camel"`` or ``msgspec.field(name=...)`` apply), unknown fields are rejected when the
struct was declared with ``forbid_unknown_fields=True``, a field without a default is required,
and ``msgspec.Meta`` constraints and ``__post_init__`` checks are honoured. Plugins outside this
package rely on that through :func:`kubesched.config.decode_args`.
"""

from __future__ import annotations

import base64
import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Final, TypeVar, get_args, get_origin

import msgspec

from kubesched.config._duration import DurationError, format_duration, parse_duration
from kubesched.config._errors import FieldError, child, index


class _DurationMarker:
    """Marks a ``float`` field that is written as a Go duration string in configuration files."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DURATION"


DURATION: Final = _DurationMarker()

Duration = Annotated[float, DURATION]
"""A duration in seconds, read from and written as a Go duration string such as ``"1m30s"``."""

T = TypeVar("T")


class _Invalid:
    __slots__ = ()


_INVALID: Final = _Invalid()

_AT_SUFFIX = re.compile(r"^(?P<msg>.*) - at `\$(?P<sub>[^`]*)`$", re.DOTALL)


def _is_struct_type(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, msgspec.Struct)


def _is_union(tp: Any) -> bool:
    origin = get_origin(tp)
    return origin is typing.Union or origin is types.UnionType


def type_name(value: Any) -> str:
    """The JSON name of a value's type (``object``, ``array``, ``string``, ...) for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


def _msgspec_convert(tp: Any, raw: Any, path: str, errors: list[FieldError]) -> Any:
    """Let msgspec convert a leaf value, turning its error into a path-qualified field error."""
    try:
        return msgspec.convert(raw, tp, strict=True)
    except msgspec.ValidationError as exc:
        text = str(exc)
        match = _AT_SUFFIX.match(text)
        sub = ""
        if match:
            text, sub = match.group("msg"), match.group("sub")
        detail = _lower_first(text)
        if sub:
            where = path + sub if sub.startswith("[") else child(path, sub.lstrip("."))
            errors.append(FieldError(where, f"Invalid value: {detail}"))
        else:
            errors.append(FieldError.invalid(path, raw, detail))
        return _INVALID


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name ``name`` most likely misspells (same letters in another case first)."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    guess = lowered.get(name.lower())
    if guess is None:
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        guess = close[0] if close else None
    return guess


def _unknown_field(path: str, key: str, known: list[str]) -> FieldError:
    guess = closest(key, known)
    hint = f' (did you mean "{guess}"?)' if guess else ""
    return FieldError(child(path, key), f"Unknown field{hint}")


def _accepts_none(tp: Any) -> bool:
    if tp is Any or tp is None or tp is type(None):
        return True
    if get_origin(tp) is Annotated:
        return _accepts_none(get_args(tp)[0])
    if _is_union(tp):
        return any(_accepts_none(a) for a in get_args(tp))
    return False


def _convert_struct(cls: type[Any], raw: Any, path: str, errors: list[FieldError]) -> Any:
    if not isinstance(raw, Mapping):
        errors.append(FieldError.invalid(path, raw, f"expected an object, got {type_name(raw)}"))
        return _INVALID
    fields = msgspec.structs.fields(cls)
    by_name = {f.encode_name: f for f in fields}
    forbid_unknown = cls.__struct_config__.forbid_unknown_fields
    kwargs: dict[str, Any] = {}
    present: set[str] = set()
    ok = True
    for key, value in raw.items():
        if not isinstance(key, str):
            errors.append(FieldError.invalid(child(path, str(key)), key, "field names are strings"))
            ok = False
            continue
        info = by_name.get(key)
        if info is None:
            if forbid_unknown:
                # Reported, but the rest of the object is still decoded so that problems
                # further down are found in the same pass, as kube-scheduler's strict decoding does.
                errors.append(_unknown_field(path, key, list(by_name)))
            continue
        if value is None and not _accepts_none(info.type):
            continue  # null means "not set", as in Go's JSON decoding
        present.add(key)
        converted = convert_value(info.type, value, child(path, key), errors)
        if converted is _INVALID:
            ok = False
        else:
            kwargs[info.name] = converted
    for info in fields:
        if info.required and info.encode_name not in present:
            errors.append(FieldError.required(child(path, info.encode_name)))
            ok = False
    if not ok:
        return _INVALID
    try:
        return cls(**kwargs)
    except (ValueError, TypeError, msgspec.ValidationError) as exc:
        errors.append(FieldError(path, f"Invalid value: {exc}"))
        return _INVALID


def convert_value(tp: Any, raw: Any, path: str, errors: list[FieldError]) -> Any:
    """Convert ``raw`` to type ``tp``; on failure add field errors and return the invalid marker.

    ``path`` is where ``raw`` sits in the document; errors for nested values extend it.
    """
    if tp is Any:
        return raw
    origin = get_origin(tp)
    if origin is Annotated:
        base, *extras = get_args(tp)
        if any(isinstance(e, _DurationMarker) for e in extras):
            if not isinstance(raw, str):
                errors.append(
                    FieldError.invalid(
                        path, raw, 'expected a duration string such as "15s", "1m30s" or "100ms"'
                    )
                )
                return _INVALID
            try:
                return parse_duration(raw)
            except DurationError as exc:
                errors.append(FieldError.invalid(path, raw, str(exc)))
                return _INVALID
        if _contains_struct(base):
            return convert_value(base, raw, path, errors)
        return _msgspec_convert(tp, raw, path, errors)
    if _is_union(tp):
        members = get_args(tp)
        if raw is None and type(None) in members:
            return None
        concrete = [m for m in members if m is not type(None)]
        if len(concrete) == 1:
            return convert_value(concrete[0], raw, path, errors)
        if msgspec.Struct in concrete:
            # Raw plugin args: kept as a plain mapping until their type is known.
            if not isinstance(raw, Mapping):
                errors.append(
                    FieldError.invalid(path, raw, f"expected an object, got {type_name(raw)}")
                )
                return _INVALID
            return _plain_mapping(raw, path, errors)
        return _msgspec_convert(tp, raw, path, errors)
    if _is_struct_type(tp):
        return _convert_struct(tp, raw, path, errors)
    if origin in (list, tuple) or tp in (list, tuple):
        args = get_args(tp)
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return _msgspec_convert(tp, raw, path, errors)
        item_type = args[0] if args else Any
        if not isinstance(raw, (list, tuple)):
            errors.append(FieldError.invalid(path, raw, f"expected an array, got {type_name(raw)}"))
            return _INVALID
        items = [
            convert_value(item_type, item, index(path, i), errors) for i, item in enumerate(raw)
        ]
        if any(item is _INVALID for item in items):
            return _INVALID
        return tuple(items) if origin is tuple else items
    if origin is dict or tp is dict:
        args = get_args(tp)
        key_type, value_type = args if args else (Any, Any)
        if not isinstance(raw, Mapping):
            errors.append(
                FieldError.invalid(path, raw, f"expected an object, got {type_name(raw)}")
            )
            return _INVALID
        out: dict[Any, Any] = {}
        ok = True
        for key, value in raw.items():
            k = _msgspec_convert(key_type, key, child(path, str(key)), errors)
            v = convert_value(value_type, value, child(path, str(key)), errors)
            if k is _INVALID or v is _INVALID:
                ok = False
            else:
                out[k] = v
        return out if ok else _INVALID
    return _msgspec_convert(tp, raw, path, errors)


def _plain_mapping(raw: Mapping[Any, Any], path: str, errors: list[FieldError]) -> Any:
    for key in raw:
        if not isinstance(key, str):
            errors.append(FieldError.invalid(child(path, str(key)), key, "field names are strings"))
            return _INVALID
    return dict(raw)


def _contains_struct(tp: Any) -> bool:
    if _is_struct_type(tp):
        return True
    return any(_contains_struct(a) for a in get_args(tp) if a is not Ellipsis)


def decode_struct(cls: type[T], raw: Any, path: str) -> tuple[T | None, list[FieldError]]:
    """Decode ``raw`` into ``cls`` strictly; return the value and the problems found.

    The value is ``None`` when a problem made it impossible to build; it is still returned when
    the only problems were unknown fields (which are left out), so a caller may look further
    into it before reporting. Any problem at all means the input is not acceptable.
    """
    errors: list[FieldError] = []
    value = convert_value(cls, raw, path, errors)
    if value is _INVALID:
        return None, errors
    return typing.cast(T, value), errors


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, dict)) and not value)


def to_builtins(value: Any, tp: Any = None) -> Any:
    """Turn a decoded value back into plain data that decodes to the same value.

    Structs become mappings keyed by their encoded (camelCase) names; unset (``None``) fields and
    empty lists or objects are left out, as Go leaves out ``omitempty`` fields. :data:`Duration`
    fields become Go duration strings; ``bytes`` become base64 text.
    """
    if tp is not None and _is_union(tp):
        candidates = [a for a in get_args(tp) if a is not type(None)]
        tp = candidates[0] if len(candidates) == 1 else None
    if tp is not None and get_origin(tp) is Annotated:
        base, *extras = get_args(tp)
        if any(isinstance(e, _DurationMarker) for e in extras) and isinstance(value, (int, float)):
            return format_duration(value)
        tp = base
    if isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        for info in msgspec.structs.fields(type(value)):
            encoded = to_builtins(getattr(value, info.name), info.type)
            if not _is_empty(encoded):
                out[info.encode_name] = encoded
        return out
    if isinstance(value, (list, tuple)):
        item_type = None
        if tp is not None and get_origin(tp) in (list, tuple):
            args = get_args(tp)
            item_type = args[0] if args else None
        return [to_builtins(v, item_type) for v in value]
    if isinstance(value, dict):
        value_type = None
        if tp is not None and get_origin(tp) is dict:
            value_type = get_args(tp)[1]
        return {k: to_builtins(v, value_type) for k, v in value.items()}
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
