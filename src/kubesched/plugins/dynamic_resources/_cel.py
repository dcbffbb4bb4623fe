"""CEL device selectors, evaluated as ``k8s.io/dynamic-resource-allocation/cel`` does.

Expressions run on ``cel-python``. The ``device`` variable has ``driver``, ``attributes`` and
``capacity``; attributes and capacity are maps by domain (an unqualified name takes the
driver's), then by id, and an unknown domain reads as an empty map, so only a missing id is an
error ("no such key"). Version attributes are semantic versions and capacities are quantities,
with the Kubernetes CEL libraries that compare them: ``semver()``, ``isSemver()``,
``quantity()``, ``isQuantity()``, ``compareTo``, ``isGreaterThan``, ``isLessThan``,
``major``/``minor``/``patch``, ``add``/``sub``, ``sign``, ``isInteger``, ``asInteger``,
``asApproximateFloat``; and ``lowerAscii``/``upperAscii`` of the strings extension.
What cel-python cannot parse or does not have (``cel.bind``, most of the strings, lists,
regex, URL and IP extensions) is a compile error or an "undeclared reference" at run time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import celpy
from celpy import celtypes
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from kubesched import KubeschedError
from kubesched.api import Device, DeviceAttribute, QuantityError, parse_quantity

#: Compiled expressions kept (kube-scheduler keeps the last 10; compiling here costs more).
CACHE_SIZE = 256


class CELError(KubeschedError):
    """A selector that does not compile, or fails when evaluated; the message is the detail
    kube-scheduler's allocator puts after "CEL compile error: " or "CEL runtime error: "."""


# --- semantic versions -----------------------------------------------------------------------

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


@functools.total_ordering
class Semver:
    """A semantic version 2.0.0, ordered by precedence (build metadata ignored)."""

    __slots__ = ("major", "minor", "patch", "pre", "text")

    def __init__(self, text: str) -> None:
        m = _SEMVER.match(text)
        if m is None:
            raise CELError(f"string {text!r} cannot be parsed as a semantic version")
        self.text = text
        self.major, self.minor, self.patch = int(m[1]), int(m[2]), int(m[3])
        self.pre: tuple[str, ...] = tuple(m[4].split(".")) if m[4] else ()

    def _key(self) -> tuple[Any, ...]:
        # A version without pre-release parts ranks above one with; numeric parts rank below
        # alphanumeric ones.
        pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in self.pre)
        return (self.major, self.minor, self.patch, not self.pre, pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self._key() == other._key()

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Semver):
            return NotImplemented
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Semver({self.text!r})"


# --- quantities ------------------------------------------------------------------------------


@functools.total_ordering
class Quantity:
    """A resource quantity, compared by exact value."""

    __slots__ = ("value",)

    def __init__(self, value: Fraction) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Quantity):
            return NotImplemented
        return self.value < other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __repr__(self) -> str:
        return f"Quantity({self.value})"


def _parse_quantity(text: Any) -> Quantity:
    try:
        return Quantity(parse_quantity(str(text)))
    except QuantityError as e:
        raise CELError(f"quantities must match the regular expression: {e}") from e


def _as_quantity(value: Any) -> Fraction:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, int) and not isinstance(value, bool):
        return Fraction(value)
    raise CELError(f"no such overload: Quantity and {type(value).__name__}")


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Semver) and isinstance(b, Semver):
        return (a > b) - (a < b)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return (a > b) - (a < b)
    raise CELError(f"no such overload: {type(a).__name__}.compareTo({type(b).__name__})")


def _fn_semver(text: Any, normalize: Any = False) -> Semver:
    s = str(text)
    if normalize:
        s = _normalize_semver(s)
    return Semver(s)


def _normalize_semver(text: str) -> str:
    """``semver(s, true)``: a leading ``v`` dropped, missing minor/patch added, leading zeros
    of the numbers removed."""
    s = text[1:] if text.startswith("v") else text
    core, sep, rest = _split_core(s)
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
    return ".".join(parts) + sep + rest


def _split_core(s: str) -> tuple[str, str, str]:
    m = re.search(r"[-+]", s)
    if m is None:
        return s, "", ""
    return s[: m.start()], s[m.start()], s[m.end() :]


def _is_semver(text: Any, normalize: Any = False) -> celtypes.BoolType:
    try:
        _fn_semver(text, normalize)
    except CELError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _is_quantity(text: Any) -> celtypes.BoolType:
    try:
        parse_quantity(str(text))
    except QuantityError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


def _int_part(q: Quantity) -> celtypes.IntType:
    if q.value.denominator != 1:
        raise CELError("cannot convert value to integer")
    return celtypes.IntType(q.value.numerator)


_FUNCTIONS: dict[str, Any] = {
    "semver": _fn_semver,
    "isSemver": _is_semver,
    "quantity": _parse_quantity,
    "isQuantity": _is_quantity,
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) < 0),
    "major": lambda v: celtypes.IntType(v.major),
    "minor": lambda v: celtypes.IntType(v.minor),
    "patch": lambda v: celtypes.IntType(v.patch),
    "sign": lambda q: celtypes.IntType((q.value > 0) - (q.value < 0)),
    "isInteger": lambda q: celtypes.BoolType(q.value.denominator == 1),
    "asInteger": _int_part,
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "add": lambda q, o: Quantity(_as_quantity(q) + _as_quantity(o)),
    "sub": lambda q, o: Quantity(_as_quantity(q) - _as_quantity(o)),
    "lowerAscii": lambda s: celtypes.StringType(
        "".join(c.lower() if c.isascii() else c for c in str(s))
    ),
    "upperAscii": lambda s: celtypes.StringType(
        "".join(c.upper() if c.isascii() else c for c in str(s))
    ),
}


# --- the device variable -------------------------------------------------------------------


class _DomainMap(celtypes.MapType):
    """A map by domain where an unknown domain reads as an empty map
    (``newStringInterfaceMapWithDefault``)."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType()


def _attribute_value(attr: DeviceAttribute) -> Any:
    if attr.int_ is not None:
        return celtypes.IntType(attr.int_)
    if attr.bool_ is not None:
        return celtypes.BoolType(attr.bool_)
    if attr.string is not None:
        return celtypes.StringType(attr.string)
    if attr.version is not None:
        try:
            return Semver(attr.version)
        except CELError as e:
            raise CELError(f"parse semantic version: {e}") from e
    raise CELError("unsupported attribute value")


def _by_domain(names: Mapping[str, Any], driver: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name, value in names.items():
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        out.setdefault(domain, {})[ident] = value
    return out


def device_variable(driver: str, device: Device) -> celtypes.MapType:
    """The ``device`` variable of a selector evaluated on ``device`` of ``driver``."""
    attributes: dict[str, Any] = {}
    for name, attr in device.attributes.items():
        try:
            attributes[name] = _attribute_value(attr)
        except CELError as e:
            raise CELError(f"attribute {name}: {e}") from e
    capacity = {name: _parse_quantity(c.value) for name, c in device.capacity.items()}

    def domains(values: dict[str, dict[str, Any]]) -> _DomainMap:
        return _DomainMap(
            {
                celtypes.StringType(d): celtypes.MapType(
                    {celtypes.StringType(k): v for k, v in ids.items()}
                )
                for d, ids in values.items()
            }
        )

    return celtypes.MapType(
        {
            celtypes.StringType("driver"): celtypes.StringType(driver),
            celtypes.StringType("attributes"): domains(_by_domain(attributes, driver)),
            celtypes.StringType("capacity"): domains(_by_domain(capacity, driver)),
        }
    )


# --- compiling and evaluating ----------------------------------------------------------------


@functools.cache
def _env() -> celpy.Environment:
    # Building the CEL parser takes a third of a second: only when a selector is compiled.
    return celpy.Environment()


@dataclass(frozen=True)
class Selector:
    """A compiled selector (or why it does not compile)."""

    expression: str
    program: Any = None
    error: str | None = None

    def matches(self, device: celtypes.MapType) -> bool:
        """The selector's verdict on a device variable; :class:`CELError` if it fails."""
        assert self.program is not None
        try:
            result = self.program.evaluate({"device": device})
        except CELError:
            raise
        except CELEvalError as e:
            raise CELError(_runtime_message(e)) from e
        except Exception as e:  # a function of ours given values it has no overload for
            raise CELError(f"no such overload: {e}") from e
        if isinstance(result, CELEvalError):
            raise CELError(_runtime_message(result))
        if not isinstance(result, (bool, celtypes.BoolType)):
            raise CELError(
                f"CEL result of type {type(result).__name__} could not be converted to bool"
            )
        return bool(result)


def _runtime_message(e: CELEvalError) -> str:
    args = e.args
    if len(args) >= 2 and args[1] is KeyError:
        text = str(args[0])
        m = re.match(r"no such member in mapping: '(.*)'$", text)
        if m is not None:
            return f"no such key: {m[1]}"
        m = re.match(r"undeclared reference to '([^']*)'", text)
        if m is not None:
            return f"undeclared reference to '{m[1]}'"
        return text
    if args and isinstance(args[0], CELError):
        return str(args[0])
    return str(args[0]) if args else str(e)


@functools.lru_cache(maxsize=CACHE_SIZE)
def compile_selector(expression: str) -> Selector:
    """The compiled ``expression``, cached; a compile failure is kept as ``error``."""
    try:
        env = _env()
        ast = env.compile(expression)
        program = env.program(ast, functions=_FUNCTIONS)
    except CELParseError as e:
        return Selector(expression, error=f"compilation failed: ERROR: {_one_line(str(e))}")
    except Exception as e:  # anything else cel-python rejects is a compile error too
        return Selector(expression, error=f"compilation failed: {_one_line(str(e))}")
    return Selector(expression, program=program)


def _one_line(text: str) -> str:
    return " ".join(text.split())
