"""SchedulingGates: PreEnqueue verdicts and the queueing hint (kube-scheduler's cases)."""

from __future__ import annotations

from typing import Any, cast

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import ActionType, ClusterEvent, Code, Handle, QueueingHint, Status
from kubesched.plugins.scheduling_gates import SchedulingGates

PLUGIN = SchedulingGates(cast(Handle, None))


def gated(name: str, *gates: str, uid: str = "") -> Pod:
    pod = make_pod(name, spec={"schedulingGates": [{"name": g} for g in gates]})
    if uid:
        pod.metadata.uid = uid
    return pod


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod("p"), None, id="pod does not carry scheduling gates"),
        pytest.param(
            gated("p", "foo"),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo]"),
            id="pod carries one gate",
        ),
        pytest.param(
            gated("p", "foo", "bar"),
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for scheduling gates: [foo bar]"),
            id="pod carries gates, listed in order",
        ),
    ],
)
def test_pre_enqueue(pod: Pod, want: Status | None) -> None:
    assert PLUGIN.pre_enqueue(pod) == want


def test_events_to_register() -> None:
    [registered] = PLUGIN.events_to_register()
    assert registered.event == ClusterEvent(
        "Pod", ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    )
    assert registered.hint is not None


def _without_gates(pod: Pod) -> Pod:
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, scheduling_gates=[]))


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(
            gated("p", "foo", uid="uid0"),
            _without_gates(gated("p", "foo", uid="uid0")),
            QueueingHint.QUEUE,
            id="queue-the-pod-itself",
        ),
        pytest.param(
            gated("q", "foo", uid="uid1"),
            _without_gates(gated("q", "foo", uid="uid1")),
            QueueingHint.SKIP,
            id="skip-another-pod",
        ),
        pytest.param(None, make_node("n"), QueueingHint.QUEUE, id="queue-on-wrong-object"),
    ],
)
def test_hint(old: Any, new: Any, want: QueueingHint) -> None:
    target = gated("p", "foo", uid="uid0")
    assert PLUGIN.is_schedulable_after_gates_eliminated(target, old, new) is want
