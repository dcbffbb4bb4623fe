"""Node Feature Discovery's rule engine, in process: NodeFeature objects and GroupRule matching.

NFD v0.19's semantics, odd corners included, and the differences from it:
docs/plugins/image-compatibility.md, "NFD's rule semantics".

Rules are validated and compiled once (:func:`compile_rule`): regular expressions compiled,
numbers and versions parsed, feature names lower-cased, failure messages prepared. A rule
that matches allocates nothing unless it uses matchName or back-references; only a failure
builds its message.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

import msgspec
import re2  # type: ignore[import-untyped]

from kubesched import KubeschedError
from kubesched.api import ObjectMeta

__all__ = [
    "API_VERSION",
    "NODE_NAME_LABEL",
    "RULE_BACKREF_FEATURE",
    "AttributeFeatureSet",
    "CompiledRule",
    "FeatureMatcherTerm",
    "Features",
    "FlagFeatureSet",
    "GroupRule",
    "InstanceFeature",
    "InstanceFeatureSet",
    "MatchAnyElem",
    "MatchExpression",
    "MatchResult",
    "Nil",
    "NodeFeature",
    "NodeFeatureSpec",
    "RuleError",
    "compile_rule",
    "match_group_rule",
    "node_features",
]

API_VERSION: Final = "nfd.k8s-sigs.io/v1alpha1"
NODE_NAME_LABEL: Final = "nfd.node.kubernetes.io/node-name"
# The attribute feature through which a rule sees the vars of the rules before it.
RULE_BACKREF_FEATURE: Final = "rule.matched"


class _Obj(msgspec.Struct, rename="camel", omit_defaults=True, gc=False):
    """Base of the NFD structs: camelCase on the wire, untracked by the garbage collector."""


# --- NodeFeature ---------------------------------------------------------------------------


class Nil(_Obj):
    """The empty value of a flag element (``{}`` on the wire)."""


class FlagFeatureSet(_Obj):
    elements: dict[str, Nil] = {}


class AttributeFeatureSet(_Obj):
    elements: dict[str, str] = {}


class InstanceFeature(_Obj):
    attributes: dict[str, str] = {}


class InstanceFeatureSet(_Obj):
    elements: list[InstanceFeature] = []


class Features(_Obj):
    """All features of a node, by kind, each keyed ``<domain>.<feature>``."""

    flags: dict[str, FlagFeatureSet] = {}
    attributes: dict[str, AttributeFeatureSet] = {}
    instances: dict[str, InstanceFeatureSet] = {}


class NodeFeatureSpec(_Obj):
    features: Features = msgspec.field(default_factory=Features)
    labels: dict[str, str] = {}


class NodeFeature(_Obj):
    """One source's features of one node; the node is named by the ``NODE_NAME_LABEL`` label."""

    api_version: str = API_VERSION
    kind: str = "NodeFeature"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: NodeFeatureSpec = msgspec.field(default_factory=NodeFeatureSpec)


def node_features(
    objects: Iterable[NodeFeature], node_name: str, *, nfd_namespace: str | None = None
) -> Features:
    """The features of ``node_name``, merged from its NodeFeature objects as nfd-master does.

    The objects whose ``nfd.node.kubernetes.io/node-name`` label names the node are ordered
    (those in ``nfd_namespace`` first, then by name, then by namespace) and merged in that
    order: a later object's flag and attribute elements overwrite an earlier one's, instances
    are appended. The inputs are not modified; a single object's features are returned as is.
    """
    mine = [o for o in objects if o.metadata.labels.get(NODE_NAME_LABEL) == node_name]
    if not mine:
        return Features()
    mine.sort(
        key=lambda o: (
            nfd_namespace is not None and o.metadata.namespace != nfd_namespace,
            o.metadata.name,
            o.metadata.namespace,
        )
    )
    if len(mine) == 1:
        return mine[0].spec.features
    flags: dict[str, dict[str, Nil]] = {}
    attributes: dict[str, dict[str, str]] = {}
    instances: dict[str, list[InstanceFeature]] = {}
    for obj in mine:
        features = obj.spec.features
        for name, fs in features.flags.items():
            flags.setdefault(name, {}).update(fs.elements)
        for name, attrs in features.attributes.items():
            attributes.setdefault(name, {}).update(attrs.elements)
        for name, insts in features.instances.items():
            instances.setdefault(name, []).extend(insts.elements)
    return Features(
        flags={k: FlagFeatureSet(elements=v) for k, v in flags.items()},
        attributes={k: AttributeFeatureSet(elements=v) for k, v in attributes.items()},
        instances={k: InstanceFeatureSet(elements=v) for k, v in instances.items()},
    )


# --- GroupRule -----------------------------------------------------------------------------


class MatchExpression(_Obj):
    """``op`` applied to an element's value with ``value`` as arguments; see the module doc."""

    op: str = ""
    value: list[str] = []
    type: str = ""


class FeatureMatcherTerm(_Obj):
    feature: str = ""
    # None and {} differ: None skips value matching, {} still needs the feature to have
    # flags, attributes or at least one instance.
    match_expressions: dict[str, MatchExpression] | None = None
    match_name: MatchExpression | None = None


class MatchAnyElem(_Obj):
    match_features: list[FeatureMatcherTerm] = []


class GroupRule(msgspec.Struct, rename="camel", omit_defaults=True, dict=True):
    """NFD's GroupRule (NodeFeatureGroup and image compatibility rules).

    ``dict=True`` lets :func:`compile_rule` keep the compiled form on the rule itself, so a
    rule decoded once is validated and compiled once; a rule is a value and is not modified
    after it is compiled.
    """

    name: str = ""
    vars: dict[str, str] = {}
    vars_template: str = ""
    match_features: list[FeatureMatcherTerm] = []
    match_any: list[MatchAnyElem] = []


class RuleError(KubeschedError, ValueError):
    """A rule that cannot be evaluated; ``path`` names the offending field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


@dataclass(frozen=True, slots=True)
class MatchResult:
    """The outcome of one rule on one node.

    ``reason`` is empty when matched, else one short sentence naming the rule and what failed.
    ``vars`` are the rule's vars when it matched (what later rules see as ``rule.matched``).
    """

    matched: bool
    reason: str
    vars: Mapping[str, str] = field(default_factory=dict)


# --- compiling expressions -----------------------------------------------------------------

_VALUELESS_OPS: Final = frozenset({"", "Exists", "DoesNotExist", "IsTrue", "IsFalse"})
_LIST_OPS: Final = frozenset({"In", "NotIn", "InRegexp"})
_ONE_VALUE_OPS: Final = frozenset({"Gt", "Ge", "Lt", "Le"})
_RANGE_OPS: Final = frozenset({"GtLt", "GeLe"})
_OPS: Final = _VALUELESS_OPS | _LIST_OPS | _ONE_VALUE_OPS | _RANGE_OPS

# How an expression treats the element it names; only _VALUE looks at the element's value.
_ANY, _EXISTS, _DOES_NOT_EXIST, _VALUE = range(4)
_KIND: Final = {"": _ANY, "Exists": _EXISTS, "DoesNotExist": _DOES_NOT_EXIST}

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_UINT64_MAX: Final = (1 << 64) - 1
_ATOI: Final = re.compile(r"[+-]?[0-9]+")
# Masterminds/semver v3 NewVersion in its default (coercing) mode.
_VERSION: Final = re.compile(
    r"v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_MAX_VERSION_LEN: Final = 256
_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False
# Longest element value quoted in a failure message.
_QUOTE_MAX: Final = 40


class _EvalError(Exception):
    """A node value an operator cannot compare (NFD returns an error for the rule)."""


def _number(s: str) -> tuple[int] | None:
    """``strconv.Atoi``: optional sign and ASCII digits, within int64; None if not a number.

    A 1-tuple, so that numbers and versions compare alike.
    """
    if not _ATOI.fullmatch(s):
        return None
    n = int(s)
    return (n,) if _INT64_MIN <= n <= _INT64_MAX else None


@functools.lru_cache(maxsize=4096)
def _version(s: str) -> tuple[int, int, int] | None:
    """``major.minor.patch`` of a version NFD accepts, or None.

    Node values repeat across nodes (kernel versions), hence the cache.
    """
    m = _VERSION.fullmatch(s) if len(s) <= _MAX_VERSION_LEN else None
    if m is None:
        return None
    parts = tuple(int(p) if p else 0 for p in m.group(1, 2, 3))
    if any(p > _UINT64_MAX for p in parts):
        return None
    pre = m.group(4)
    # A numeric pre-release identifier with a leading zero is invalid semver.
    if pre and any(i.isdigit() and len(i) > 1 and i[0] == "0" for i in pre.split(".")):
        return None
    return parts[0], parts[1], parts[2]


def _regexp_error(pattern: str) -> str | None:
    """Why RE2 (Go's syntax) refuses ``pattern``, or None."""
    try:
        re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as e:
        return str(e.args[0].decode() if isinstance(e.args[0], bytes) else e)
    return None


@functools.lru_cache(maxsize=256)
def _regexps(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a value contains a match of any of ``patterns`` (valid RE2), as Go's
    ``MatchString``; one RE2 set per distinct list of patterns, whichever rule uses it.

    A call into RE2 costs more than a dict lookup, and node values repeat across nodes (PCI
    classes, vendors), so answers are kept per value.
    """
    found = re2.Set.SearchSet(_RE2_OPTIONS)
    for p in patterns:
        found.Add(p)
    found.Compile()

    @functools.lru_cache(maxsize=1024)
    def test(value: str) -> bool:
        # A lone surrogate cannot be UTF-8; Go would see U+FFFD there.
        return found.Match(value.encode("utf-8", "replace")) is not None

    return test


def _quote(value: str) -> str:
    if len(value) > _QUOTE_MAX:
        value = value[: _QUOTE_MAX - 3] + "..."
    return f'"{value}"'


def _expression_text(op: str, values: list[str], vtype: str) -> str:
    text = op or "(any)"
    if values:
        text += " " + ",".join(values)
    if vtype == "version" and op in _ONE_VALUE_OPS | _RANGE_OPS:
        text += " (version)"
    return text


def _no_value(value: str) -> bool:
    """The value test of the ops that never look at a value (Exists, DoesNotExist, any)."""
    return False


def _value_test(me: MatchExpression, text: str, path: str) -> Callable[[str], bool]:
    """Validate ``me`` and build the test of an element value."""
    op, values, vtype = me.op, me.value, me.type
    if op not in _OPS:
        raise RuleError(f"{path}.op", f"unknown operator {_quote(op)} (want one of {sorted(_OPS)})")
    if op in _VALUELESS_OPS:
        if values:
            raise RuleError(f"{path}.value", f"must be empty for op {_quote(op)}")
        if op == "IsTrue":
            return "true".__eq__
        if op == "IsFalse":
            return "false".__eq__
        return _no_value
    if op in _LIST_OPS:
        if not values:
            raise RuleError(f"{path}.value", f"must not be empty for op {op}")
        if op == "In":
            return frozenset(values).__contains__
        if op == "NotIn":
            excluded = frozenset(values)
            return lambda v: v not in excluded
        for i, v in enumerate(values):
            error = _regexp_error(v)
            if error is not None:
                raise RuleError(f"{path}.value[{i}]", f"invalid regexp {_quote(v)}: {error}")
        return _regexps(tuple(values))
    want = 1 if op in _ONE_VALUE_OPS else 2
    if len(values) != want:
        raise RuleError(
            f"{path}.value",
            f"must have exactly {want} element{'s' if want > 1 else ''} for op {op}",
        )
    if vtype not in ("", "version"):
        raise RuleError(f"{path}.type", f"unknown type {_quote(vtype)} (want version or none)")
    return _compare_test(op, values, vtype, text, path)


def _compare_test(
    op: str, values: list[str], vtype: str, text: str, path: str
) -> Callable[[str], bool]:
    """The test of Gt, Ge, Lt, Le, GtLt, GeLe over integers or versions."""
    parse: Callable[[str], tuple[int, ...] | None]
    if vtype == "version":
        parse, kind = _version, "version"
    else:
        parse, kind = _number, "number"
    bounds: list[tuple[int, ...]] = []
    for i, v in enumerate(values):
        b = parse(v)
        if b is None:
            raise RuleError(f"{path}.value[{i}]", f"not a {kind} {_quote(v)}")
        bounds.append(b)
    if kind == "number" and len(bounds) == 2 and not bounds[0] < bounds[1]:
        raise RuleError(f"{path}.value", f"value[0] must be less than value[1] for op {op}")

    def convert(v: str) -> tuple[int, ...]:
        x = parse(v)
        if x is None:
            raise _EvalError(f"{text}: not a {kind} {_quote(v)}")
        return x

    lo = bounds[0]
    hi = bounds[-1]
    compare: dict[str, Callable[[str], bool]] = {
        "Gt": lambda v: convert(v) > lo,
        "Ge": lambda v: convert(v) >= lo,
        "Lt": lambda v: convert(v) < lo,
        "Le": lambda v: convert(v) <= lo,
        "GtLt": lambda v: lo < convert(v) < hi,
        "GeLe": lambda v: lo <= convert(v) <= hi,
    }
    return compare[op]


@dataclass(frozen=True, slots=True)
class _Expr:
    """One compiled expression: ``name`` is the element it reads (unused by matchName)."""

    name: str
    kind: int
    test: Callable[[str], bool]
    # Can raise _EvalError on a node value (the comparison operators).
    fallible: bool
    text: str


def _compile_expression(name: str, me: MatchExpression | None, path: str) -> _Expr:
    if me is None:
        raise RuleError(path, "expression must be an object, not null")
    text = _expression_text(me.op, me.value, me.type)
    test = _value_test(me, f"{name} {text}" if name else f"name {text}", path)
    kind = _KIND.get(me.op, _VALUE)
    return _Expr(name, kind, test, me.op in _ONE_VALUE_OPS | _RANGE_OPS, text)


# --- matching ------------------------------------------------------------------------------


def _kv_failure(
    exprs: tuple[_Expr, ...],
    keys: Mapping[str, Nil] | None,
    values: Mapping[str, str] | None,
    full: bool,
) -> _Expr | None:
    """The first of ``exprs`` that flags ``keys`` and attributes ``values`` fail, or None.

    NFD's MatchMulti: each expression may hold in either set, but DoesNotExist needs the name
    absent from both. An instance is ``values`` alone. ``full`` evaluates every expression,
    so that a value that cannot be compared raises even after a failure.
    """
    failed = None
    for e in exprs:
        kind = e.kind
        name = e.name
        if kind == _EXISTS:
            ok = (keys is not None and name in keys) or (values is not None and name in values)
        elif kind == _VALUE:
            v = None if values is None else values.get(name)
            ok = v is not None and e.test(v)
        elif kind == _DOES_NOT_EXIST:
            ok = (keys is None or name not in keys) and (values is None or name not in values)
        else:
            ok = True
        if not ok and failed is None:
            failed = e
            if not full:
                break
    return failed


class _Term:
    """One compiled FeatureMatcherTerm."""

    __slots__ = ("backref", "exprs", "fallible", "feature", "match_name", "missing")

    def __init__(self, term: FeatureMatcherTerm, path: str) -> None:
        self.feature = term.feature.lower()
        self.backref = self.feature == RULE_BACKREF_FEATURE
        self.missing = f"feature {term.feature} not found"
        self.exprs: tuple[_Expr, ...] | None = None
        if term.match_expressions is not None:
            # Sorted, so that the first failure named is the same every time.
            self.exprs = tuple(
                _compile_expression(name, me, f"{path}.matchExpressions.{name}")
                for name, me in sorted(term.match_expressions.items())
            )
        self.match_name = (
            None
            if term.match_name is None
            else _compile_expression("", term.match_name, f"{path}.matchName")
        )
        self.fallible = any(e.fallible for e in self.exprs or ()) or bool(
            self.match_name and self.match_name.fallible
        )

    def check(
        self, features: Features, backref: Mapping[str, str] | None, fail_fast: bool
    ) -> str | None:
        """None if the term matches, else why not; raises _EvalError on an unusable value.

        A fallible term is evaluated as far as NFD goes, so that an error is found wherever
        NFD finds it: every instance, and unless ``fail_fast`` every expression; an
        infallible one stops at the answer.
        """
        feature = self.feature
        flag_set = features.flags.get(feature)
        attr_set = features.attributes.get(feature)
        inst_set = features.instances.get(feature)
        keys = flag_set.elements if flag_set is not None else None
        values: Mapping[str, str] | None = attr_set.elements if attr_set is not None else None
        if self.backref and backref is not None:
            values = backref if values is None else {**values, **backref}
        instances = inst_set.elements if inst_set is not None else None
        if keys is None and values is None and instances is None:
            return self.missing
        try:
            exprs = self.exprs
            if exprs is not None:
                full = self.fallible and not fail_fast
                failed = None
                kv_ok = False
                if keys is not None or values is not None:
                    failed = _kv_failure(exprs, keys, values, full)
                    kv_ok = failed is None
                inst_ok = False
                if instances and (self.fallible or not kv_ok):
                    for inst in instances:
                        if _kv_failure(exprs, None, inst.attributes, full) is None:
                            inst_ok = True
                            if not self.fallible:
                                break
                if not kv_ok and not inst_ok:
                    if failed is not None:
                        return self._kv_reason(failed, keys, values)
                    return self._instance_reason(exprs, instances)
            me = self.match_name
            if me is not None and not self._any_name(me, keys, values, instances):
                return f"{feature} name {me.text}: no match"
        except _EvalError as e:
            raise _EvalError(f"{feature} {e}") from None
        return None

    def _any_name(
        self,
        me: _Expr,
        keys: Mapping[str, Nil] | None,
        values: Mapping[str, str] | None,
        instances: list[InstanceFeature] | None,
    ) -> bool:
        names: list[Iterable[str]] = [keys or (), values or ()]
        names.extend(i.attributes for i in instances or ())
        if me.kind in (_ANY, _EXISTS):
            return any(names_ for names_ in names)
        if me.kind == _DOES_NOT_EXIST:
            return False
        test = me.test
        if not me.fallible:
            return any(test(n) for group in names for n in group)
        # NFD tests every name, so a name that is not a number is an error even after a match.
        results = [test(n) for group in names for n in group]
        return any(results)

    def _kv_reason(
        self, e: _Expr, keys: Mapping[str, Nil] | None, values: Mapping[str, str] | None
    ) -> str:
        where = f"{self.feature} {e.name} {e.text}"
        if e.kind == _DOES_NOT_EXIST:
            return f"{where}: present"
        v = values.get(e.name) if values is not None else None
        if v is None:
            return f"{where}: {'a flag, no value' if keys and e.name in keys else 'not found'}"
        return f"{where}: have {_quote(v)}"

    def _instance_reason(
        self, exprs: tuple[_Expr, ...], instances: list[InstanceFeature] | None
    ) -> str:
        if not instances:
            return f"{self.feature}: no instances"
        for e in exprs:
            if all(_kv_failure((e,), None, i.attributes, False) for i in instances):
                return f"{self.feature}: no instance with {e.name} {e.text}"
        return f"{self.feature}: no instance matches all expressions"


def _check_all(
    terms: tuple[_Term, ...],
    features: Features,
    backref: Mapping[str, str] | None,
    fail_fast: bool,
) -> str | None:
    for t in terms:
        reason = t.check(features, backref, fail_fast)
        if reason is not None:
            return reason
    return None


class CompiledRule:
    """A validated GroupRule, ready to be matched against many nodes."""

    __slots__ = (
        "any_fallible",
        "label",
        "match_any",
        "match_features",
        "matched",
        "uses_backref",
        "vars",
    )

    def __init__(self, rule: GroupRule, path: str = "") -> None:
        prefix = f"{path}." if path else ""
        if rule.vars_template:
            raise RuleError(f"{prefix}varsTemplate", "templates are not supported; use vars")
        self.label = f'rule "{rule.name}"'
        # Read-only: every match of the rule hands out this same mapping.
        self.vars: Mapping[str, str] = MappingProxyType(dict(rule.vars))
        self.matched = MatchResult(True, "", self.vars)
        self.match_features = tuple(
            _Term(t, f"{prefix}matchFeatures[{i}]") for i, t in enumerate(rule.match_features)
        )
        self.match_any = tuple(
            tuple(
                _Term(t, f"{prefix}matchAny[{i}].matchFeatures[{j}]")
                for j, t in enumerate(elem.match_features)
            )
            for i, elem in enumerate(rule.match_any)
        )
        every = [*self.match_features, *(t for elem in self.match_any for t in elem)]
        self.any_fallible = any(t.fallible for elem in self.match_any for t in elem)
        self.uses_backref = any(t.backref for t in every)

    def check(
        self,
        features: Features,
        backref: Mapping[str, str] | None = None,
        *,
        fail_fast: bool = False,
    ) -> str | None:
        """None if the rule matches ``features``, else the reason (``rule "x": ...``).

        By default the rule is evaluated as NFD's image compatibility validator does, where
        an error in any ``matchAny`` element or expression fails the rule. ``fail_fast`` is
        nfd-master's evaluation of NodeFeatureGroups, which stops at the first matching
        ``matchAny`` element and the first failing expression; the two differ only in which
        unusable node values they reach.
        """
        try:
            if self.match_any:
                hit = -1
                first = None
                for i, elem in enumerate(self.match_any):
                    reason = _check_all(elem, features, backref, fail_fast)
                    if reason is None:
                        hit = i
                        break
                    if first is None:
                        first = reason
                if hit < 0:
                    return f"{self.label}: no matchAny element matched, first: {first}"
            reason = _check_all(self.match_features, features, backref, fail_fast)
            if reason is not None:
                return f"{self.label}: {reason}"
            if self.any_fallible and not fail_fast:
                # NFD evaluates every matchAny element; an error in any one fails the rule.
                for i, elem in enumerate(self.match_any):
                    if i != hit:
                        for t in elem:
                            if t.fallible:
                                t.check(features, backref, fail_fast)
        except _EvalError as e:
            return f"{self.label}: {e}"
        return None

    def match(
        self,
        features: Features,
        backref: Mapping[str, str] | None = None,
        *,
        fail_fast: bool = False,
    ) -> MatchResult:
        reason = self.check(features, backref, fail_fast=fail_fast)
        return self.matched if reason is None else MatchResult(False, reason)


def compile_rule(rule: GroupRule, path: str = "") -> CompiledRule:
    """Validate and compile ``rule`` once; later calls return the same compiled rule.

    ``path`` prefixes the field path of a :class:`RuleError`
    (``compatibilities[0].rules[1]`` gives ``compatibilities[0].rules[1].matchFeatures[0]...``).
    """
    compiled: CompiledRule | None = rule.__dict__.get("_compiled")
    if compiled is None:
        compiled = CompiledRule(rule, path)
        rule.__dict__["_compiled"] = compiled
    return compiled


def match_group_rule(
    rule: GroupRule,
    features: Features,
    matched_rules: Mapping[str, str] | None = None,
    *,
    fail_fast: bool = False,
) -> MatchResult:
    """Match one rule against one node's features, as NFD's ExecuteGroupRule does.

    ``matched_rules`` is what the rules evaluated before this one left in ``rule.matched``:
    None before the first rule (the feature does not exist), then the union of the vars of the
    matched rules so far (``{}`` if none had vars). To run rules in order the way NFD does::

        seen: dict[str, str] | None = None
        for rule in rules:
            result = match_group_rule(rule, features, seen)
            seen = {**(seen or {}), **result.vars}

    ``fail_fast`` evaluates as nfd-master does for NodeFeatureGroups rather than as the image
    compatibility validator does (see :meth:`CompiledRule.check`). Raises RuleError if the
    rule is invalid (decoded specs are validated on decode).
    """
    return compile_rule(rule).match(features, matched_rules, fail_fast=fail_fast)
