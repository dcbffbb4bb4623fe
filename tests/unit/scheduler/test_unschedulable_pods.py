"""unschedulablePods: counted once per entry, gated pods and pods any event moves kept apart
(kube-scheduler's unschedulable_pods_test.go scenarios)."""

from __future__ import annotations

from builders import make_pod
from kubesched.framework import PodInfo, QueuedPodInfo
from kubesched.scheduler._unschedulable_pods import UnschedulablePods


def qinfo(name: str, *rejectors: str, gated_by: str = "") -> QueuedPodInfo:
    qpi = QueuedPodInfo(PodInfo.of(make_pod(name)), initial_attempt_timestamp=0, timestamp=0)
    qpi.unschedulable_plugins = set(rejectors)
    qpi.gated_by = gated_by
    return qpi


def uid(qpi: QueuedPodInfo) -> str:
    return qpi.pod.metadata.uid


def test_a_pod_counts_as_incoming_when_it_arrives_not_when_updated() -> None:
    incoming: dict[str, int] = {}
    pods = UnschedulablePods({"Fit"}, incoming)
    qpi = qinfo("p", "Fit")
    pods.add(qpi, "ScheduleAttemptFailure")
    pods.add(qpi, "UnschedulablePodUpdate")
    assert incoming == {"ScheduleAttemptFailure": 1}
    assert pods.delete(uid(qpi))
    assert not pods.delete(uid(qpi))
    pods.add(qpi, "NodeAdd")
    assert incoming == {"ScheduleAttemptFailure": 1, "NodeAdd": 1}


def test_gated_pods_are_kept_apart_and_follow_updates() -> None:
    pods = UnschedulablePods({"Fit", "SchedulingGates"}, {})
    gated = qinfo("g", "SchedulingGates", gated_by="SchedulingGates")
    plain = qinfo("p", "Fit")
    pods.add(gated, "UnschedulablePodAdd")
    pods.add(plain, "ScheduleAttemptFailure")
    assert (pods.size(), pods.gated_size()) == (2, 1)
    assert pods.gated(uid(gated))
    assert not pods.gated(uid(plain))
    gated.gated_by = ""
    pods.add(gated, "UnschedulablePodUpdate")
    assert pods.gated_size() == 0
    gated.gated_by = "SchedulingGates"
    pods.add(gated, "UnschedulablePodUpdate")
    pods.delete(uid(gated))
    assert (pods.size(), pods.gated_size()) == (1, 0)
    assert pods.get(uid(plain)) is plain
    assert pods.get(uid(gated)) is None
    assert [p.metadata.name for p in pods.pods()] == ["p"]


def test_pods_any_event_moves_are_those_without_a_registered_rejector() -> None:
    pods = UnschedulablePods({"Fit"}, {})
    erred = qinfo("erred")
    fit = qinfo("fit", "Fit")
    silent = qinfo("silent", "Fit", "NoEvents")  # NoEvents registered nothing
    for q in (erred, fit, silent):
        pods.add(q, "ScheduleAttemptFailure")
    assert {q.pod.metadata.name for _, q in pods.catch_all()} == {"erred", "silent"}
    assert {q.pod.metadata.name for q in pods.pod_infos()} == {"erred", "fit", "silent"}
    silent.unschedulable_plugins = {"Fit"}
    pods.add(silent, "UnschedulablePodUpdate")
    pods.delete(uid(erred))
    assert pods.catch_all() == []


def test_an_event_reaches_the_pods_not_gated_and_those_its_gating_plugin_may_lift() -> None:
    """Gated pods are kept by gating plugin: an event that cannot lift a plugin's gate does not
    reach any of the pods it gates (nor is each of them looked at)."""
    pods = UnschedulablePods({"Fit", "SchedulingGates", "DefaultPreemption"}, {})
    plain = qinfo("plain", "Fit")
    gates = [qinfo(f"gates-{i}", "SchedulingGates", gated_by="SchedulingGates") for i in range(3)]
    preempting = qinfo("preempting", "Fit", "DefaultPreemption", gated_by="DefaultPreemption")
    for q in (plain, *gates, preempting):
        pods.add(q, "ScheduleAttemptFailure")

    def names(lifted: set[str]) -> list[str]:
        return sorted(q.pod.metadata.name for _, q in pods.reachable(lifted.__contains__))

    assert names(set()) == ["plain"]
    assert names({"DefaultPreemption"}) == ["plain", "preempting"]
    assert names({"SchedulingGates", "DefaultPreemption"}) == sorted(
        ["plain", "preempting", "gates-0", "gates-1", "gates-2"]
    )
    # A pod no longer gated, one gated by another plugin now, one gone: the groups follow.
    gates[0].gated_by = ""
    pods.add(gates[0], "UnschedulablePodUpdate")
    preempting.gated_by = "SchedulingGates"
    pods.add(preempting, "UnschedulablePodUpdate")
    pods.delete(uid(gates[1]))
    assert names(set()) == ["gates-0", "plain"]
    assert names({"SchedulingGates"}) == ["gates-0", "gates-2", "plain", "preempting"]
    assert names({"DefaultPreemption"}) == ["gates-0", "plain"]
    assert pods.gated_size() == 2


def test_a_pod_gated_again_alike_keeps_its_place_and_counts_as_arriving() -> None:
    """Gated again by the same plugin: counted as arriving, where it was; gated by another
    (added again): kept under that one, counted too."""
    incoming: dict[str, int] = {}
    pods = UnschedulablePods({"Fit", "Preempting", "Other"}, incoming)
    first, second = (qinfo(n, "Fit", "Preempting", gated_by="Preempting") for n in ("a", "b"))
    for q in (first, second):
        pods.add(q, "NodeAdd")
    pods.count_incoming("AssignedPodDelete")
    assert incoming == {"NodeAdd": 2, "AssignedPodDelete": 1}
    pods.count_incoming("AssignedPodDelete", 3)
    assert incoming == {"NodeAdd": 2, "AssignedPodDelete": 4}
    assert [q.pod.metadata.name for _, q in pods.reachable(lambda gate: gate == "Preempting")] == [
        "a",
        "b",
    ]
    second.gated_by = "Other"
    pods.add_again(second, "AssignedPodDelete")
    assert incoming == {"NodeAdd": 2, "AssignedPodDelete": 5}
    assert pods.reachable(lambda gate: gate == "Preempting") == [(first.pod.metadata.uid, first)]
    assert pods.reachable(lambda gate: gate == "Other") == [(second.pod.metadata.uid, second)]
    assert (pods.size(), pods.gated_size()) == (2, 2)
