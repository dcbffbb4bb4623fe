"""The plugins from the field in ``kubesched simulate``, registered through their entry points:
every score of the explanation worked by hand from the documented formulas."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import yaml
from click.testing import CliRunner

from kubesched.cli import main

NODES = [
    {
        # cpu: mean free 3000 +- 100 of 4000; memory: 6Gi free of 8Gi, steady; congestion 10
        "name": "calm",
        "annotations": {
            "mean-free-cpu": "3000",
            "std-free-cpu": "100",
            "mean-free-memory": str(6 << 30),
            "std-free-memory": "0",
            "congestion-factor": "10",
        },
    },
    # cpu: 500 free: with the pod's 500m, mu = 1: rejected by SafeOverload
    {"name": "busy", "annotations": {"mean-free-cpu": "500", "std-free-cpu": "400"}},
    # no statistics: accepted, safe scores 0; no congestion factor: 100
    {"name": "bare", "annotations": {}},
]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_explained_scores(tmp_path: Path) -> None:
    manifests = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n["name"], "annotations": n["annotations"]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
        for n in NODES
    ]
    manifests.append(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {
                "schedulerName": "field",
                "containers": [
                    {
                        "name": "c",
                        "image": "nginx",
                        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                    }
                ],
            },
        }
    )
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "field",
                "plugins": {
                    "filter": {"enabled": [{"name": "SafeOverload"}]},
                    "score": {
                        "disabled": [{"name": "*"}],
                        "enabled": [
                            {"name": n}
                            for n in (
                                "SafeOverload",
                                "SafeBalance",
                                "Congestion",
                                "PigeonHole",
                                "NetworkTraffic",
                            )
                        ],
                    },
                },
                "pluginConfig": [
                    {
                        "name": "NetworkTraffic",
                        "args": {"prometheusAddress": f"http://127.0.0.1:{closed_port()}"},
                    },
                    {"name": "PigeonHole", "args": {"policy": "LOAD_BALANCE"}},
                ],
            }
        ],
    }
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(manifests))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    got = CliRunner().invoke(
        main,
        [
            "simulate",
            "-f",
            str(tmp_path / "cluster.yaml"),
            "--config",
            str(tmp_path / "config.yaml"),
            "-o",
            "json",
            "--explain",
        ],
    )
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout[got.stdout.index("{") :])
    [pod] = report["pods"]
    assert pod["node"] == "calm"
    nodes = pod["nodes"]
    assert nodes["busy"]["filter"]["SafeOverload"] == "node(s) were at risk of cpu overload"
    # calm: cpu mu = (1000 + 500) / 4000 = 0.375, sigma 0.025: risk ~1e-40 -> 100;
    #   balance int((1 - (0.375 + sqrt(0.025)) / 2) * 100 + 0.5) = 73, memory
    #   int((1 - 0.28125 / 2) * 100 + 0.5) = 86 -> 73; congestion 100 * (1 - 0.1) = 90;
    #   PigeonHole: both empty nodes are equal -> 100; NetworkTraffic without data: 50
    assert nodes["calm"]["scores"] == {
        "SafeOverload": 100,
        "SafeBalance": 73,
        "Congestion": 90,
        "PigeonHole": 100,
        "NetworkTraffic": 50,
    }
    assert nodes["bare"]["scores"] == {
        "SafeOverload": 0,
        "SafeBalance": 0,
        "Congestion": 100,
        "PigeonHole": 100,
        "NetworkTraffic": 50,
    }
