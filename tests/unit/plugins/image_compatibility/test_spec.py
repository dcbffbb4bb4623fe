"""Image compatibility specs: decoding as NFD reads them (sigs.k8s.io/yaml), errors that name
the field, and evaluation against a node, with NFD's node-validator cases
(pkg/client-nfd/compat/node-validator) on the features of its fake source."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from kubesched.plugins.image_compatibility._nfd import Features, GroupRule, RuleError
from kubesched.plugins.image_compatibility._spec import (
    Compatibility,
    CompatibilitySpec,
    SpecError,
    SpecResult,
    decode_spec,
    evaluate,
)

Json = dict[str, Any]

# NFD's fake feature source, as the node-validator tests see it.
FAKE = msgspec.convert(
    {
        "flags": {"fake.flag": {"elements": {"flag_1": {}, "flag_2": {}, "flag_3": {}}}},
        "attributes": {
            "fake.attribute": {"elements": {"attr_1": "true", "attr_2": "false", "attr_3": "10"}}
        },
        "instances": {
            "fake.instance": {
                "elements": [
                    {
                        "attributes": {
                            "name": "instance_1",
                            "attr_1": "true",
                            "attr_2": "false",
                            "attr_3": "10",
                            "attr_4": "foobar",
                        }
                    },
                    {
                        "attributes": {
                            "name": "instance_2",
                            "attr_1": "true",
                            "attr_2": "true",
                            "attr_3": "100",
                        }
                    },
                    {"attributes": {"name": "instance_3"}},
                ]
            }
        },
    },
    Features,
)


def in_(*values: str) -> Json:
    return {"op": "In", "value": list(values)}


def one_set(*rules: Json, **extra: Any) -> bytes:
    return json.dumps(
        {"version": "v1alpha1", "compatibilities": [{"rules": list(rules), **extra}]}
    ).encode()


INSTANCE_1 = {"feature": "fake.instance", "matchExpressions": {"name": in_("instance_1")}}
VALIDATOR: list[tuple[str, Json, bool]] = [
    (
        "flag matchName",
        {
            "matchFeatures": [
                {"feature": "fake.flag", "matchName": {"op": "InRegexp", "value": ["^flag"]}}
            ]
        },
        True,
    ),
    (
        "unknown flag",
        {
            "matchFeatures": [
                {"feature": "fake.flag", "matchExpressions": {"flag_unknown": {"op": "Exists"}}},
                {"feature": "fake.attribute", "matchExpressions": {"attr_1": in_("true")}},
            ]
        },
        False,
    ),
    (
        "two instance terms, the second unmet",
        {
            "matchFeatures": [
                {
                    "feature": "fake.instance",
                    "matchExpressions": {"name": in_("instance_1"), "attr_1": in_("true")},
                },
                {
                    "feature": "fake.instance",
                    "matchExpressions": {"name": in_("instance_2"), "attr_1": in_("false")},
                },
            ]
        },
        False,
    ),
    (
        "matchAny over instances",
        {
            "matchAny": [
                {"matchFeatures": [INSTANCE_1]},
                {
                    "matchFeatures": [
                        {
                            "feature": "fake.instance",
                            "matchExpressions": {"name": in_("instance_unknown")},
                        }
                    ]
                },
            ]
        },
        True,
    ),
    (
        "unknown feature",
        {
            "matchFeatures": [
                {"feature": "unknown.unknown", "matchExpressions": {"name": in_("instance_1")}}
            ]
        },
        False,
    ),
    (
        "matchAny and matchFeatures match",
        {
            "matchAny": [
                {"matchFeatures": [INSTANCE_1]},
                {
                    "matchFeatures": [
                        INSTANCE_1,
                        {
                            "feature": "fake.instance",
                            "matchExpressions": {"name": in_("instance_unknown")},
                        },
                    ]
                },
            ],
            "matchFeatures": [
                {"feature": "fake.attribute", "matchExpressions": {"attr_1": in_("true")}}
            ],
        },
        True,
    ),
    (
        "matchAny matches, matchFeatures does not",
        {
            "matchAny": [
                {"matchFeatures": [INSTANCE_1]},
                {
                    "matchFeatures": [
                        {
                            "feature": "fake.instance",
                            "matchExpressions": {"name": in_("instance_unknown")},
                        },
                        {"feature": "fake.instance", "matchExpressions": {"id": in_("unknown")}},
                    ]
                },
            ],
            "matchFeatures": [
                {"feature": "fake.attribute", "matchExpressions": {"attr_unknown": in_("true")}},
                {"feature": "fake.attribute", "matchExpressions": {"attr_1": in_("true")}},
            ],
        },
        False,
    ),
    (
        "flags, attributes and instances, a flag unmet",
        {
            "matchFeatures": [
                {"feature": "fake.flag", "matchExpressions": {"flag_unknown": {"op": "Exists"}}},
                {"feature": "fake.attribute", "matchExpressions": {"attr_1": in_("true")}},
                {
                    "feature": "fake.instance",
                    "matchExpressions": {"name": in_("instance_1"), "attr_1": in_("true")},
                },
            ]
        },
        False,
    ),
    (
        "flags, attributes and instances match",
        {
            "matchFeatures": [
                {"feature": "fake.flag", "matchName": {"op": "InRegexp", "value": ["^flag"]}},
                {"feature": "fake.attribute", "matchExpressions": {"attr_1": in_("true")}},
                INSTANCE_1,
            ]
        },
        True,
    ),
    ("empty rule", {"matchFeatures": []}, True),
]


@pytest.mark.parametrize(
    ("rule", "want"), [c[1:] for c in VALIDATOR], ids=[c[0] for c in VALIDATOR]
)
def test_node_validator_single_set(rule: Json, want: bool) -> None:
    result = evaluate(decode_spec(one_set({"name": "fake", **rule})), FAKE)
    assert result.compatible is want
    assert result.matched_sets == ((0,) if want else ())
    assert (result.reason == "") is want


def two_sets(attr_a: str, attr_b: str) -> bytes:
    def compat(tag: str, weight: int, attr: str) -> Json:
        term = {"feature": "fake.attribute", "matchExpressions": {attr: in_("false")}}
        return {
            "tag": tag,
            "weight": weight,
            "rules": [{"name": "fake_1", "matchFeatures": [term]}],
        }

    return json.dumps(
        {
            "version": "v1alpha1",
            "compatibilities": [compat("prefered", 90, attr_a), compat("fallback", 40, attr_b)],
        }
    ).encode()


def test_node_validator_multiple_sets() -> None:
    # attr_1 is "true", attr_2 is "false": the fallback set matches, with its weight
    assert evaluate(decode_spec(two_sets("attr_1", "attr_2")), FAKE) == SpecResult(
        True, 40, (1,), ""
    )
    assert evaluate(decode_spec(two_sets("attr_2", "attr_2")), FAKE) == SpecResult(
        True, 90, (0, 1), ""
    )
    assert evaluate(decode_spec(two_sets("attr_1", "attr_1")), FAKE) == SpecResult(
        False,
        0,
        (),
        'set 0 "prefered": rule "fake_1": fake.attribute attr_1 In false: have "true"; '
        'set 1 "fallback": rule "fake_1": fake.attribute attr_1 In false: have "true"',
    )


def test_weight_is_the_highest_of_the_matched_sets() -> None:
    def compat(weight: int, feature: str) -> Json:
        return {"weight": weight, "rules": [{"name": "r", "matchFeatures": [{"feature": feature}]}]}

    sets = [
        compat(10, "fake.flag"),
        compat(70, "x.y"),
        compat(50, "fake.flag"),
        compat(-5, "fake.flag"),
    ]
    data = json.dumps({"version": "v1alpha1", "compatibilities": sets}).encode()
    assert evaluate(decode_spec(data), FAKE) == SpecResult(True, 50, (0, 2, 3), "")


def test_no_sets_is_compatible() -> None:
    spec = decode_spec(b"version: v1alpha1\ncompatibilities: []\n")
    assert evaluate(spec, Features()) == SpecResult(True, 0, (), "")
    assert evaluate(decode_spec(b"version: v1alpha1\n"), Features()).compatible


def test_a_set_fails_at_its_first_failing_rule() -> None:
    rules = [
        {"name": "ok", "matchFeatures": [{"feature": "fake.flag"}]},
        {"name": "first", "matchFeatures": [{"feature": "x.y"}]},
        {"name": "second", "matchFeatures": [{"feature": "z.w"}]},
    ]
    result = evaluate(decode_spec(one_set(*rules)), FAKE)
    assert result == SpecResult(False, 0, (), 'rule "first": feature x.y not found')


def test_long_reasons_are_cut_per_set() -> None:
    rule = {"name": "r" * 200, "matchFeatures": [{"feature": "x.y"}]}
    data = json.dumps(
        {"version": "v1alpha1", "compatibilities": [{"rules": [rule]}, {"rules": [rule]}]}
    ).encode()
    reason = evaluate(decode_spec(data), FAKE).reason
    first, second = reason.split("; ")
    assert first == second.replace("set 1", "set 0")
    assert len(first) == len("set 0: ") + 160
    assert first.endswith("...")


def test_back_references_within_a_set_only() -> None:
    producer = {"name": "p", "vars": {"fast": "true"}, "matchFeatures": [{"feature": "fake.flag"}]}
    consumer = {
        "name": "c",
        "matchFeatures": [
            {"feature": "rule.matched", "matchExpressions": {"fast": {"op": "IsTrue"}}}
        ],
    }
    assert evaluate(decode_spec(one_set(producer, consumer)), FAKE).compatible
    assert not evaluate(decode_spec(one_set(consumer, producer)), FAKE).compatible
    data = json.dumps(
        {
            "version": "v1alpha1",
            "compatibilities": [{"rules": [producer]}, {"rules": [consumer]}],
        }
    ).encode()
    assert evaluate(decode_spec(data), FAKE).matched_sets == (0,)


def test_back_references_accumulate_over_the_rules_of_a_set() -> None:
    def producer(var: str) -> Json:
        return {"name": var, "vars": {var: "true"}, "matchFeatures": [{"feature": "fake.flag"}]}

    both = {"fast": {"op": "IsTrue"}, "gpu": {"op": "IsTrue"}}
    consumer = {
        "name": "c",
        "matchFeatures": [{"feature": "rule.matched", "matchExpressions": both}],
    }
    data = one_set(producer("fast"), producer("gpu"), consumer)
    assert evaluate(decode_spec(data), FAKE).compatible


def test_evaluation_error_fails_the_set() -> None:
    rule = {
        "name": "n",
        "matchFeatures": [
            {
                "feature": "fake.instance",
                "matchExpressions": {"attr_4": {"op": "Gt", "value": ["1"]}},
            }
        ],
    }
    result = evaluate(decode_spec(one_set(rule)), FAKE)
    assert result == SpecResult(
        False, 0, (), 'rule "n": fake.instance attr_4 Gt 1: not a number "foobar"'
    )


def test_spec_not_from_decode_is_compiled_on_first_use() -> None:
    rule = msgspec.convert({"name": "a", "matchFeatures": [{"feature": "fake.flag"}]}, GroupRule)
    spec = CompatibilitySpec(
        version="v1alpha1", compatibilities=[Compatibility(rules=[rule], weight=3)]
    )
    assert evaluate(spec, FAKE) == SpecResult(True, 3, (0,), "")
    bad = msgspec.convert(
        {
            "name": "b",
            "matchFeatures": [{"feature": "a.b", "matchExpressions": {"x": {"op": "Bad"}}}],
        },
        GroupRule,
    )
    with pytest.raises(SpecError, match=r"^compatibilities\[0\]\.rules\[0\]\.matchFeatures"):
        evaluate(
            CompatibilitySpec(version="v1alpha1", compatibilities=[Compatibility(rules=[bad])]),
            FAKE,
        )


# --- decoding ------------------------------------------------------------------------------

YAML_SPEC = b"""
version: v1alpha1
compatibilities:
- description: "My image requirements"
  tag: avx512
  weight: 90
  rules:
  - name: "kernel and cpu"
    matchFeatures:
    - feature: kernel.loadedmodule
      matchExpressions:
        vfio-pci: {op: Exists}
    - feature: cpu.model
      matchExpressions:
        vendor_id: {op: In, value: ["Intel", "AMD"]}
  - name: "one of available nics"
    matchAny:
    - matchFeatures:
      - feature: pci.device
        matchExpressions:
          vendor: {op: In, value: ["0eee"]}
          class: {op: In, value: ["0200"]}
"""


def test_decode_yaml() -> None:
    spec = decode_spec(YAML_SPEC)
    assert spec.version == "v1alpha1"
    (c,) = spec.compatibilities
    assert (c.tag, c.weight, c.description) == ("avx512", 90, "My image requirements")
    assert [r.name for r in c.rules] == ["kernel and cpu", "one of available nics"]
    exprs = c.rules[1].match_any[0].match_features[0].match_expressions
    assert exprs is not None
    assert exprs["class"].value == ["0200"]


def test_decode_json_equals_yaml() -> None:
    spec = decode_spec(YAML_SPEC)
    assert decode_spec(msgspec.json.encode(spec)) == spec


SCALARS = [
    ("quoted", '"0300"', "0300"),
    ("octal", "0300", "192"),
    ("not octal, a float", "08", "8"),
    ("hex", "0x1F", "31"),
    ("yes", "y", "true"),
    ("off", "off", "false"),
    ("float", "2.0", "2"),
    ("float with exponent", "1e3", "1000"),
    ("big float", "1e7", "1e+07"),
    ("underscores", "1_000", "1000"),
    ("version", "5.15", "5.15"),
    ("version with patch", "5.15.0", "5.15.0"),
    ("plain", "10de", "10de"),
    ("null", "~", None),
]


@pytest.mark.parametrize(("text", "want"), [c[1:] for c in SCALARS], ids=[c[0] for c in SCALARS])
def test_unquoted_scalars_read_as_nfd_reads_them(text: str, want: str | None) -> None:
    data = f"""
version: v1alpha1
compatibilities:
- rules:
  - name: r
    vars: {{v: {text}}}
    matchFeatures:
    - feature: a.b
      matchExpressions:
        x: {{op: In, value: [{text}, z]}}
""".encode()
    if want is None:
        with pytest.raises(SpecError) as info:
            decode_spec(data)
        assert (
            info.value.path
            == "compatibilities[0].rules[0].matchFeatures[0].matchExpressions.x.value"
        )
        return
    rule = decode_spec(data).compatibilities[0].rules[0]
    exprs = rule.match_features[0].match_expressions
    assert exprs is not None
    assert exprs["x"].value == [want, "z"]
    assert rule.vars == {"v": want}


def test_null_fields_keep_their_defaults() -> None:
    spec = decode_spec(
        b"version: v1alpha1\ncompatibilities:\n- tag: ~\n  rules:\n  - name: r\n"
        b"    vars: {a: ~}\n    matchAny: ~\n    matchFeatures:\n"
        b"    - feature: a.b\n      matchName: ~\n"
    )
    (rule,) = spec.compatibilities[0].rules
    assert spec.compatibilities[0].tag == ""
    assert rule.vars == {"a": ""}
    assert rule.match_any == []
    assert rule.match_features[0].match_name is None


def test_unknown_fields_are_ignored() -> None:
    spec = decode_spec(
        b"version: v1alpha1\nkind: Whatever\ncompatibilities:\n- rules: []\n  extra: 1\n"
    )
    assert spec.compatibilities == [Compatibility()]


TERM = b"version: v1alpha1\ncompatibilities:\n- rules:\n  - matchFeatures:\n    - feature: a.b\n"
ERRORS = [
    ("not yaml", b"version: [v1alpha1", "", "not YAML or JSON"),
    ("not a mapping", b"- version", "", "must be a mapping"),
    ("duplicate key", b"version: v1alpha1\nversion: v1alpha1\n", "", "given twice"),
    ("wrong version", b"version: v1\ncompatibilities: []\n", "version", 'unsupported version "v1"'),
    ("no version", b"compatibilities: []\n", "version", 'unsupported version ""'),
    (
        "weight not a number",
        b"version: v1alpha1\ncompatibilities:\n- weight: high\n",
        "compatibilities[0].weight",
        "Expected `int`",
    ),
    (
        "weight quoted",
        b'version: v1alpha1\ncompatibilities:\n- weight: "1"\n',
        "compatibilities[0].weight",
        "Expected `int`",
    ),
    (
        "rules not a list",
        b"version: v1alpha1\ncompatibilities:\n- rules: {}\n",
        "compatibilities[0].rules",
        "Expected `array`",
    ),
    (
        "null expression",
        TERM + b"      matchExpressions:\n        X:\n",
        "compatibilities[0].rules[0].matchFeatures[0].matchExpressions.X",
        "must be a mapping",
    ),
    (
        "value not a list",
        TERM + b"      matchName: {op: In, value: x}\n",
        "compatibilities[0].rules[0].matchFeatures[0].matchName.value",
        "must be a list",
    ),
    (
        "op not a string",
        TERM + b"      matchExpressions:\n        X: {op: [In]}\n",
        "compatibilities[0].rules[0].matchFeatures[0].matchExpressions.X.op",
        "must be a string",
    ),
    (
        "var not a string",
        b"version: v1alpha1\ncompatibilities:\n- rules:\n  - vars: {a: [1]}\n",
        "compatibilities[0].rules[0].vars.a",
        "must be a string",
    ),
]


@pytest.mark.parametrize(
    ("data", "path", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_decode_errors_name_the_field(data: bytes, path: str, message: str) -> None:
    with pytest.raises(SpecError) as info:
        decode_spec(data)
    assert info.value.path == path
    assert message in info.value.message
    assert str(info.value) == (f"{path}: {info.value.message}" if path else info.value.message)


def test_invalid_rule_is_a_spec_error_and_a_rule_error() -> None:
    bad = {
        "name": "r",
        "matchFeatures": [
            {
                "feature": "cpu.cpuid",
                "matchExpressions": {"AVX512F": {"op": "Exists", "value": ["y"]}},
            }
        ],
    }
    data = json.dumps(
        {
            "version": "v1alpha1",
            "compatibilities": [{"rules": []}, {"rules": [{"name": "ok"}, bad]}],
        }
    ).encode()
    with pytest.raises(SpecError) as info:
        decode_spec(data)
    assert isinstance(info.value, RuleError)
    assert (
        info.value.path
        == "compatibilities[1].rules[1].matchFeatures[0].matchExpressions.AVX512F.value"
    )
    assert str(info.value) == f'{info.value.path}: must be empty for op "Exists"'


def test_nested_aliases_are_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    data = ("version: v1alpha1\n" + "\n".join(lines) + "\ncompatibilities: []\n").encode()
    with pytest.raises(SpecError, match="more than 100000 values"):
        decode_spec(data)


@pytest.mark.parametrize("data", [b"a: " + b"[" * 3000 + b"]" * 3000, b"[" * 3000 + b"]" * 3000])
def test_deep_nesting_is_a_spec_error(data: bytes) -> None:
    with pytest.raises(SpecError):
        decode_spec(data)


def test_very_deep_nesting_does_not_crash_the_parser() -> None:
    with pytest.raises(SpecError, match="nested too deep"):
        decode_spec(b"[" * 200_000 + b"]" * 200_000)
