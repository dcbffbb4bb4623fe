from __future__ import annotations

from builders import make_node, make_pod
from kubesched.framework import NodeContent, PodInfo, Snapshot


def test_node_content_holds_while_the_node_has_the_content_seen() -> None:
    s = Snapshot()
    s.set_node(make_node("n", cpu="2", memory="2Gi"))
    info = s.get("n")
    assert info is not None
    a = PodInfo.of(make_pod("a", cpu="1"))
    s.add_pod(a, "n")
    seen = NodeContent.of(info)
    assert seen.holds(info)
    # A trial that changes the node and undoes it: a new generation, the same content.
    with s.trial("n") as trial:
        trial.remove_pod(a)
        assert not seen.holds(info)
    assert info.generation != seen.generation
    assert seen.holds(info)
    s.add_pod(PodInfo.of(make_pod("b", cpu="1")), "n")
    assert not seen.holds(info)


def test_node_content_of_a_node_added_anew_does_not_hold_at_the_same_generation() -> None:
    s = Snapshot()
    s.set_node(make_node("n", cpu="2", memory="2Gi"))
    before = s.get("n")
    assert before is not None
    seen = NodeContent.of(before)
    s.remove_node("n")
    smaller = make_node("n", cpu="1", memory="1Gi")
    s.set_node(smaller)
    after = s.get("n")
    assert after is not None
    assert after is not before
    while after.generation < seen.generation:
        s.set_node(smaller)
    assert after.generation == seen.generation
    assert not seen.holds(after)
