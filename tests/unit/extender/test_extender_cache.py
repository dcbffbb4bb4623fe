"""The extender's snapshots: informer changes queued and applied, NodeList bodies decoded once."""

from __future__ import annotations

import msgspec
import pytest
from extender_fakes import make_pod, nodes

from kubesched.api import Node
from kubesched.extender import BodyNodes, ClusterCache
from kubesched.extender._cache import (
    BadNodeError,
    MapWorkload,
    Namespace,
    NamespaceHandler,
    NodeHandler,
    PodHandler,
    SelectorWorkload,
    WorkloadHandler,
)
from kubesched.framework import Snapshot


def raw(node: Node) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(node))


def with_rv(node: Node, rv: str, **labels: str) -> Node:
    meta = msgspec.structs.replace(
        node.metadata, resource_version=rv, labels={**node.metadata.labels, **labels}
    )
    return msgspec.structs.replace(node, metadata=meta)


def test_changes_wait_in_the_queue_until_flushed_and_one_flush_is_scheduled() -> None:
    cache = ClusterCache()
    wakes = []
    cache.on_pending = lambda: wakes.append(1)
    n1, n2 = nodes("n-1", "n-2")
    handler = NodeHandler(cache)
    handler.on_add(n1)
    handler.on_add(n2)
    assert len(cache.cluster) == 0
    assert wakes == [1]  # one flush covers both
    assert cache.flush() == 2
    assert len(cache.cluster) == 2
    handler.on_delete(n2)
    assert wakes == [1, 1]
    cache.flush()
    assert cache.cluster.get("n-2") is None


def test_assigned_pods_count_in_both_snapshots_until_they_finish() -> None:
    cache = ClusterCache()
    cache.set_node(nodes("n-1")[0])
    pods = PodHandler(cache)
    pod = make_pod("p", cpu="1", node_name="n-1")
    pods.on_add(pod)
    pods.on_add(make_pod("pending", cpu="1"))  # not assigned: counts nowhere
    cache.flush()
    assert cache.cluster.get("n-1").requested["cpu"] == 1000  # type: ignore[union-attr]
    assert cache.body.node_of_pod(pod.metadata.uid) == "n-1"
    done = msgspec.structs.replace(
        pod, status=msgspec.structs.replace(pod.status, phase="Succeeded")
    )
    pods.on_update(pod, done)
    cache.flush()
    assert cache.cluster.get("n-1").requested.get("cpu", 0) == 0  # type: ignore[union-attr]
    assert cache.body.node_of_pod(pod.metadata.uid) is None


def test_body_nodes_decode_a_node_again_only_when_it_changed() -> None:
    body = BodyNodes(Snapshot())
    a, b = nodes("a", "b")
    names, slots = body.update([raw(a), raw(b)])
    assert names == ["a", "b"]
    assert [body.snapshot.table.names[s] for s in slots.tolist()] == ["a", "b"]
    assert body.decoded == 2
    body.update([raw(a), raw(b)])
    assert body.decoded == 2
    body.update([raw(with_rv(a, "2", zone="z1")), raw(b)])
    assert body.decoded == 3
    assert body.snapshot.get("a").node.metadata.labels["zone"] == "z1"  # type: ignore[union-attr]


def test_body_nodes_without_a_resource_version_are_always_decoded() -> None:
    body = BodyNodes(Snapshot())
    a = with_rv(nodes("a")[0], "")
    body.update([raw(a)])
    body.update([raw(a)])
    assert body.decoded == 2


def test_body_nodes_forget_nodes_no_longer_sent() -> None:
    now = [0.0]
    body = BodyNodes(Snapshot(), forget_after=60.0, clock=lambda: now[0])
    a, b = nodes("a", "b")
    body.update([raw(a), raw(b)])
    now[0] = 50.0
    body.update([raw(a)])
    now[0] = 120.0  # b last seen at 0, a at 50: b is forgotten at the sweep
    body.update([raw(a)])
    assert body.snapshot.get("b") is None
    assert body.snapshot.get("a") is not None
    assert len(body.snapshot) == 1


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (b"[]", "Nodes.items[0]: Expected `object`, got `array`"),
        (b'{"metadata": {"name": ""}}', "Nodes.items[0]: metadata.name is required"),
        (
            b'{"metadata": {"name": "a"}, "status": {"allocatable": []}}',
            "Nodes.items[0] (a): Expected `object`, got `array` - at `$.status.allocatable`",
        ),
    ],
)
def test_bad_items_name_their_position(item: bytes, message: str) -> None:
    with pytest.raises(BadNodeError) as err:
        BodyNodes(Snapshot()).update([msgspec.Raw(item)])
    assert message in str(err.value)


def test_namespaces_and_workload_selectors_reach_both_snapshots() -> None:
    cache = ClusterCache()
    ns = msgspec.convert({"metadata": {"name": "prod", "labels": {"env": "prod"}}}, Namespace)
    NamespaceHandler(cache).on_add(ns)
    service = msgspec.convert(
        {"metadata": {"name": "web", "namespace": "prod"}, "spec": {"selector": {"app": "web"}}},
        MapWorkload,
    )
    headless = msgspec.convert(
        {"metadata": {"name": "ext", "namespace": "prod"}, "spec": {}}, MapWorkload
    )
    replica_set = msgspec.convert(
        {
            "metadata": {"name": "web-1", "namespace": "prod"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}},
        },
        SelectorWorkload,
    )
    WorkloadHandler(cache, "Service").on_add(service)
    WorkloadHandler(cache, "Service").on_add(headless)
    WorkloadHandler(cache, "ReplicaSet").on_add(replica_set)
    cache.flush()
    for snapshot in (cache.cluster, cache.body):
        assert snapshot.namespace_labels("prod") == {"env": "prod"}
        services = snapshot.workload_selectors("Service", "prod")
        assert set(services) == {"web"}  # a Service without a selector selects no pod
        assert services["web"].match_labels == {"app": "web"}
        assert snapshot.workload_selectors("ReplicaSet", "prod")["web-1"].match_labels == {
            "app": "web"
        }
    NamespaceHandler(cache).on_delete(ns)
    WorkloadHandler(cache, "Service").on_delete(service)
    cache.flush()
    assert cache.cluster.namespace_labels("prod") is None
    assert cache.body.workload_selectors("Service", "prod") == {}


def test_a_change_that_fails_does_not_keep_the_others_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cache = ClusterCache()
    cache.set_node(nodes("n-1")[0])
    cache.set_pod(make_pod("lost", node_name="n-1", spec={"containers": [{"name": "c",
        "resources": {"requests": {"cpu": "lots"}}}]}))  # fmt: skip
    cache.set_node(nodes("n-2")[0])
    assert cache.flush() == 3
    assert len(cache.cluster) == 2
    assert "applying an informer change failed" in caplog.text
