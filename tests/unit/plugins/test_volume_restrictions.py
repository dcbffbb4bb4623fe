"""VolumeRestrictions: upstream's disk conflict tables (GCE PD, AWS EBS, RBD, iSCSI), the
ReadWriteOncePod cases with PreFilterExtensions, and the queueing hints
(volume_restrictions_test.go)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from test_volume_builders import claim_pod, cluster, handle, node, pvc

from builders import make_pod
from kubesched.api import Pod
from kubesched.framework import ActionType, Code, CycleState, Nodes, PodInfo, QueueingHint, Status
from kubesched.plugins.volume_restrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)

DISK_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_DISK_CONFLICT)
RWOP_CONFLICT = Status(Code.UNSCHEDULABLE, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT)


def volume_pod(name: str, *sources: Mapping[str, Any], node_name: str = "") -> Pod:
    volumes = [{"name": f"v{i}", **s} for i, s in enumerate(sources)]
    return make_pod(name, node_name=node_name, spec={"volumes": volumes})


def filter_on_node(
    pod: Pod, existing: Sequence[Pod], objects: Sequence[Any] = ()
) -> tuple[Status | None, Status | None]:
    """PreFilter, then Filter on one node running ``existing``: (per node, vectorized)."""
    snapshot = cluster([node("n")], objects, existing)
    plugin = VolumeRestrictions(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    _, pre = plugin.pre_filter(state, pod, nodes)
    if pre is not None and pre.code == Code.SKIP:
        return None, None
    assert pre is None
    [info] = nodes.infos()
    verdict = plugin.filter_nodes(state, pod, nodes)
    return plugin.filter(state, pod, info), verdict.statuses[int(verdict.ids[0])]


def gce(pd: str, read_only: bool = False) -> dict[str, Any]:
    return {"gcePersistentDisk": {"pdName": pd, "readOnly": read_only}}


def ebs(volume_id: str) -> dict[str, Any]:
    return {"awsElasticBlockStore": {"volumeID": volume_id}}


def rbd(monitors: list[str], pool: str, image: str, read_only: bool = False) -> dict[str, Any]:
    return {"rbd": {"monitors": monitors, "pool": pool, "image": image, "readOnly": read_only}}


def iscsi(iqn: str, read_only: bool = False) -> dict[str, Any]:
    return {
        "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": iqn, "lun": 0, "readOnly": read_only}
    }


@pytest.mark.parametrize(
    ("state", "state2"),
    [
        pytest.param(gce("foo"), gce("bar"), id="gce"),
        pytest.param(ebs("foo"), ebs("bar"), id="aws"),
        pytest.param(rbd(["a", "b"], "foo", "bar"), rbd(["c", "d"], "foo", "bar"), id="rbd"),
        pytest.param(
            iscsi("iqn.2016-12.server:storage.target01"),
            iscsi("iqn.2017-12.server:storage.target01"),
            id="iscsi",
        ),
    ],
)
@pytest.mark.parametrize(
    ("existing", "conflict"),
    [
        pytest.param([], False, id="nothing"),
        pytest.param(["state"], True, id="one state"),
        pytest.param(["state2"], False, id="another state"),
    ],
)
def test_disk_conflicts(
    state: dict[str, Any], state2: dict[str, Any], existing: list[str], conflict: bool
) -> None:
    pod = volume_pod("p", state)
    running = [
        volume_pod(f"e{i}", state if e == "state" else state2, node_name="n")
        for i, e in enumerate(existing)
    ]
    want = DISK_CONFLICT if conflict else None
    assert filter_on_node(pod, running) == (want, want)


@pytest.mark.parametrize(
    ("mine", "theirs", "conflict"),
    [
        pytest.param(gce("foo", True), gce("foo", True), False, id="gce both read-only"),
        pytest.param(gce("foo", True), gce("foo"), True, id="gce one writer"),
        pytest.param(iscsi("q", True), iscsi("q", True), False, id="iscsi both read-only"),
        pytest.param(
            rbd(["a"], "p", "i", True), rbd(["a", "b"], "p", "i", True), False, id="rbd read-only"
        ),
        pytest.param(
            rbd(["a"], "p", "i"), rbd(["b", "a"], "p", "i"), True, id="rbd shared monitor"
        ),
        pytest.param(rbd(["a"], "p", "i"), rbd(["a"], "q", "i"), False, id="rbd other pool"),
        pytest.param(ebs("v"), ebs("v"), True, id="ebs even read-only"),
    ],
)
def test_read_only_and_overlaps(
    mine: dict[str, Any], theirs: dict[str, Any], conflict: bool
) -> None:
    want = DISK_CONFLICT if conflict else None
    running = [volume_pod("e", theirs, node_name="n")]
    assert filter_on_node(volume_pod("p", mine), running) == (want, want)


def test_pods_without_restricted_volumes_are_skipped() -> None:
    snapshot = cluster([node("n")])
    plugin = VolumeRestrictions(handle(snapshot))
    for pod in (make_pod("a"), volume_pod("b", {"emptyDir": {}})):
        _, s = plugin.pre_filter(CycleState(), pod, Nodes(snapshot, snapshot.present_slots()))
        assert s == Status(Code.SKIP)


# --- ReadWriteOncePod ---------------------------------------------------------------------------

RWOP = pvc("claim-with-rwop-1", "", access_modes=["ReadWriteOncePod"])
RWOP2 = pvc("claim-with-rwop-2", "", access_modes=["ReadWriteOncePod"])
RWO = pvc("claim-with-rwo", "", access_modes=["ReadWriteOnce"])


def rwop_filter(
    pod: Pod, running: Sequence[Pod], objects: Sequence[Any]
) -> tuple[Status | None, Status | None]:
    snapshot = cluster([node("n"), node("m")], objects, running)
    plugin = VolumeRestrictions(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    _, pre = plugin.pre_filter(state, pod, nodes)
    if pre is not None and pre.code == Code.SKIP:
        return pre, None
    if pre is not None:
        return pre, None
    verdict = plugin.filter_nodes(state, pod, nodes)
    got = [verdict.statuses[i] for i in verdict.ids.tolist()]
    assert got[0] == got[1]  # the same on every node
    assert [plugin.filter(state, pod, info) for info in nodes.infos()] == got
    return None, got[0]


@pytest.mark.parametrize(
    ("pod", "running", "want_pre", "want"),
    [
        pytest.param(
            claim_pod("p", "claim-with-rwop-1"),
            [claim_pod("e", "claim-with-rwo", node_name="n")],
            Status(Code.SKIP),
            None,
            id="nothing to filter",
        ),
        pytest.param(
            claim_pod("p", "claim-with-rwop-1"),
            [claim_pod("e", "claim-with-rwop-1", node_name="m")],
            None,
            RWOP_CONFLICT,
            id="failed rwop conflict",
        ),
        pytest.param(
            claim_pod("p", "claim-with-rwop-1"),
            [claim_pod("e", "claim-with-rwop-1", node_name="n", namespace="other")],
            Status(Code.SKIP),
            None,
            id="same claim name in another namespace",
        ),
        pytest.param(
            claim_pod("p", "claim-with-rwop-2"),
            [claim_pod("e", "claim-with-rwop-1", node_name="n")],
            Status(Code.SKIP),
            None,
            id="another rwop claim in use",
        ),
        pytest.param(
            claim_pod("p", "claim-missing"),
            [],
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                'persistentvolumeclaim "claim-missing" not found',
            ),
            None,
            id="claim not found",
        ),
    ],
)
def test_read_write_once_pod(
    pod: Pod, running: list[Pod], want_pre: Status | None, want: Status | None
) -> None:
    assert rwop_filter(pod, running, [RWOP, RWOP2, RWO]) == (want_pre, want)


def test_preemption_what_ifs_count_rwop_users() -> None:
    victim = claim_pod("victim", "claim-with-rwop-1", node_name="n")
    snapshot = cluster([node("n")], [RWOP], [victim])
    plugin = VolumeRestrictions(handle(snapshot))
    pod = claim_pod("p", "claim-with-rwop-1")
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    assert plugin.pre_filter(state, pod, nodes)[1] is None
    [info] = nodes.infos()
    assert plugin.filter(state, pod, info) == RWOP_CONFLICT
    trial = state.clone()
    assert plugin.remove_pod(trial, pod, PodInfo.of(victim), info) is None
    assert plugin.filter(trial, pod, info) is None
    assert plugin.add_pod(trial, pod, PodInfo.of(victim), info) is None
    assert plugin.filter(trial, pod, info) == RWOP_CONFLICT
    # The clone did not change the original.
    assert plugin.filter(state, pod, info) == RWOP_CONFLICT


def test_a_pod_assumed_with_the_claim_counts() -> None:
    snapshot = cluster([node("n")], [RWOP])
    snapshot.add_pod(PodInfo.of(claim_pod("first", "claim-with-rwop-1")), "n")
    assert snapshot.is_pvc_used_by_pods("default", "claim-with-rwop-1")
    snapshot.remove_pod(next(iter(snapshot.get("n").pods)))  # type: ignore[union-attr]
    assert not snapshot.is_pvc_used_by_pods("default", "claim-with-rwop-1")


# --- queueing hints -------------------------------------------------------------------------


def test_events_to_register() -> None:
    plugin = VolumeRestrictions(handle(cluster()))
    assert {e.event.resource: e.event.action for e in plugin.events_to_register()} == {
        "Pod": ActionType.DELETE,
        "Node": ActionType.ADD,
        "PersistentVolumeClaim": ActionType.ADD,
    }


Q, S = QueueingHint.QUEUE, QueueingHint.SKIP


def test_hint_pvc_added() -> None:
    plugin = VolumeRestrictions(handle(cluster()))
    hint = plugin.is_schedulable_after_persistent_volume_claim_added
    pod = claim_pod("p", "claim-with-rwop-1")
    assert hint(pod, None, "not-a-pvc") == Q
    assert hint(pod, None, RWOP) == Q
    assert hint(pod, None, RWOP2) == S
    assert hint(pod, None, pvc("claim-with-rwop-1", "", namespace="other")) == S


def test_hint_pod_deleted() -> None:
    plugin = VolumeRestrictions(handle(cluster()))
    hint = plugin.is_schedulable_after_pod_deleted
    pod = volume_pod("p", gce("foo"))
    assert hint(pod, "not-a-pod", None) == Q
    assert hint(pod, volume_pod("e", gce("foo")), None) == Q
    assert hint(pod, volume_pod("e", gce("bar")), None) == S
    other_ns = make_pod("e", namespace="other", spec={"volumes": [{"name": "v", **gce("foo")}]})
    assert hint(pod, other_ns, None) == S
    rwop = claim_pod("p", "claim-with-rwop-1")
    assert hint(rwop, claim_pod("e", "claim-with-rwop-1"), None) == Q
    assert hint(rwop, claim_pod("e", "claim-with-rwo"), None) == S
