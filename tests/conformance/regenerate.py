#!/usr/bin/env python3
"""Record what the real kube-scheduler does with each conformance scenario (expected.yaml).

For every scenario under ``scenarios/`` (or those named on the command line) this script, on a
local control plane (``kubesched cluster``, started if needed, left running with ``--keep``):

1. deletes whatever a previous scenario left (pods, nodes, the PriorityClasses it created);
2. creates the scenario's Namespaces and PriorityClasses, its Nodes (status written through the
   status subresource), then its pods that have ``spec.nodeName`` (already running);
3. starts the built kube-scheduler with the scenario's ``config.yaml`` (or ``default-config.yaml``),
   leader election off and every profile renamed ``conformance-<schedulerName>`` (the pods follow),
   so that no other scheduler can take the pods;
4. ``mode: sequential``: creates the pending pods one at a time in file order, waiting for each to
   be bound, reported unschedulable (condition ``PodScheduled=False``), gated, or (for a
   schedulerName no profile has) left alone for a while, before the next: the order simulate uses.
   ``mode: batch``: creates every pending pod before starting kube-scheduler, so that its queue
   orders them (PrioritySort), and waits for all of them;
5. writes ``expected.yaml``: per pod, the node, or the reason and message, as first observed.

Run from the repository root:  python tests/conformance/regenerate.py [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import ssl
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path
from typing import Any

import yaml

from kubesched import cluster

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
DEFAULT_CONFIG = HERE / "default-config.yaml"
CLUSTER = "conformance"
COMPONENT = "kube-scheduler-conformance"
PREFIX = "conformance-"
LABEL = "kubesched.io/conformance"
POLL = 0.05
DECIDE_TIMEOUT = 30.0
#: How long a pod for a scheduler no profile has must stay untouched to count as not handled.
NOT_HANDLED_WAIT = 3.0


class Api:
    """A small synchronous JSON client, as the cluster admin."""

    def __init__(self, info: cluster.ClusterInfo) -> None:
        parts = urllib.parse.urlsplit(info.server)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port
        self.context: ssl.SSLContext = info.ssl_context()

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200, 201),
    ) -> Any:
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=30)
        try:
            conn.request(method, target, body=data, headers=headers)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        if response.status not in ok:
            raise RuntimeError(f"{method} {target}: HTTP {response.status}: {payload[:500]!r}")
        return json.loads(payload) if payload else None


def load_scenario(directory: Path) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    meta = yaml.safe_load((directory / "scenario.yaml").read_text())
    config_path = directory / "config.yaml"
    config = yaml.safe_load((config_path if config_path.exists() else DEFAULT_CONFIG).read_text())
    docs = [d for d in yaml.safe_load_all((directory / "manifests.yaml").read_text()) if d]
    return meta, config, docs


def key(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


def clean(api: Api) -> None:
    """Remove every pod, node and conformance PriorityClass; wait until they are gone."""
    namespaces = [n["metadata"]["name"] for n in api.request("GET", "/api/v1/namespaces")["items"]]
    for ns in namespaces:
        api.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    api.request("DELETE", "/api/v1/nodes")
    api.request(
        "DELETE",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        params={"labelSelector": LABEL},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pods = api.request("GET", "/api/v1/pods")["items"]
        nodes = api.request("GET", "/api/v1/nodes")["items"]
        classes = api.request(
            "GET", "/apis/scheduling.k8s.io/v1/priorityclasses", params={"labelSelector": LABEL}
        )["items"]
        if not pods and not nodes and not classes:
            return
        time.sleep(0.2)
    raise RuntimeError("the cluster did not empty within 30s")


def scheduler_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The config kube-scheduler runs: leader election off, profiles renamed; and the names."""
    out = copy.deepcopy(config)
    out["leaderElection"] = {"leaderElect": False}
    renamed: dict[str, str] = {}
    profiles = out.get("profiles") or [{}]
    for profile in profiles:
        name = profile.get("schedulerName") or "default-scheduler"
        renamed[name] = PREFIX + name
        profile["schedulerName"] = renamed[name]
    out["profiles"] = profiles
    return out, renamed


def create_node(api: Api, doc: dict[str, Any]) -> None:
    created = api.request("POST", "/api/v1/nodes", doc)
    if doc.get("status"):
        created["status"] = {**(created.get("status") or {}), **doc["status"]}
        api.request("PUT", f"/api/v1/nodes/{doc['metadata']['name']}/status", created)


def create_pod(api: Api, doc: dict[str, Any], renamed: dict[str, str]) -> None:
    pod = copy.deepcopy(doc)
    ns = pod["metadata"].setdefault("namespace", "default")
    spec = pod["spec"]
    if not spec.get("nodeName"):
        wanted = spec.get("schedulerName") or "default-scheduler"
        spec["schedulerName"] = renamed.get(wanted, wanted)
    api.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)


def outcome(pod: dict[str, Any], handled: bool, age: float) -> dict[str, Any] | None:
    """What became of a pod so far, or ``None`` while undecided."""
    node = pod["spec"].get("nodeName")
    if node:
        return {"node": node}
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            reason = c.get("reason", "")
            if reason == "SchedulingGated":
                return {"node": None, "reason": reason}
            return {"node": None, "reason": reason, "message": c.get("message", "")}
    if not handled and age >= NOT_HANDLED_WAIT:
        return {"node": None, "reason": "NotHandled"}
    return None


def wait_for(
    api: Api, pods: list[dict[str, Any]], handled: dict[str, bool]
) -> dict[str, dict[str, Any]]:
    """Poll until every pod is decided; the first outcome seen for each."""
    found: dict[str, dict[str, Any]] = {}
    start = time.monotonic()
    namespaces = sorted({p["metadata"].get("namespace") or "default" for p in pods})
    wanted = {key(p) for p in pods}
    while len(found) < len(wanted):
        if time.monotonic() - start > DECIDE_TIMEOUT:
            missing = sorted(wanted - set(found))
            raise RuntimeError(f"undecided after {DECIDE_TIMEOUT}s: {missing}")
        for ns in namespaces:
            for live in api.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]:
                k = key(live)
                if k in wanted and k not in found:
                    o = outcome(live, handled[k], time.monotonic() - start)
                    if o is not None:
                        found[k] = o
        time.sleep(POLL)
    return found


def run_scenario(api: Api, directory: Path, scheduler_version: str) -> None:
    meta, config, docs = load_scenario(directory)
    mode = meta.get("mode", "sequential")
    sys.stderr.write(f"{directory.name} ({mode})\n")
    clean(api)
    real_config, renamed = scheduler_config(config)
    config_file = directory / ".kube-scheduler-config.yaml"
    config_file.write_text(yaml.safe_dump(real_config, sort_keys=False))
    pods = [d for d in docs if d.get("kind") == "Pod"]
    namespaces = {p["metadata"].get("namespace") or "default" for p in pods}
    existing = {n["metadata"]["name"] for n in api.request("GET", "/api/v1/namespaces")["items"]}
    for ns in sorted(namespaces - existing):
        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": ns}})
    for doc in docs:
        if doc.get("kind") == "PriorityClass":
            pc = copy.deepcopy(doc)
            pc["metadata"].setdefault("labels", {})[LABEL] = "true"
            api.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", pc)
    for doc in docs:
        if doc.get("kind") == "Node":
            create_node(api, doc)
    for pod in pods:
        if pod["spec"].get("nodeName"):
            create_pod(api, pod, renamed)
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    handled = {
        key(p): (p["spec"].get("schedulerName") or "default-scheduler") in renamed for p in pending
    }
    results: dict[str, dict[str, Any]] = {}
    try:
        if mode == "batch":
            for pod in pending:
                create_pod(api, pod, renamed)
            cluster.start_kube_scheduler(config_file, cluster=CLUSTER, name=COMPONENT)
            results = wait_for(api, pending, handled)
        else:
            cluster.start_kube_scheduler(config_file, cluster=CLUSTER, name=COMPONENT)
            for pod in pending:
                create_pod(api, pod, renamed)
                results.update(wait_for(api, [pod], handled))
    finally:
        cluster.stop_component(COMPONENT, cluster=CLUSTER)
        config_file.unlink(missing_ok=True)
    expected = {
        "generatedBy": "tests/conformance/regenerate.py",
        "kubeScheduler": scheduler_version,
        "pods": [{"pod": key(p), **results[key(p)]} for p in pending],
    }
    header = "# Recorded from the real kube-scheduler by regenerate.py; do not edit by hand.\n"
    (directory / "expected.yaml").write_text(
        header + yaml.safe_dump(expected, sort_keys=False, width=1000)
    )
    for p in expected["pods"]:
        sys.stderr.write(f"  {p}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--cluster", default="conformance", help="cluster name")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    global CLUSTER  # noqa: PLW0603 (one name for the whole run)
    CLUSTER = args.cluster
    names = args.scenarios or sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())
    binaries = cluster.ensure_binaries(progress=lambda m: sys.stderr.write(m + "\n"))
    version = subprocess.run(
        [str(binaries.kube_scheduler), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    started = cluster.info(CLUSTER) is None
    info = cluster.up(CLUSTER, progress=lambda m: sys.stderr.write(m + "\n"))
    try:
        api = Api(info)
        for name in names:
            run_scenario(api, SCENARIOS / name, version)
        clean(api)
    finally:
        if started and not args.keep:
            cluster.down(CLUSTER)


if __name__ == "__main__":
    main()
