"""Answers assembled from a resolved NodeNames list equal what encoding them would give."""

from __future__ import annotations

import msgspec
import numpy as np

from kubesched.extender import HostPriority
from kubesched.extender._names import NameList


def make(names: list[str], slots: dict[str, int]) -> NameList:
    return NameList(msgspec.json.encode(names), names, slots)


def test_slots_unknown_and_positions() -> None:
    nl = make(["a", "ghost", "b", "c"], {"a": 7, "b": 3, "c": 9})
    assert nl.slots.tolist() == [7, 3, 9]
    assert nl.unknown == ["ghost"]
    assert nl.known is not None
    assert nl.known.tolist() == [0, 2, 3]
    positions = nl.positions(np.array([7, 9]))
    assert positions is not None
    assert positions.tolist() == [0, 3]
    assert not nl.slots.flags.writeable


def test_names_json_is_the_request_itself_when_every_node_passes() -> None:
    raw = b'["a","b"]'
    nl = NameList(raw, ["a", "b"], {"a": 0, "b": 1})
    assert nl.names_json(np.array([0, 1])) is raw
    assert nl.names_json(np.array([1])) == b'["b"]'
    assert nl.names_json(np.array([], dtype=np.int64)) == b"[]"


def test_odd_names_are_escaped() -> None:
    names = ['we"ird', "back\\slash", "ünï", "n-1"]
    nl = make(names, {n: i for i, n in enumerate(names)})
    assert msgspec.json.decode(nl.names_json(np.array([0, 1, 2]))) == names[:3]


def test_names_json_with_few_or_most_names_kept() -> None:
    names = [f"n-{i}" for i in range(18)] + ['we"ird', "ünï"]
    nl = make(names, {n: i for i, n in enumerate(names)})
    for kept in ([3], [0, 19], list(range(1, 20)), [i for i in range(20) if i % 7], [18]):
        answer = nl.names_json(np.array(kept, dtype=np.int64))
        assert msgspec.json.decode(answer) == [names[i] for i in kept]
        assert answer == msgspec.json.encode([names[i] for i in kept])


def test_priorities_json_decodes_to_the_encoded_list() -> None:
    names = ["n-0", 'q"uote', "n-2", "ünï"]
    nl = make(names, {n: i for i, n in enumerate(names)})
    for scores in (np.array([10, 0, 7, 1]), np.array([3, 10, 10, 0])):
        expected = [HostPriority(n, int(s)) for n, s in zip(names, scores, strict=True)]
        answer = nl.priorities_json(scores)
        assert msgspec.json.decode(answer, type=list[HostPriority]) == expected
        # Two bytes per score: a space before a single digit, as JSON allows.
        assert answer.count(b'"Score": ') == int((scores < 10).sum())
        assert answer == msgspec.json.encode(expected).replace(b'"Score":', b'"Score": ').replace(
            b'"Score": 10', b'"Score":10'
        )
    assert make([], {}).priorities_json(np.array([], dtype=np.int64)) == b"[]"


def test_reasons_json_maps_each_group_to_its_reason() -> None:
    names = ["a", "ghost", 'q"uote', "c"]
    nl = make(names, {"a": 0, 'q"uote': 1, "c": 2})
    assert nl.unknown_at.tolist() == [1]
    answer = nl.reasons_json(
        [
            (nl.unknown_at, "unknown"),
            (np.array([0, 2]), 'too "big"'),
            (np.array([], dtype=np.int64), "nobody"),
            (np.array([3]), "tainted"),
        ]
    )
    assert msgspec.json.decode(answer) == {
        "ghost": "unknown",
        "a": 'too "big"',
        'q"uote': 'too "big"',
        "c": "tainted",
    }
    assert nl.reasons_json([]) == b"{}"


def test_a_name_listed_twice_has_no_positions() -> None:
    nl = make(["a", "a"], {"a": 0})
    assert nl.positions(np.array([0])) is None
