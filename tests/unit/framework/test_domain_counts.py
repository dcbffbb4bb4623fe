"""KeptDomainCounts: pods per topology domain, counted once and then kept up to date from the
pod table's change records; counted afresh when a Node changes or the records are too old."""

from __future__ import annotations

import numpy as np

from builders import NodeWrapper, PodWrapper, next_uid
from kubesched.framework import (
    BoolArray,
    IntArray,
    KeptDomainCounts,
    PodGroup,
    PodInfo,
    Snapshot,
)

ZONE = "zone"


def cluster() -> Snapshot:
    snap = Snapshot()
    for name, zone in (("n1", "a"), ("n2", "a"), ("n3", "b")):
        snap.set_node(NodeWrapper(name).label(ZONE, zone).obj())
    return snap


def add(snap: Snapshot, name: str, node: str, app: str) -> str:
    pod = PodWrapper(name).uid(next_uid()).label("app", app).node(node).obj()
    snap.add_pod(PodInfo.of(pod), node)
    return pod.metadata.uid


class Question:
    """Pods labelled app=web, weight 2 each; counts how often it was counted afresh."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.fresh = 0

    def weigh(self, group: PodGroup) -> tuple[bool, int]:
        return group.labels.get("app") == "web", 2

    def masks(self) -> tuple[BoolArray, IntArray | None]:
        self.fresh += 1
        pods = self.snap.pods
        mask = pods.group_lookup(lambda g: g.labels.get("app") == "web")
        return mask, np.full(len(mask), 2, dtype=np.int64)

    def ask(self, kept: KeptDomainCounts) -> dict[str, tuple[int, int]]:
        tally = kept.get(self.snap.table, self.snap.pods, "web", ZONE, self.weigh, self.masks)
        assert tally is not None
        values = self.snap.table.labels[ZONE].values
        return {
            str(values[i]): (int(tally.pods[i]), int(tally.weighted[i]))
            for i in range(1, len(tally.pods))
            if tally.pods[i]
        }


def test_counts_follow_pods_without_counting_again() -> None:
    snap = cluster()
    w1 = add(snap, "w1", "n1", "web")
    add(snap, "d1", "n3", "db")
    kept, q = KeptDomainCounts(), Question(snap)
    assert q.ask(kept) == {"a": (1, 2)}
    add(snap, "w2", "n2", "web")
    add(snap, "w3", "n3", "web")
    snap.remove_pod(w1)
    assert q.ask(kept) == {"a": (1, 2), "b": (1, 2)}
    assert q.fresh == 1


def test_a_node_change_counts_again() -> None:
    snap = cluster()
    add(snap, "w1", "n1", "web")
    kept, q = KeptDomainCounts(), Question(snap)
    assert q.ask(kept) == {"a": (1, 2)}
    snap.set_node(NodeWrapper("n1").label(ZONE, "c").obj())
    assert q.ask(kept) == {"c": (1, 2)}
    assert q.fresh == 2


def test_records_too_old_count_again() -> None:
    snap = cluster()
    kept, q = KeptDomainCounts(), Question(snap)
    assert q.ask(kept) == {}
    added = 0
    while snap.pods.changes_since(0) is not None:
        add(snap, f"w{added}", "n3", "web")
        added += 1
        assert added < 100_000
    assert q.ask(kept) == {"b": (added, 2 * added)}
    assert q.fresh == 2


def test_no_node_has_the_label() -> None:
    snap = cluster()
    kept, q = KeptDomainCounts(), Question(snap)
    assert kept.get(snap.table, snap.pods, "web", "rack", q.weigh, q.masks) is None


def test_pod_table_changes_name_the_group_and_node() -> None:
    snap = cluster()
    start = snap.pods.version
    snap.remove_pod(add(snap, "w1", "n2", "web"))
    changes = snap.pods.changes_since(start)
    assert changes is not None
    slot = snap.slot_of("n2")
    assert [(s, g.labels, d) for s, g, d in changes] == [
        (slot, {"app": "web"}, 1),
        (slot, {"app": "web"}, -1),
    ]
