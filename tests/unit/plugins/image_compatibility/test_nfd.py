"""The NFD rule engine: NFD v0.19's nodefeaturerule tables (expression_test.go,
expression-api_test.go, grouprule_test.go) as facts, plus back-references, errors, messages
and how nfd-master merges the NodeFeature objects of a node."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from kubesched.api import ObjectMeta
from kubesched.plugins.image_compatibility._nfd import (
    NODE_NAME_LABEL,
    Features,
    GroupRule,
    MatchResult,
    NodeFeature,
    NodeFeatureSpec,
    RuleError,
    compile_rule,
    match_group_rule,
    node_features,
)

Json = dict[str, Any]
ERR = "error"  # the rule is invalid, or a node value cannot be compared: no match either way
FEATURE = "dom.feat"


def features(
    flags: dict[str, list[str]] | None = None,
    attributes: dict[str, dict[str, str]] | None = None,
    instances: dict[str, list[dict[str, str]]] | None = None,
) -> Features:
    return msgspec.convert(
        {
            "flags": {k: {"elements": {e: {} for e in v}} for k, v in (flags or {}).items()},
            "attributes": {k: {"elements": v} for k, v in (attributes or {}).items()},
            "instances": {
                k: {"elements": [{"attributes": a} for a in v]}
                for k, v in (instances or {}).items()
            },
        },
        Features,
    )


def me(op: str, *values: str, type: str = "") -> Json:
    e: Json = {"op": op}
    if values:
        e["value"] = list(values)
    if type:
        e["type"] = type
    return e


def term(feature: str = FEATURE, exprs: Json | None = None, name: Json | None = None) -> Json:
    t: Json = {"feature": feature}
    if exprs is not None:
        t["matchExpressions"] = exprs
    if name is not None:
        t["matchName"] = name
    return t


def rule(
    *terms: Json,
    name: str = "r",
    any_of: list[list[Json]] | None = None,
    vars: dict[str, str] | None = None,
) -> GroupRule:
    r: Json = {"name": name, "matchFeatures": list(terms)}
    if any_of is not None:
        r["matchAny"] = [{"matchFeatures": elem} for elem in any_of]
    if vars:
        r["vars"] = vars
    return msgspec.convert(r, GroupRule)


def outcome(r: GroupRule, f: Features, seen: dict[str, str] | None = None) -> bool | str:
    """True or False as NFD answers; ERR where NFD returns an error."""
    try:
        compile_rule(r)
    except RuleError:
        return ERR
    result = match_group_rule(r, f, seen)
    assert result.matched == (result.reason == "")
    if not result.matched and ": not a " in result.reason:
        return ERR
    return result.matched


def on_value(op: str, values: list[str], vtype: str, key: str, attrs: dict[str, str]) -> bool | str:
    return outcome(
        rule(term(exprs={key: me(op, *values, type=vtype)})), features(attributes={FEATURE: attrs})
    )


# --- evaluateMatchExpression: one expression, one element present (valid) or not ----------

SINGLE = [
    ("MatchAny-1", "", [], False, "", True),
    ("MatchAny-2", "", [], False, "2", True),
    ("MatchIn-1", "In", ["1"], False, "2", False),
    ("MatchIn-2", "In", ["1"], True, "2", False),
    ("MatchIn-3", "In", ["1", "2", "3"], False, "2", False),
    ("MatchIn-4", "In", ["1", "2", "3"], True, "2", True),
    ("MatchNotIn-1", "NotIn", ["2"], False, "2", False),
    ("MatchNotIn-2", "NotIn", ["1"], True, "2", True),
    ("MatchNotIn-3", "NotIn", ["1", "2", "3"], False, "2", False),
    ("MatchNotIn-4", "NotIn", ["1", "2", "3"], True, "2", False),
    ("MatchInRegexp-1", "InRegexp", ["val-[0-9]$"], False, "val-1", False),
    ("MatchInRegexp-2", "InRegexp", ["val-[0-9]$"], True, "val-1", True),
    ("MatchInRegexp-3", "InRegexp", ["val-[0-9]$"], True, "val-12", False),
    ("MatchInRegexp-4", "InRegexp", ["val-[0-9]$", "al-[1-9]"], True, "val-12", True),
    ("MatchExists-1", "Exists", [], False, "", False),
    ("MatchExists-2", "Exists", [], True, "", True),
    ("MatchDoesNotExist-1", "DoesNotExist", [], False, "false", True),
    ("MatchDoesNotExist-2", "DoesNotExist", [], True, "false", False),
    ("MatchGt-1", "Gt", ["2"], False, "3", False),
    ("MatchGt-2", "Gt", ["2"], True, "2", False),
    ("MatchGt-3", "Gt", ["2"], True, "3", True),
    ("MatchGt-4", "Gt", ["-10"], True, "-3", True),
    ("MatchLt-1", "Lt", ["2"], False, "1", False),
    ("MatchLt-2", "Lt", ["2"], True, "2", False),
    ("MatchLt-3", "Lt", ["-10"], True, "-3", False),
    ("MatchLt-4", "Lt", ["2"], True, "1", True),
    ("MatchGtLt-1", "GtLt", ["1", "10"], False, "1", False),
    ("MatchGtLt-2", "GtLt", ["1", "10"], True, "1", False),
    ("MatchGtLt-3", "GtLt", ["1", "10"], True, "10", False),
    ("MatchGtLt-4", "GtLt", ["1", "10"], True, "2", True),
    ("MatchIsTrue-1", "IsTrue", [], False, "true", False),
    ("MatchIsTrue-2", "IsTrue", [], True, "true", True),
    ("MatchIsTrue-3", "IsTrue", [], True, "false", False),
    ("MatchIsFalse-1", "IsFalse", [], False, "false", False),
    ("MatchIsFalse-2", "IsFalse", [], True, "false", True),
    ("MatchIsFalse-3", "IsFalse", [], True, "true", False),
]


@pytest.mark.parametrize(
    ("op", "values", "valid", "value", "want"), [c[1:] for c in SINGLE], ids=[c[0] for c in SINGLE]
)
def test_evaluate_match_expression(
    op: str, values: list[str], valid: bool, value: str, want: bool
) -> None:
    attrs = {"foo": value} if valid else {"bar": value}
    assert on_value(op, values, "", "foo", attrs) == want


SINGLE_ERRORS = [
    ("MatchAny-err-1", "", ["1"], "val"),
    ("MatchIn-err-1", "In", [], "val"),
    ("MatchNotIn-err-1", "NotIn", [], "val"),
    ("MatchInRegexp-err-1", "InRegexp", [], "val"),
    ("MatchInRegexp-err-2", "InRegexp", ["("], "val"),
    ("MatchExists-err-1", "Exists", ["1"], ""),
    ("MatchDoesNotExist-err-1", "DoesNotExist", ["1"], ""),
    ("MatchGt-err-1", "Gt", [], "1"),
    ("MatchGt-err-2", "Gt", ["1", "2"], "1"),
    ("MatchGt-err-3", "Gt", [""], "1"),
    ("MatchGt-err-4", "Gt", ["2"], "3a"),
    ("MatchLt-err-1", "Lt", [], "1"),
    ("MatchLt-err-2", "Lt", ["1", "2", "3"], "1"),
    ("MatchLt-err-3", "Lt", ["a"], "1"),
    ("MatchLt-err-4", "Lt", ["2"], "1.0"),
    ("MatchGtLt-err-1", "GtLt", [], "1"),
    ("MatchGtLt-err-2", "GtLt", ["1"], "1"),
    ("MatchGtLt-err-3", "GtLt", ["2", "1"], "1"),
    ("MatchGtLt-err-4", "GtLt", ["1", "2", "3"], "1"),
    ("MatchGtLt-err-5", "GtLt", ["a", "2"], "1"),
    ("MatchGtLt-err-6", "GtLt", ["1", "10"], "1.0"),
    ("MatchIsTrue-err-1", "IsTrue", ["1"], "true"),
    ("MatchIsFalse-err-1", "IsFalse", ["1", "2"], "false"),
    ("invalid-op-err", "non-existent-op", ["1"], "1"),
]


@pytest.mark.parametrize(
    ("op", "values", "value"), [c[1:] for c in SINGLE_ERRORS], ids=[c[0] for c in SINGLE_ERRORS]
)
def test_evaluate_match_expression_errors(op: str, values: list[str], value: str) -> None:
    assert on_value(op, values, "", "foo", {"foo": value}) == ERR


# --- evaluateMatchExpressionKeys: flags ---------------------------------------------------

KEYS = [
    ("1", "", [], "", [], True),
    ("2", "Exists", [], "foo", [], False),
    ("3", "Exists", [], "foo", ["bar"], False),
    ("4", "Exists", [], "foo", ["bar", "foo"], True),
    ("6", "DoesNotExist", [], "foo", [], True),
    ("7", "DoesNotExist", [], "foo", ["bar"], True),
    ("8", "DoesNotExist", [], "foo", ["bar", "foo"], False),
    # every other op needs a value, and a flag has none: never a match, never an error
    ("9", "In", ["foo"], "foo", ["foo"], False),
    ("10", "NotIn", ["foo"], "foo", ["foo"], False),
    ("11", "InRegexp", ["foo"], "foo", ["foo"], False),
    ("12", "Gt", ["1"], "foo", ["foo"], False),
    ("13", "Lt", ["1"], "foo", ["foo"], False),
    ("14", "GtLt", ["1", "10"], "foo", ["foo"], False),
    ("15", "IsTrue", [], "foo", ["foo"], False),
    ("16", "IsFalse", [], "foo", ["foo"], False),
]


@pytest.mark.parametrize(
    ("op", "values", "key", "flags", "want"), [c[1:] for c in KEYS], ids=[c[0] for c in KEYS]
)
def test_evaluate_match_expression_keys(
    op: str, values: list[str], key: str, flags: list[str], want: bool
) -> None:
    r = rule(term(exprs={key: me(op, *values)}))
    assert outcome(r, features(flags={FEATURE: flags})) == want


# --- evaluateMatchExpressionValues: attributes, numbers and versions ------------------------

VALUES = [
    ("1", "", [], "", "", {}, True),
    ("2", "In", ["1", "2"], "", "foo", {"bar": "2"}, False),
    ("3", "In", ["1", "2"], "", "foo", {"foo": "3"}, False),
    ("4", "In", ["1", "2"], "", "foo", {"foo": "2"}, True),
    ("5", "NotIn", ["1", "2"], "", "foo", {"bar": "2"}, False),
    ("6", "NotIn", ["1", "2"], "", "foo", {"foo": "3"}, True),
    ("7", "NotIn", ["1", "2"], "", "foo", {"foo": "2"}, False),
    ("8", "InRegexp", ["1", "2"], "", "foo", {"bar": "2"}, False),
    ("9", "InRegexp", ["1", "[0-8]"], "", "foo", {"foo": "9"}, False),
    ("10", "InRegexp", ["1", "[0-8]"], "", "foo", {"foo": "2"}, True),
    ("11", "Exists", [], "", "foo", {"bar": "1"}, False),
    ("12", "Exists", [], "", "foo", {"foo": "1"}, True),
    ("13", "DoesNotExist", [], "", "foo", {}, True),
    ("14", "DoesNotExist", [], "", "foo", {"foo": "1"}, False),
    ("15", "Gt", ["2"], "", "foo", {"bar": "3"}, False),
    ("16", "Gt", ["2"], "", "foo", {"bar": "3", "foo": "2"}, False),
    ("17", "Gt", ["2"], "", "foo", {"bar": "3", "foo": "3"}, True),
    ("18", "Gt", ["2"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("19", "Gt", ["2.0"], "", "foo", {"bar": "str", "foo": "3"}, ERR),
    ("20", "Gt", ["2"], "", "foo", {"bar": "3", "foo": "2"}, False),
    ("21", "Gt", ["2"], "version", "foo", {"bar": "3"}, False),
    ("22", "Gt", ["2"], "version", "foo", {"bar": "3", "foo": "2"}, False),
    ("23", "Gt", ["2"], "version", "foo", {"bar": "3", "foo": "3"}, True),
    ("24", "Gt", ["2.0"], "version", "foo", {"bar": "3", "foo": "2.0"}, False),
    ("25", "Gt", ["2.0"], "version", "foo", {"bar": "3", "foo": "2.1"}, True),
    ("26", "Gt", ["2.0.1"], "version", "foo", {"bar": "3", "foo": "2.0.1"}, False),
    ("27", "Gt", ["2.0.1"], "version", "foo", {"bar": "3", "foo": "2.0.2"}, True),
    ("28", "Gt", ["2.0.1"], "version", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("29", "Ge", ["2"], "", "foo", {"bar": "3"}, False),
    ("30", "Ge", ["2"], "", "foo", {"bar": "3", "foo": "2"}, True),
    ("31", "Ge", ["2"], "", "foo", {"bar": "3", "foo": "3"}, True),
    ("32", "Ge", ["2"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("33", "Ge", ["2.0"], "", "foo", {"bar": "3", "foo": "3"}, ERR),
    ("34", "Ge", ["2"], "", "foo", {"bar": "3", "foo": "2"}, True),
    ("35", "Ge", ["2"], "version", "foo", {"bar": "3"}, False),
    ("36", "Ge", ["2"], "version", "foo", {"bar": "3", "foo": "2"}, True),
    ("37", "Ge", ["2"], "version", "foo", {"bar": "3", "foo": "3"}, True),
    ("38", "Ge", ["2"], "version", "foo", {"bar": "3", "foo": "1"}, False),
    ("39", "Ge", ["2.0"], "version", "foo", {"bar": "3"}, False),
    ("40", "Ge", ["2.0"], "version", "foo", {"bar": "3", "foo": "2.0"}, True),
    ("41", "Ge", ["2.0"], "version", "foo", {"bar": "3", "foo": "2.1"}, True),
    ("42", "Ge", ["2.0"], "version", "foo", {"bar": "3", "foo": "1.9"}, False),
    ("43", "Ge", ["2.0.1"], "version", "foo", {"bar": "3"}, False),
    ("44", "Ge", ["2.0.1"], "version", "foo", {"bar": "3", "foo": "2.0.1"}, True),
    ("45", "Ge", ["2.0.1"], "version", "foo", {"bar": "3", "foo": "2.0.2"}, True),
    ("46", "Ge", ["2.0.1"], "version", "foo", {"bar": "3", "foo": "2.0.0"}, False),
    ("47", "Ge", ["2.0.1"], "version", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("48", "Lt", ["2"], "", "foo", {"bar": "1"}, False),
    ("49", "Lt", ["2"], "", "foo", {"bar": "1", "foo": "2"}, False),
    ("50", "Lt", ["2"], "", "foo", {"bar": "1", "foo": "1"}, True),
    ("51", "Lt", ["2"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("52", "Lt", ["2.0"], "", "foo", {"bar": "str", "foo": "1"}, ERR),
    ("53", "Lt", ["2"], "", "foo", {"bar": "1", "foo": "2"}, False),
    ("54", "Lt", ["2"], "version", "foo", {"bar": "1"}, False),
    ("55", "Lt", ["2"], "version", "foo", {"bar": "1", "foo": "2"}, False),
    ("56", "Lt", ["2"], "version", "foo", {"bar": "1", "foo": "1"}, True),
    ("57", "Lt", ["2.0"], "version", "foo", {"bar": "1"}, False),
    ("58", "Lt", ["2.0"], "version", "foo", {"bar": "1", "foo": "2.0"}, False),
    ("59", "Lt", ["2.0"], "version", "foo", {"bar": "1", "foo": "1.9"}, True),
    ("60", "Lt", ["2.0.1"], "version", "foo", {"bar": "1"}, False),
    ("61", "Lt", ["2.0.1"], "version", "foo", {"bar": "1", "foo": "2.0.1"}, False),
    ("62", "Lt", ["2.0.1"], "version", "foo", {"bar": "1", "foo": "2.0.0"}, True),
    ("63", "Lt", ["2.0.1"], "version", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("64", "Le", ["2"], "", "foo", {"bar": "1"}, False),
    ("65", "Le", ["2"], "", "foo", {"bar": "1", "foo": "2"}, True),
    ("66", "Le", ["2"], "", "foo", {"bar": "1", "foo": "1"}, True),
    ("67", "Le", ["2"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("68", "Le", ["2"], "", "foo", {"bar": "1", "foo": "1.0"}, ERR),
    ("69", "Le", ["2"], "", "foo", {"bar": "1", "foo": "2"}, True),
    ("70", "Le", ["2"], "version", "foo", {"bar": "1"}, False),
    ("71", "Le", ["2"], "version", "foo", {"bar": "1", "foo": "2"}, True),
    ("72", "Le", ["2"], "version", "foo", {"bar": "1", "foo": "1"}, True),
    ("73", "Le", ["2"], "version", "foo", {"bar": "1", "foo": "3"}, False),
    ("74", "Le", ["2.0"], "version", "foo", {"bar": "1.0"}, False),
    ("75", "Le", ["2.0"], "version", "foo", {"bar": "1", "foo": "2.0"}, True),
    ("76", "Le", ["2.0"], "version", "foo", {"bar": "1", "foo": "1.0"}, True),
    ("77", "Le", ["2.0"], "version", "foo", {"bar": "1", "foo": "2.1"}, False),
    ("78", "Le", ["2.0.1"], "version", "foo", {"bar": "1.0"}, False),
    ("79", "Le", ["2.0.1"], "version", "foo", {"bar": "1", "foo": "2.0.1"}, True),
    ("80", "Le", ["2.0.1"], "version", "foo", {"bar": "1", "foo": "2.0.0"}, True),
    ("81", "Le", ["2.0.1"], "version", "foo", {"bar": "1", "foo": "2.0.2"}, False),
    ("82", "Le", ["2.0.1"], "version", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("83", "GtLt", ["-10", "10"], "", "foo", {"bar": "1"}, False),
    ("84", "GtLt", ["-10", "10"], "", "foo", {"bar": "1", "foo": "11"}, False),
    ("85", "GtLt", ["-10", "10"], "", "foo", {"bar": "1", "foo": "-11"}, False),
    ("86", "GtLt", ["-10", "10"], "", "foo", {"bar": "1", "foo": "1"}, True),
    ("87", "GtLt", ["-10", "10"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("88", "GtLt", ["-10", "10"], "", "foo", {"bar": "str", "foo": "5.0"}, ERR),
    ("89", "GtLt", ["-10", "10"], "", "foo", {"bar": "1", "foo": "11"}, False),
    ("90", "GtLt", ["1", "10"], "version", "foo", {"bar": "1"}, False),
    ("91", "GtLt", ["1", "10"], "version", "foo", {"bar": "1", "foo": "11"}, False),
    ("92", "GtLt", ["1", "10"], "version", "foo", {"bar": "1", "foo": "1"}, False),
    ("93", "GtLt", ["1", "10"], "version", "foo", {"bar": "1", "foo": "2"}, True),
    ("94", "GtLt", ["1", "10"], "version", "foo", {"bar": "1", "foo": "0"}, False),
    ("95", "GtLt", ["1.0", "10.0"], "version", "foo", {"bar": "1.1"}, False),
    ("96", "GtLt", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "10.1"}, False),
    ("97", "GtLt", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "1.0"}, False),
    ("98", "GtLt", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "1.1"}, True),
    ("99", "GtLt", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "0.9"}, False),
    ("100", "GtLt", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1.1"}, False),
    ("101", "GtLt", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "10.0.1"}, False),
    ("102", "GtLt", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "1.0.1"}, False),
    ("103", "GtLt", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "1.0.2"}, True),
    ("104", "GtLt", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "0.0.9"}, False),
    ("105", "GtLt", ["1.0.1", "10.0.1"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("106", "GeLe", ["-10", "10"], "", "foo", {"bar": "1"}, False),
    ("107", "GeLe", ["-10", "10"], "", "foo", {"bar": "-10", "foo": "10"}, True),
    ("108", "GeLe", ["-10", "10"], "", "foo", {"bar": "1", "foo": "-11"}, False),
    ("109", "GeLe", ["-10", "10"], "", "foo", {"bar": "1", "foo": "1"}, True),
    ("110", "GeLe", ["-10", "10"], "", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("111", "GeLe", ["-10", "10"], "", "foo", {"bar": "1", "foo": "1.0"}, ERR),
    ("112", "GeLe", ["-10", "10"], "", "foo", {"bar": "-10", "foo": "10"}, True),
    ("113", "GeLe", ["1", "10"], "version", "foo", {"bar": "1"}, False),
    ("114", "GeLe", ["1", "10"], "version", "foo", {"bar": "-10", "foo": "10"}, True),
    ("115", "GeLe", ["1", "10"], "version", "foo", {"bar": "1", "foo": "-11"}, ERR),
    ("116", "GeLe", ["1", "10"], "version", "foo", {"bar": "1", "foo": "1"}, True),
    ("117", "GeLe", ["1", "10"], "version", "foo", {"bar": "1", "foo": "0"}, False),
    ("118", "GeLe", ["1.0", "10.0"], "version", "foo", {"bar": "1"}, False),
    ("119", "GeLe", ["1.0", "10.0"], "version", "foo", {"bar": "-10", "foo": "10.0"}, True),
    ("120", "GeLe", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "10.1"}, False),
    ("121", "GeLe", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "1.1"}, True),
    ("122", "GeLe", ["1.0", "10.0"], "version", "foo", {"bar": "1", "foo": "0.9"}, False),
    ("123", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1"}, False),
    ("124", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "-10", "foo": "10.0.1"}, True),
    ("125", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "10.0.2"}, False),
    ("126", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "1.0.2"}, True),
    ("127", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "1", "foo": "0.0.9"}, False),
    ("128", "GeLe", ["1.0.1", "10.0.1"], "version", "foo", {"bar": "str", "foo": "str"}, ERR),
    ("129", "IsTrue", [], "", "foo", {}, False),
    ("130", "IsTrue", [], "", "foo", {"foo": "1"}, False),
    ("131", "IsTrue", [], "", "foo", {"foo": "true"}, True),
    ("132", "IsFalse", [], "", "foo", {"foo": "true"}, False),
    ("133", "IsFalse", [], "", "foo", {"foo": "false"}, True),
]


@pytest.mark.parametrize(
    ("op", "values", "vtype", "key", "attrs", "want"),
    [c[1:] for c in VALUES],
    ids=[c[0] for c in VALUES],
)
def test_evaluate_match_expression_values(
    op: str, values: list[str], vtype: str, key: str, attrs: dict[str, str], want: bool | str
) -> None:
    assert on_value(op, values, vtype, key, attrs) == want


# --- MatchKeys / MatchValues / MatchInstances: expression sets ----------------------------

SET_A = {"foo": me("DoesNotExist"), "bar": me("Exists")}
SET_B = {"foo": me("Exists"), "bar": me("In", "val", "wal"), "baz": me("Gt", "10")}
SET_C = {"foo": me("Exists"), "bar": me("Lt", "10")}

MATCH_KEYS = [
    ("empty expression and empty input", {}, [], True),
    ("empty expression with non-empty input", {}, ["foo"], True),
    ("expressions match", SET_A, ["bar", "baz", "buzz"], True),
    ("expression does not match", SET_A, ["foo", "bar", "baz"], False),
    ("op that never matches", {"foo": me("In", "bar"), "bar": me("Exists")}, ["bar", "baz"], False),
    ("error in expression", {"foo": me("Exists", "bar"), "bar": me("Exists")}, ["bar"], ERR),
]


@pytest.mark.parametrize(
    ("exprs", "flags", "want"), [c[1:] for c in MATCH_KEYS], ids=[c[0] for c in MATCH_KEYS]
)
def test_match_keys(exprs: Json, flags: list[str], want: bool | str) -> None:
    assert outcome(rule(term(exprs=exprs)), features(flags={FEATURE: flags})) == want


MATCH_VALUES = [
    ("empty set, empty input", {}, {}, True),
    ("empty set", {}, {"foo": "bar"}, True),
    ("missing elements", SET_B, {"bar": "val"}, False),
    ("all hold", SET_B, {"foo": "1", "bar": "val", "baz": "123", "buzz": "light"}, True),
    (
        "not a number",
        {**SET_B, "bar": me("In", "val")},
        {"foo": "1", "bar": "val", "baz": "123.0"},
        ERR,
    ),
]


@pytest.mark.parametrize(
    ("exprs", "attrs", "want"), [c[1:] for c in MATCH_VALUES], ids=[c[0] for c in MATCH_VALUES]
)
def test_match_values(exprs: Json, attrs: dict[str, str], want: bool | str) -> None:
    assert outcome(rule(term(exprs=exprs)), features(attributes={FEATURE: attrs})) == want


MATCH_INSTANCES = [
    ("zero instances", {}, [], False),
    ("one empty instance", {}, [{}], True),
    ("no instance has all", SET_C, [{"foo": "1"}, {"bar": "1"}], False),
    ("one instance has all", SET_C, [{"foo": "1"}, {"foo": "2", "bar": "1"}], True),
    ("not a number", {"bar": me("Lt", "10")}, [{"foo": "1"}, {"bar": "0x1"}], ERR),
]


@pytest.mark.parametrize(
    ("exprs", "insts", "want"),
    [c[1:] for c in MATCH_INSTANCES],
    ids=[c[0] for c in MATCH_INSTANCES],
)
def test_match_instances(exprs: Json, insts: list[dict[str, str]], want: bool | str) -> None:
    assert outcome(rule(term(exprs=exprs)), features(instances={FEATURE: insts})) == want


# --- MatchMulti: one feature name holding flags, attributes and instances ------------------

KEYS_3 = ["bar", "baz", "qux"]
VALUES_3 = {"foo": "1", "bar": "2", "quux": "3"}
MULTI: list[
    tuple[
        str, Json, list[str] | None, dict[str, str] | None, list[dict[str, str]] | None, bool | str
    ]
] = [
    ("empty expression and empty inputs", {}, [], {}, [], True),
    ("empty expression and empty values", {}, None, {}, None, True),
    ("empty expression and empty instances", {}, None, None, [], False),
    ("empty expression and one empty instance", {}, None, None, [{}], True),
    ("empty expression", {}, None, {"foo": "bar"}, None, True),
    ("keys match", SET_A, ["bar", "baz", "buzz"], None, None, True),
    ("keys do not match", SET_A, ["foo", "bar", "baz"], None, None, False),
    ("keys error", {"foo": me("Exists", "val")}, ["bar"], None, None, ERR),
    (
        "values match",
        SET_B,
        None,
        {"foo": "1", "bar": "val", "baz": "123", "buzz": "light"},
        None,
        True,
    ),
    ("values do not match", SET_B, None, {"bar": "val"}, None, False),
    ("values error", {"bar": me("In")}, None, {"bar": "val"}, None, ERR),
    ("instances match", SET_C, None, None, [{"foo": "1"}, {"foo": "2", "bar": "1"}], True),
    (
        "instances do not match",
        {"foo": me("Exists"), "baz": me("Lt", "10")},
        None,
        None,
        [{"foo": "1"}, {"bar": "1"}],
        False,
    ),
    ("instances error", {"foo": me("In")}, None, None, [{"foo": "1"}], ERR),
    (
        "keys and values either matches",
        {"foo": me("In", "1"), "baz": me("Exists")},
        KEYS_3,
        VALUES_3,
        None,
        True,
    ),
    (
        "keys and values both match",
        {"foo": me("In", "1"), "bar": me("Exists")},
        KEYS_3,
        VALUES_3,
        None,
        True,
    ),
    ("NotIn matches the value", {"bar": me("NotIn", "1", "3")}, KEYS_3, VALUES_3, None, True),
    ("NotIn does not match the value", {"bar": me("NotIn", "2")}, KEYS_3, VALUES_3, None, False),
    ("DoesNotExist in neither", {"xyzzy": me("DoesNotExist")}, KEYS_3, VALUES_3, None, True),
    ("DoesNotExist but a value", {"quux": me("DoesNotExist")}, KEYS_3, VALUES_3, None, False),
    ("DoesNotExist but a flag", {"qux": me("DoesNotExist")}, KEYS_3, VALUES_3, None, False),
    (
        "keys, values and instances all match",
        {"foo": me("In", "1"), "bar": me("Exists")},
        KEYS_3,
        VALUES_3,
        [{"foo": "1", "bar": "2"}, {"foo": "10", "bar": "20"}],
        True,
    ),
    (
        "instances match where keys and values do not",
        {"foo": me("In", "10")},
        KEYS_3,
        VALUES_3,
        [{"foo": "10"}],
        True,
    ),
    (
        "expressions split across keys and instances",
        {"baz": me("Exists"), "z": me("Exists")},
        KEYS_3,
        None,
        [{"z": "1"}],
        False,
    ),
]


@pytest.mark.parametrize(
    ("exprs", "flags", "attrs", "insts", "want"), [c[1:] for c in MULTI], ids=[c[0] for c in MULTI]
)
def test_match_multi(
    exprs: Json,
    flags: list[str] | None,
    attrs: dict[str, str] | None,
    insts: list[dict[str, str]] | None,
    want: bool | str,
) -> None:
    f = features(
        flags=None if flags is None else {FEATURE: flags},
        attributes=None if attrs is None else {FEATURE: attrs},
        instances=None if insts is None else {FEATURE: insts},
    )
    assert outcome(rule(term(exprs=exprs)), f) == want


# --- matchName: MatchKeyNames, MatchValueNames, MatchInstanceAttributeNames, MatchNamesMulti

K2 = ["key1", "key2"]
V2 = {"key1": "val1", "key2": "val2"}
NAMES: list[
    tuple[
        str, Json, list[str] | None, dict[str, str] | None, list[dict[str, str]] | None, bool | str
    ]
] = [
    ("empty input keys", me(""), [], None, None, False),
    ("empty input values", me(""), None, {}, None, False),
    ("empty input instances", me(""), None, None, [], False),
    ("any name", me(""), K2, None, None, True),
    ("keys Exists", me("Exists"), K2, None, None, True),
    ("keys DoesNotExist never matches", me("DoesNotExist"), K2, None, None, False),
    ("keys In", me("In", "key1"), K2, None, None, True),
    ("keys In no match", me("In", "key3"), K2, None, None, False),
    ("keys NotIn", me("NotIn", "key1"), K2, None, None, True),
    ("keys error", me("Exists", "key1"), K2, None, None, ERR),
    ("values Exists", me("Exists"), None, V2, None, True),
    ("values DoesNotExist", me("DoesNotExist"), None, V2, None, False),
    ("values In", me("In", "key1"), None, V2, None, True),
    ("values In no match", me("In", "key3"), None, V2, None, False),
    ("values NotIn", me("NotIn", "key1"), None, V2, None, True),
    ("values error", me("NotIn"), None, V2, None, ERR),
    ("instances no match", me("In", "foo"), None, None, [{"bar": "1"}, {"baz": "2"}], False),
    (
        "instances match",
        me("In", "foo"),
        None,
        None,
        [{"foo": "1"}, {"bar": "2"}, {"foo": "3", "baz": "4"}],
        True,
    ),
    ("instances error", me("In"), None, None, [{"foo": "1"}], ERR),
    (
        "all kinds match",
        me("In", "key2"),
        K2,
        V2,
        [{"key1": "1"}, {"key1": "3", "key2": "4"}],
        True,
    ),
    ("InRegexp on names", me("InRegexp", "^AVX"), ["AVX2", "SSE4"], None, None, True),
    ("numeric op on names", me("Gt", "5"), ["7"], None, None, True),
    # every name is compared, so one that is not a number is an error even after a match
    ("numeric op on a name that is not a number", me("Gt", "5"), ["7", "x"], None, None, ERR),
]


@pytest.mark.parametrize(
    ("name", "flags", "attrs", "insts", "want"), [c[1:] for c in NAMES], ids=[c[0] for c in NAMES]
)
def test_match_names(
    name: Json,
    flags: list[str] | None,
    attrs: dict[str, str] | None,
    insts: list[dict[str, str]] | None,
    want: bool | str,
) -> None:
    f = features(
        flags=None if flags is None else {FEATURE: flags},
        attributes=None if attrs is None else {FEATURE: attrs},
        instances=None if insts is None else {FEATURE: insts},
    )
    assert outcome(rule(term(name=name)), f) == want


def test_match_name_runs_only_after_the_expressions_match() -> None:
    f = features(attributes={FEATURE: {"key-1": "val-1", "key-4": "val-4"}})
    both = term(exprs={"key-5": me("DoesNotExist")}, name=me("In", "key-1", "key-4"))
    assert outcome(rule(both), f) is True
    assert outcome(rule(term(name=me("In", "key-not-exists"))), f) is False
    # a matchName that would error is not reached when the expressions fail
    unreached = term(exprs={"key-1": me("In", "other")}, name=me("Gt", "1"))
    assert (
        match_group_rule(rule(unreached), f).reason
        == 'rule "r": dom.feat key-1 In other: have "val-1"'
    )


# --- ExecuteGroupRule ----------------------------------------------------------------------

R1_VARS = {"var-1": "var-val-1"}


def kf1_exists(key: str) -> Json:
    return term("domain-1.kf-1", {key: me("Exists")})


def test_group_rule_on_empty_and_growing_features() -> None:
    """grouprule_test.go TestGroupRule, step by step."""
    r1 = rule(vars=R1_VARS)
    r2 = rule(kf1_exists("key-1"), vars={"var-2": "var-val-2"})

    # empty features: a rule without matchers matches, a missing feature does not
    empty = features()
    assert match_group_rule(r1, empty) == MatchResult(True, "", R1_VARS)
    assert match_group_rule(r2, empty) == MatchResult(
        False, 'rule "r": feature domain-1.kf-1 not found'
    )

    # empty feature sets
    f = features(
        flags={"domain-1.kf-1": []},
        attributes={"domain-1.vf-1": {}},
        instances={"domain-1.if-1": []},
    )
    assert outcome(r1, f) is True
    assert outcome(r2, f) is False

    # non-empty sets, key-1 still missing
    f = features(
        flags={"domain-1.kf-1": ["key-x"]},
        attributes={"domain-1.vf-1": {"key-1": "val-x"}},
        instances={"domain-1.if-1": [{"attr-1": "val-x"}]},
    )
    assert outcome(rule(term("domain-1.kf-1", {})), f) is True  # an empty set matches anything
    assert outcome(r2, f) is False
    f = features(
        flags={"domain-1.kf-1": ["key-x", "key-1"]},
        attributes={"domain-1.vf-1": {"key-1": "val-x"}},
        instances={"domain-1.if-1": [{"attr-1": "val-x"}]},
    )
    assert match_group_rule(r2, f).vars == {"var-2": "var-val-2"}

    r3 = rule(term("domain-1.vf-1", {"key-1": me("In", "val-1")}))
    assert outcome(r3, f) is False
    r4 = rule(term("domain-1.if-1", {"attr-1": me("In", "val-1")}))
    assert outcome(r4, f) is False
    r6 = rule(
        term("domain-1.vf-1", {"key-1": me("In", "val-x")}),
        term("domain-1.if-1", {"attr-1": me("In", "val-1")}),
    )
    assert outcome(r6, f) is False

    f = features(
        flags={"domain-1.kf-1": ["key-x", "key-1"]},
        attributes={"domain-1.vf-1": {"key-1": "val-1"}},
        instances={"domain-1.if-1": [{"attr-1": "val-1"}]},
    )
    assert outcome(r3, f) is True
    assert outcome(r4, f) is True
    r6 = rule(
        term("domain-1.vf-1", {"key-1": me("In", "val-1")}),
        term("domain-1.if-1", {"attr-1": me("In", "val-1")}),
    )
    assert outcome(r6, f) is True

    # matchAny: one element must match, besides every matchFeatures term
    r6_any = rule(
        *[term("domain-1.vf-1", {"key-1": me("In", "val-1")})], any_of=[[kf1_exists("key-na")]]
    )
    assert outcome(r6_any, f) is False
    r6_any = rule(
        *[term("domain-1.vf-1", {"key-1": me("In", "val-1")})],
        any_of=[[kf1_exists("key-na")], [kf1_exists("key-1")]],
    )
    assert outcome(r6_any, f) is True


MULTI_TYPE = features(
    flags={"dom.feat": ["k-1", "k-2"]},
    attributes={"dom.feat": {"a-1": "v-1", "a-2": "v-2"}},
    instances={"dom.feat": [{"ia-1": "iv-1"}, {"ia-2": "iv-2"}]},
)


@pytest.mark.parametrize(
    "exprs",
    [
        {"k-1": me("Exists")},
        {"a-1": me("In", "v-1")},
        {"ia-1": me("In", "iv-1")},
        {"k-2": me("Exists"), "a-2": me("In", "v-2")},
        {"ia-2": me("In", "iv-2")},
    ],
)
def test_group_rule_multi_type_feature(exprs: Json) -> None:
    assert outcome(rule(term("dom.feat", exprs)), MULTI_TYPE) is True


def test_feature_name_in_a_rule_is_lower_cased() -> None:
    f = features(flags={"cpu.cpuid": ["AVX2"], "Vendor.Feat": ["x"]})
    assert outcome(rule(term("CPU.CpuID", {"AVX2": me("Exists")})), f) is True
    # the node's feature names are not: an upper-case one is out of any rule's reach
    assert outcome(rule(term("Vendor.Feat", {"x": me("Exists")})), f) is False


def test_term_without_matchers_needs_only_the_feature() -> None:
    assert outcome(rule(term("dom.feat")), features(instances={"dom.feat": []})) is True
    assert outcome(rule(term("dom.other")), features(instances={"dom.feat": []})) is False


def test_empty_op_matches_even_a_missing_element() -> None:
    f = features(flags={"cpu.cpuid": ["AVX2"]})
    assert outcome(rule(term("cpu.cpuid", {"AVX512F": {}})), f) is True


# --- versions ------------------------------------------------------------------------------

VERSIONS = [
    ("kernel flavour ignored", "6.8.0-1015-aws", "Ge", ["6.8"], True),
    ("pre-release ignored both ways", "5.15.0-91-generic", "Le", ["5.15.0"], True),
    ("build metadata ignored", "1.2.3+build.7", "Gt", ["1.2.2"], True),
    ("v prefix", "v1.10", "Gt", ["1.9"], True),
    ("numeric, not lexical", "1.10.0", "Gt", ["1.9.0"], True),
    ("missing parts are zero", "2", "GeLe", ["2.0.0", "2.0.0"], True),
    ("version range has no order check", "3", "GtLt", ["5", "1"], False),
    ("underscore in a pre-release is not semver", "4.18.0-513.el8.x86_64", "Ge", ["4"], ERR),
    ("leading zero in a numeric pre-release", "1.2.3-01", "Ge", ["1"], ERR),
    ("negative", "-1", "Lt", ["1"], ERR),
    ("four parts", "1.2.3.4", "Ge", ["1"], ERR),
]


@pytest.mark.parametrize(
    ("value", "op", "values", "want"), [c[1:] for c in VERSIONS], ids=[c[0] for c in VERSIONS]
)
def test_version_type(value: str, op: str, values: list[str], want: bool | str) -> None:
    assert on_value(op, values, "version", "v", {"v": value}) == want


NUMBERS = [
    ("sign", "+5", "Gt", ["4"], True),
    ("int64 max", "9223372036854775807", "Gt", ["0"], True),
    ("beyond int64", "9223372036854775808", "Gt", ["0"], ERR),
    ("hex is not a number", "0x10", "Gt", ["0"], ERR),
    ("underscores are not", "1_000", "Gt", ["0"], ERR),
    ("spaces are not", " 5", "Gt", ["0"], ERR),
    ("non-ASCII digits are not", "\u0665", "Gt", ["0"], ERR),
    ("GeLe includes both ends", "5", "GeLe", ["5", "6"], True),
]


@pytest.mark.parametrize(
    ("value", "op", "values", "want"), [c[1:] for c in NUMBERS], ids=[c[0] for c in NUMBERS]
)
def test_numbers(value: str, op: str, values: list[str], want: bool | str) -> None:
    assert on_value(op, values, "", "n", {"n": value}) == want


def test_range_bounds_must_be_ordered_for_numbers_only() -> None:
    with pytest.raises(RuleError, match=r"value\[0\] must be less than value\[1\]"):
        compile_rule(rule(term(exprs={"n": me("GeLe", "5", "5")})))
    compile_rule(rule(term(exprs={"n": me("GeLe", "5", "5", type="version")})))


# --- errors: where NFD's validator evaluates, an error fails the rule ----------------------


def test_error_in_another_instance_fails_a_matched_term() -> None:
    f = features(instances={"pci.device": [{"n": "3"}, {"n": "x"}]})
    result = match_group_rule(rule(term("pci.device", {"n": me("Gt", "1")})), f)
    assert result == MatchResult(False, 'rule "r": pci.device n Gt 1: not a number "x"')


def test_error_in_a_failed_term_is_still_an_error() -> None:
    f = features(attributes={"a.b": {"x": "1", "n": "nan"}})
    r = rule(term("a.b", {"x": me("In", "2"), "n": me("Lt", "1")}))
    assert match_group_rule(r, f).reason == 'rule "r": a.b n Lt 1: not a number "nan"'


def test_error_in_an_unneeded_match_any_element_fails_the_rule() -> None:
    f = features(attributes={"a.b": {"ok": "1", "n": "x"}})
    good = [term("a.b", {"ok": me("Exists")})]
    bad = [term("a.b", {"n": me("Gt", "1")})]
    assert outcome(rule(any_of=[good, bad]), f) == ERR
    assert outcome(rule(any_of=[bad, good]), f) == ERR
    assert outcome(rule(any_of=[good, [term("a.b", {"ok": me("Gt", "0")})]]), f) is True


def test_missing_feature_is_not_evaluated() -> None:
    f = features(attributes={"a.b": {"ok": "1"}})
    r = rule(any_of=[[term("a.b", {"ok": me("Exists")})], [term("c.d", {"n": me("Gt", "1")})]])
    assert outcome(r, f) is True


# --- back-references: rule.matched ---------------------------------------------------------


def run_in_order(rules: list[GroupRule], f: Features) -> list[bool]:
    """How NFD runs the rules of a NodeFeatureGroup or a compatibility set."""
    seen: dict[str, str] | None = None
    out = []
    for r in rules:
        result = match_group_rule(r, f, seen)
        out.append(result.matched)
        seen = {**(seen or {}), **result.vars}
    return out


def test_back_references() -> None:
    f = features(attributes={"kernel.version": {"major": "6"}}, flags={"cpu.cpuid": ["AVX512F"]})
    kernel = rule(
        term("kernel.version", {"major": me("Gt", "4")}),
        name="kernel",
        vars={"kernel-feature": "true"},
    )
    cpu = rule(
        term("cpu.cpuid", {"AVX512F": me("Exists")}), name="cpu", vars={"nolabel-feature": "true"}
    )
    high = rule(
        term("rule.matched", {"kernel-feature": me("IsTrue"), "nolabel-feature": me("IsTrue")}),
        name="high",
    )
    assert run_in_order([kernel, cpu, high], f) == [True, True, True]
    assert run_in_order([kernel, high], f) == [True, False]
    assert run_in_order([high, kernel, cpu], f) == [False, True, True]


def test_rule_matched_exists_once_a_rule_has_run() -> None:
    absent = rule(term("rule.matched", {"x": me("DoesNotExist")}))
    assert run_in_order([absent], features()) == [False]  # no such feature yet
    assert run_in_order([rule(), absent], features()) == [True, True]


def test_back_references_overlay_the_node_feature() -> None:
    f = features(attributes={"rule.matched": {"a": "1", "b": "1"}})
    r = rule(term("rule.matched", {"a": me("In", "2"), "b": me("In", "1")}))
    assert match_group_rule(r, f, {"a": "2"}).matched
    assert f.attributes["rule.matched"].elements == {"a": "1", "b": "1"}


# --- reasons -------------------------------------------------------------------------------

NODE = features(
    flags={"cpu.cpuid": ["AVX2"]},
    attributes={"kernel.version": {"major": "5", "full": "5.15.0"}, "kernel.config": {"X86": "y"}},
    instances={
        "pci.device": [{"vendor": "8086", "class": "0200"}, {"vendor": "10de", "class": "0302"}]
    },
)
REASONS = [
    (term("cpu.cpuid", {"AVX512F": me("Exists")}), "cpu.cpuid AVX512F Exists: not found"),
    (term("cpu.cpuid", {"AVX2": me("DoesNotExist")}), "cpu.cpuid AVX2 DoesNotExist: present"),
    (term("cpu.cpuid", {"AVX2": me("In", "y")}), "cpu.cpuid AVX2 In y: a flag, no value"),
    (term("kernel.version", {"major": me("Ge", "6")}), 'kernel.version major Ge 6: have "5"'),
    (
        term("kernel.version", {"full": me("GeLe", "6.1", "6.9", type="version")}),
        'kernel.version full GeLe 6.1,6.9 (version): have "5.15.0"',
    ),
    (
        term("kernel.version", {"full": me("Gt", "5")}),
        'kernel.version full Gt 5: not a number "5.15.0"',
    ),
    (term("gpu.nvidia", {"x": me("Exists")}), "feature gpu.nvidia not found"),
    (
        term("pci.device", {"vendor": me("In", "1002")}),
        "pci.device: no instance with vendor In 1002",
    ),
    (
        term("pci.device", {"vendor": me("In", "10de"), "class": me("In", "0200")}),
        "pci.device: no instance matches all expressions",
    ),
    (
        term("cpu.cpuid", name=me("InRegexp", "^AVX512")),
        "cpu.cpuid name InRegexp ^AVX512: no match",
    ),
]


@pytest.mark.parametrize(("t", "reason"), REASONS, ids=[r for _, r in REASONS])
def test_reasons(t: Json, reason: str) -> None:
    assert match_group_rule(rule(t, name="avx512"), NODE) == MatchResult(
        False, f'rule "avx512": {reason}'
    )


def test_reason_names_the_first_failing_term_and_sorted_element() -> None:
    r = rule(
        term("cpu.cpuid", {"AVX2": me("Exists")}),
        term("cpu.cpuid", {"ZZZ": me("Exists"), "AAA": me("Exists")}),
        term("gpu.x"),
    )
    assert match_group_rule(r, NODE).reason == 'rule "r": cpu.cpuid AAA Exists: not found'


def test_match_any_reason_names_the_first_element() -> None:
    r = rule(any_of=[[term("cpu.cpuid", {"SSE": me("Exists")})], [term("gpu.x")]])
    assert match_group_rule(r, NODE).reason == (
        'rule "r": no matchAny element matched, first: cpu.cpuid SSE Exists: not found'
    )


def test_long_values_are_cut_in_reasons() -> None:
    f = features(attributes={"a.b": {"x": "v" * 100}})
    reason = match_group_rule(rule(term("a.b", {"x": me("In", "w")})), f).reason
    assert reason == f'rule "r": a.b x In w: have "{"v" * 37}..."'


# --- validation ----------------------------------------------------------------------------

INVALID: list[tuple[Json, str]] = [
    (
        {"matchFeatures": [term(exprs={"AVX512F": me("Exist")})]},
        "matchFeatures[0].matchExpressions.AVX512F.op",
    ),
    ({"matchFeatures": [term(exprs={"a": me("In")})]}, "matchFeatures[0].matchExpressions.a.value"),
    (
        {"matchFeatures": [term(exprs={"a": me("Gt", "1", "2")})]},
        "matchFeatures[0].matchExpressions.a.value",
    ),
    (
        {"matchFeatures": [term(exprs={"a": me("Gt", "x")})]},
        "matchFeatures[0].matchExpressions.a.value[0]",
    ),
    (
        {"matchFeatures": [term(exprs={"a": me("Gt", "1", type="semver")})]},
        "matchFeatures[0].matchExpressions.a.type",
    ),
    (
        {"matchFeatures": [term(exprs={"a": me("Lt", "x.y", type="version")})]},
        "matchFeatures[0].matchExpressions.a.value[0]",
    ),
    (
        {"matchFeatures": [term(exprs={"a": me("InRegexp", "ok", "(")})]},
        "matchFeatures[0].matchExpressions.a.value[1]",
    ),
    ({"matchFeatures": [term(name=me("IsTrue", "x"))]}, "matchFeatures[0].matchName.value"),
    (
        {"matchAny": [{"matchFeatures": [term(), term(exprs={"b": me("Nope")})]}]},
        "matchAny[0].matchFeatures[1].matchExpressions.b.op",
    ),
    ({"varsTemplate": "{{range .cpu.cpuid}}{{.Name}}=1{{end}}"}, "varsTemplate"),
]


@pytest.mark.parametrize(("data", "path"), INVALID, ids=[p for _, p in INVALID])
def test_invalid_rules_name_the_field(data: Json, path: str) -> None:
    r = msgspec.convert({"name": "x", **data}, GroupRule)
    with pytest.raises(RuleError) as info:
        compile_rule(r, "compatibilities[0].rules[1]")
    assert info.value.path == f"compatibilities[0].rules[1].{path}"
    assert str(info.value).startswith(f"compatibilities[0].rules[1].{path}: ")
    with pytest.raises(RuleError):
        match_group_rule(msgspec.convert({"name": "x", **data}, GroupRule), features())


def test_null_expression_is_invalid() -> None:
    """NFD dereferences the nil pointer of a null expression; here it does not decode."""
    data = b'{"name": "x", "matchFeatures": [{"feature": "a.b", "matchExpressions": {"a": null}}]}'
    with pytest.raises(msgspec.ValidationError, match=r"matchExpressions"):
        msgspec.json.decode(data, type=GroupRule)


def test_rule_is_compiled_once() -> None:
    r = rule(term(exprs={"a": me("Exists")}))
    assert compile_rule(r) is compile_rule(r)


# --- merging NodeFeature objects -----------------------------------------------------------


def node_feature(name: str, node: str, namespace: str = "nfd", **f: Any) -> NodeFeature:
    meta = ObjectMeta(name=name, namespace=namespace, labels={NODE_NAME_LABEL: node})
    return NodeFeature(metadata=meta, spec=NodeFeatureSpec(features=features(**f)))


def test_node_features_merge_as_nfd_master() -> None:
    objects = [
        node_feature(
            "b-vendor",
            "n1",
            flags={"cpu.cpuid": ["AVX2"]},
            attributes={"k.v": {"a": "b", "c": "b"}},
            instances={"pci.device": [{"id": "b"}]},
        ),
        node_feature(
            "a-vendor",
            "n1",
            namespace="other",
            attributes={"k.v": {"a": "a", "d": "a"}},
            instances={"pci.device": [{"id": "a"}]},
        ),
        node_feature(
            "n1",
            "n1",
            flags={"cpu.cpuid": ["AVX"]},
            attributes={"k.v": {"a": "n1"}},
            instances={"pci.device": [{"id": "n1"}]},
        ),
        node_feature("n2", "n2", flags={"cpu.cpuid": ["SSE"]}),
    ]
    # by name: a-vendor, b-vendor, n1; a later object's attributes win, instances append
    merged = node_features(objects, "n1")
    assert sorted(merged.flags["cpu.cpuid"].elements) == ["AVX", "AVX2"]
    assert merged.attributes["k.v"].elements == {"a": "n1", "c": "b", "d": "a"}
    assert [i.attributes["id"] for i in merged.instances["pci.device"].elements] == ["a", "b", "n1"]
    # the objects in nfd-master's namespace come first
    merged = node_features(objects, "n1", nfd_namespace="other")
    assert merged.attributes["k.v"].elements == {"a": "n1", "c": "b", "d": "a"}
    assert [i.attributes["id"] for i in merged.instances["pci.device"].elements] == ["a", "b", "n1"]
    merged = node_features(objects, "n1", nfd_namespace="nfd")
    assert merged.attributes["k.v"].elements == {"a": "a", "c": "b", "d": "a"}
    assert [i.attributes["id"] for i in merged.instances["pci.device"].elements] == ["b", "n1", "a"]
    # inputs are untouched
    assert objects[2].spec.features.attributes["k.v"].elements == {"a": "n1"}


def test_node_features_of_one_or_no_object() -> None:
    one = node_feature("n2", "n2", flags={"cpu.cpuid": ["SSE"]})
    assert node_features([one], "n2") is one.spec.features
    assert node_features([one], "n3") == Features()
    unlabeled = NodeFeature(metadata=ObjectMeta(name="n3"), spec=one.spec)
    assert node_features([unlabeled], "n3") == Features()


def test_node_feature_decodes_from_the_api() -> None:
    data = b"""{"apiVersion": "nfd.k8s-sigs.io/v1alpha1", "kind": "NodeFeature",
      "metadata": {"name": "n1", "namespace": "nfd",
                   "labels": {"nfd.node.kubernetes.io/node-name": "n1"}},
      "spec": {"labels": {"x": "y"}, "features": {
        "flags": {"cpu.cpuid": {"elements": {"AVX2": {}}}},
        "attributes": {"kernel.version": {"elements": {"major": "6"}}},
        "instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}}}}}"""
    nf = msgspec.json.decode(data, type=NodeFeature)
    f = node_features([nf], "n1")
    r = rule(
        term("cpu.cpuid", {"AVX2": me("Exists")}),
        term("kernel.version", {"major": me("Ge", "6")}),
        term("pci.device", {"vendor": me("In", "10de")}),
    )
    assert match_group_rule(r, f).matched
    assert nf.spec.labels == {"x": "y"}


def test_error_in_an_instance_fails_a_term_its_attributes_matched() -> None:
    f = features(attributes={"a.b": {"n": "5"}}, instances={"a.b": [{"n": "x"}]})
    assert outcome(rule(term("a.b", {"n": me("Gt", "1")})), f) == ERR
    assert outcome(rule(term("a.b", {"n": me("In", "5")})), f) is True


REGEXPS = [
    ("search, not full match", "AV", "xAVX2", True),
    ("Go's end of text", r"AVX\z", "AVX", True),
    ("Go's end of text before a newline", r"AVX\z", "AVX\n", False),
    ("a backslash and a z", r"a\\z", "a\\z", True),
    ("Go's $ is the end of text", r"AVX$", "AVX\n", False),
    ("a lone surrogate", r"x", "\udc80x", True),
    ("ASCII digits only", r"^\d+$", "\u0663", False),
    ("ASCII word characters only", r"^\w+$", "\u00e9", False),
]


@pytest.mark.parametrize(
    ("pattern", "value", "want"), [c[1:] for c in REGEXPS], ids=[c[0] for c in REGEXPS]
)
def test_regexps_as_go(pattern: str, value: str, want: bool) -> None:
    assert on_value("InRegexp", [pattern], "", "x", {"x": value}) is want


@pytest.mark.parametrize("pattern", [r"(a)\1", r"x(?=y)", r"(?<!a)b", "a{2,1}"])
def test_regexps_go_refuses_are_invalid(pattern: str) -> None:
    with pytest.raises(RuleError, match=r"matchExpressions\.x\.value\[0\]: invalid regexp"):
        compile_rule(rule(term(exprs={"x": me("InRegexp", pattern)})))


def test_regexps_take_linear_time() -> None:
    started = time.monotonic()
    assert on_value("InRegexp", [r"(a+)+$"], "", "x", {"x": "a" * 40 + "!"}) is False
    assert time.monotonic() - started < 5


# --- fail_fast: nfd-master's evaluation of NodeFeatureGroups -------------------------------


def test_fail_fast_stops_at_the_first_matching_match_any_element() -> None:
    f = features(attributes={"a.b": {"ok": "1", "n": "x"}})
    good = [term("a.b", {"ok": me("Exists")})]
    bad = [term("a.b", {"n": me("Gt", "1")})]
    assert match_group_rule(rule(any_of=[good, bad]), f, fail_fast=True).matched
    assert not match_group_rule(rule(any_of=[bad, good]), f, fail_fast=True).matched
    assert not match_group_rule(rule(any_of=[good, bad]), f).matched


def test_fail_fast_stops_at_the_first_failing_expression() -> None:
    f = features(attributes={"a.b": {"a": "1", "n": "nan"}})
    r = rule(term("a.b", {"a": me("In", "2"), "n": me("Lt", "1")}))
    assert match_group_rule(r, f, fail_fast=True).reason == 'rule "r": a.b a In 2: have "1"'
    assert match_group_rule(r, f).reason == 'rule "r": a.b n Lt 1: not a number "nan"'


def test_fail_fast_still_visits_every_instance() -> None:
    f = features(instances={"pci.device": [{"n": "3"}, {"n": "x"}]})
    r = rule(term("pci.device", {"n": me("Gt", "1")}))
    assert match_group_rule(r, f, fail_fast=True).reason == (
        'rule "r": pci.device n Gt 1: not a number "x"'
    )
    matched_by_attributes = features(
        attributes={"a.b": {"n": "5"}}, instances={"a.b": [{"n": "x"}]}
    )
    r = rule(term("a.b", {"n": me("Gt", "1")}))
    assert not match_group_rule(r, matched_by_attributes, fail_fast=True).matched
