#!/usr/bin/env python3
"""Record what the real kube-scheduler does with each conformance scenario (expected.yaml).

For every scenario under ``scenarios/`` (or those named on the command line) this script, on a
local control plane (``kubesched cluster``, started if needed, left running with ``--keep``):

1. deletes whatever a previous scenario left (pods, nodes, the PriorityClasses it created,
   storage objects, PodDisruptionBudgets and workloads);
2. creates the scenario's Namespaces (with their labels) and PriorityClasses, its storage objects
   (StorageClasses, CSINodes, PersistentVolumes, PersistentVolumeClaims, VolumeAttachments),
   PodDisruptionBudgets,
   pod-selecting workloads (Services, ReplicationControllers, ReplicaSets, StatefulSets) and
   dynamic resource allocation objects (DeviceClasses, ResourceSlices, ResourceClaimTemplates,
   ResourceClaims),
   its Nodes (status written through the status subresource, as for PVs,
   PVCs and PDBs), then its pods that have ``spec.nodeName`` (already running);
3. starts the built kube-scheduler with the scenario's ``config.yaml`` (or ``default-config.yaml``),
   leader election off and every profile renamed ``conformance-<schedulerName>`` (the pods follow),
   so that no other scheduler can take the pods;
4. ``mode: sequential``: creates the pending pods one at a time in file order, waiting for each to
   be bound, reported unschedulable (condition ``PodScheduled=False``), gated, or (for a
   schedulerName no profile has) left alone for a while, before the next: the order simulate uses.
   ``mode: batch``: creates every pending pod before starting kube-scheduler, so that its queue
   orders them (PrioritySort), and waits for all of them;
5. writes ``expected.yaml``: per pod, the node, or the reason and message, as first observed;
   for a bound pod with resource claims, the devices allocated to each (``devices``).

No controller-manager runs, so this script does the things of its controllers that
kube-scheduler waits for: it completes the binding of a PV that kube-scheduler's VolumeBinding
pre-bound to a claim (as the PV controller would), it finishes the graceful deletion of
preemption victims (as the kubelet would), and for a pod whose ResourceClaim comes from a
template it creates the claim and names it in the pod's status (as the resourceclaim controller
would). A pod that kube-scheduler nominates to a node
(preemption) is followed until it is bound; its entry then has the node it ended on, plus
``nominatedNodeName`` and ``victims`` (the scenario's pods deleted meanwhile).

Run from the repository root:  python tests/conformance/regenerate.py [SCENARIO ...]
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import http.client
import json
import ssl
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
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
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
#: Kinds created before the nodes, in this order: (kind, collection path, namespaced, status).
OBJECT_KINDS: tuple[tuple[str, str, bool, bool], ...] = (
    ("StorageClass", "/apis/storage.k8s.io/v1/storageclasses", False, False),
    ("CSINode", "/apis/storage.k8s.io/v1/csinodes", False, False),
    ("PersistentVolume", "/api/v1/persistentvolumes", False, True),
    ("PersistentVolumeClaim", "/api/v1/namespaces/{ns}/persistentvolumeclaims", True, True),
    ("VolumeAttachment", "/apis/storage.k8s.io/v1/volumeattachments", False, False),
    ("PodDisruptionBudget", "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets", True, True),
    # Pod-selecting workloads, for PodTopologySpread's default constraints (no controller runs,
    # so a ReplicaSet or StatefulSet creates no pod).
    ("Service", "/api/v1/namespaces/{ns}/services", True, False),
    ("ReplicationController", "/api/v1/namespaces/{ns}/replicationcontrollers", True, False),
    ("ReplicaSet", "/apis/apps/v1/namespaces/{ns}/replicasets", True, False),
    ("StatefulSet", "/apis/apps/v1/namespaces/{ns}/statefulsets", True, False),
    # Dynamic resource allocation: devices published by hand (no driver runs), classes, claims
    # (an allocated one with its status) and templates.
    ("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", False, False),
    ("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", False, False),
    (
        "ResourceClaimTemplate",
        "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
        True,
        False,
    ),
    ("ResourceClaim", "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", True, True),
    # Admission policies, to have the API server refuse a binding.
    (
        "ValidatingAdmissionPolicy",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies",
        False,
        False,
    ),
    (
        "ValidatingAdmissionPolicyBinding",
        "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
        False,
        False,
    ),
)
#: The resourceclaim controller's cut of ``<pod>-<claim>`` before its generated suffix.
CLAIM_NAME_BASE = 57
#: How long a pod for a scheduler no profile has must stay untouched to count as not handled.
NOT_HANDLED_WAIT = 3.0


class Api:
    """A small synchronous JSON client, as the cluster admin."""

    def __init__(self, info: cluster.ClusterInfo) -> None:
        parts = urllib.parse.urlsplit(info.server)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port
        self.context: ssl.SSLContext = info.ssl_context()
        self.cert = str(info.admin_cert)
        self.key = str(info.admin_key)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        params: dict[str, str] | None = None,
        ok: tuple[int, ...] = (200, 201),
        content_type: str = "application/json",
    ) -> Any:
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        data = None if body is None else json.dumps(body)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
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

    def get_text(self, url: str) -> str:
        """``GET`` another HTTPS server of the cluster (a scheduler's ``/metrics``) with the
        admin certificate, not checking the server's own certificate."""
        parts = urllib.parse.urlsplit(url)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(self.cert, self.key)
        conn = http.client.HTTPSConnection(
            parts.hostname or "127.0.0.1", parts.port, context=context, timeout=30
        )
        try:
            conn.request("GET", parts.path)
            response = conn.getresponse()
            payload = response.read()
        finally:
            conn.close()
        if response.status != 200:
            raise RuntimeError(f"GET {url}: HTTP {response.status}: {payload[:500]!r}")
        return payload.decode()


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
    """Remove every pod and node, and every PriorityClass, storage object, PDB and workload a
    scenario created (they carry ``LABEL``); wait until they are gone."""
    namespaces = [n["metadata"]["name"] for n in api.request("GET", "/api/v1/namespaces")["items"]]
    for ns in namespaces:
        api.request("DELETE", f"/api/v1/namespaces/{ns}/pods", params={"gracePeriodSeconds": "0"})
    for _, path, namespaced, _ in OBJECT_KINDS:
        for ns in namespaces if namespaced else [""]:
            collection = path.format(ns=ns)
            # One by one: Services have no collection delete.
            for item in api.request("GET", collection, params={"labelSelector": LABEL})["items"]:
                url = f"{collection}/{item['metadata']['name']}"
                # PV and PVC protection finalizers wait for a controller that does not run.
                if item["metadata"].get("finalizers"):
                    item["metadata"]["finalizers"] = None
                    api.request("PUT", url, item)
                api.request("DELETE", url, ok=(200, 202, 404))
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
        leftovers = [
            item
            for _, path, namespaced, _ in OBJECT_KINDS
            for ns in (namespaces if namespaced else [""])
            for item in api.request("GET", path.format(ns=ns), params={"labelSelector": LABEL})[
                "items"
            ]
        ]
        if not pods and not nodes and not classes and not leftovers:
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


def create_object(api: Api, doc: dict[str, Any], path: str, status: bool) -> None:
    """Create ``doc`` at ``path``, labelled for :func:`clean`; its status, if any, through the
    status subresource."""
    doc = copy.deepcopy(doc)
    doc["metadata"].setdefault("labels", {})[LABEL] = "true"
    created = api.request("POST", path, doc)
    if status and doc.get("status"):
        created["status"] = {**(created.get("status") or {}), **doc["status"]}
        api.request("PUT", f"{path}/{doc['metadata']['name']}/status", created)


def ensure_namespace(api: Api, name: str, labels: dict[str, str]) -> None:
    """Create the namespace, or set its labels if it is left from another scenario."""
    found = api.request("GET", f"/api/v1/namespaces/{name}", ok=(200, 404))
    if found.get("kind") != "Namespace":
        api.request("POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        return
    found["metadata"]["labels"] = {"kubernetes.io/metadata.name": name, **labels}
    api.request("PUT", f"/api/v1/namespaces/{name}", found)


def complete_pv_bindings(api: Api) -> None:
    """The PV controller's part of a binding: for every PV that kube-scheduler pre-bound to a
    claim (``spec.claimRef``), point the claim at it, mark both Bound and the claim
    bind-completed, which is what VolumeBinding's PreBind waits for."""
    for pv in api.request("GET", "/api/v1/persistentvolumes")["items"]:
        ref = pv["spec"].get("claimRef")
        if not ref or (pv.get("status") or {}).get("phase") == "Bound":
            continue
        path = f"/api/v1/namespaces/{ref['namespace']}/persistentvolumeclaims/{ref['name']}"
        pvc = api.request("GET", path, ok=(200, 404))
        if pvc.get("kind") != "PersistentVolumeClaim":
            continue
        annotations = pvc["metadata"].setdefault("annotations", {})
        annotations[ANN_BIND_COMPLETED] = "yes"
        annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        pvc["spec"]["volumeName"] = pv["metadata"]["name"]
        pvc = api.request("PUT", path, pvc)
        pvc["status"] = {
            "phase": "Bound",
            "accessModes": pvc["spec"].get("accessModes", []),
            "capacity": pv["spec"].get("capacity", {}),
        }
        api.request("PUT", f"{path}/status", pvc)
        pv["status"] = {"phase": "Bound"}
        api.request("PUT", f"/api/v1/persistentvolumes/{pv['metadata']['name']}/status", pv)


def finish_deletions(api: Api, namespaces: list[str]) -> None:
    """The kubelet's part of a graceful deletion (there is none): remove pods marked deleted."""
    for ns in namespaces:
        for pod in api.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]:
            if pod["metadata"].get("deletionTimestamp"):
                name = pod["metadata"]["name"]
                api.request(
                    "DELETE",
                    f"/api/v1/namespaces/{ns}/pods/{name}",
                    params={"gracePeriodSeconds": "0"},
                    ok=(200, 404),
                )


def create_pod(api: Api, doc: dict[str, Any], renamed: dict[str, str]) -> None:
    pod = copy.deepcopy(doc)
    ns = pod["metadata"].setdefault("namespace", "default")
    spec = pod["spec"]
    if not spec.get("nodeName"):
        wanted = spec.get("schedulerName") or "default-scheduler"
        spec["schedulerName"] = renamed.get(wanted, wanted)
    api.request("POST", f"/api/v1/namespaces/{ns}/pods", pod)


def make_template_claims(api: Api, doc: dict[str, Any]) -> None:
    """The resourceclaim controller's part for a pod whose claims come from templates: a claim
    of the template's spec, owned by the pod, named in the pod's ``resourceClaimStatuses``."""
    ns = doc["metadata"].get("namespace") or "default"
    name = doc["metadata"]["name"]
    entries = [
        c for c in doc["spec"].get("resourceClaims") or [] if c.get("resourceClaimTemplateName")
    ]
    if not entries:
        return
    pod_path = f"/api/v1/namespaces/{ns}/pods/{name}"
    pod = api.request("GET", pod_path)
    statuses = []
    for entry in entries:
        template = api.request(
            "GET",
            f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates/"
            f"{entry['resourceClaimTemplateName']}",
        )
        meta = template["spec"].get("metadata") or {}
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{name}-{entry['name']}"[:CLAIM_NAME_BASE] + "-",
                "labels": {**(meta.get("labels") or {}), LABEL: "true"},
                "annotations": {
                    **(meta.get("annotations") or {}),
                    "resource.kubernetes.io/pod-claim-name": entry["name"],
                },
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": template["spec"]["spec"],
        }
        created = api.request(
            "POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", claim
        )
        statuses.append({"name": entry["name"], "resourceClaimName": created["metadata"]["name"]})
    pod["status"]["resourceClaimStatuses"] = statuses
    api.request("PUT", f"{pod_path}/status", pod)


def claim_devices(api: Api, doc: dict[str, Any]) -> dict[str, list[str]]:
    """Per pod claim: the devices allocated to it (``request: driver/pool/device``), as
    kube-scheduler wrote them."""
    ns = doc["metadata"].get("namespace") or "default"
    pod = api.request("GET", f"/api/v1/namespaces/{ns}/pods/{doc['metadata']['name']}")
    made = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out: dict[str, list[str]] = {}
    for entry in pod["spec"].get("resourceClaims") or []:
        name = entry.get("resourceClaimName") or made.get(entry["name"])
        if not name:
            continue
        claim = api.request(
            "GET", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"
        )
        allocation = (claim.get("status") or {}).get("allocation") or {}
        out[entry["name"]] = [
            f"{r['request']}: {r['driver']}/{r['pool']}/{r['device']}"
            for r in (allocation.get("devices") or {}).get("results") or []
        ]
    return out


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
    api: Api,
    pods: list[dict[str, Any]],
    handled: dict[str, bool],
    scenario_pods: set[str],
    namespaces: list[str],
) -> dict[str, dict[str, Any]]:
    """Poll until every pod is decided; the first outcome seen for each, except that a pod
    nominated by preemption is followed until it is bound (see the module doc)."""
    found: dict[str, dict[str, Any]] = {}
    nominations: dict[str, str] = {}
    start = time.monotonic()
    wanted = {key(p) for p in pods}
    present: set[str] | None = None  # the scenario's pods that exist when the wait starts
    while len(found) < len(wanted):
        if time.monotonic() - start > DECIDE_TIMEOUT:
            missing = sorted(wanted - set(found))
            raise RuntimeError(f"undecided after {DECIDE_TIMEOUT}s: {missing}")
        live_pods = {
            key(live): live
            for ns in namespaces
            for live in api.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        }
        if present is None:
            present = set(live_pods) & scenario_pods
        gone = present - set(live_pods)
        for k, live in live_pods.items():
            if k not in wanted or k in found:
                continue
            nominated = (live.get("status") or {}).get("nominatedNodeName")
            if nominated and not live["spec"].get("nodeName"):
                nominations.setdefault(k, nominated)
            o = outcome(live, handled[k], time.monotonic() - start)
            if o is None:
                continue
            if k not in nominations:
                found[k] = o
            elif o["node"] is not None:
                found[k] = {
                    "node": o["node"],
                    "nominatedNodeName": nominations[k],
                    "victims": sorted(gone),
                }
        complete_pv_bindings(api)
        # Only once the nomination has been seen: the preemptor cannot be bound before its
        # victims are gone, so its nomination is never missed between two polls.
        if set(nominations) - set(found):
            finish_deletions(api, namespaces)
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
    labelled = {
        d["metadata"]["name"]: d["metadata"].get("labels") or {}
        for d in docs
        if d.get("kind") == "Namespace"
    }
    namespaces = sorted(
        {p["metadata"].get("namespace") or "default" for p in pods}
        | {d["metadata"].get("namespace") or "default" for d in docs if d["kind"] != "Namespace"}
        | set(labelled)
    )
    for ns in namespaces:
        ensure_namespace(api, ns, labelled.get(ns, {}))
    for kind, path, namespaced, status in OBJECT_KINDS:
        for doc in docs:
            if doc.get("kind") == kind:
                ns = doc["metadata"].setdefault("namespace", "default") if namespaced else ""
                create_object(api, doc, path.format(ns=ns), status)
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
    every = {key(p) for p in pods}
    try:
        if mode == "batch":
            for pod in pending:
                create_pod(api, pod, renamed)
                make_template_claims(api, pod)
            cluster.start_kube_scheduler(config_file, cluster=CLUSTER, name=COMPONENT)
            results = wait_for(api, pending, handled, every, namespaces)
        else:
            cluster.start_kube_scheduler(config_file, cluster=CLUSTER, name=COMPONENT)
            for pod in pending:
                create_pod(api, pod, renamed)
                make_template_claims(api, pod)
                results.update(wait_for(api, [pod], handled, every, namespaces))
        for pod in pending:
            if pod["spec"].get("resourceClaims") and results[key(pod)]["node"]:
                results[key(pod)]["devices"] = claim_devices(api, pod)
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


@dataclass
class Recording:
    """A recording session: the scenarios asked for, on a local control plane."""

    api: Api
    cluster: str
    #: ``kube-scheduler --version``
    version: str
    scenarios: list[str]


@contextlib.contextmanager
def recording(description: str) -> Iterator[Recording]:
    """Parse the command line (scenario names, ``--cluster``, ``--keep``), start the cluster
    (left running with ``--keep``) and the built kube-scheduler's version; empty the cluster
    at the end."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--cluster", default="conformance", help="cluster name")
    parser.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = parser.parse_args()
    binaries = cluster.ensure_binaries(progress=lambda m: sys.stderr.write(m + "\n"))
    version = subprocess.run(
        [str(binaries.kube_scheduler), "--version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    started = cluster.info(args.cluster) is None
    info = cluster.up(args.cluster, progress=lambda m: sys.stderr.write(m + "\n"))
    try:
        api = Api(info)
        yield Recording(api, args.cluster, version, list(args.scenarios))
        clean(api)
    finally:
        if started and not args.keep:
            cluster.down(args.cluster)


def main() -> None:
    global CLUSTER  # noqa: PLW0603 (one name for the whole run)
    with recording(__doc__.split("\n\n")[0]) as rec:
        CLUSTER = rec.cluster
        names = rec.scenarios or sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())
        for name in names:
            run_scenario(rec.api, SCENARIOS / name, rec.version)


if __name__ == "__main__":
    main()
