"""The four verbs on kube-scheduler's own request bodies (recorded) and on bodies in that shape:
both node modes, every answer field, and every error case."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import numpy as np
import pytest
from extender_fakes import (
    config,
    fixture,
    fixture_json,
    make_extender,
    make_pod,
    names_body,
    nodes,
    nodes_body,
    rec_nodes,
    rec_pods,
    registry,
)

from kubesched.extender import (
    ERR_NOT_SYNCED,
    ERR_UNKNOWN_NODE,
    Extender,
    ExtenderArgs,
    Reply,
    scale_scores,
)
from kubesched.plugins.annotation_gate import ERR_REASON_ANNOTATED
from kubesched.plugins.default_binder import ERR_NO_CLIENT
from kubesched.plugins.dynamic_resources import DynamicResources


def answer(reply: Reply, status: int = 200) -> Any:
    assert reply.status == status, reply.body
    assert reply.content_type == "application/json"
    return json.loads(reply.body)


def text(reply: Reply, status: int) -> str:
    assert reply.status == status, reply.body
    assert reply.content_type.startswith("text/plain")
    return reply.body.decode()


FIT = config("NodeResourcesFit")


# --- the recorded bodies decode and are answered --------------------------------------------


def test_recorded_filter_with_node_names_passes_nodes_with_room() -> None:
    ext = make_extender(FIT, nodes=rec_nodes())
    out = answer(ext.filter("test", fixture("filter-node-names")))
    assert out == {
        "Nodes": None,
        "NodeNames": ["rec-a", "rec-b"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }


def test_recorded_filter_with_node_names_fails_full_nodes_with_the_plugins_reason() -> None:
    ext = make_extender(FIT, nodes=rec_nodes(), pods=rec_pods())
    out = answer(ext.filter("test", fixture("filter-node-names")))
    assert out["NodeNames"] == []
    assert out["FailedNodes"] == {"rec-a": "Too many pods", "rec-b": "Too many pods"}
    assert out["FailedAndUnresolvableNodes"] == {}
    assert out["Error"] == ""


def test_recorded_filter_with_a_node_list_echoes_the_passing_items_byte_for_byte() -> None:
    ext = make_extender(FIT, informers=False)
    body = fixture("filter-nodes")
    reply = ext.filter("test", body)
    out = answer(reply)
    assert out["NodeNames"] is None
    assert out["Nodes"]["items"] == fixture_json("filter-nodes")["Nodes"]["items"]
    nodes_list = msgspec.json.decode(body, type=ExtenderArgs).nodes
    assert nodes_list is not None
    assert nodes_list.items
    for raw in nodes_list.items:
        assert bytes(raw) in reply.body  # written back as they came, not re-encoded


def test_recorded_prioritize_bodies_answer_every_node_in_order() -> None:
    cfg = config("TaintToleration", "NodeAffinity")
    ext = make_extender(cfg, nodes=rec_nodes())
    for name in ("prioritize-node-names", "prioritize-nodes"):
        out = answer(ext.prioritize("test", fixture(name)))
        assert out == [{"Host": "rec-a", "Score": 10}, {"Host": "rec-b", "Score": 10}]


def test_recorded_preempt_with_meta_victims_keeps_nodes_where_the_pod_then_fits() -> None:
    ext = make_extender(FIT, nodes=rec_nodes(), pods=rec_pods())
    out = answer(ext.preempt("test", fixture("preempt-meta-victims")))
    assert out == {
        "NodeNameToMetaVictims": fixture_json("preempt-meta-victims")["NodeNameToMetaVictims"]
    }
    # The victims are back on their nodes afterwards.
    assert ext.cache.cluster.get("rec-a").requested["pods"] == 1  # type: ignore[union-attr]
    assert ext.cache.cluster.get("rec-b").requested["pods"] == 1  # type: ignore[union-attr]


def test_recorded_preempt_with_full_victims_uses_the_nodes_seen_in_bodies() -> None:
    ext = make_extender(FIT, informers=False)
    answer(ext.filter("test", fixture("filter-nodes")))  # kube-scheduler filters first
    out = answer(ext.preempt("test", fixture("preempt-victims")))
    expected = {
        node: {"Pods": [{"UID": v["Pods"][0]["metadata"]["uid"]}], "NumPDBViolations": 0}
        for node, v in fixture_json("preempt-victims")["NodeNameToVictims"].items()
    }
    assert out == {"NodeNameToMetaVictims": expected}


async def test_recorded_bind_creates_the_binding_through_the_client() -> None:
    calls = []

    class Client:
        async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
            calls.append((namespace, name, uid, node))

    ext = make_extender(FIT, client=Client())
    out = answer(await ext.bind("test", fixture("bind")))
    assert out == {"Error": ""}
    args = fixture_json("bind")
    assert calls == [("default", "rec-low-1", args["PodUID"], "rec-a")]


# --- filter -------------------------------------------------------------------------------------


def test_filter_sorts_failures_into_resolvable_and_unresolvable_with_reasons() -> None:
    ext = make_extender(config("RejectOdd"), nodes=nodes("n-1", "n-2", "n-3", "n-x"))
    pod = make_pod("p")
    out = answer(ext.filter("test", names_body(pod, ["n-1", "n-2", "n-3", "n-x"])))
    assert out["NodeNames"] == ["n-2"]
    assert out["FailedNodes"] == {
        "n-1": "node(s) had an odd name",
        "n-3": "node(s) had an odd name",
    }
    assert out["FailedAndUnresolvableNodes"] == {"n-x": "node(s) were crossed out"}


def test_filter_with_a_node_list_answers_a_node_list() -> None:
    ext = make_extender(config("RejectOdd"), informers=False)
    pod = make_pod("p")
    out = answer(ext.filter("test", nodes_body(pod, nodes("n-1", "n-2", "n-4"))))
    assert out["NodeNames"] is None
    assert [i["metadata"]["name"] for i in out["Nodes"]["items"]] == ["n-2", "n-4"]
    assert out["FailedNodes"] == {"n-1": "node(s) had an odd name"}


def test_filter_fails_nodes_the_extender_does_not_know() -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-1", "ghost"])))
    assert out["NodeNames"] == ["n-1"]
    assert out["FailedNodes"] == {"ghost": ERR_UNKNOWN_NODE}


def test_a_node_list_seen_before_is_resolved_again_once_nodes_change() -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    body = names_body(make_pod("p"), ["n-1", "n-2"])
    assert answer(ext.filter("test", body))["FailedNodes"] == {"n-2": ERR_UNKNOWN_NODE}
    assert answer(ext.filter("test", body))["FailedNodes"] == {"n-2": ERR_UNKNOWN_NODE}
    ext.cache.set_node(nodes("n-2")[0])
    assert answer(ext.filter("test", body))["NodeNames"] == ["n-1", "n-2"]
    ext.cache.remove_node(nodes("n-1")[0])
    assert answer(ext.filter("test", body))["FailedNodes"] == {"n-1": ERR_UNKNOWN_NODE}


def test_go_encoded_and_other_node_lists_resolve_alike() -> None:
    # Go writes compact JSON with metadata first (a fast path reads name, uid and
    # resourceVersion from that prefix); anything else is decoded.
    pod = make_pod("p")
    items = [msgspec.to_builtins(n) for n in nodes("n-1", "n-2", "n-3")]
    go = json.dumps(
        {"Pod": msgspec.to_builtins(pod), "Nodes": {"metadata": {}, "items": items}},
        separators=(",", ":"),
    ).encode()
    spaced = nodes_body(pod, nodes("n-1", "n-2", "n-3"))
    assert b'{"metadata":{"name":"n-1","uid":"node-n-1","resourceVersion":"1"' in go
    outs = []
    for body in (go, spaced):
        ext = make_extender(config("RejectOdd"), informers=False)
        outs.append(answer(ext.filter("test", body)))
        assert ext.cache.body_nodes.decoded == 3
        answer(ext.filter("test", body))
        assert ext.cache.body_nodes.decoded == 3
    assert outs[0] == outs[1]


def test_filter_without_informers_knows_no_node_by_name() -> None:
    ext = make_extender(FIT, informers=False)
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-1"])))
    assert out["NodeNames"] == []
    assert out["FailedNodes"] == {"n-1": ERR_UNKNOWN_NODE}


def test_filter_pre_filter_rejection_fails_every_node_unresolvably() -> None:
    ext = make_extender(config("AnnotationGate"), nodes=nodes("n-1", "n-2"))
    pod = make_pod("p", annotations={"mycompany.com/environment": "legacy"})
    out = answer(ext.filter("test", names_body(pod, ["n-1", "n-2", "ghost"])))
    reason = ERR_REASON_ANNOTATED.format(key="mycompany.com/environment")
    assert out["NodeNames"] == []
    assert out["FailedAndUnresolvableNodes"] == {"n-1": reason, "n-2": reason}
    assert out["FailedNodes"] == {"ghost": ERR_UNKNOWN_NODE}
    assert out["Error"] == ""


def test_filter_pre_filter_narrowing_fails_the_other_nodes_unresolvably() -> None:
    ext = make_extender(config("NodeAffinity"), nodes=nodes("n-1", "n-2", "n-3"))
    pod = make_pod(
        "p",
        spec={
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {
                                        "key": "metadata.name",
                                        "operator": "In",
                                        "values": ["n-2"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            }
        },
    )
    out = answer(ext.filter("test", names_body(pod, ["n-1", "n-2", "n-3"])))
    assert out["NodeNames"] == ["n-2"]
    reason = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    assert out["FailedAndUnresolvableNodes"] == {"n-1": reason, "n-3": reason}


def test_filter_with_added_affinity_steers_pods_the_stock_scheduler_would_not() -> None:
    added = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["blue"]}]}
                ]
            }
        }
    }
    cfg = config("NodeAffinity", pluginConfig=[{"name": "NodeAffinity", "args": added}])
    blue = nodes("blue-1", labels={"pool": "blue"})
    green = nodes("green-1", labels={"pool": "green"})
    ext = make_extender(cfg, nodes=blue + green)
    out = answer(ext.filter("test", names_body(make_pod("p"), ["blue-1", "green-1"])))
    assert out["NodeNames"] == ["blue-1"]
    assert out["FailedAndUnresolvableNodes"] == {
        "green-1": "node(s) didn't match scheduler-enforced node affinity"
    }


def test_namespace_labels_from_the_informers_reach_inter_pod_affinity() -> None:
    from kubesched.extender._cache import Namespace

    db = make_pod("db", namespace="prod", node_name="n-1", labels={"app": "db"})
    pod = make_pod(
        "p",
        spec={
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "namespaceSelector": {"matchLabels": {"env": "prod"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
        },
    )
    hosts = [nodes(n, labels={"kubernetes.io/hostname": n})[0] for n in ("n-1", "n-2")]
    ext = make_extender(config("InterPodAffinity"), nodes=hosts, pods=[db])
    assert ext.uses("InterPodAffinity")
    body = names_body(pod, ["n-1", "n-2"])
    # Without the namespace's labels the selector selects no namespace: nothing to avoid.
    assert answer(ext.filter("test", body))["NodeNames"] == ["n-1", "n-2"]
    prod = msgspec.convert({"metadata": {"name": "prod", "labels": {"env": "prod"}}}, Namespace)
    ext.cache.set_namespace(prod)
    out = answer(ext.filter("test", body))
    assert out["NodeNames"] == ["n-2"]
    assert "n-1" in out["FailedNodes"]


def test_filter_plugin_error_is_a_200_with_error_set() -> None:
    ext = make_extender(config("Broken"), nodes=nodes("n-1"))
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-1"])))
    assert out["Error"] == 'running "Broken" filter plugin: the oracle is unreachable'
    assert out["NodeNames"] is None


def test_filter_plugin_that_raises_is_a_200_with_error_set() -> None:
    ext = make_extender(config("Raising"), nodes=nodes("n-1"))
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-1"])))
    assert "ZeroDivisionError: division by zero" in out["Error"]


def test_filter_with_no_nodes_answers_empty_lists() -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    out = answer(ext.filter("test", names_body(make_pod("p"), [])))
    assert out["NodeNames"] == []
    ext2 = make_extender(FIT, informers=False)
    body = json.dumps(
        {"Pod": msgspec.to_builtins(make_pod("p")), "Nodes": {"metadata": {}, "items": None}}
    ).encode()
    assert answer(ext2.filter("test", body))["Nodes"] == {"items": [], "metadata": {}}


def test_a_profile_without_filter_plugins_passes_every_known_node() -> None:
    ext = make_extender(config("Digits"), nodes=nodes("n-1", "n-2"))
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-1", "n-2"])))
    assert out["NodeNames"] == ["n-1", "n-2"]


# --- malformed requests ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{bad", "cannot decode ExtenderArgs: JSON is malformed"),
        (b"", "cannot decode ExtenderArgs: Input data was truncated"),
        (b"[]", "cannot decode ExtenderArgs: Expected `object`, got `array`"),
        (
            b'{"Pod": {"metadata": {"name": "p"}}, "NodeNames": "n-1"}',
            "Expected `array | null`, got `str` - at `$.NodeNames`",
        ),
        (
            b'{"Pod": {"metadata": {"name": 5}}, "NodeNames": []}',
            "Expected `str`, got `int` - at `$.Pod.metadata.name`",
        ),
        (b'{"NodeNames": ["n-1"]}', "ExtenderArgs.Pod is required"),
        (b'{"Pod": {}}', "one of Nodes and NodeNames is required"),
        (
            b'{"Pod": {}, "NodeNames": [], "Nodes": {"items": []}}',
            "set one of Nodes and NodeNames, not both",
        ),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}',
            "Nodes.items[0]: metadata.name is required",
        ),
        (
            b'{"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"}, "spec": []}]}}',
            "Nodes.items[0] (a): Expected `object`, got `array` - at `$.spec`",
        ),
    ],
)
@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_malformed_bodies_are_400_with_the_reason(verb: str, body: bytes, reason: str) -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    message = text(getattr(ext, verb)("test", body), 400)
    assert reason in message


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{", "cannot decode ExtenderPreemptionArgs: Input data was truncated"),
        (b'{"NodeNameToMetaVictims": {}}', "ExtenderPreemptionArgs.Pod is required"),
        (
            b'{"Pod": {}, "NodeNameToMetaVictims": {"n": {"Pods": [{"UID": 1}]}}}',
            "Expected `str`, got `int` - at `$.NodeNameToMetaVictims[...].Pods[0].UID`",
        ),
    ],
)
def test_malformed_preempt_bodies_are_400(body: bytes, reason: str) -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    assert reason in text(ext.preempt("test", body), 400)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"nope", "cannot decode ExtenderBindingArgs: JSON is malformed"),
        (b'{"PodName": "p"}', "PodName and Node are required"),
        (b'{"PodName": "p", "Node": 3}', "Expected `str`, got `int` - at `$.Node`"),
    ],
)
async def test_malformed_bind_bodies_are_400(body: bytes, reason: str) -> None:
    ext = make_extender(FIT)
    assert reason in text(await ext.bind("test", body), 400)


def test_go_field_names_are_exact() -> None:
    # Go's encoder writes the exported names; a lower-case key is an unknown field, ignored.
    ext = make_extender(FIT, nodes=nodes("n-1"))
    body = json.dumps({"pod": {}, "nodeNames": ["n-1"]}).encode()
    assert "ExtenderArgs.Pod is required" in text(ext.filter("test", body), 400)


# --- informers not synced -------------------------------------------------------------------


def test_verbs_reading_the_informers_answer_503_until_they_synced() -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    ext.synced = lambda: False
    body = names_body(make_pod("p"), ["n-1"])
    for verb in (ext.filter, ext.prioritize):
        assert ERR_NOT_SYNCED in text(verb("test", body), 503)
    assert ERR_NOT_SYNCED in text(ext.preempt("test", fixture("preempt-meta-victims")), 503)
    ext.synced = lambda: True
    assert answer(ext.filter("test", body))["NodeNames"] == ["n-1"]


# --- prioritize -------------------------------------------------------------------------------


def test_scale_scores_maps_0_to_max_onto_0_to_10_rounding_half_up() -> None:
    totals = np.array([0, 4, 5, 14, 15, 50, 95, 100], dtype=np.int64)
    assert scale_scores(totals, 100).tolist() == [0, 0, 1, 1, 2, 5, 10, 10]
    assert scale_scores(np.array([0, 150, 300]), 300).tolist() == [0, 5, 10]
    assert scale_scores(np.array([7, 7]), 0).tolist() == [0, 0]
    assert scale_scores(np.array([], dtype=np.int64), 100).tolist() == []


def test_prioritize_scales_the_weighted_sum_into_0_to_10() -> None:
    names = [f"n-{d}" for d in range(10)]
    ext = make_extender(config(("Digits", 2), ("Full", 1)), nodes=nodes(*names))
    out = answer(ext.prioritize("test", names_body(make_pod("p"), names)))
    # total = 2 * 10d + 100 out of 2 * 100 + 1 * 100; 10 * total / 300 rounded half up
    assert [o["Host"] for o in out] == names
    assert [o["Score"] for o in out] == [3, 4, 5, 5, 6, 7, 7, 8, 9, 9]


def test_prioritize_counts_only_the_score_plugins_that_ran() -> None:
    names = ["n-0", "n-5", "n-9"]
    ext = make_extender(config("Digits", ("SkipScore", 5)), nodes=nodes(*names))
    out = answer(ext.prioritize("test", names_body(make_pod("p"), names)))
    assert [o["Score"] for o in out] == [0, 5, 9]


def test_prioritize_gives_unknown_nodes_zero_and_keeps_the_request_order() -> None:
    ext = make_extender(config("Full"), nodes=nodes("n-1", "n-2"))
    out = answer(ext.prioritize("test", names_body(make_pod("p"), ["n-2", "ghost", "n-1"])))
    assert out == [
        {"Host": "n-2", "Score": 10},
        {"Host": "ghost", "Score": 0},
        {"Host": "n-1", "Score": 10},
    ]


def test_prioritize_without_score_plugins_scores_zero() -> None:
    ext = make_extender(config("RejectOdd"), nodes=nodes("n-1"))
    out = answer(ext.prioritize("test", names_body(make_pod("p"), ["n-1"])))
    assert out == [{"Host": "n-1", "Score": 0}]


def test_prioritize_with_a_node_list() -> None:
    ext = make_extender(config("Digits"), informers=False)
    out = answer(ext.prioritize("test", nodes_body(make_pod("p"), nodes("a-3", "a-7"))))
    assert out == [{"Host": "a-3", "Score": 3}, {"Host": "a-7", "Score": 7}]


def test_prioritize_plugin_error_is_a_500_with_the_message() -> None:
    # HostPriorityList has no error field; kube-scheduler ignores this extender's scores.
    ext = make_extender(config("BrokenScore"), nodes=nodes("n-1"))
    message = text(ext.prioritize("test", names_body(make_pod("p"), ["n-1"])), 500)
    assert message.strip() == 'running Score plugins: plugin "BrokenScore" failed with: no metrics'


def test_in_tree_scores_come_through_scaled() -> None:
    cfg = config("TaintToleration")
    tainted = nodes("t-1", taints=[{"key": "k", "value": "v", "effect": "PreferNoSchedule"}])
    ext = make_extender(cfg, nodes=tainted + nodes("c-1"))
    out = answer(ext.prioritize("test", names_body(make_pod("p"), ["t-1", "c-1"])))
    assert out == [{"Host": "t-1", "Score": 0}, {"Host": "c-1", "Score": 10}]


# --- preempt ----------------------------------------------------------------------------------


def _meta_body(pod: Any, victims: dict[str, list[str]]) -> bytes:
    return json.dumps(
        {
            "Pod": msgspec.to_builtins(pod),
            "NodeNameToVictims": None,
            "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": u} for u in uids], "NumPDBViolations": 1}
                for node, uids in victims.items()
            },
        }
    ).encode()


def _bound(name: str, node: str, **kwargs: Any) -> Any:
    return make_pod(name, node_name=node, **kwargs)


def test_preempt_drops_nodes_failing_the_filters_unknown_nodes_and_empty_victims() -> None:
    a, b, c = _bound("a", "n-1"), _bound("b", "n-2"), _bound("c", "n-4")
    ext = make_extender(
        config("RejectOdd", "NodeResourcesFit"),
        nodes=nodes("n-1", "n-2", "n-4", pods="1"),
        pods=[a, b, c],
    )
    body = _meta_body(
        make_pod("high"),
        {
            "n-1": [a.metadata.uid],  # odd: fails RejectOdd whatever is evicted
            "n-2": [b.metadata.uid],  # fits once b is gone
            "n-4": [],  # no victims: kube-scheduler would reject the answer
            "ghost": ["x"],  # unknown node
        },
    )
    out = answer(ext.preempt("test", body))
    assert out == {
        "NodeNameToMetaVictims": {"n-2": {"Pods": [{"UID": b.metadata.uid}], "NumPDBViolations": 1}}
    }


def test_preempt_drops_nodes_where_evicting_the_victims_is_not_enough() -> None:
    a1, a2 = _bound("a1", "n-2", cpu="2"), _bound("a2", "n-2", cpu="2")
    ext = make_extender(FIT, nodes=nodes("n-2", cpu="4"), pods=[a1, a2])
    high = make_pod("high", cpu="3")
    assert answer(ext.preempt("test", _meta_body(high, {"n-2": [a1.metadata.uid]}))) == {
        "NodeNameToMetaVictims": {}
    }
    both = _meta_body(high, {"n-2": [a1.metadata.uid, a2.metadata.uid]})
    assert set(answer(ext.preempt("test", both))["NodeNameToMetaVictims"]) == {"n-2"}
    assert ext.cache.cluster.get("n-2").requested["cpu"] == 4000  # type: ignore[union-attr]


def test_preempt_when_pre_filter_rejects_the_pod_keeps_no_node() -> None:
    a = _bound("a", "n-2")
    ext = make_extender(config("AnnotationGate"), nodes=nodes("n-2"), pods=[a])
    high = make_pod("high", annotations={"mycompany.com/environment": "x"})
    assert answer(ext.preempt("test", _meta_body(high, {"n-2": [a.metadata.uid]}))) == {
        "NodeNameToMetaVictims": {}
    }


def test_preempt_plugin_error_is_a_500() -> None:
    a = _bound("a", "n-2")
    ext = make_extender(config("Broken"), nodes=nodes("n-2"), pods=[a])
    body = _meta_body(make_pod("high"), {"n-2": [a.metadata.uid]})
    assert "the oracle is unreachable" in text(ext.preempt("test", body), 500)


# --- bind -------------------------------------------------------------------------------------


async def test_bind_failure_is_answered_in_error() -> None:
    class Client:
        async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
            raise RuntimeError("409 Conflict: pod p is already assigned to node n-2")

    ext = make_extender(FIT, client=Client())
    out = answer(await ext.bind("test", fixture("bind")))
    assert out == {
        "Error": 'running Bind plugin "DefaultBinder": '
        "409 Conflict: pod p is already assigned to node n-2"
    }


async def test_bind_without_a_cluster_is_answered_in_error() -> None:
    ext = make_extender(FIT, informers=False)
    assert answer(await ext.bind("test", fixture("bind"))) == {
        "Error": f'running Bind plugin "DefaultBinder": {ERR_NO_CLIENT}'
    }


# --- dispatch ---------------------------------------------------------------------------------


async def test_handle_runs_verbs_on_the_worker_and_maps_unknown_profiles_to_404() -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))
    try:
        reply = await ext.handle("filter", "test", names_body(make_pod("p"), ["n-1"]))
        assert answer(reply)["NodeNames"] == ["n-1"]
        assert (await ext.handle("filter", "nope", b"{}")).status == 404
    finally:
        ext.close()


async def test_handle_answers_500_when_the_extender_itself_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ext = make_extender(FIT, nodes=nodes("n-1"))

    def explode(profile: str, body: bytes) -> Reply:
        raise KeyError("lost")

    monkeypatch.setattr(ext, "prioritize", explode)
    try:
        reply = await ext.handle("prioritize", "test", b"{}")
        assert reply.status == 500
        assert b"prioritize failed: KeyError" in reply.body
    finally:
        ext.close()


async def test_informer_changes_are_applied_on_the_worker_before_requests() -> None:
    ext = Extender(FIT, registry(), informers=True)
    try:
        for n in nodes("n-1", "n-2"):
            ext.cache.set_node(n)  # queued; a flush is scheduled on the worker
        reply = await ext.handle("filter", "test", names_body(make_pod("p"), ["n-1", "n-2"]))
        assert answer(reply)["NodeNames"] == ["n-1", "n-2"]
        ext.cache.remove_node(nodes("n-2")[0])
        reply = await ext.handle("filter", "test", names_body(make_pod("p"), ["n-1", "n-2"]))
        assert answer(reply)["FailedNodes"] == {"n-2": ERR_UNKNOWN_NODE}
    finally:
        ext.close()


def test_a_node_named_twice_is_answered_twice() -> None:
    ext = make_extender(config("RejectOdd"), nodes=nodes("n-1", "n-2"))
    out = answer(ext.filter("test", names_body(make_pod("p"), ["n-2", "n-1", "n-2"])))
    assert out["NodeNames"] == ["n-2", "n-2"]
    assert out["FailedNodes"] == {"n-1": "node(s) had an odd name"}


def test_the_extender_prepares_its_plugins_as_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[str] = []
    monkeypatch.setattr(
        DynamicResources, "prepare", lambda self: prepared.append(self.handle.profile_name)
    )
    Extender(config("DynamicResources"), registry())
    # Once for the cached cluster's frameworks, once for those of request bodies.
    assert prepared == ["test", "test"]
