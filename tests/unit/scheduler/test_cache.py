"""The scheduler cache: assume, confirm, forget, expire, over the live snapshot."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import CPU, Pod
from kubesched.framework import PodInfo, Snapshot
from kubesched.scheduler._cache import Cache, CacheError


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def bound(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))


def requested_cpu(cache: Cache, node: str) -> int:
    """Millicores requested on ``node``, read from the table the plugins read."""
    snap = cache.snapshot
    slot = snap.slot_of(node)
    assert slot is not None
    col = snap.table.resource_column(CPU)
    assert col is not None
    table_value = int(snap.table.requested[slot, col])
    info = snap.get(node)
    assert info is not None
    assert info.requested.get(CPU, 0) == table_value
    return table_value


def fits(cache: Cache, pod: Pod, node: str) -> bool:
    """Whether ``pod``'s CPU fits on ``node`` as the next scheduling cycle would see it."""
    info = cache.snapshot.get(node)
    assert info is not None
    want = PodInfo.of(pod).requests.get(CPU, 0)
    return info.requested.get(CPU, 0) + want <= info.allocatable[CPU]


@pytest.fixture
def cache() -> Cache:
    c = Cache(Snapshot())
    c.add_node(make_node("n1", cpu="4"))
    c.add_node(make_node("n2", cpu="4"))
    return c


def test_assumed_pod_counts_at_once_so_no_node_is_over_committed(cache: Cache) -> None:
    first = make_pod("first", cpu="3")
    second = make_pod("second", cpu="3")
    assert fits(cache, second, "n1")
    cache.assume_pod(PodInfo.of(first), "n1")
    assert cache.is_assumed(first.metadata.uid)
    assert requested_cpu(cache, "n1") == 3000
    # While the first pod binds, the second no longer fits on n1.
    assert not fits(cache, second, "n1")
    assert fits(cache, second, "n2")
    assert cache.pod_count == 1
    assert cache.assumed_count == 1


def test_assume_returns_the_pod_on_its_node_and_leaves_the_original(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    assumed = cache.assume_pod(PodInfo.of(pod), "n1")
    assert assumed.pod.spec.node_name == "n1"
    assert pod.spec.node_name == ""
    assert cache.get_pod(pod.metadata.uid) is assumed.pod
    assert cache.node_of(pod.metadata.uid) == "n1"


def test_assuming_a_pod_twice_is_an_error(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    with pytest.raises(CacheError, match=r"^pod uid-\d+\(default/p\) is in the cache, so can't"):
        cache.assume_pod(PodInfo.of(pod), "n2")
    assert requested_cpu(cache, "n2") == 0


def test_informer_add_confirms_an_assumed_pod(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.finish_binding(pod.metadata.uid)
    cache.add_pod(bound(pod, "n1"))
    assert not cache.is_assumed(pod.metadata.uid)
    assert requested_cpu(cache, "n1") == 1000  # counted once
    assert cache.pod_count == 1
    with pytest.raises(CacheError, match="was already in added state"):
        cache.add_pod(bound(pod, "n1"))


def test_confirming_an_assumed_pod_alike_keeps_the_row_and_takes_the_new_object(
    cache: Cache,
) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    table = cache.snapshot.table
    version = table.version
    meta = msgspec.structs.replace(pod.metadata, resource_version="42")
    confirmed = bound(msgspec.structs.replace(pod, metadata=meta), "n1")
    cache.add_pod(confirmed)
    assert table.version == version  # no row changed: nothing to derive again
    assert cache.get_pod(pod.metadata.uid) is confirmed
    info = cache.snapshot.get("n1")
    assert info is not None
    assert info.pods[pod.metadata.uid].pod is confirmed
    assert not cache.is_assumed(pod.metadata.uid)
    assert requested_cpu(cache, "n1") == 1000


def test_confirming_an_assumed_pod_that_changed_counts_it_anew(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    # The same pod (same metadata) with a larger request, as after an in-place resize.
    resized = msgspec.structs.replace(bound(make_pod("p", cpu="2"), "n1"), metadata=pod.metadata)
    cache.add_pod(resized)
    assert requested_cpu(cache, "n1") == 2000
    assert not cache.is_assumed(pod.metadata.uid)


def test_informer_add_on_another_node_moves_the_assumed_pod(cache: Cache) -> None:
    pod = make_pod("p", cpu="2")
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.add_pod(bound(pod, "n2"))
    assert requested_cpu(cache, "n1") == 0
    assert requested_cpu(cache, "n2") == 2000
    assert cache.node_of(pod.metadata.uid) == "n2"
    assert not cache.is_assumed(pod.metadata.uid)


def test_forget_releases_what_the_pod_held(cache: Cache) -> None:
    pod = make_pod("p", cpu="3")
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.forget_pod(pod.metadata.uid)
    assert requested_cpu(cache, "n1") == 0
    assert cache.pod_count == 0
    assert not cache.is_assumed(pod.metadata.uid)
    cache.forget_pod(pod.metadata.uid)  # gone already: nothing to do
    # It can be assumed again, elsewhere.
    cache.assume_pod(PodInfo.of(pod), "n2")
    assert requested_cpu(cache, "n2") == 3000


def test_forgetting_a_pod_assumed_elsewhere_or_not_assumed_is_an_error(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    with pytest.raises(CacheError, match=r"was assumed on n2 but assigned to n1"):
        cache.forget_pod(pod.metadata.uid, "n2")
    assert cache.is_assumed(pod.metadata.uid)
    cache.add_pod(bound(pod, "n1"))
    with pytest.raises(CacheError, match="is not assumed, so it cannot be removed or forgotten"):
        cache.forget_pod(pod.metadata.uid, "n1")
    assert requested_cpu(cache, "n1") == 1000


def test_assumed_pods_never_expire_without_a_ttl(cache: Cache) -> None:
    clock = FakeClock()
    c = Cache(cache.snapshot, clock=clock)
    pod = make_pod("p", cpu="1")
    c.assume_pod(PodInfo.of(pod), "n1")
    c.finish_binding(pod.metadata.uid)
    clock.step(10**6)
    assert c.cleanup_assumed_pods() == []
    assert c.is_assumed(pod.metadata.uid)


def test_assumed_pod_expires_after_the_ttl_once_binding_finished() -> None:
    clock = FakeClock()
    c = Cache(assumed_pod_ttl=30, clock=clock)
    c.add_node(make_node("n1", cpu="4"))
    binding, bound_pod = make_pod("binding", cpu="1"), make_pod("bound", cpu="1")
    c.assume_pod(PodInfo.of(binding), "n1")
    c.assume_pod(PodInfo.of(bound_pod), "n1")
    clock.step(100)
    c.finish_binding(bound_pod.metadata.uid)
    clock.step(29)
    assert c.cleanup_assumed_pods() == []
    clock.step(2)
    assert c.cleanup_assumed_pods() == [bound_pod.metadata.uid]
    # The pod still binding never expires.
    assert c.is_assumed(binding.metadata.uid)
    assert requested_cpu(c, "n1") == 1000
    # The informer's late add brings the expired pod back.
    c.add_pod(bound(bound_pod, "n1"))
    assert requested_cpu(c, "n1") == 2000


async def test_run_expires_and_reports_sizes() -> None:
    clock = FakeClock()
    sizes: list[dict[str, int]] = []
    c = Cache(assumed_pod_ttl=1, clock=clock, size_metric=sizes.append)
    c.add_node(make_node("n1"))
    pod = make_pod("p")
    c.assume_pod(PodInfo.of(pod), "n1")
    c.finish_binding(pod.metadata.uid)
    clock.step(5)
    task = asyncio.ensure_future(c.run(period=0.01))
    await asyncio.sleep(0.05)
    c.stop()
    await asyncio.wait_for(task, 1)
    assert not c.is_assumed(pod.metadata.uid)
    assert sizes[-1] == {"assumed_pods": 0, "pods": 0, "nodes": 1}


def test_update_pod(cache: Cache) -> None:
    pod = bound(make_pod("p", cpu="1"), "n1")
    cache.add_pod(pod)
    bigger = bound(make_pod("p", cpu="2"), "n1")
    bigger = msgspec.structs.replace(bigger, metadata=pod.metadata)
    cache.update_pod(pod, bigger)
    assert requested_cpu(cache, "n1") == 2000
    assert cache.get_pod(pod.metadata.uid) is bigger
    stranger = bound(make_pod("stranger"), "n1")
    with pytest.raises(CacheError, match="is not added to scheduler cache, so cannot be updated"):
        cache.update_pod(stranger, stranger)
    with pytest.raises(CacheError, match="different node"):
        cache.update_pod(bigger, bound(bigger, "n2"))


def test_update_of_an_assumed_pod(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    on_n1 = bound(pod, "n1")
    with pytest.raises(CacheError, match="should not be updated"):
        cache.update_pod(on_n1, on_n1)
    # The update that binds it (unbound -> bound) confirms it, as an add.
    cache.update_pod(pod, on_n1)
    assert not cache.is_assumed(pod.metadata.uid)
    assert requested_cpu(cache, "n1") == 1000


def test_remove_pod(cache: Cache) -> None:
    pod = bound(make_pod("p", cpu="1"), "n1")
    cache.add_pod(pod)
    with pytest.raises(CacheError, match="corrupted"):
        cache.remove_pod(bound(pod, "n2"))
    cache.remove_pod(pod)
    assert requested_cpu(cache, "n1") == 0
    with pytest.raises(CacheError, match="is not found in scheduler cache"):
        cache.remove_pod(pod)
    with pytest.raises(CacheError, match="not assigned to a node"):
        cache.add_pod(make_pod("unbound"))


def test_removing_an_assumed_pod_deleted_before_binding(cache: Cache) -> None:
    pod = make_pod("p", cpu="1")
    cache.assume_pod(PodInfo.of(pod), "n1")
    cache.remove_pod(pod)  # the deletion of the pending pod carries no node
    assert requested_cpu(cache, "n1") == 0
    assert not cache.is_assumed(pod.metadata.uid)


def test_removed_node_keeps_its_pods_until_they_go(cache: Cache) -> None:
    pod = bound(make_pod("p", cpu="1"), "n1")
    cache.add_pod(pod)
    cache.remove_node(make_node("n1"))
    assert cache.node_count == 1
    assert cache.snapshot.get("n1") is None  # no longer a candidate
    dump = cache.dump()
    assert dump.nodes["n1"].has_node is False
    assert dump.nodes["n1"].pods == ["default/p"]
    assert dump.nodes["n1"].requested[CPU] == 1000
    with pytest.raises(CacheError, match="node n1 is not found"):
        cache.remove_node("n1")
    cache.remove_pod(pod)
    assert "n1" not in cache.dump().nodes
    # The node comes back empty.
    cache.add_node(make_node("n1", cpu="4"))
    assert requested_cpu(cache, "n1") == 0


def test_pod_bound_to_a_node_not_yet_seen(cache: Cache) -> None:
    pod = bound(make_pod("p", cpu="1"), "n9")
    cache.add_pod(pod)
    assert cache.snapshot.get("n9") is None
    cache.add_node(make_node("n9", cpu="2"))
    assert requested_cpu(cache, "n9") == 1000
    assert cache.node_count == 3


def test_dump(cache: Cache) -> None:
    cache.add_pod(bound(make_pod("running", cpu="1"), "n1"))
    assumed = make_pod("assumed", cpu="1")
    cache.assume_pod(PodInfo.of(assumed), "n1")
    dump = cache.dump()
    assert list(dump.nodes) == ["n1", "n2"]
    assert dump.nodes["n1"].pods == ["default/assumed (assumed)", "default/running"]
    assert dump.nodes["n1"].allocatable[CPU] == 4000
    assert dump.nodes["n1"].requested[CPU] == 2000
    assert dump.nodes["n2"].pods == []
    assert dump.assumed_pods == {assumed.metadata.uid: "n1"}
    assert cache.sizes() == {"assumed_pods": 1, "pods": 2, "nodes": 2}
