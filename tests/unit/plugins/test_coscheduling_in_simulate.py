"""Coscheduling in ``kubesched simulate``: PodGroups and their pods read from manifests, members
counted from them. (``simulate`` finishes each pod's binding cycle before the next pod, so a
member waiting at Permit waits out its timeout there: groups of one, or turned away at PreFilter,
are what it shows without waiting.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kubesched.cli import main


def manifests(groups: dict[str, tuple[int, int]], nodes: int) -> list[dict[str, Any]]:
    """``groups``: name -> (minMember, pods)."""
    out: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"}},
        }
        for i in range(nodes)
    ]
    for group, (min_member, size) in groups.items():
        out.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "PodGroup",
                "metadata": {"name": group, "namespace": "default"},
                "spec": {"minMember": min_member},
            }
        )
        out.extend(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{group}-{i}",
                    "namespace": "default",
                    "labels": {"scheduling.x-k8s.io/pod-group": group},
                },
                "spec": {
                    "schedulerName": "gangs",
                    "containers": [
                        {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}
                    ],
                },
            }
            for i in range(size)
        )
    return out


CONFIG = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "gangs",
            "plugins": {
                "multiPoint": {"enabled": [{"name": "Coscheduling"}]},
                "queueSort": {"enabled": [{"name": "Coscheduling"}], "disabled": [{"name": "*"}]},
            },
            "pluginConfig": [{"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 5}}],
        }
    ],
}


def test_members_counted_from_the_manifests(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        yaml.safe_dump_all(manifests({"short": (3, 2), "solo": (1, 1)}, nodes=2))
    )
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(CONFIG))
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
        ],
    )
    assert got.exit_code == 0, got.output
    report = json.loads(got.stdout[got.stdout.index("{") :])
    pods = {p["name"]: p for p in report["pods"]}
    assert pods["solo-0"]["node"] in ("n0", "n1")
    for name in ("short-0", "short-1"):
        assert pods[name]["node"] is None
        assert pods[name]["message"] == (
            f"0/2 nodes are available: pre-filter pod {name} cannot find enough sibling pods, "
            "current pods number: 2, minMember of group: 3. no new claims to deallocate, "
            "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling., "
            f"PodGroup default/short gets rejected due to Pod {name} is unschedulable even "
            "after PostFilter"
        )


def test_without_coscheduling_in_the_configuration_podgroups_are_not_read(tmp_path: Path) -> None:
    # Kinds are read for the plugins the profiles enable: the default profile has no
    # Coscheduling, so the PodGroup is skipped with a warning (and its plugin is not loaded).
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(manifests({"solo": (1, 1)}, nodes=1)))
    got = CliRunner().invoke(main, ["simulate", "-f", str(tmp_path / "cluster.yaml")])
    assert got.exit_code == 0, got.output
    assert "document 2: kind PodGroup is not simulated; skipped" in got.stderr
