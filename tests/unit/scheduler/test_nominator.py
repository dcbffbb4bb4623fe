"""The nominator: nominations per node in order, following the pods' updates and deletions
(kube-scheduler's nominator scenarios in scheduling_queue_test.go)."""

from __future__ import annotations

import msgspec

from builders import make_pod
from kubesched.api import Pod
from kubesched.framework import PodInfo
from kubesched.scheduler._nominator import Nominator


def nominated_to(pod: Pod, node: str) -> Pod:
    """The same pod with ``status.nominatedNodeName`` set."""
    status = msgspec.structs.replace(pod.status, nominated_node_name=node)
    return msgspec.structs.replace(pod, status=status)


def names(infos: list[PodInfo]) -> list[str]:
    return [i.pod.metadata.name for i in infos]


def test_nominations_are_kept_per_node_in_order() -> None:
    n = Nominator(lambda uid: False)
    a, b, c = make_pod("a"), make_pod("b"), make_pod("c")
    n.add_nominated_pod(PodInfo.of(a), "n1")
    n.add_nominated_pod(PodInfo.of(b), "n1")
    n.add_nominated_pod(PodInfo.of(c), "n2")
    assert names(n.nominated_pods_for_node("n1")) == ["a", "b"]
    assert sorted(n.nominated_nodes()) == ["n1", "n2"]
    # Nominated again: moves to the end, or to another node.
    n.add_nominated_pod(PodInfo.of(a), "n1")
    assert names(n.nominated_pods_for_node("n1")) == ["b", "a"]
    n.add_nominated_pod(PodInfo.of(b), "n2")
    assert names(n.nominated_pods_for_node("n2")) == ["c", "b"]
    assert n.nominated_node(b.metadata.uid) == "n2"
    n.delete_nominated_pod_if_exists(a.metadata.uid)
    n.delete_nominated_pod_if_exists(a.metadata.uid)
    assert n.nominated_pods_for_node("n1") == []
    assert n.nominated_nodes() == ["n2"]


def test_the_node_comes_from_the_status_unless_given() -> None:
    n = Nominator(lambda uid: False)
    pod = nominated_to(make_pod("p"), "n3")
    n.add_nominated_pod(PodInfo.of(pod), None)
    assert n.nominated_node(pod.metadata.uid) == "n3"
    n.add_nominated_pod(PodInfo.of(pod), "")  # "" clears
    assert n.nominated_node(pod.metadata.uid) is None
    n.add_nominated_pod(PodInfo.of(make_pod("q")), None)  # no status: nothing
    assert n.nominated_nodes() == []


def test_bound_or_deleted_pods_are_not_nominated() -> None:
    gone = make_pod("gone")
    n = Nominator(lambda uid: uid == gone.metadata.uid)
    n.add_nominated_pod(PodInfo.of(gone), "n1")
    n.add_nominated_pod(PodInfo.of(make_pod("bound", node_name="n1")), "n1")
    assert n.nominated_nodes() == []


def test_an_update_keeps_a_nomination_made_in_memory() -> None:
    n = Nominator(lambda uid: False)
    pod = make_pod("p")
    n.add_nominated_pod(PodInfo.of(pod), "n1")
    newer = msgspec.structs.replace(
        pod, metadata=msgspec.structs.replace(pod.metadata, labels={"a": "b"})
    )
    n.update_nominated_pod(pod, PodInfo.of(newer))
    assert [i.pod for i in n.nominated_pods_for_node("n1")] == [newer]
    # The status now says another node: it wins.
    moved = nominated_to(newer, "n2")
    n.update_nominated_pod(newer, PodInfo.of(moved))
    assert n.nominated_pods_for_node("n1") == []
    assert [i.pod for i in n.nominated_pods_for_node("n2")] == [moved]
