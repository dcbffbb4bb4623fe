"""DynamicResources: kube-scheduler's behaviour for pods without resource claims."""

from __future__ import annotations

import random

from builders import make_pod
from kubesched.config import default_config
from kubesched.framework import Code, CycleState, Nodes, Snapshot, Status, build_frameworks
from kubesched.plugins import default_registry
from kubesched.plugins.dynamic_resources import (
    MSG_NO_CLAIMS_TO_DEALLOCATE,
    DynamicResources,
)


def _no_nodes() -> Nodes:
    snapshot = Snapshot()
    return Nodes(snapshot, snapshot.present_slots())


NO_NODES = _no_nodes()


def plugin() -> DynamicResources:
    """The default profile's, as a what-if run builds it (no client)."""
    fwk = build_frameworks(default_config(), default_registry(), Snapshot(), rng=random.Random(0))[
        "default-scheduler"
    ]
    found = fwk.plugin("DynamicResources")
    assert isinstance(found, DynamicResources)
    return found


def test_a_pod_without_claims_is_skipped_and_has_nothing_to_deallocate() -> None:
    p, state, pod = plugin(), CycleState(), make_pod("p")
    assert p.pre_filter(state, pod, NO_NODES) == (None, Status(Code.SKIP))
    assert p.post_filter(state, pod, {}) == (
        None,
        Status(Code.UNSCHEDULABLE, MSG_NO_CLAIMS_TO_DEALLOCATE),
    )


def test_post_filter_without_pre_filter_is_an_error() -> None:
    # An earlier PreFilter plugin rejected the pod: kube-scheduler's error text, as it is.
    _, status = plugin().post_filter(CycleState(), make_pod("p"), {})
    assert status is not None
    assert (status.code, status.message) == (Code.ERROR, "not found")
