"""Latency of the extender's filter and prioritize verbs, as kube-scheduler would see it.

``kubesched bench extender [--nodes 1000,5000] [--requests 300]`` (or
``python -m kubesched.extender.bench``)

This process runs the extender (listener, worker thread, snapshots) on a loopback port with a
synthetic cluster: nodes shaped like a kubelet's (labels, annotations, managedFields, conditions,
addresses, node info, 20 images; about 6 KB of JSON each), a fifth of them tainted, spread over
three zones, with pods bound to them. A client in a separate process sends kube-scheduler's
requests over one keep-alive HTTP/1.1 connection, one at a time, for each node count, each
mode (``NodeNames``: a ``nodeCacheCapable`` extender fed by informers; ``Nodes``: the whole
NodeList in every body) and each verb, and measures each request from the first byte sent to
the last byte of the answer read. Pods vary between requests (requests, tolerations, node
affinity). The profile is kube-scheduler's filter and score plugins kubesched has:
NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
NodeResourcesBalancedAllocation, ImageLocality.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from kubesched.api import Node, Pod, freeze_loaded
from kubesched.config import load_config_from_dict
from kubesched.extender._engine import Extender
from kubesched.extender._metrics import ExtenderMetrics
from kubesched.extender._server import ExtenderServer, ServerOptions
from kubesched.framework import plugin_args_types
from kubesched.plugins import default_registry

__all__ = ["main", "make_node", "make_pod", "run", "table"]

PLUGINS = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
)
ZONES = ("zone-a", "zone-b", "zone-c")
#: How kube-scheduler names the nodes: ``NodeNames`` (nodeCacheCapable) or a whole ``Nodes`` list.
MODES = ("NodeNames", "Nodes")
TIME = "2025-01-01T00:00:00Z"
_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "KubeletReady", "kubelet is posting ready status"),
)


def make_node(i: int, rng: random.Random) -> dict[str, Any]:
    """A Node as a kubelet registers it, in JSON form."""
    name = f"node-{i:05d}"
    zone = ZONES[i % len(ZONES)]
    cpu, memory = rng.choice([(8, 32), (16, 64), (32, 128), (64, 256)])
    images = [
        {
            "names": [
                f"registry.example.com/team-{j % 7}/app-{j}@sha256:{rng.getrandbits(256):064x}",
                f"registry.example.com/team-{j % 7}/app-{j}:v1.{j}.{i % 5}",
            ],
            "sizeBytes": rng.randrange(5_000_000, 900_000_000),
        }
        for j in rng.sample(range(60), 20)
    ]
    taints = []
    if i % 5 == 0:
        taints.append({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
    if i % 7 == 0:
        taints.append({"key": "spot", "value": "true", "effect": "PreferNoSchedule"})
    return {
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": TIME,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": f"m5.{cpu // 4}xlarge",
                "topology.kubernetes.io/region": "region-1",
                "topology.kubernetes.io/zone": zone,
                "pool": "gpu" if i % 11 == 0 else "general",
                "rack": f"rack-{i % 40}",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{i:017x}"}),
            },
            "managedFields": [
                {
                    "manager": "kubelet",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": TIME,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {
                        "f:metadata": {
                            "f:annotations": {".": {}, "f:node.alpha.kubernetes.io/ttl": {}},
                            "f:labels": {
                                ".": {},
                                "f:kubernetes.io/arch": {},
                                "f:kubernetes.io/hostname": {},
                                "f:kubernetes.io/os": {},
                            },
                        },
                        "f:status": {
                            "f:conditions": {'k:{"type":"Ready"}': {"f:lastHeartbeatTime": {}}},
                            "f:images": {},
                            "f:nodeInfo": {"f:bootID": {}},
                        },
                    },
                }
            ],
        },
        "spec": {"providerID": f"aws:///{zone}/i-{i:017x}", "taints": taints},
        "status": {
            "capacity": {
                "cpu": str(cpu),
                "memory": f"{memory}Gi",
                "pods": "110",
                "ephemeral-storage": "100Gi",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
            },
            "allocatable": {
                "cpu": f"{cpu * 1000 - 100}m",
                "memory": f"{memory * 1024 - 800}Mi",
                "pods": "110",
                "ephemeral-storage": "95Gi",
                "hugepages-1Gi": "0",
                "hugepages-2Mi": "0",
            },
            "conditions": [
                {
                    "type": kind,
                    "status": "False" if kind != "Ready" else "True",
                    "lastHeartbeatTime": TIME,
                    "lastTransitionTime": TIME,
                    "reason": reason,
                    "message": message,
                }
                for kind, reason, message in _CONDITIONS
            ],
            "addresses": [
                {"type": "InternalIP", "address": f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": f"{i:032x}",
                "systemUUID": f"ec2{i:029x}",
                "bootID": f"{rng.getrandbits(128):032x}",
                "kernelVersion": "6.1.0-18-cloud-amd64",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.7.13",
                "kubeletVersion": "v1.34.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": images,
        },
    }


def make_pod(i: int, rng: random.Random, node: str = "") -> dict[str, Any]:
    """A pod of a Deployment (bound to ``node`` if given), in JSON form."""
    app = f"app-{i % 50}"
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": f"registry.example.com/team-{i % 7}/app-{i % 60}:v1.{i % 60}.{i % 5}",
                "resources": {
                    "requests": {
                        "cpu": f"{rng.choice([100, 250, 500, 1000])}m",
                        "memory": f"{rng.choice([128, 256, 512, 1024])}Mi",
                    }
                },
                "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            }
        ],
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
        ],
    }
    if i % 3 == 0:
        spec["tolerations"].append(
            {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
        )
    if i % 4 == 0:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "pool", "operator": "In", "values": ["general"]}
                            ]
                        }
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "preference": {
                            "matchExpressions": [
                                {
                                    "key": "topology.kubernetes.io/zone",
                                    "operator": "In",
                                    "values": [ZONES[i % 3]],
                                }
                            ]
                        },
                    }
                ],
            }
        }
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {
            "name": f"{app}-{i:06d}",
            "namespace": "default",
            "uid": f"10000000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(500000 + i),
            "labels": {"app": app, "pod-template-hash": "5d8f7c9b6"},
        },
        "spec": spec,
        "status": {"phase": "Running" if node else "Pending"},
    }


def _profile() -> Any:
    registry = default_registry()
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "bench",
                    "plugins": {
                        "multiPoint": {
                            "enabled": [{"name": p} for p in PLUGINS],
                            "disabled": [{"name": "*"}],
                        }
                    },
                }
            ],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    return config, registry


# --- the client (its own process) -------------------------------------------------------------


def _client(port: int, jobs: list[tuple[str, str, int]], out: Any) -> None:
    """Send each job's bodies (files) ``count`` times; put the latencies (s) on ``out``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"}
    for path, bodies_file, count in jobs:
        bodies = json.loads(Path(bodies_file).read_text())
        payloads = [b.encode() for b in bodies]
        samples = []
        for k in range(count):
            body = payloads[k % len(payloads)]
            start = time.perf_counter()
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            samples.append(time.perf_counter() - start)
            if response.status != 200:
                raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
        out.put(samples)
    connection.close()


# --- the server (this process) -------------------------------------------------------------------


def _percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _measure(
    n_nodes: int,
    pods_per_node: int,
    requests: int,
    warmup: int,
    seed: int,
    modes: Sequence[str],
    tmp: Path,
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    nodes = [make_node(i, rng) for i in range(n_nodes)]
    bound = [
        make_pod(10_000_000 + k, rng, nodes[k % n_nodes]["metadata"]["name"])
        for k in range(n_nodes * pods_per_node)
    ]
    pending = [make_pod(k, rng) for k in range(16)]
    names = [n["metadata"]["name"] for n in nodes]
    node_list = {"metadata": {}, "items": nodes}
    compact = (",", ":")  # as Go's encoder writes it
    bodies = {
        mode: [
            json.dumps(
                {"Pod": p, "Nodes": None, "NodeNames": names}
                if mode == "NodeNames"
                else {"Pod": p, "Nodes": node_list, "NodeNames": None},
                separators=compact,
            )
            for p in pending
        ]
        for mode in modes
    }
    plan = []
    for mode, texts in bodies.items():
        path = tmp / f"{n_nodes}-{mode}.json"
        path.write_text(json.dumps(texts))
        count = requests if mode == "NodeNames" else max(20, requests // 5)
        for verb in ("filter", "prioritize"):
            plan.append((mode, verb, f"/{verb}", str(path), count))
    jobs = []
    for _, _, path_, file, count in plan:
        jobs.extend([(path_, file, warmup), (path_, file, count)])
    cluster = (msgspec.convert(nodes, list[Node]), msgspec.convert(bound, list[Pod]))
    results, cpu = asyncio.run(_serve(cluster, jobs))
    rows = []
    for k, (mode, verb, _, _, _) in enumerate(plan):
        samples = results[2 * k + 1]
        rows.append(
            {
                "nodes": n_nodes,
                "mode": mode,
                "verb": verb,
                "requests": len(samples),
                "body_bytes": len(bodies[mode][0]),
                "p50_ms": _percentile(samples, 0.50) * 1e3,
                "p99_ms": _percentile(samples, 0.99) * 1e3,
                "mean_ms": statistics.fmean(samples) * 1e3,
                "server_cpu_ms": cpu[2 * k + 1] / len(samples) * 1e3,
            }
        )
    return rows


async def _serve(
    cluster: tuple[list[Node], list[Pod]], jobs: list[tuple[str, str, int]]
) -> tuple[list[list[float]], list[float]]:
    """Serve the cluster while the client process runs ``jobs``; the latencies of each job, and
    the CPU time this process (the extender) spent during each."""
    config, registry = _profile()
    ext = Extender(config, registry, metrics=ExtenderMetrics(), informers=True)
    for node in cluster[0]:
        ext.cache.set_node(node)
    for pod in cluster[1]:
        ext.cache.set_pod(pod)
    server = ExtenderServer(ext, ServerOptions(host="127.0.0.1", port=0))
    await server.start()
    try:
        context = multiprocessing.get_context("spawn")
        queue = context.Queue()
        client = context.Process(target=_client, args=(server.port, jobs, queue))
        # As the service does once its informers have synced: what is loaded now is long-lived.
        await ext.settle()
        freeze_loaded()
        client.start()
        results, cpu = [], []
        for _ in jobs:
            before = time.process_time()
            results.append(await asyncio.to_thread(queue.get, True, 3600))
            cpu.append(time.process_time() - before)
        await asyncio.to_thread(client.join)
        return results, cpu
    finally:
        await server.stop()
        ext.close()


def run(
    node_counts: Sequence[int],
    *,
    requests: int = 300,
    warmup: int = 20,
    pods_per_node: int = 4,
    seed: int = 1,
    modes: Sequence[str] = MODES,
) -> list[dict[str, Any]]:
    """Measure every node count; one row per (nodes, mode, verb)."""
    unknown = set(modes) - set(MODES)
    if unknown:
        raise ValueError(f"unknown modes {sorted(unknown)}; known: {', '.join(MODES)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kubesched-extender-bench-") as tmp:
        for n in node_counts:
            rows.extend(_measure(n, pods_per_node, requests, warmup, seed, modes, Path(tmp)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kubesched.extender.bench", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--nodes", default="1000,5000", help="node counts (default 1000,5000)")
    parser.add_argument("--requests", type=int, default=300, help="per NodeNames verb")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--pods-per-node", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES), help="NodeNames, Nodes or both")
    parser.add_argument("--json", action="store_true", help="print rows as JSON")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.nodes.split(",") if n]
    rows = run(
        counts,
        requests=args.requests,
        warmup=args.warmup,
        pods_per_node=args.pods_per_node,
        seed=args.seed,
        modes=[m for m in args.modes.split(",") if m],
    )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(table(rows))
    return 0


def table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as a Markdown table, with the machine it ran on."""
    lines = [
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.1f} at the end",
        "",
        "| nodes | mode | verb | body | requests | p50 | p99 | extender CPU / request |",
        "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        size = r["body_bytes"]
        body = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.0f} KB"
        lines.append(
            f"| {r['nodes']:,} | {r['mode']} | {r['verb']} | {body} | {r['requests']} "
            f"| {r['p50_ms']:.2f} ms | {r['p99_ms']:.2f} ms | {r['server_cpu_ms']:.2f} ms |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
