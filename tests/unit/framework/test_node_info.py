from __future__ import annotations

from builders import make_node, make_pod
from kubesched.api import Node
from kubesched.framework import NodeContent, NodeInfo, PodInfo, Snapshot


def readded_at_generation(s: Snapshot, node: Node, generation: int) -> NodeInfo:
    """``node`` removed and added anew (a new NodeInfo) as ``node``, then updated until its
    generation is ``generation``: the same generation, another identity."""
    name = node.metadata.name
    s.remove_node(name)
    s.set_node(node)
    info = s.get(name)
    assert info is not None
    while info.generation < generation:
        s.set_node(node)
    assert info.generation == generation
    return info


def test_node_content_holds_while_the_node_has_the_content_seen() -> None:
    s = Snapshot()
    s.set_node(make_node("n", cpu="2", memory="2Gi"))
    info = s.get("n")
    assert info is not None
    a = PodInfo.of(make_pod("a", cpu="1"))
    s.add_pod(a, "n")
    seen = NodeContent.of(info)
    assert seen.holds(info)
    # A trial that changes the node and undoes it: a new generation meanwhile, then the one
    # before with the content before.
    with s.trial("n") as trial:
        trial.remove_pod(a)
        assert not seen.holds(info)
        during = NodeContent.of(info)
    assert info.generation == seen.generation
    assert seen.holds(info)
    assert not during.holds(info)
    # The next change is a generation the node never had, the trial's neither.
    s.add_pod(PodInfo.of(make_pod("b", cpu="1")), "n")
    assert not seen.holds(info)
    assert not during.holds(info)


def test_node_content_of_a_node_added_anew_does_not_hold_at_the_same_generation() -> None:
    s = Snapshot()
    s.set_node(make_node("n", cpu="2", memory="2Gi"))
    before = s.get("n")
    assert before is not None
    seen = NodeContent.of(before)
    after = readded_at_generation(s, make_node("n", cpu="1", memory="1Gi"), seen.generation)
    assert after is not before
    assert not seen.holds(after)


def test_pod_info_is_the_counted_version_as_the_cluster_has_it() -> None:
    s = Snapshot()
    s.set_node(make_node("n", cpu="2", memory="2Gi"))
    a = PodInfo.of(make_pod("a", cpu="1", uid="a"))
    assert s.pod_info(a.uid) is None
    s.add_pod(a, "n")
    assert s.pod_info(a.uid) is a
    newer = PodInfo.of(make_pod("a", cpu="1", labels={"v": "2"}, uid="a"))
    s.replace_pod(newer)
    assert s.pod_info(a.uid) is newer
    # A trial's changes are not seen, as the node counting each pod is not.
    with s.trial("n") as trial:
        trial.remove_pod(newer)
        assert s.pod_info(a.uid) is newer
        assert s.node_of_pod(a.uid) == "n"
    s.add_pod(newer, "n")  # added again: still the one counted
    assert s.pod_info(a.uid) is newer
    s.remove_pod(a.uid)
    assert s.pod_info(a.uid) is None
