"""The NodeTable's record of changed rows, and RowDerived, which keeps per-node values with it."""

from __future__ import annotations

import numpy as np

from builders import make_node, make_pod
from kubesched.framework import IntArray, NodeTable, PodInfo, RowDerived, Snapshot


def snapshot(n: int) -> Snapshot:
    s = Snapshot()
    for i in range(n):
        s.set_node(make_node(f"n{i}"))
    return s


class Cpu:
    """Derives each slot's requested CPU and records which slots it was asked for."""

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.asked: list[list[int]] = []

    def __call__(self, slots: IntArray) -> IntArray:
        self.asked.append(slots.tolist())
        col = self.table.resource_index["cpu"]
        out: IntArray = self.table.requested[slots, col].copy()
        return out


def warmed(s: Snapshot, *keys: str, max_keys: int = 8) -> RowDerived:
    """A RowDerived that has seen ``keys`` once, so keeps them from their next use."""
    kept = RowDerived(max_keys=max_keys)
    for key in keys:
        kept.get(s.table, key, s.present_slots(), lambda slots: np.zeros(len(slots), np.int64))
    return kept


def test_present_slots_are_kept_until_a_node_comes_or_goes() -> None:
    s = snapshot(3)
    first = s.present_slots()
    assert first.tolist() == [0, 1, 2]
    assert not first.flags.writeable
    assert s.table.is_leading(first)
    assert not s.table.is_leading(first.copy())
    s.add_pod(PodInfo.of(make_pod("a", cpu="1")), "n1")
    s.set_node(make_node("n0", cpu="8"))
    assert s.present_slots() is first
    s.remove_node("n1")
    assert s.present_slots().tolist() == [0, 2]
    assert not s.table.is_leading(s.present_slots())
    # n1's pod keeps its slot; n2's is free again and n3 takes it.
    s.remove_node("n2")
    s.set_node(make_node("n3"))
    assert s.present_slots().tolist() == [0, 2]
    s.set_node(make_node("n1"))
    assert s.present_slots().tolist() == [0, 1, 2]
    assert s.table.is_leading(s.present_slots())


def test_changed_rows_since_lists_the_rows_changed_after_a_version() -> None:
    s = snapshot(3)
    t = s.table
    v = t.version
    assert t.changed_rows_since(v) == ([], [])
    s.add_pod(PodInfo.of(make_pod("a", cpu="1")), "n2")
    s.remove_node("n0")
    # n0's Node went; only n2's pods changed.
    assert t.changed_rows_since(v) == ([0], [2])


def test_changed_rows_since_is_none_when_too_far_behind() -> None:
    s = snapshot(1)
    v = s.table.version
    for i in range(5000):
        s.add_pod(PodInfo.of(make_pod(f"p{i}")), "n0")
    assert s.table.changed_rows_since(v) is None
    assert s.table.changed_rows_since(s.table.version - 1) == ([], [0])


def test_only_changed_rows_are_derived_again() -> None:
    s = snapshot(4)
    derive = Cpu(s.table)
    kept = warmed(s, "k")
    every = s.present_slots()
    assert kept.get(s.table, "k", every, derive).tolist() == [0, 0, 0, 0]
    assert derive.asked == [[0, 1, 2, 3]]
    s.add_pod(PodInfo.of(make_pod("a", cpu="500m")), "n1")
    s.add_pod(PodInfo.of(make_pod("b", cpu="1")), "n1")
    assert kept.get(s.table, "k", every, derive).tolist() == [0, 1500, 0, 0]
    assert derive.asked[1:] == [[1]]
    # Nothing changed: nothing derived; the result is a fresh array in the order asked.
    got = kept.get(s.table, "k", np.array([3, 1], dtype=np.int64), derive)
    assert got.tolist() == [0, 1500]
    assert len(derive.asked) == 2
    got[1] = -1
    assert kept.get(s.table, "k", every, derive).tolist() == [0, 1500, 0, 0]


def test_a_key_used_once_derives_the_slots_asked_and_keeps_nothing() -> None:
    s = snapshot(4)
    derive = Cpu(s.table)
    kept = RowDerived()
    some = np.array([2, 0], dtype=np.int64)
    assert kept.get(s.table, "k", some, derive).tolist() == [0, 0]
    assert kept.get_unless_zero(s.table, "j", some, derive) is None
    assert derive.asked == [[2, 0], [2, 0]]
    # Its second use keeps it: every row, then only what changes.
    kept.get(s.table, "k", some, derive)
    assert derive.asked[2:] == [[0, 1, 2, 3]]
    kept.get(s.table, "k", some, derive)
    assert len(derive.asked) == 3


def test_values_follow_the_slots_asked_for_when_some_slots_are_empty() -> None:
    s = snapshot(4)
    derive = Cpu(s.table)
    kept = RowDerived()
    s.remove_node("n1")
    s.add_pod(PodInfo.of(make_pod("a", cpu="2")), "n2")
    assert kept.get(s.table, "k", s.present_slots(), derive).tolist() == [0, 2000, 0]


def test_removed_rows_are_not_derived() -> None:
    s = snapshot(3)
    derive = Cpu(s.table)
    kept = warmed(s, "k")
    kept.get(s.table, "k", s.present_slots(), derive)
    s.remove_node("n1")
    assert kept.get(s.table, "k", s.present_slots(), derive).tolist() == [0, 0]
    assert derive.asked[1:] == []


def test_a_new_column_or_more_rows_derive_everything_again() -> None:
    s = snapshot(2)
    derive = Cpu(s.table)
    kept = RowDerived()
    kept.get(s.table, "k", s.present_slots(), derive)
    s.set_node(make_node("n0", extra={"example.com/gpu": "1"}))
    kept.get(s.table, "k", s.present_slots(), derive)
    assert derive.asked[1:] == [[0, 1]]
    for i in range(2, 70):
        s.set_node(make_node(f"n{i}"))
    kept.get(s.table, "k", s.present_slots(), derive)
    assert derive.asked[2] == list(range(70))


def test_keys_are_kept_apart_and_the_least_recently_used_dropped() -> None:
    s = snapshot(2)
    derive = Cpu(s.table)
    kept = warmed(s, "a", "b", "c", max_keys=2)
    every = s.present_slots()
    for key in ("a", "b", "a", "c"):
        kept.get(s.table, key, every, derive)
    # "b" was dropped for "c"; "a" was still kept.
    kept.get(s.table, "a", every, derive)
    assert len(derive.asked) == 3
    kept.get(s.table, "b", every, derive)
    assert len(derive.asked) == 4


def test_another_table_starts_over() -> None:
    one, two = snapshot(2), snapshot(3)
    kept = RowDerived()
    kept.get(one.table, "k", one.present_slots(), Cpu(one.table))
    derive = Cpu(two.table)
    assert kept.get(two.table, "k", two.present_slots(), derive).tolist() == [0, 0, 0]
    assert derive.asked == [[0, 1, 2]]


def test_get_unless_zero_knows_when_every_value_is_zero() -> None:
    s = snapshot(3)
    derive = Cpu(s.table)
    kept = RowDerived()
    every = s.present_slots()
    assert kept.get_unless_zero(s.table, "k", every, derive) is None
    s.add_pod(PodInfo.of(make_pod("a", cpu="1")), "n2")
    got = kept.get_unless_zero(s.table, "k", s.present_slots(), derive)
    assert got is not None
    assert got.tolist() == [0, 0, 1000]
    # Slots without the non-zero one.
    assert kept.get_unless_zero(s.table, "k", np.array([1, 0]), derive) is None
    # The node goes (its pod still counts there), then comes back.
    s.remove_node("n2")
    assert kept.get_unless_zero(s.table, "k", s.present_slots(), derive) is None
    s.set_node(make_node("n2"))
    got = kept.get_unless_zero(s.table, "k", s.present_slots(), derive)
    assert got is not None
    assert got.tolist() == [0, 0, 1000]


def test_many_changed_rows_derive_everything_again() -> None:
    s = snapshot(300)
    derive = Cpu(s.table)
    kept = RowDerived()
    kept.get(s.table, "k", s.present_slots(), derive)
    for i in range(300):
        s.add_pod(PodInfo.of(make_pod(f"p{i}", cpu=f"{i}m")), f"n{i}")
    assert kept.get(s.table, "k", s.present_slots(), derive).tolist() == list(range(300))
    assert derive.asked[1:] == [list(range(300))]
