"""CycleState: the pod's derived values shared by the plugins of one cycle."""

from __future__ import annotations

from builders import make_pod
from kubesched.api import CPU
from kubesched.framework import CycleState, PodInfo


def test_pod_info_of_uses_the_info_handed_over_for_that_very_pod() -> None:
    pod = make_pod("p", cpu="250m")
    info = PodInfo.of(pod)
    state = CycleState()
    state.pod_info = info
    assert state.pod_info_of(pod) is info
    assert state.clone().pod_info_of(pod) is info


def test_pod_info_of_derives_once_for_another_pod() -> None:
    state = CycleState()
    state.pod_info = PodInfo.of(make_pod("other", cpu="1"))
    pod = make_pod("p", cpu="250m")
    info = state.pod_info_of(pod)
    assert info.pod is pod
    assert info.requests[CPU] == 250
    assert state.pod_info_of(pod) is info


def test_the_end_of_the_scheduling_cycle_drops_what_only_it_reads() -> None:
    state = CycleState()
    state.write("kept", 1)
    before = state.count()
    state.write("scoring", 2)
    state.write("filtering", 3)
    state.scheduling_cycle_only(state.keys_since(before))
    clone = state.clone()
    state.end_scheduling_cycle()
    assert state.get("kept") == 1
    assert state.get("scoring") is None
    assert state.get("filtering") is None
    # A clone taken before (preemption's) keeps its own.
    assert clone.get("filtering") == 3
    clone.end_scheduling_cycle()
    assert clone.get("filtering") is None
