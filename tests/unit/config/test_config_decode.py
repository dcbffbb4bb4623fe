"""Strict decoding, durations, type and version checks, and args decoding for any plugin."""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

import msgspec
import pytest

from kubesched.config import (
    ConfigError,
    DurationError,
    FeatureGates,
    FieldError,
    NodeResourcesFitArgs,
    VolumeBindingArgs,
    decode_args,
    format_duration,
    load_config_from_dict,
    parse_duration,
)

DOC = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}


def errors_of(doc: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config_from_dict(doc, **kwargs)
    return [str(e) for e in info.value.errors]


# ---------------------------------------------------------------------------------------------
# durations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("0", 0.0),
        ("0s", 0.0),
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("100ms", 0.1),
        ("1.5h", 5400.0),
        ("2h45m", 9900.0),
        ("-1.5s", -1.5),
        ("+3s", 3.0),
        ("300us", 0.0003),
        ("300µs", 0.0003),
        ("1ns", 1e-9),
        (".5s", 0.5),
        ("1.s", 1.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-12)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'time: invalid duration ""'),
        ("15", 'time: missing unit in duration "15"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("s", 'time: invalid duration "s"'),
        (".s", 'time: invalid duration ".s"'),
        ("1s 2s", 'time: unknown unit "s " in duration "1s 2s"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
    ],
)
def test_parse_duration_errors(text: str, message: str) -> None:
    with pytest.raises(DurationError) as info:
        parse_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (15, "15s"),
        (90, "1m30s"),
        (3600, "1h0m0s"),
        (0.1, "100ms"),
        (1.5, "1.5s"),
        (0.0003, "300µs"),
        (1e-9, "1ns"),
        (-2.5, "-2.5s"),
        (9900.25, "2h45m0.25s"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == pytest.approx(seconds, abs=1e-12)


def test_duration_fields_are_read_from_go_strings() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "leaderElection": {
                "leaseDuration": "1m",
                "renewDeadline": "45s",
                "retryPeriod": "500ms",
            },
            "extenders": [{"urlPrefix": "http://x", "httpTimeout": "1m30s"}],
        }
    )
    assert cfg.leader_election.lease_duration == 60.0
    assert cfg.leader_election.renew_deadline == 45.0
    assert cfg.leader_election.retry_period == 0.5
    assert cfg.extenders[0].http_timeout == 90.0


def test_bad_durations_are_field_errors() -> None:
    got = errors_of(
        {
            **DOC,
            "leaderElection": {"leaseDuration": 15, "renewDeadline": "10 seconds"},
        }
    )
    assert got == [
        "leaderElection.leaseDuration: Invalid value: 15: "
        'expected a duration string such as "15s", "1m30s" or "100ms"',
        'leaderElection.renewDeadline: Invalid value: "10 seconds": '
        'time: unknown unit " seconds" in duration "10 seconds"',
    ]


# ---------------------------------------------------------------------------------------------
# strict decoding


def test_unknown_fields_everywhere_are_all_reported() -> None:
    got = errors_of(
        {
            **DOC,
            "paralelism": 4,
            "leaderElection": {"leaderelect": True},
            "profiles": [
                {
                    "schedulerName": "a",
                    "plugins": {"filter": {"enabeld": [{"name": "X"}]}},
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "LeastAllocated", "resource": []}},
                        }
                    ],
                }
            ],
        }
    )
    assert got == [
        'paralelism: Unknown field (did you mean "parallelism"?)',
        'leaderElection.leaderelect: Unknown field (did you mean "leaderElect"?)',
        'profiles[0].plugins.filter.enabeld: Unknown field (did you mean "enabled"?)',
        "profiles[0].pluginConfig[0].args.scoringStrategy.resource: "
        'Unknown field (did you mean "resources"?)',
    ]


def test_unknown_field_without_a_close_match() -> None:
    assert errors_of({**DOC, "zzz": 1}) == ["zzz: Unknown field"]


def test_wrong_types() -> None:
    got = errors_of(
        {
            **DOC,
            "parallelism": "16",
            "enableProfiling": "yes",
            "clientConnection": {"qps": "fast"},
            "profiles": [{"plugins": {"score": {"enabled": [{"name": "A", "weight": 1.5}]}}}],
            "extenders": {"urlPrefix": "x"},
        }
    )
    assert got == [
        'parallelism: Invalid value: "16": expected `int`, got `str`',
        'enableProfiling: Invalid value: "yes": expected `bool`, got `str`',
        'clientConnection.qps: Invalid value: "fast": expected `float`, got `str`',
        "profiles[0].plugins.score.enabled[0].weight: Invalid value: 1.5: "
        "expected `int`, got `float`",
        'extenders: Invalid value: {"urlPrefix":"x"}: expected an array, got object',
    ]


def test_int32_range_is_enforced() -> None:
    assert errors_of({**DOC, "parallelism": 2**31}) == [
        "parallelism: Invalid value: 2147483648: expected `int` <= 2147483647"
    ]


def test_required_fields() -> None:
    got = errors_of(
        {
            **DOC,
            "profiles": [
                {"plugins": {"filter": {"enabled": [{"weight": 1}]}}, "pluginConfig": [{}]}
            ],
            "extenders": [{"filterVerb": "filter"}],
        }
    )
    assert got == [
        "profiles[0].plugins.filter.enabled[0].name: Required value",
        "profiles[0].pluginConfig[0].name: Required value",
        "extenders[0].urlPrefix: Required value",
    ]


def test_null_means_not_set() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "parallelism": None,
            "profiles": [
                {
                    "schedulerName": "only",
                    "plugins": {"score": {"disabled": None, "enabled": None}, "filter": None},
                    "pluginConfig": None,
                }
            ],
        }
    )
    assert cfg.parallelism == 16
    assert cfg.profiles[0].scheduler_name == "only"


def test_plugin_args_must_be_an_object() -> None:
    got = errors_of({**DOC, "profiles": [{"pluginConfig": [{"name": "Custom", "args": [1, 2]}]}]})
    assert got == [
        "profiles[0].pluginConfig[0].args: Invalid value: [1,2]: expected an object, got array"
    ]


def test_in_tree_args_accept_matching_type_meta() -> None:
    cfg = load_config_from_dict(
        {
            **DOC,
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "VolumeBinding",
                            "args": {
                                "apiVersion": "kubescheduler.config.k8s.io/v1",
                                "kind": "VolumeBindingArgs",
                                "bindTimeoutSeconds": 30,
                            },
                        }
                    ]
                }
            ],
        }
    )
    assert cfg.profiles[0].plugin_args("VolumeBinding") == VolumeBindingArgs(
        bind_timeout_seconds=30
    )


def test_in_tree_args_reject_other_type_meta() -> None:
    got = errors_of(
        {
            **DOC,
            "profiles": [
                {
                    "pluginConfig": [
                        {
                            "name": "VolumeBinding",
                            "args": {"apiVersion": "v1beta3", "kind": "NodeResourcesFitArgs"},
                        }
                    ]
                }
            ],
        }
    )
    assert got == [
        'profiles[0].pluginConfig[0].args.kind: Invalid value: "NodeResourcesFitArgs": '
        'must be "VolumeBindingArgs"',
        'profiles[0].pluginConfig[0].args.apiVersion: Invalid value: "v1beta3": '
        'must be "kubescheduler.config.k8s.io/v1"',
    ]


# ---------------------------------------------------------------------------------------------
# apiVersion and kind


@pytest.mark.parametrize(
    ("doc", "want"),
    [
        (
            {"kind": "KubeSchedulerConfiguration"},
            ["apiVersion: Required value: must be kubescheduler.config.k8s.io/v1"],
        ),
        (
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1alpha2",
                "kind": "KubeSchedulerConfiguration",
            },
            [
                'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1alpha2": this version '
                "is no longer served by kube-scheduler v1.34, which reads only "
                "kubescheduler.config.k8s.io/v1; convert the file to kubescheduler.config.k8s.io/v1"
            ],
        ),
        (
            {"apiVersion": "v1", "kind": "Pod"},
            [
                'apiVersion: Unsupported value: "v1": supported values: '
                '"kubescheduler.config.k8s.io/v1"',
                'kind: Unsupported value: "Pod": supported values: "KubeSchedulerConfiguration"',
            ],
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1"},
            ["kind: Required value: must be KubeSchedulerConfiguration"],
        ),
        (
            None,
            [
                "apiVersion: Required value: must be kubescheduler.config.k8s.io/v1",
                "kind: Required value: must be KubeSchedulerConfiguration",
            ],
        ),
        ([1, 2], ["expected a KubeSchedulerConfiguration object, got array"]),
    ],
)
def test_type_meta(doc: Any, want: list[str]) -> None:
    assert errors_of(doc) == want


# ---------------------------------------------------------------------------------------------
# args of plugins defined outside this package


class GateArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of an imaginary out-of-tree plugin, with its own checks."""

    annotation_key: str = "example.com/allowed"
    max_pods: int = 10
    timeout: float = 1.0

    def validate(self, path: str) -> Iterable[FieldError | tuple[str, str]]:
        if self.max_pods <= 0:
            yield FieldError.invalid(f"{path}.maxPods", self.max_pods, "must be positive")
        if not self.annotation_key:
            yield (f"{path}.annotationKey", "Required value")


def test_decode_args_for_an_out_of_tree_type() -> None:
    assert decode_args(GateArgs, None) == GateArgs()
    assert decode_args(GateArgs, {"maxPods": 3}) == GateArgs(max_pods=3)
    with pytest.raises(ConfigError) as info:
        decode_args(GateArgs, {"maxPods": 0, "annotationKey": "", "extra": 1}, "p.args")
    assert [str(e) for e in info.value.errors] == ["p.args.extra: Unknown field"]
    with pytest.raises(ConfigError) as info:
        decode_args(GateArgs, {"maxPods": 0, "annotationKey": ""}, "p.args")
    assert [str(e) for e in info.value.errors] == [
        "p.args.maxPods: Invalid value: 0: must be positive",
        "p.args.annotationKey: Required value",
    ]


def test_out_of_tree_args_decoded_at_load_with_full_paths() -> None:
    doc = {
        **DOC,
        "profiles": [
            {
                "plugins": {"multiPoint": {"enabled": [{"name": "Gate"}]}},
                "pluginConfig": [{"name": "Gate", "args": {"maxPods": -1}}],
            }
        ],
    }
    assert errors_of(doc, plugin_args_types={"Gate": GateArgs}) == [
        "profiles[0].pluginConfig[0].args.maxPods: Invalid value: -1: must be positive"
    ]
    doc["profiles"][0]["pluginConfig"] = [{"name": "Gate", "args": {"maxPods": 4}}]  # type: ignore[index]
    cfg = load_config_from_dict(doc, plugin_args_types={"Gate": GateArgs})
    assert cfg.profiles[0].plugin_args("Gate") == GateArgs(max_pods=4)
    # Without the type registered the args stay raw, like kube-scheduler's runtime.Unknown.
    cfg = load_config_from_dict(doc)
    assert cfg.profiles[0].plugin_args("Gate") == {"maxPods": 4}


def test_in_tree_args_type_cannot_be_replaced() -> None:
    with pytest.raises(ValueError, match="NodeResourcesFit"):
        load_config_from_dict(DOC, plugin_args_types={"NodeResourcesFit": GateArgs})


def test_decode_args_rejects_a_struct_of_another_type() -> None:
    with pytest.raises(ConfigError) as info:
        decode_args(NodeResourcesFitArgs, GateArgs(), "args")
    assert [str(e) for e in info.value.errors] == [
        'args: Invalid value: "GateArgs": has to match plugin args NodeResourcesFitArgs'
    ]


def test_decode_args_copies_a_typed_value() -> None:
    given = NodeResourcesFitArgs()
    got = decode_args(NodeResourcesFitArgs, given)
    assert given.scoring_strategy is None
    assert got.scoring_strategy is not None
    assert got.scoring_strategy.type == "LeastAllocated"


def test_decode_args_error_path_names_the_field() -> None:
    with pytest.raises(ConfigError) as info:
        decode_args(
            NodeResourcesFitArgs,
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": 200}],
                }
            },
            "profiles[0].pluginConfig[1].args",
        )
    assert [e.path for e in info.value.errors] == [
        "profiles[0].pluginConfig[1].args.scoringStrategy.resources[0].weight"
    ]


def test_feature_gates_from_mapping() -> None:
    gates = FeatureGates.from_mapping({"StorageCapacityScoring": True})
    assert gates == FeatureGates(storage_capacity_scoring=True)
    assert gates.dynamic_resource_allocation is True
    with pytest.raises(ConfigError) as info:
        FeatureGates.from_mapping({"NoSuchGate": True, "DynamicResourceAllocation": "yes"})  # type: ignore[dict-item]
    assert [str(e) for e in info.value.errors] == [
        'featureGates.NoSuchGate: Unsupported value: "NoSuchGate": supported values: '
        '"DRASchedulerFilterTimeout", "DynamicResourceAllocation", "StorageCapacityScoring"',
        'featureGates.DynamicResourceAllocation: Invalid value: "yes": must be true or false',
    ]


def test_config_error_survives_pickling() -> None:
    err = ConfigError([FieldError("a", "Required value")], source="x.yaml")
    again = pickle.loads(pickle.dumps(err))
    assert again.errors == err.errors
    assert str(again) == "x.yaml: a: Required value"
