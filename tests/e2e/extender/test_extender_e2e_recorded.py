"""Request bodies as the real kube-scheduler v1.34.4 sends them to an extender.

A tiny recorder stands in for the extender (answering like an extender that accepts every
node and proposed victim, and binding through the API) while kube-scheduler, with two
extenders configured (one ``nodeCacheCapable``, one not), schedules two low-priority pods onto
two single-pod nodes and then a high-priority pod that can only preempt. Every body must decode
into kubesched's protocol structs and have exactly upstream's Go field names; the unit tests
replay the copies kept under ``tests/unit/extender/fixtures`` (``KUBESCHED_RECORD_FIXTURES=1``
writes this run's bodies there).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from ext_e2e import KubeScheduler, scheduler_config, wait_for

from kubesched.extender._protocol import (
    args_decoder,
    binding_args_decoder,
    node_names_decoder,
    preemption_args_decoder,
)

FIXTURES = Path(__file__).parents[2] / "unit" / "extender" / "fixtures"
NODES = ("rec-a", "rec-b")
PODS = ("rec-low-1", "rec-low-2", "rec-high")
CLASSES = (("rec-low", 10), ("rec-high", 1000))
PROFILE = "rec"


class Recorder:
    """Records each POST body by path and answers as an accepting extender."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.bodies: dict[str, list[bytes]] = {}
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                recorder.bodies.setdefault(self.path, []).append(body)
                data = json.dumps(recorder.answer(self.path.rsplit("/", 1)[1], body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, verb: str, body: bytes) -> Any:
        a = json.loads(body)
        if verb == "filter":
            if a["NodeNames"] is not None:
                return {"NodeNames": a["NodeNames"], "FailedNodes": {}, "Error": ""}
            return {"Nodes": a["Nodes"], "FailedNodes": {}, "Error": ""}
        if verb == "prioritize":
            names = a["NodeNames"] or [n["metadata"]["name"] for n in a["Nodes"]["items"]]
            return [{"Host": n, "Score": 1} for n in names]
        if verb == "bind":
            binding = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {
                    "name": a["PodName"],
                    "namespace": a["PodNamespace"],
                    "uid": a["PodUID"],
                },
                "target": {"kind": "Node", "name": a["Node"]},
            }
            path = f"/api/v1/namespaces/{a['PodNamespace']}/pods/{a['PodName']}/binding"
            response = self.client.post(path, binding)
            return {"Error": "" if response.status == 201 else response.body.decode()}
        if a["NodeNameToMetaVictims"] is not None:
            return {"NodeNameToMetaVictims": a["NodeNameToMetaVictims"]}
        return {
            "NodeNameToMetaVictims": {
                node: {
                    "Pods": [{"UID": p["metadata"]["uid"]} for p in v["Pods"]],
                    "NumPDBViolations": v["NumPDBViolations"],
                }
                for node, v in a["NodeNameToVictims"].items()
            }
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _clean(client: Any) -> None:
    for pod in PODS:
        client.request(
            "DELETE", f"/api/v1/namespaces/default/pods/{pod}", params={"gracePeriodSeconds": "0"}
        )
    for node in NODES:
        client.delete(f"/api/v1/nodes/{node}")
    for name, _ in CLASSES:
        client.delete(f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
    wait_for(
        lambda: all(client.get(f"/api/v1/namespaces/default/pods/{p}").status == 404 for p in PODS),
        30,
        "the recording's pods to be gone",
    )


@pytest.fixture
def recorder(admin_client: Any) -> Iterator[Recorder]:
    _clean(admin_client)
    r = Recorder(admin_client)
    try:
        yield r
    finally:
        r.close()
        _clean(admin_client)


def _node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "4", "memory": "8Gi", "pods": "1"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"rec": "yes", "kubernetes.io/hostname": name}},
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "ok",
                    "lastHeartbeatTime": "2024-01-01T00:00:00Z",
                    "lastTransitionTime": "2024-01-01T00:00:00Z",
                }
            ],
            "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 300000}],
        },
    }


def _pod(name: str, priority_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"app": "rec"},
            "annotations": {"note": "x"},
        },
        "spec": {
            "schedulerName": PROFILE,
            "priorityClassName": priority_class,
            "nodeSelector": {"rec": "yes"},
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    "ports": [{"containerPort": 80}],
                }
            ],
        },
    }


def test_kube_scheduler_request_bodies_match_the_protocol_types(
    admin_client: Any,
    recorder: Recorder,
    kube_scheduler: Callable[[dict[str, Any]], KubeScheduler],
) -> None:
    for name, value in CLASSES:
        admin_client.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {"apiVersion": "scheduling.k8s.io/v1", "metadata": {"name": name}, "value": value},
        ).expect(201)
    for node in NODES:
        admin_client.post("/api/v1/nodes", _node(node)).expect(201)
    verbs = {"filterVerb": "filter", "prioritizeVerb": "prioritize", "preemptVerb": "preempt"}
    document = scheduler_config(
        PROFILE,
        [
            {"urlPrefix": recorder.url + "/cache", **verbs, "bindVerb": "bind", "weight": 1,
             "nodeCacheCapable": True},
            {"urlPrefix": recorder.url + "/full", **verbs, "weight": 1},
        ],
    )  # fmt: skip
    kube_scheduler(document)
    for name in ("rec-low-1", "rec-low-2"):
        admin_client.post("/api/v1/namespaces/default/pods", _pod(name, "rec-low")).expect(201)
        wait_for(
            lambda name=name: (
                admin_client.get(f"/api/v1/namespaces/default/pods/{name}")
                .json()["spec"]
                .get("nodeName")
            ),
            30,
            f"{name} bound",
        )
    admin_client.post("/api/v1/namespaces/default/pods", _pod("rec-high", "rec-high")).expect(201)
    wait_for(
        lambda: "/cache/preempt" in recorder.bodies and "/full/preempt" in recorder.bodies,
        30,
        "preemption to consult both extenders",
    )
    time.sleep(0.5)
    b = recorder.bodies

    recorded = {
        "filter-node-names": b["/cache/filter"][0],
        "filter-nodes": b["/full/filter"][0],
        "prioritize-node-names": b["/cache/prioritize"][0],
        "prioritize-nodes": b["/full/prioritize"][0],
        "bind": b["/cache/bind"][0],
        "preempt-meta-victims": b["/cache/preempt"][0],
        "preempt-victims": b["/full/preempt"][0],
    }
    for name in ("filter-node-names", "prioritize-node-names"):
        assert list(json.loads(recorded[name])) == ["Pod", "Nodes", "NodeNames"]
        args = args_decoder.decode(recorded[name])
        assert args.pod is not None
        assert args.pod.metadata.name == "rec-low-1"
        assert args.nodes is None
        assert sorted(node_names_decoder.decode(bytes(args.node_names)) or []) == list(NODES)
    for name in ("filter-nodes", "prioritize-nodes"):
        assert list(json.loads(recorded[name])) == ["Pod", "Nodes", "NodeNames"]
        args = args_decoder.decode(recorded[name])
        assert bytes(args.node_names) == b"null"
        assert args.nodes is not None
        assert args.nodes.items
    assert json.loads(recorded["bind"]).keys() == {"PodName", "PodNamespace", "PodUID", "Node"}
    binding = binding_args_decoder.decode(recorded["bind"])
    assert (binding.pod_name, binding.pod_namespace) == ("rec-low-1", "default")
    assert binding.pod_uid
    for name, field in (
        ("preempt-meta-victims", "NodeNameToMetaVictims"),
        ("preempt-victims", "NodeNameToVictims"),
    ):
        data = json.loads(recorded[name])
        assert list(data) == ["Pod", "NodeNameToVictims", "NodeNameToMetaVictims"]
        assert sorted(data[field]) == list(NODES)
        victims = next(iter(data[field].values()))
        assert list(victims) == ["Pods", "NumPDBViolations"]
        args = preemption_args_decoder.decode(recorded[name])
        assert args.pod is not None
        assert args.pod.metadata.name == "rec-high"
    meta = preemption_args_decoder.decode(recorded["preempt-meta-victims"])
    assert meta.node_name_to_meta_victims is not None
    assert all(v is not None and v.pods for v in meta.node_name_to_meta_victims.values())

    if os.environ.get("KUBESCHED_RECORD_FIXTURES") == "1":
        for name, body in recorded.items():
            (FIXTURES / f"{name}.json").write_bytes(body)
