#!/usr/bin/env python3
"""Behaviour between decisions: which cluster event retries which pod, and when.

A dynamics scenario (``dynamics/<name>.yaml``) sets a cluster up, starts a scheduler, creates
pending pods and waits until each is decided (reported unschedulable or gated, or kept out of
the queue by a PreEnqueue plugin, which writes no condition but is counted in the scheduler's
``scheduler_pending_pods{queue="gated"}``), then changes the cluster step by step (create,
patch, delete, sleep) and watches for ``watch`` seconds what becomes of each pod: bound (to
which node, how many seconds after the last step) or not (with its final ``PodScheduled``
message, none for a pod still gated by a PreEnqueue plugin), how many scheduling attempts the
scheduler made after the pods were first decided (``scheduler_schedule_attempts_total``), and
which cluster events moved a pod out of unschedulablePods
(``scheduler_queue_incoming_pods_total``).

``record`` (this script) runs every scenario against the real kube-scheduler and writes
``dynamics/<name>.expected.yaml``; ``tests/e2e/scheduler/test_dynamics.py`` runs the same
scenarios against ``kubesched run`` and compares (:func:`compare`).

Run from the repository root:  PYTHONPATH=tests python tests/conformance/dynamics.py [SCENARIO ...]
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml
from prometheus_client.parser import text_string_to_metric_families

from conformance.regenerate import (
    OBJECT_KINDS,
    Api,
    clean,
    create_node,
    create_object,
    create_pod,
    ensure_namespace,
    key,
    recording,
    scheduler_config,
)
from kubesched import cluster

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "dynamics"
DEFAULT_CONFIG = HERE / "default-config.yaml"
POLL = 0.05
DECIDE_TIMEOUT = 30.0
#: How much later than kube-scheduler kubesched may bind a pod, in seconds.
LATENESS = 1.0
#: How long an admission policy takes to be enforced once its binding exists: the API server
#: reloads its policies every second (``policyRefreshInterval``), with a margin.
POLICY_SETTLE = 2.5

#: kind -> (collection path, namespaced, has a status subresource written separately)
KINDS: dict[str, tuple[str, bool, bool]] = {
    kind: (path, namespaced, status) for kind, path, namespaced, status in OBJECT_KINDS
}
KINDS.update(
    {
        "Node": ("/api/v1/nodes", False, True),
        "Pod": ("/api/v1/namespaces/{ns}/pods", True, False),
        "Namespace": ("/api/v1/namespaces", False, False),
        "PriorityClass": ("/apis/scheduling.k8s.io/v1/priorityclasses", False, False),
    }
)


@dataclass
class Scenario:
    name: str
    description: str
    config: dict[str, Any]
    setup: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    watch: float
    #: Compare the number of attempts after the pods were decided (where timing cannot vary it).
    compare_attempts: bool
    #: Extra lateness allowed (a periodic flush whose phase differs between runs).
    slack: float
    #: kube-scheduler's ``--pod-max-in-unschedulable-pods-duration``, in seconds.
    max_in_unschedulable: float | None
    #: Where kubesched knowingly does otherwise than kube-scheduler v1.34.4: ``why``, and
    #: under ``kubesched`` what it does instead (pods' fields, ``movedBy``, ``attempts``); the
    #: replay requires exactly that difference (:func:`diverged`).
    divergence: dict[str, Any] | None

    @property
    def expected_path(self) -> Path:
        return SCENARIOS / f"{self.name}.expected.yaml"

    def step_objects(self) -> Iterator[dict[str, Any]]:
        for step in self.steps:
            for verb in ("create", "patch", "delete"):
                if verb in step:
                    yield step[verb]


def load(name: str) -> Scenario:
    doc = yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())
    config = doc.get("config") or yaml.safe_load(DEFAULT_CONFIG.read_text())
    return Scenario(
        name=name,
        description=doc["description"],
        config=config,
        setup=list(doc.get("setup") or []),
        pods=list(doc["pods"]),
        steps=list(doc["steps"]),
        watch=float(doc.get("watch", 10)),
        compare_attempts=bool(doc.get("compareAttempts", False)),
        slack=float(doc.get("slack", 0)),
        max_in_unschedulable=doc.get("podMaxInUnschedulablePodsDuration"),
        divergence=doc.get("divergence"),
    )


def diverged(expected: Mapping[str, Any], divergence: Mapping[str, Any]) -> dict[str, Any]:
    """``expected`` with what kubesched knowingly does instead (``divergence["kubesched"]``)."""
    instead = divergence["kubesched"]
    out = copy.deepcopy(dict(expected))
    for entry in out["pods"]:
        entry.update(instead.get("pods", {}).get(entry["pod"], {}))
    for field in ("movedBy", "attempts"):
        if field in instead:
            out[field] = instead[field]
    return out


def names() -> list[str]:
    return sorted(p.stem for p in SCENARIOS.glob("*.yaml") if not p.stem.endswith(".expected"))


class Scheduler(Protocol):
    """A running scheduler: its ``/metrics`` text."""

    def metrics(self) -> str: ...


#: Starts a scheduler with a configuration (profiles renamed) and stops it on exit.
Launcher = Callable[[dict[str, Any], Scenario], AbstractContextManager[Scheduler]]


def _path(doc: Mapping[str, Any]) -> tuple[str, str, bool]:
    """The collection path of ``doc``'s kind, its name, and whether it has a status to write."""
    collection, namespaced, status = KINDS[doc["kind"]]
    meta = doc["metadata"]
    ns = meta.get("namespace") or "default"
    return collection.format(ns=ns) if namespaced else collection, meta["name"], status


def create(api: Api, doc: dict[str, Any], renamed: Mapping[str, str]) -> None:
    """Create ``doc`` as the recorder creates a scenario's objects of its kind."""
    kind = doc["kind"]
    if kind == "Node":
        create_node(api, copy.deepcopy(doc))
    elif kind == "Pod":
        create_pod(api, doc, renamed)
    elif kind == "Namespace":
        ensure_namespace(api, doc["metadata"]["name"], doc["metadata"].get("labels") or {})
    else:
        collection, _, status = _path(doc)
        create_object(api, doc, collection, status)
        if kind == "ValidatingAdmissionPolicyBinding":
            time.sleep(POLICY_SETTLE)


def apply(api: Api, step: Mapping[str, Any], renamed: Mapping[str, str]) -> None:
    """One step: ``create``, ``patch`` (a JSON merge patch, ``subresource: status`` optional),
    ``delete`` or ``sleep``."""
    if "sleep" in step:
        time.sleep(float(step["sleep"]))
    elif "create" in step:
        create(api, step["create"], renamed)
    elif "patch" in step:
        target = step["patch"]
        collection, name, _ = _path(target)
        sub = f"/{target['subresource']}" if target.get("subresource") else ""
        api.request(
            "PATCH",
            f"{collection}/{name}{sub}",
            target["patch"],
            content_type="application/merge-patch+json",
        )
    elif "delete" in step:
        collection, name, _ = _path(step["delete"])
        api.request(
            "DELETE", f"{collection}/{name}", params={"gracePeriodSeconds": "0"}, ok=(200, 202)
        )
    else:
        raise ValueError(f"unknown step {dict(step)}")


def _decided(pod: Mapping[str, Any]) -> bool:
    if pod["spec"].get("nodeName"):
        return True
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _message(pod: Mapping[str, Any]) -> dict[str, Any]:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            out = {"reason": c.get("reason", "")}
            if c.get("reason") != "SchedulingGated":
                out["message"] = c.get("message", "")
            return out
    return {}


def _pods(api: Api, scenario: Scenario) -> dict[str, dict[str, Any]]:
    namespaces = {p["metadata"].get("namespace") or "default" for p in scenario.pods}
    return {
        key(p): p
        for ns in sorted(namespaces)
        for p in api.request("GET", f"/api/v1/namespaces/{ns}/pods")["items"]
    }


def run(api: Api, scenario: Scenario, launch: Launcher) -> dict[str, Any]:
    """Run ``scenario`` with the scheduler ``launch`` starts; what became of each pod."""
    clean(api)
    config, renamed = scheduler_config(scenario.config)
    namespaces = {
        d["metadata"].get("namespace") or "default"
        for d in [*scenario.setup, *scenario.pods, *scenario.step_objects()]
        if d["kind"] not in ("Namespace", "Node", "PriorityClass", "PersistentVolume")
    }
    for ns in sorted(namespaces):
        ensure_namespace(api, ns, {})
    for doc in scenario.setup:
        create(api, doc, renamed)
    with launch(config, scenario) as scheduler:
        for doc in scenario.pods:
            create(api, doc, renamed)
        wanted = [key(p) for p in scenario.pods]
        first = _wait(api, scenario, wanted, _decided, DECIDE_TIMEOUT, scheduler)
        before = scheduler.metrics()
        for step in scenario.steps:
            apply(api, step, renamed)
        last_step = time.monotonic()
        bound_after: dict[str, float] = {}
        deadline = last_step + scenario.watch
        pods = first
        while time.monotonic() < deadline and len(bound_after) < len(wanted):
            pods = _pods(api, scenario)
            now = time.monotonic()
            for k in wanted:
                if k not in bound_after and pods.get(k, {}).get("spec", {}).get("nodeName"):
                    bound_after[k] = now - last_step
            time.sleep(POLL)
        pods = _pods(api, scenario)
        after = scheduler.metrics()
    outcome: list[dict[str, Any]] = []
    for k in wanted:
        pod = pods.get(k)
        entry: dict[str, Any] = {"pod": k, "first": _message(first[k])}
        if pod is not None and pod["spec"].get("nodeName"):
            entry["node"] = pod["spec"]["nodeName"]
            entry["boundAfter"] = round(bound_after.get(k, 0.0), 2)
        else:
            entry["node"] = None
            entry.update(_message(pod) if pod else {"reason": "Deleted"})
        outcome.append(entry)
    return {
        "pods": outcome,
        "attempts": attempts_from_metrics(after) - attempts_from_metrics(before),
        "movedBy": moved_by(before, after),
    }


def _wait(
    api: Api,
    scenario: Scenario,
    wanted: list[str],
    done: Callable[[Mapping[str, Any]], bool],
    timeout: float,
    scheduler: Scheduler,
) -> dict[str, dict[str, Any]]:
    """Poll until every pod is ``done``, or those that are not are all gated by a PreEnqueue
    plugin (no condition written): the scheduler's gated pods are exactly those and the pods
    gated by ``schedulingGates`` (which the API server marks ``SchedulingGated``), two polls
    in a row."""
    deadline = time.monotonic() + timeout
    settled = False
    while True:
        pods = _pods(api, scenario)
        missing = [k for k in wanted if k not in pods or not done(pods[k])]
        if not missing:
            return pods
        held = False
        if all(k in pods for k in missing):
            marked = sum(_message(p).get("reason") == "SchedulingGated" for p in pods.values())
            held = _gated(scheduler.metrics()) == len(missing) + marked
        if held and settled:
            return pods
        settled = held
        if time.monotonic() > deadline:
            raise RuntimeError(f"{scenario.name}: undecided after {timeout}s: {missing}")
        time.sleep(POLL)


def _gated(text: str) -> int:
    """``scheduler_pending_pods{queue="gated"}``."""
    return int(
        sum(
            value
            for labels, value in _samples(text, "scheduler_pending_pods").items()
            if dict(labels).get("queue") == "gated"
        )
    )


def compare(expected: Mapping[str, Any], got: Mapping[str, Any], scenario: Scenario) -> list[str]:
    """How ``got`` (kubesched) differs from ``expected`` (kube-scheduler); empty if it agrees."""
    problems: list[str] = []
    by_pod = {p["pod"]: p for p in got["pods"]}
    for want in expected["pods"]:
        k = want["pod"]
        have = by_pod.get(k)
        if have is None:
            problems.append(f"{k}: missing")
            continue
        if have["first"] != want["first"]:
            problems.append(f"{k}: first decision {have['first']} != {want['first']}")
        if have["node"] != want["node"]:
            problems.append(f"{k}: node {have['node']!r} != kube-scheduler's {want['node']!r}")
        elif want["node"] is None:
            if have.get("message") != want.get("message") or have.get("reason") != want.get(
                "reason"
            ):
                problems.append(
                    f"{k}: final {have.get('reason')}: {have.get('message')!r} != "
                    f"{want.get('reason')}: {want.get('message')!r}"
                )
        else:
            allowed = want["boundAfter"] + LATENESS + scenario.slack
            if have["boundAfter"] > allowed:
                problems.append(
                    f"{k}: bound {have['boundAfter']}s after the last step, kube-scheduler "
                    f"{want['boundAfter']}s (allowed {allowed:.2f}s)"
                )
    if "movedBy" in expected and got["movedBy"] != expected["movedBy"]:
        problems.append(
            f"moved by {got['movedBy']} (scheduler_queue_incoming_pods_total), "
            f"kube-scheduler by {expected['movedBy']}"
        )
    if scenario.compare_attempts and got["attempts"] != expected["attempts"]:
        problems.append(
            f"attempts after the pods were decided: {got['attempts']} != "
            f"kube-scheduler's {expected['attempts']}"
        )
    return problems


# --- recording against the real kube-scheduler -----------------------------------------------


def attempts_from_metrics(text: str) -> int:
    """The sum of ``scheduler_schedule_attempts_total`` over its labels."""
    return int(sum(_samples(text, "scheduler_schedule_attempts_total").values()))


#: Moves into a sub-queue that no cluster event caused.
_BOOKKEEPING = frozenset(
    {
        "ScheduleAttemptFailure",
        "BackoffComplete",
        "PopFromBackoffQ",
        "UnschedulablePodAdd",
        "UnschedulablePodUpdate",
    }
)


def moved_by(before: str, after: str) -> list[str]:
    """The cluster events that moved a pod to activeQ or backoffQ between the two scrapes
    (``scheduler_queue_incoming_pods_total``'s ``event`` label)."""
    old = _samples(before, "scheduler_queue_incoming_pods_total")
    new = _samples(after, "scheduler_queue_incoming_pods_total")
    events = set()
    for labels, value in new.items():
        fields = dict(labels)
        if value > old.get(labels, 0.0) and fields.get("queue") in ("active", "backoff"):
            events.add(fields.get("event", ""))
    return sorted(events - _BOOKKEEPING)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


class _KubeScheduler:
    def __init__(self, api: Api, url: str) -> None:
        self.api = api
        self.url = url

    def metrics(self) -> str:
        return self.api.get_text(f"{self.url}/metrics")


class KubeSchedulerLauncher:
    """Starts the built kube-scheduler on ``cluster_name`` for one scenario."""

    def __init__(self, api: Api, cluster_name: str) -> None:
        self.api = api
        self.cluster_name = cluster_name

    @contextmanager
    def __call__(self, config: dict[str, Any], scenario: Scenario) -> Iterator[Scheduler]:
        name = "kube-scheduler-dynamics"
        path = SCENARIOS / f".{scenario.name}.config.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        extra = []
        if scenario.max_in_unschedulable is not None:
            extra.append(
                f"--pod-max-in-unschedulable-pods-duration={scenario.max_in_unschedulable}s"
            )
        try:
            started = cluster.start_kube_scheduler(
                path, cluster=self.cluster_name, name=name, extra_args=extra
            )
            yield _KubeScheduler(self.api, started.url)
        finally:
            cluster.stop_component(name, cluster=self.cluster_name)
            path.unlink(missing_ok=True)


def main() -> None:
    with recording(__doc__.split("\n\n")[0]) as rec:
        launch = KubeSchedulerLauncher(rec.api, rec.cluster)
        for name in rec.scenarios or names():
            scenario = load(name)
            sys.stderr.write(f"{name}\n")
            result = run(rec.api, scenario, launch)
            header = "# Recorded from the real kube-scheduler by dynamics.py; do not edit.\n"
            body = {"generatedBy": "tests/conformance/dynamics.py", "kubeScheduler": rec.version}
            body.update(result)
            scenario.expected_path.write_text(
                header + yaml.safe_dump(body, sort_keys=False, width=1000)
            )
            for p in result["pods"]:
                sys.stderr.write(f"  {p}\n")
            sys.stderr.write(f"  attempts: {result['attempts']}\n")


if __name__ == "__main__":
    main()
