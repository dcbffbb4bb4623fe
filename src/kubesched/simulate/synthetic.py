"""A synthetic cluster and workload of any size, for benchmarks and scale tests.

Deterministic for a given seed. Nodes come in four shapes over three zones, some tainted, some
cordoned, some with images cached; pods vary in requests, and some carry node selectors,
required or preferred node affinity, tolerations, host ports, or requests no node can meet.

``python -m kubesched.simulate.synthetic --nodes 5000 --pods 10000 > big.json`` writes one
``List`` document (JSON, or YAML with ``--yaml``) that ``kubesched simulate -f`` reads.
"""

from __future__ import annotations

import argparse
import random
import sys
from typing import Any

import msgspec
import yaml

_SHAPES = [
    ("m.large", "4", "16Gi"),
    ("m.xlarge", "8", "32Gi"),
    ("m.2xlarge", "16", "64Gi"),
    ("r.2xlarge", "16", "128Gi"),
]
_ZONES = ["zone-a", "zone-b", "zone-c"]
_IMAGES = [f"registry.example.com/app-{i}:1.0" for i in range(20)]
_CPU = ["100m", "250m", "500m", "1", "2"]
_MEMORY = ["128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"]


def _node(i: int, rng: random.Random) -> dict[str, Any]:
    shape, cpu, memory = _SHAPES[i % len(_SHAPES)]
    name = f"node-{i:05d}"
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": _ZONES[i % len(_ZONES)],
                "node.kubernetes.io/instance-type": shape,
            },
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "images": [
                {"names": [image], "sizeBytes": rng.randrange(50, 800) * 1_000_000}
                for image in rng.sample(_IMAGES, 3)
            ],
        },
    }
    roll = rng.random()
    if roll < 0.05:
        node["spec"]["taints"] = [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]
        node["metadata"]["labels"]["dedicated"] = "batch"
    elif roll < 0.07:
        node["spec"]["unschedulable"] = True
    return node


def _pod(
    i: int, rng: random.Random, node_name: str = "", *, distinct: bool = False
) -> dict[str, Any]:
    if distinct:
        # Requests no other pod has, so that no two pods share a shape (what-if inputs).
        cpu, memory = f"{100 + i % 1900}m", f"{128 * 1024 + i}Ki"
    else:
        cpu, memory = rng.choice(_CPU), rng.choice(_MEMORY)
    container: dict[str, Any] = {
        "name": "app",
        "image": rng.choice(_IMAGES),
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }
    spec: dict[str, Any] = {"containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    else:
        roll = rng.random()
        if roll < 0.15:
            spec["nodeSelector"] = {"topology.kubernetes.io/zone": rng.choice(_ZONES)}
        elif roll < 0.25:
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "node.kubernetes.io/instance-type",
                                        "operator": "In",
                                        "values": rng.sample([s[0] for s in _SHAPES], 2),
                                    }
                                ]
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 10,
                            "preference": {
                                "matchExpressions": [
                                    {
                                        "key": "topology.kubernetes.io/zone",
                                        "operator": "In",
                                        "values": [rng.choice(_ZONES)],
                                    }
                                ]
                            },
                        }
                    ],
                }
            }
        elif roll < 0.30:
            spec["tolerations"] = [
                {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
            ]
            spec["nodeSelector"] = {"dedicated": "batch"}
        elif roll < 0.32:
            container["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
        elif roll < 0.33:
            container["resources"]["requests"]["cpu"] = "64"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": "default", "labels": {"app": "bench"}},
        "spec": spec,
    }


def synthetic_manifests(
    nodes: int, pods: int, *, running: int = 0, seed: int = 0, distinct: bool = False
) -> list[dict[str, Any]]:
    """``nodes`` Nodes, then ``running`` pods already bound round-robin, then ``pods`` pending
    pods, as plain manifests; with ``distinct`` no two pending pods ask for the same."""
    rng = random.Random(seed)
    out = [_node(i, rng) for i in range(nodes)]
    for i in range(running):
        out.append(_pod(i, rng, node_name=f"node-{i % nodes:05d}"))
    for i in range(running, running + pods):
        out.append(_pod(i, rng, distinct=distinct))
    return out


def synthetic_cluster(
    nodes: int, pods: int, *, running: int = 0, seed: int = 0, distinct: bool = False
) -> str:
    """:func:`synthetic_manifests` as one JSON ``List`` document."""
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": synthetic_manifests(nodes, pods, running=running, seed=seed, distinct=distinct),
    }
    return msgspec.json.encode(doc).decode()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--running", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--yaml", action="store_true", help="multi-document YAML, not JSON")
    parser.add_argument(
        "--distinct", action="store_true", help="no two pending pods with the same requests"
    )
    args = parser.parse_args(argv)
    if args.yaml:
        docs = synthetic_manifests(
            args.nodes, args.pods, running=args.running, seed=args.seed, distinct=args.distinct
        )
        yaml.dump_all(docs, sys.stdout, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    else:
        sys.stdout.write(
            synthetic_cluster(
                args.nodes, args.pods, running=args.running, seed=args.seed, distinct=args.distinct
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
