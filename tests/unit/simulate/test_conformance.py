"""simulate against the real kube-scheduler: every scenario of tests/conformance, pod by pod.

The expectations (``expected.yaml``) were recorded from kube-scheduler on a real apiserver by
``tests/conformance/regenerate.py``; see docs/simulate.md. Each pod is compared on its node; a
pod left without one on its reason and FailedScheduling message; a pod bound after preempting on
its nominated node and its victims; a pod with resource claims on the devices allocated to
them. Each scenario is simulated with a few
seeds: a tie between top-scored nodes would make kube-scheduler's recorded choice a coin toss, so
a scenario must make the best node unique, and a seed-dependent result fails here.
"""

from __future__ import annotations

import asyncio
import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.config import load_config
from kubesched.framework import plugin_args_types
from kubesched.plugins import default_registry
from kubesched.simulate import PodResult, load_inputs, simulate

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"
SCENARIOS = CONFORMANCE / "scenarios"
SEEDS = (0, 1, 7)


def _scenario_names() -> list[str]:
    return sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir())


def _expected(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SCENARIOS / name / "expected.yaml").read_text())
    return loaded


def _known() -> dict[tuple[str, str], str]:
    entries = yaml.safe_load((CONFORMANCE / "known-divergences.yaml").read_text()) or []
    return {(e["scenario"], e["pod"]): e["why"] for e in entries}


@functools.cache
def _simulated(name: str, seed: int) -> dict[str, PodResult]:
    return _run(name, seed)[0]


@functools.cache
def _run(name: str, seed: int) -> tuple[dict[str, PodResult], dict[str, dict[str, list[str]]]]:
    """The pods' results, and per pod with resource claims the devices allocated to each."""
    directory = SCENARIOS / name
    config_path = directory / "config.yaml"
    if not config_path.exists():
        config_path = CONFORMANCE / "default-config.yaml"
    registry = default_registry()
    config = load_config(str(config_path), plugin_args_types=plugin_args_types(registry))
    inputs = load_inputs([directory / "manifests.yaml"])
    assert not inputs.issues, [str(i) for i in inputs.issues]
    result = asyncio.run(simulate(inputs, config, registry, seed=seed))
    claims = {(c.metadata.namespace, c.metadata.name): c for c in result.resource_claims}
    devices: dict[str, dict[str, list[str]]] = {}
    for pod in inputs.pods:
        made = {s.name: s.resource_claim_name for s in pod.status.resource_claim_statuses}
        per_claim = {}
        for pc in pod.spec.resource_claims:
            claim = claims.get(
                (pod.metadata.namespace, pc.resource_claim_name or made.get(pc.name) or "")
            )
            allocation = claim.status.allocation if claim is not None else None
            if allocation is not None:
                per_claim[pc.name] = [
                    f"{r.request}: {r.driver}/{r.pool}/{r.device}"
                    for r in allocation.devices.results
                ]
        devices[pod.key] = per_claim
    return {p.key: p for p in result.pods}, devices


def _cases() -> list[Any]:
    known = _known()
    cases = []
    for name in _scenario_names():
        for expected in _expected(name)["pods"]:
            why = known.get((name, expected["pod"]))
            marks = [pytest.mark.xfail(reason=why, strict=True)] if why else []
            cases.append(pytest.param(name, expected, id=f"{name}:{expected['pod']}", marks=marks))
    return cases


@pytest.mark.parametrize(("scenario", "expected"), _cases())
def test_pod_as_kube_scheduler_decided(scenario: str, expected: dict[str, Any]) -> None:
    for seed in SEEDS:
        got = _simulated(scenario, seed)[expected["pod"]]
        where = f"{scenario}, seed {seed}: {expected['pod']}"
        assert got.node == expected["node"], f"{where}: {got.reason}: {got.message}"
        # A pod kube-scheduler bound after preempting: where it was nominated, whom it evicted.
        assert got.nominated_node == expected.get("nominatedNodeName"), where
        assert sorted(got.victims) == expected.get("victims", []), where
        if expected["node"] is None:
            assert got.reason == expected["reason"], where
            if "message" in expected:
                assert got.message == expected["message"], where
        # A pod with resource claims: the devices DynamicResources allocated to each claim.
        if "devices" in expected:
            assert _run(scenario, seed)[1][expected["pod"]] == expected["devices"], where


@pytest.mark.parametrize("scenario", _scenario_names())
def test_scenario_is_complete(scenario: str) -> None:
    directory = SCENARIOS / scenario
    meta = yaml.safe_load((directory / "scenario.yaml").read_text())
    assert meta["description"]
    assert meta.get("mode", "sequential") in ("sequential", "batch")
    expected = _expected(scenario)
    assert expected["kubeScheduler"].startswith("Kubernetes v1.34")
    # Every pod simulate schedules has a recorded expectation, and the other way round.
    assert sorted(p["pod"] for p in expected["pods"]) == sorted(_simulated(scenario, 0))


def test_known_divergences_name_real_pods() -> None:
    for scenario, pod in _known():
        assert pod in {p["pod"] for p in _expected(scenario)["pods"]}, (scenario, pod)


def test_every_default_plugin_is_covered() -> None:
    """Every default plugin implemented so far has a scenario of its own."""
    names = set(_scenario_names())
    for needed in (
        "fit-least-allocated",
        "fit-most-allocated",
        "fit-requested-to-capacity-ratio",
        "balanced-allocation",
        "image-locality",
        "taint-toleration",
        "node-affinity",
        "node-ports",
        "node-name",
        "node-unschedulable",
        "scheduling-gates",
        "priority-sort",
        "inter-pod-affinity-required",
        "inter-pod-affinity-preferred",
        "inter-pod-affinity-args",
        "pod-topology-spread-filter",
        "pod-topology-spread-score",
        "pod-topology-spread-defaults",
        "pod-topology-spread-defaults-list",
        "preemption",
        "volume-binding",
        "volume-zone",
        "node-volume-limits",
        "volume-restrictions",
        "dynamic-resources",
    ):
        assert needed in names
