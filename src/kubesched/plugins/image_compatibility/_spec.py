"""NFD image compatibility specs (v1alpha1): decoding, validation, and evaluation on a node.

A spec lists compatibility sets of NFD rules; a node is compatible when every rule of at least
one set matches it. How the YAML is read (as NFD reads it, YAML 1.1) and where the sets differ
from NFD's validator: docs/plugins/image-compatibility.md, "Reading a spec".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

import msgspec
import numpy as np
import yaml

from kubesched import KubeschedError
from kubesched.plugins.image_compatibility._nfd import (
    CompiledRule,
    Features,
    GroupRule,
    RuleError,
    compile_rule,
)

__all__ = [
    "ARTIFACT_TYPE",
    "SPEC_MEDIA_TYPE",
    "SPEC_VERSION",
    "Compatibility",
    "CompatibilitySpec",
    "SpecError",
    "SpecResult",
    "decode_spec",
    "evaluate",
]

ARTIFACT_TYPE: Final = "application/vnd.nfd.image-compatibility.v1alpha1"
SPEC_MEDIA_TYPE: Final = "application/vnd.nfd.image-compatibility.spec.v1alpha1+yaml"
SPEC_VERSION: Final = "v1alpha1"
# Most values a spec may hold: a real one has hundreds.
_MAX_VALUES: Final = 100_000
# Deepest nesting of a spec: a real one is about 10 deep.
_MAX_DEPTH: Final = 64
# Longest reason given for one compatibility set of an incompatible spec.
_SET_REASON_MAX: Final = 160


class Compatibility(msgspec.Struct, rename="camel", omit_defaults=True):
    """One compatibility set: alternatives to the other sets, all its rules must match."""

    rules: list[GroupRule] = []
    weight: int = 0
    tag: str = ""
    description: str = ""


class CompatibilitySpec(msgspec.Struct, rename="camel", omit_defaults=True, dict=True):
    """The spec; ``dict=True`` keeps its compiled form with it (see :func:`evaluate`)."""

    version: str = ""
    compatibilities: list[Compatibility] = []


class SpecError(KubeschedError, ValueError):
    """A spec that cannot be used; ``path`` names the field (``compatibilities[0].weight``)."""

    def __init__(self, path: str, message: str) -> None:
        ValueError.__init__(self, f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


class _InvalidRuleError(SpecError, RuleError):
    """An invalid rule in a spec: both a SpecError and a RuleError."""


@dataclass(frozen=True, slots=True)
class SpecResult:
    """The outcome of a spec on one node.

    ``weight`` is the highest weight of the matched sets (0 if none); ``matched_sets`` their
    indexes; ``reason``, when incompatible, names the first failing rule of each set.
    """

    compatible: bool
    weight: int
    matched_sets: tuple[int, ...]
    reason: str


_NO_SETS: Final = SpecResult(True, 0, (), "")


# --- decoding ------------------------------------------------------------------------------

_PLAIN_TAG: Final = "tag:kubesched.io,2026:plain"
_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """PyYAML with go-yaml v2's resolution of plain scalars (see :func:`_resolve_plain`).

    go-yaml v2 also refuses a mapping with a key twice, where PyYAML keeps the last. The pure
    Python loader, not libyaml's: libyaml's composer recurses in C and crashes the process on
    a deeply nested document, where Python's raises RecursionError. A spec is decoded once.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                continue  # unhashable: the base class reports it
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} given twice", key_node.start_mark
                )
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


_GO_NULL: Final = frozenset({"", "~", "null", "Null", "NULL"})
_GO_BOOL: Final = {
    **dict.fromkeys(
        ["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True
    ),
    **dict.fromkeys(
        ["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False
    ),
}
_GO_FLOAT_WORDS: Final = {
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
_GO_DOT_FLOAT: Final = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
_GO_YAML_FLOAT: Final = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_GO_INT_DIGITS: Final = {2: "01", 8: "01234567", 10: "0123456789", 16: "0123456789abcdefABCDEF"}


def _go_parse_int(s: str, signed: bool) -> int | None:
    """Go's ``strconv.ParseInt(s, 0, 64)`` (or ParseUint): prefixes 0x, 0o, 0b, 0 (octal)."""
    sign = 1
    if s[:1] in ("+", "-") and signed:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    base = 10
    if s[:1] == "0":
        prefix = s[1:2].lower()
        if len(s) >= 3 and prefix in ("b", "o", "x"):
            base, s = {"b": 2, "o": 8, "x": 16}[prefix], s[2:]
        else:
            base, s = 8, s[1:]
            if not s:
                return 0
    if not s or any(c not in _GO_INT_DIGITS[base] for c in s):
        return None
    n = sign * int(s, base)
    if signed:
        return n if -(1 << 63) <= n < (1 << 63) else None
    return n if n < (1 << 64) else None


def _resolve_plain(value: str) -> object:
    """What go-yaml v2 makes of an unquoted scalar: None, bool, int, float or the string.

    Timestamps, which go-yaml would parse too, are left as strings.
    """
    if value in _GO_NULL:
        return None
    if value in _GO_BOOL:
        return _GO_BOOL[value]
    if value in _GO_FLOAT_WORDS:
        return _GO_FLOAT_WORDS[value]
    first = value[0]
    if first == "." and _GO_DOT_FLOAT.fullmatch(value):
        return float(value)
    if first.isascii() and (first.isdigit() or first in "+-"):
        plain = value.replace("_", "")
        for signed in (True, False):
            n = _go_parse_int(plain, signed)
            if n is not None:
                return n
        if _GO_YAML_FLOAT.fullmatch(plain):
            return float(plain)
    return value


_Loader.yaml_implicit_resolvers = {}
_Loader.add_implicit_resolver(_MERGE_TAG, re.compile(r"<<\Z"), ["<"])
_Loader.add_implicit_resolver(_PLAIN_TAG, re.compile(""), None)
_Loader.add_constructor(_PLAIN_TAG, lambda loader, node: _resolve_plain(node.value))


def _go_float(x: float) -> str:
    """Go's ``strconv.FormatFloat(x, 'g', -1, 32)``: shortest float32 digits, %e from 1e+06."""
    if math.isnan(x):
        return "NaN"
    f = np.float32(x) if abs(x) <= float(np.finfo(np.float32).max) else np.float32(math.inf)
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, float(f)) < 0 else ""
    if f == 0:
        return sign + "0"
    mantissa, _, exponent = np.format_float_scientific(abs(f), unique=True, trim="-").partition("e")
    digits = mantissa.replace(".", "")
    exp = int(exponent)
    if exp < -4 or exp >= 6:  # Go: %e for shortest "g" from 1e+06
        frac = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{frac}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    point = exp + 1
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _go_string(x: object) -> object:
    """A resolved scalar as sigs.k8s.io/yaml hands it to a Go string field."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return _go_float(x)
    return x


def _go_key(key: object, path: str) -> str:
    if key is None or isinstance(key, list | dict):
        raise SpecError(path, f"unsupported key {key!r}")
    if isinstance(key, float) and math.isinf(key):
        return ".inf" if key > 0 else "-.inf"
    if isinstance(key, float) and math.isnan(key):
        return ".nan"
    return str(_go_string(key))


def _is_scalar(x: object) -> bool:
    return not isinstance(x, list | dict)


class _Normalizer:
    """Turn YAML data into what Go's JSON decoding of the spec types would see.

    Scalars become strings except ``weight``; a null field keeps its default as in Go, except
    a null expression (NFD would crash on it) and a null var (the empty string in Go).
    At most ``_MAX_VALUES`` values are visited, aliases counted each time they are used, and
    at most ``_MAX_DEPTH`` deep, so that a small document cannot take the decoder down.
    """

    def __init__(self) -> None:
        self.left = _MAX_VALUES

    def __call__(self, node: object, path: str, field: str, depth: int = 0) -> object:
        """``node`` normalized; ``field`` is the name of the field it belongs to."""
        self.left -= 1
        if self.left < 0:
            raise SpecError("", f"more than {_MAX_VALUES} values (aliases counted each use)")
        if depth > _MAX_DEPTH:
            raise SpecError(path, f"nested more than {_MAX_DEPTH} deep")
        if isinstance(node, dict):
            out: dict[str, object] = {}
            for k, v in node.items():
                key = _go_key(k, path)
                sub = f"{path}.{key}" if path else key
                if field == "matchExpressions" and not isinstance(v, dict):
                    raise SpecError(sub, "expression must be a mapping {op, value, type}")
                if v is None:
                    if field == "vars":
                        out[key] = ""
                    continue
                if field == "vars" and not _is_scalar(v):
                    raise SpecError(sub, "a var must be a string")
                if field in ("expression", "matchName"):
                    # Checked here: under matchExpressions, msgspec's error path would lose
                    # the key.
                    if key == "value" and not (
                        isinstance(v, list) and all(_is_scalar(x) and x is not None for x in v)
                    ):
                        raise SpecError(sub, "must be a list of strings")
                    if key in ("op", "type") and not _is_scalar(v):
                        raise SpecError(sub, "must be a string")
                out[key] = self(v, sub, _CHILD_FIELD.get(field, key), depth + 1)
            return out
        if isinstance(node, list):
            return [self(v, f"{path}[{i}]", field, depth + 1) for i, v in enumerate(node)]
        if field == "weight":
            return node
        return _go_string(node)


# The field name given to the entries of a map whose keys are not field names.
_CHILD_FIELD: Final = {"matchExpressions": "expression", "vars": "", "expression": ""}
_AT: Final = re.compile(r"(?s)(.*) - at `\$\.?(.*)`")


def decode_spec(data: bytes) -> CompatibilitySpec:
    """Decode, validate and compile a spec (YAML or JSON). Raises SpecError naming the field."""
    try:
        raw = yaml.load(data, Loader=_Loader)  # a safe loader
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise SpecError("", f"not YAML or JSON: {e.problem or e.context}{where}") from None
    except yaml.YAMLError as e:
        raise SpecError("", f"not YAML or JSON: {e}") from None
    except RecursionError:
        raise SpecError("", "not YAML or JSON: nested too deep") from None
    if not isinstance(raw, dict):
        raise SpecError("", "a spec must be a mapping with version and compatibilities")
    try:
        spec = msgspec.convert(_Normalizer()(raw, "", ""), CompatibilitySpec)
    except msgspec.ValidationError as e:
        m = _AT.fullmatch(str(e))
        raise SpecError(m[2], m[1]) if m else SpecError("", str(e)) from None
    if spec.version != SPEC_VERSION:
        raise SpecError("version", f'unsupported version "{spec.version}" (want {SPEC_VERSION})')
    _compile(spec)
    return spec


# --- evaluation ----------------------------------------------------------------------------


class _Set:
    """One compiled compatibility set."""

    __slots__ = ("label", "rules", "uses_backref", "weight")

    def __init__(self, index: int, compatibility: Compatibility) -> None:
        self.weight = compatibility.weight
        self.label = f"set {index}" + (f' "{compatibility.tag}"' if compatibility.tag else "")
        rules: list[CompiledRule] = []
        for j, rule in enumerate(compatibility.rules):
            try:
                rules.append(compile_rule(rule, f"compatibilities[{index}].rules[{j}]"))
            except RuleError as e:
                raise _InvalidRuleError(e.path, e.message) from None
        self.rules: tuple[CompiledRule, ...] = tuple(rules)
        self.uses_backref = any(r.uses_backref for r in self.rules)

    def check(self, features: Features) -> str | None:
        if not self.uses_backref:
            for rule in self.rules:
                reason = rule.check(features)
                if reason is not None:
                    return reason
            return None
        seen: dict[str, str] | None = None
        for rule in self.rules:
            reason = rule.check(features, seen)
            if reason is not None:
                return reason
            seen = {**seen, **rule.vars} if seen is not None else dict(rule.vars)
        return None


def _compile(spec: CompatibilitySpec) -> tuple[_Set, ...]:
    sets: tuple[_Set, ...] | None = spec.__dict__.get("_compiled")
    if sets is None:
        sets = tuple(_Set(i, c) for i, c in enumerate(spec.compatibilities))
        spec.__dict__["_compiled"] = sets
    return sets


def _shorten(text: str) -> str:
    return text if len(text) <= _SET_REASON_MAX else text[: _SET_REASON_MAX - 3] + "..."


def evaluate(spec: CompatibilitySpec, features: Features) -> SpecResult:
    """Whether a node with ``features`` can run the image of ``spec``.

    Every set is evaluated (for the weight); a spec with no sets is compatible. A spec not
    from :func:`decode_spec` is compiled on first use and may raise SpecError then.
    """
    sets = _compile(spec)
    if not sets:
        return _NO_SETS
    matched: list[int] = []
    reasons: list[str] = []
    for i, s in enumerate(sets):
        reason = s.check(features)
        if reason is None:
            matched.append(i)
        elif not matched:
            reasons.append(f"{s.label}: {_shorten(reason)}" if len(sets) > 1 else _shorten(reason))
    if matched:
        return SpecResult(True, max(sets[i].weight for i in matched), tuple(matched), "")
    return SpecResult(False, 0, (), "; ".join(reasons))
