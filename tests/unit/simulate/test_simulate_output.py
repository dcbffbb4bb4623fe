"""What simulate prints: the JSON document's shape and stability, and the tables."""

from __future__ import annotations

import asyncio
import json
import textwrap
from typing import Any

from kubesched.config import default_config
from kubesched.plugins import default_registry
from kubesched.simulate import (
    JSON_FORMAT_VERSION,
    Detail,
    SimulationResult,
    load_text,
    render_json,
    render_table,
    simulate,
)

MANIFESTS = textwrap.dedent("""
    kind: Node
    metadata: {name: big}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: small}
    status: {allocatable: {cpu: "2", memory: 4Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: tainted}
    spec: {taints: [{key: dedicated, value: gpu, effect: NoSchedule}]}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
    ---
    kind: Pod
    metadata: {name: web}
    spec: {containers: [{name: c, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
    ---
    kind: Pod
    metadata: {name: only-big}
    spec: {containers: [{name: c, resources: {requests: {cpu: "4"}}}]}
    ---
    kind: Pod
    metadata: {name: huge}
    spec: {containers: [{name: c, resources: {requests: {cpu: "64"}}}]}
    ---
    kind: Pod
    metadata: {name: gated}
    spec:
      schedulingGates: [{name: g}]
      containers: [{name: c}]
    ---
    kind: Deployment
    apiVersion: apps/v1
    metadata: {name: ignored}
    """)


def _result(detail: Detail = "feasible") -> SimulationResult:
    inputs = load_text(MANIFESTS, "cluster.yaml")
    return asyncio.run(
        simulate(inputs, default_config(), default_registry(), seed=1, detail=detail)
    )


def _json(detail: Detail = "feasible") -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(render_json(_result(detail)))
    return loaded


def test_json_document_shape() -> None:
    doc = _json()
    assert list(doc) == ["formatVersion", "pods", "summary", "issues"]
    assert doc["formatVersion"] == JSON_FORMAT_VERSION
    pods = {p["name"]: p for p in doc["pods"]}
    assert list(pods) == ["web", "only-big", "huge", "gated"]
    for p in doc["pods"]:
        assert list(p) == [
            "namespace",
            "name",
            "node",
            "reason",
            "message",
            "schedulerName",
            "attempt",
            "feasibleNodes",
            "scored",
            "nodes",
            "nominatedNode",
            "victims",
        ]
        assert p["nodes"] == {}  # only with explain
        assert (p["nominatedNode"], p["victims"]) == (None, [])
    assert pods["web"]["node"] == "big"
    assert pods["web"]["feasibleNodes"] == ["big", "small"]
    assert pods["web"]["scored"] is True
    assert pods["only-big"]["feasibleNodes"] == ["big"]
    assert pods["only-big"]["scored"] is False
    assert pods["huge"]["node"] is None
    assert pods["huge"]["reason"] == "Unschedulable"
    # DefaultPreemption's part ends in its own period, as kube-scheduler writes it.
    assert pods["huge"]["message"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint(s), "
        "2 Insufficient cpu. no new claims to deallocate, preemption: 0/3 nodes are available: "
        "3 Preemption is not helpful for scheduling."
    )
    assert pods["huge"]["feasibleNodes"] == []
    assert pods["huge"]["scored"] is None
    assert pods["gated"]["reason"] == "SchedulingGated"
    assert pods["gated"]["attempt"] is None
    assert doc["summary"] == {
        "nodes": 3,
        "runningPods": 0,
        "pods": 4,
        "scheduled": 2,
        "unschedulable": 1,
        "errors": 0,
        "gated": 1,
        "notHandled": 0,
    }
    assert doc["issues"] == [
        {
            "severity": "warning",
            "location": "cluster.yaml, document 8",
            "message": "kind Deployment is not simulated; skipped",
        }
    ]


def test_json_explain_nodes() -> None:
    pods = {p["name"]: p for p in _json("explain")["pods"]}
    web = pods["web"]["nodes"]
    assert sorted(web) == ["big", "small", "tainted"]
    assert set(web["big"]) == {"filter", "preFilter", "scores", "total"}
    assert web["big"]["total"] == sum(web["big"]["scores"].values())
    assert all(isinstance(v, int) for v in web["big"]["scores"].values())
    assert web["tainted"]["filter"]["TaintToleration"] == ("node(s) had untolerated taint(s)")
    assert web["tainted"]["scores"] == {}
    assert web["tainted"]["total"] is None
    only = pods["only-big"]["nodes"]
    assert only["big"]["scores"] == {}
    assert only["big"]["total"] is None
    assert only["small"]["filter"]["NodeResourcesFit"] == "Insufficient cpu"


def test_json_is_stable() -> None:
    first, second = render_json(_result("explain")), render_json(_result("explain"))
    assert first == second
    assert first.endswith("}\n")


def test_table() -> None:
    table = render_table(_result("outcome"))
    lines = table.splitlines()
    assert lines[0].split() == ["POD", "NODE", "MESSAGE"]
    assert lines[1].split() == ["default/web", "big"]
    assert lines[3].startswith("default/huge")
    assert "unschedulable  0/3 nodes are available:" in lines[3]
    assert "gated" in lines[4]
    assert "waiting for scheduling gates: [g]" in lines[4]
    assert lines[-1].startswith(
        "4 pods on 3 nodes (0 pods already running): 2 scheduled, 1 unschedulable, 1 gated, in "
    )


def test_explain_table() -> None:
    table = render_table(_result("explain"), explain=True)
    blocks = table.split("\n\n")
    web = blocks[0].splitlines()
    assert web[0] == "default/web -> big  (2 of 3 nodes feasible)"
    header = web[1].split()
    assert header[:2] == ["NODE", "TOTAL"]
    assert header[-1] == "FILTER"
    assert "TaintToleration" in header
    assert web[2].split()[0] == "big"  # the best first
    assert web[2].split()[-1] == "ok"
    assert web[-1].split()[0] == "tainted"
    assert web[-1].endswith("TaintToleration: node(s) had untolerated taint(s)")
    only = blocks[1].splitlines()
    assert only[0].endswith(
        "(1 of 3 nodes feasible, only one: scoring skipped, as kube-scheduler does)"
    )
    assert only[1].split() == ["NODE", "FILTER"]
    huge = blocks[2].splitlines()
    assert huge[0].startswith("default/huge -> unschedulable: 0/3 nodes are available")
    assert blocks[3].strip() == "default/gated -> gated: waiting for scheduling gates: [g]"


def test_no_pods() -> None:
    inputs = load_text("kind: Node\nmetadata: {name: n}\n")
    result = asyncio.run(simulate(inputs, default_config(), default_registry()))
    assert render_table(result) == "no pods to schedule\n"
    assert json.loads(render_json(result))["pods"] == []
