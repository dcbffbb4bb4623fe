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
