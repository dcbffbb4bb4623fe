"""DynamicResources: kube-scheduler's behaviour for pods without resource claims, and a clear
rejection of pods with claims."""

from __future__ import annotations

import msgspec

from builders import make_pod
from kubesched.api import Pod, PodResourceClaim
from kubesched.framework import Code, CycleState, Nodes, Snapshot, Status
from kubesched.plugins.dynamic_resources import (
    MSG_NO_CLAIMS_TO_DEALLOCATE,
    MSG_STILL_NOT_SCHEDULABLE,
    DynamicResources,
)


def _no_nodes() -> Nodes:
    snapshot = Snapshot()
    return Nodes(snapshot, snapshot.present_slots())


NO_NODES = _no_nodes()


def plugin() -> DynamicResources:
    return DynamicResources(handle=None, args=None)  # type: ignore[arg-type]


def with_claims(pod: Pod, *names: str) -> Pod:
    claims = [PodResourceClaim(name=n, resource_claim_template_name=f"{n}-t") for n in names]
    return msgspec.structs.replace(
        pod, spec=msgspec.structs.replace(pod.spec, resource_claims=claims)
    )


def test_a_pod_without_claims_is_skipped_and_has_nothing_to_deallocate() -> None:
    p, state, pod = plugin(), CycleState(), make_pod("p")
    assert p.pre_filter(state, pod, NO_NODES) == (None, Status(Code.SKIP))
    assert p.post_filter(state, pod, {}) == (
        None,
        Status(Code.UNSCHEDULABLE, MSG_NO_CLAIMS_TO_DEALLOCATE),
    )


def test_a_pod_with_claims_is_rejected_naming_them() -> None:
    p, state, pod = plugin(), CycleState(), with_claims(make_pod("p"), "gpu", "nic")
    result, status = p.pre_filter(state, pod, NO_NODES)
    assert result is None
    assert status == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "pod has resource claims (gpu, nic): kubesched does not allocate dynamic resources",
    )
    assert p.post_filter(state, pod, {}) == (
        None,
        Status(Code.UNSCHEDULABLE, MSG_STILL_NOT_SCHEDULABLE),
    )


def test_post_filter_without_pre_filter_is_an_error() -> None:
    # An earlier PreFilter plugin rejected the pod: kube-scheduler's error text, as it is.
    _, status = plugin().post_filter(CycleState(), make_pod("p"), {})
    assert status is not None
    assert (status.code, status.message) == (Code.ERROR, "not found")
