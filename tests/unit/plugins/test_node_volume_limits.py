"""NodeVolumeLimits: upstream's TestCSILimits cases (csi_test.go) with CSINode and node
allocatable limits, in-tree migration and generic ephemeral volumes; the queueing hints; and the
vectorized Filter against the per-node one."""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, cast

import msgspec
import pytest
from test_volume_builders import (
    FakeHandle,
    claim_pod,
    cluster,
    csi_node,
    handle,
    node,
    pv,
    pvc,
    storage_class,
)

from builders import make_pod
from kubesched.api import CSINode, Pod, VolumeAttachment
from kubesched.framework import (
    ActionType,
    Code,
    CycleState,
    Handle,
    Nodes,
    PodInfo,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.plugins.node_volume_limits import (
    ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,
    NodeVolumeLimits,
    csi_attach_limit_key,
)

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
AWS_IN_TREE = "kubernetes.io/aws-ebs"
HOSTPATH_IN_TREE = "kubernetes.io/hostpath"
SC = "csi-sc"
EXCEEDED = Status(Code.UNSCHEDULABLE, ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED)


def volumes_of(driver: str, n: int = 5) -> list[Any]:
    """PVCs ``csi-<driver>-<i>`` bound to PVs of the driver (in-tree sources for in-tree names)."""
    out: list[Any] = []
    for i in range(n):
        name = f"csi-{driver}-{i}"
        if driver == AWS_IN_TREE:
            spec: dict[str, Any] = {"awsElasticBlockStore": {"volumeID": name}}
        elif driver == HOSTPATH_IN_TREE:
            spec = {}
        else:
            spec = {"csi": {"driver": driver, "volumeHandle": name}}
        out.append(pvc(name, None, namespace="default", bound_to=name))
        out.append(pv(name, spec=spec))
    return out


def fixtures(drivers: Sequence[str]) -> list[Any]:
    objects: list[Any] = [storage_class(SC, provisioner=drivers[0])]
    for d in drivers:
        objects.extend(volumes_of(d))
    objects.append(pvc("csi-4", SC))  # pending, counted through its class
    objects.append(pvc("csi-5", None))  # no class: not counted
    objects.append(pvc("csi-6", SC, volume_name="missing in action"))
    return objects


def limits_node(
    limit_source: str, limit: int, drivers: Sequence[str], *, migrated: Sequence[str] = ()
) -> tuple[Any, CSINode | None]:
    extra: dict[str, str] = {}
    csi = None
    if limit_source in ("node", "both"):
        extra = {csi_attach_limit_key(d): str(limit) for d in drivers}
    if limit_source in ("csinode", "both"):
        csi = csi_node("node-for-max-pd-test-1", dict.fromkeys(drivers, limit), migrated=migrated)
    elif limit_source == "csinode-with-no-limit":
        csi = csi_node("node-for-max-pd-test-1", dict.fromkeys(drivers), migrated=migrated)
    elif limit_source == "no-csi-driver":
        csi = csi_node("node-for-max-pd-test-1", {}, migrated=migrated)
    return node("node-for-max-pd-test-1", extra=extra), csi


def on_node(pod: Pod) -> Pod:
    raw = [{"name": v.name, **volume_source(v)} for v in pod.spec.volumes]
    return make_pod(
        pod.metadata.name,
        namespace=pod.metadata.namespace,
        node_name="node-for-max-pd-test-1",
        spec={"volumes": raw},
    )


def volume_source(v: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(v)
    out.pop("name")
    return out


def pvc_pod(*claims: str) -> Pod:
    return claim_pod("p", *claims)


RUNNING = pvc_pod(f"csi-{EBS}-3")
PENDING = pvc_pod("csi-4")
UNBOUND_2 = pvc_pod("csi-4")
MISSING_PV = pvc_pod("csi-6")
NO_SC = pvc_pod("csi-5")
GCE_TWO = pvc_pod(f"csi-{GCE}-1", f"csi-{GCE}-2")
IN_TREE_ONE = pvc_pod(f"csi-{AWS_IN_TREE}-0")
IN_TREE_TWO = pvc_pod(f"csi-{AWS_IN_TREE}-1", f"csi-{AWS_IN_TREE}-2")
EBS_ONE = pvc_pod(f"csi-{EBS}-0")
EBS_TWO = pvc_pod(f"csi-{EBS}-1", f"csi-{EBS}-2")
HOSTPATH_ONE = pvc_pod(f"csi-{HOSTPATH_IN_TREE}-0")
INLINE = make_pod(
    "p", spec={"volumes": [{"name": "v", "awsElasticBlockStore": {"volumeID": "aws-inline1"}}]}
)
INLINE_SAME_ID = make_pod(
    "p", spec={"volumes": [{"name": "v", "awsElasticBlockStore": {"volumeID": f"csi-{EBS}-1"}}]}
)
CONFIG_ONLY = make_pod(
    "p", spec={"volumes": [{"name": "c", "configMap": {}}, {"name": "s", "secret": {}}]}
)

CASES = [
    pytest.param(
        EBS_ONE,
        [RUNNING, EBS_TWO],
        4,
        [EBS],
        "csinode",
        (),
        None,
        id="fits when node volume limit >= new pods CSI volume",
    ),
    pytest.param(
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "csinode",
        (),
        EXCEEDED,
        id="doesn't when node volume limit <= pods CSI volume",
    ),
    pytest.param(
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "csinode-with-no-limit",
        (),
        None,
        id="driver does not support volume limits",
    ),
    pytest.param(
        EBS_ONE,
        [PENDING, EBS_TWO],
        2,
        [EBS],
        "csinode",
        (),
        EXCEEDED,
        id="count pending PVCs towards volume limit",
    ),
    pytest.param(
        EBS_ONE,
        [PENDING, UNBOUND_2, EBS_TWO],
        4,
        [EBS],
        "csinode",
        (),
        None,
        id="two same pending PVCs count once",
    ),
    pytest.param(
        EBS_ONE,
        [MISSING_PV, EBS_TWO],
        2,
        [EBS],
        "csinode",
        (),
        EXCEEDED,
        id="PVC with invalid PV name but valid SC counts",
    ),
    pytest.param(
        EBS_ONE,
        [RUNNING, NO_SC],
        2,
        [EBS],
        "csinode",
        (),
        None,
        id="pvcs with missing SC do not count",
    ),
    pytest.param(
        EBS_ONE,
        [GCE_TWO, EBS_TWO],
        2,
        [EBS, GCE],
        "csinode",
        (),
        EXCEEDED,
        id="count pvcs with the same type",
    ),
    pytest.param(
        GCE_TWO,
        [EBS_TWO, RUNNING],
        2,
        [EBS, GCE],
        "csinode",
        (),
        None,
        id="don't count pvcs with a different type",
    ),
    pytest.param(
        IN_TREE_ONE,
        [IN_TREE_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        EXCEEDED,
        id="in-tree volumes count when migrated",
    ),
    pytest.param(
        IN_TREE_ONE,
        [IN_TREE_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode",
        (),
        None,
        id="in-tree volumes do not count unless migrated",
    ),
    pytest.param(
        INLINE, [IN_TREE_TWO], 2, [AWS_IN_TREE, EBS], "", [AWS_IN_TREE], None, id="nil csi node"
    ),
    pytest.param(
        PENDING,
        [IN_TREE_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        EXCEEDED,
        id="unbound in-tree volumes count when migrated",
    ),
    pytest.param(
        IN_TREE_ONE,
        [IN_TREE_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode-with-no-limit",
        [AWS_IN_TREE],
        None,
        id="no limits reported",
    ),
    pytest.param(
        HOSTPATH_ONE,
        [EBS_TWO],
        2,
        [HOSTPATH_IN_TREE, EBS],
        "csinode",
        [HOSTPATH_IN_TREE],
        None,
        id="non-migratable in-tree volumes do not count",
    ),
    pytest.param(
        INLINE,
        [IN_TREE_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        EXCEEDED,
        id="in-tree inline volumes count when migrated",
    ),
    pytest.param(
        IN_TREE_ONE,
        [EBS_TWO],
        2,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        EXCEEDED,
        id="in-tree and csi volumes count together",
    ),
    pytest.param(
        INLINE,
        [EBS_TWO, IN_TREE_ONE],
        3,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        EXCEEDED,
        id="in-tree, inline and csi volumes count together",
    ),
    pytest.param(
        INLINE_SAME_ID,
        [EBS_TWO, IN_TREE_ONE],
        3,
        [AWS_IN_TREE, EBS],
        "csinode",
        [AWS_IN_TREE],
        None,
        id="an inline volume already attached is not counted again",
    ),
    # v1.34 reads limits from CSINodes only: a node's attachable-volumes allocatable is none.
    pytest.param(
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "node",
        (),
        None,
        id="the node's allocatable is no limit",
    ),
    pytest.param(
        EBS_ONE,
        [RUNNING, EBS_TWO],
        2,
        [EBS],
        "both",
        (),
        EXCEEDED,
        id="the CSINode's limit, beside the node's allocatable",
    ),
    pytest.param(
        EBS_ONE, [RUNNING, EBS_TWO], 2, [EBS], "no-csi-driver", (), None, id="no driver on the node"
    ),
    pytest.param(
        CONFIG_ONLY, [EBS_TWO], 0, [EBS], "csinode", (), None, id="only configmaps and secrets"
    ),
    pytest.param(
        EBS_TWO, [EBS_TWO], 2, [EBS], "csinode", (), None, id="the same volumes already attached"
    ),
]


@pytest.mark.parametrize(
    ("new_pod", "existing", "limit", "drivers", "limit_source", "migrated", "want"), CASES
)
def test_csi_limits(
    new_pod: Pod,
    existing: list[Pod],
    limit: int,
    drivers: list[str],
    limit_source: str,
    migrated: Sequence[str],
    want: Status | None,
) -> None:
    n, csi = limits_node(limit_source, limit, drivers, migrated=migrated)
    objects = fixtures(drivers)
    if csi is not None:
        objects.append(csi)
    snapshot = cluster([n], objects, [on_node(p) for p in existing])
    plugin = NodeVolumeLimits(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    _, pre = plugin.pre_filter(state, new_pod, nodes)
    if new_pod is CONFIG_ONLY:
        assert pre == Status(Code.SKIP)
        return
    assert pre is None
    [info] = nodes.infos()
    assert plugin.filter(state, new_pod, info) == want
    verdict = plugin.filter_nodes(state, new_pod, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want
    # A second pass reads the cached attachments and says the same.
    verdict = plugin.filter_nodes(state, new_pod, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want


EPHEMERAL_POD = make_pod(
    "abc", namespace="test", spec={"volumes": [{"name": "xyz", "ephemeral": {}}]}
)


def ephemeral_claim(owned: bool) -> Any:
    return pvc("abc-xyz", SC, namespace="test", owner=EPHEMERAL_POD if owned else None)


@pytest.mark.parametrize(
    ("claims", "limit", "want"),
    [
        pytest.param(
            [],
            2,
            Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                'looking up PVC test/abc-xyz: persistentvolumeclaim "abc-xyz" not found',
            ),
            id="ephemeral volume missing",
        ),
        pytest.param(
            [ephemeral_claim(owned=False)],
            2,
            Status(
                Code.ERROR,
                "PVC test/abc-xyz was not created for pod test/abc (pod is not owner)",
            ),
            id="ephemeral volume not owned",
        ),
        pytest.param([ephemeral_claim(owned=True)], 1, None, id="ephemeral volume unbound"),
        pytest.param(
            [ephemeral_claim(owned=True)], 0, EXCEEDED, id="ephemeral volume, exceeds limit"
        ),
    ],
)
def test_ephemeral_volumes(claims: list[Any], limit: int, want: Status | None) -> None:
    n, csi = limits_node("csinode", limit, [EBS])
    assert csi is not None
    snapshot = cluster([n], [*fixtures([EBS]), *claims, csi])
    plugin = NodeVolumeLimits(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    assert plugin.pre_filter(state, EPHEMERAL_POD, nodes)[1] is None
    [info] = nodes.infos()
    assert plugin.filter(state, EPHEMERAL_POD, info) == want
    verdict = plugin.filter_nodes(state, EPHEMERAL_POD, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_attach_limit_keys() -> None:
    assert csi_attach_limit_key(EBS) == "attachable-volumes-csi-ebs.csi.aws.com"
    long = "a-very-long-driver-name.storage.example.com"
    key = csi_attach_limit_key(long)
    assert len(key) < 63
    assert key.startswith("attachable-volumes-csi-a-very-long-driver-na")
    assert key == csi_attach_limit_key(long)


def test_a_missing_claim_fails_even_nodes_without_limits() -> None:
    snapshot = cluster([node("plain")], [])
    plugin = NodeVolumeLimits(handle(snapshot))
    pod = pvc_pod("nope")
    verdict = plugin.filter_nodes(CycleState(), pod, Nodes(snapshot, snapshot.present_slots()))
    assert verdict.statuses[int(verdict.ids[0])] == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        'looking up PVC default/nope: persistentvolumeclaim "nope" not found',
    )


# --- queueing hints -------------------------------------------------------------------------


def test_events_to_register() -> None:
    plugin = NodeVolumeLimits(handle(cluster()))
    registered = {(e.event.resource, e.event.action) for e in plugin.events_to_register()}
    assert registered == {
        ("storage.k8s.io/CSINode", ActionType.ADD),
        ("storage.k8s.io/CSINode", ActionType.UPDATE),
        ("Pod", ActionType.DELETE),
        ("PersistentVolumeClaim", ActionType.ADD),
        ("storage.k8s.io/VolumeAttachment", ActionType.DELETE),
    }


Q, S = QueueingHint.QUEUE, QueueingHint.SKIP


def test_hint_pod_deleted() -> None:
    plugin = NodeVolumeLimits(handle(cluster()))
    hint = plugin.is_schedulable_after_pod_deleted
    pod = pvc_pod("a")
    assert hint(pod, "not-a-pod", None) == Q
    assert hint(pod, make_pod("e", node_name="n"), None) == S  # no volumes
    assert hint(pod, pvc_pod("a"), None) == S  # never bound to a node
    assert hint(pod, on_node(pvc_pod("x")), None) == Q
    assert hint(pod, on_node(INLINE), None) == Q
    assert hint(pod, on_node(CONFIG_ONLY), None) == S
    # Nominated to a node (preemption) and deleted before binding: its volumes counted there.
    nominated = msgspec.convert(
        {**msgspec.to_builtins(pvc_pod("x")), "status": {"nominatedNodeName": "n"}}, Pod
    )
    assert hint(pod, nominated, None) == Q


def volume_attachment(name: str, node_name: str, pv_name: str | None, attacher: str = EBS) -> Any:
    source = {} if pv_name is None else {"persistentVolumeName": pv_name}
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "spec": {"attacher": attacher, "nodeName": node_name, "source": source},
        },
        VolumeAttachment,
    )


def test_hint_volume_attachment_deleted() -> None:
    plugin = NodeVolumeLimits(handle(cluster()))
    hint = plugin.is_schedulable_after_volume_attachment_deleted
    va = volume_attachment("va", "n", "pv")
    assert hint(pvc_pod("a"), va, None) == Q  # a claim
    assert hint(INLINE, va, None) == Q  # an inline EBS volume, the attachment's driver
    assert hint(INLINE, volume_attachment("va", "n", "pv", attacher=GCE), None) == S
    assert hint(CONFIG_ONLY, va, None) == S
    assert hint(pvc_pod("a"), "not-an-attachment", None) == Q


@pytest.mark.parametrize(
    ("new_pod", "attachments", "want"),
    [
        # csi-EBS-0 used by the pod on the node, csi-EBS-1 still attached: 2 of 2.
        (pvc_pod(f"csi-{EBS}-2"), [("csi-" + EBS + "-1", EBS)], EXCEEDED),
        # A volume attached that no pod uses is not taken out of the pod's new ones.
        (pvc_pod(f"csi-{EBS}-1"), [("csi-" + EBS + "-1", EBS)], EXCEEDED),
        # The attachment of the volume the running pod uses counts once.
        (pvc_pod(f"csi-{EBS}-2"), [("csi-" + EBS + "-0", EBS)], None),
        # No attacher, no PV, a PV that is not CSI: not counted.
        (pvc_pod(f"csi-{EBS}-2"), [("csi-" + EBS + "-1", "")], None),
        (pvc_pod(f"csi-{EBS}-2"), [(None, EBS)], None),
        (pvc_pod(f"csi-{EBS}-2"), [("csi-" + AWS_IN_TREE + "-1", EBS)], None),
    ],
)
def test_volume_attachments_count(
    new_pod: Pod, attachments: list[tuple[str | None, str]], want: Status | None
) -> None:
    n, csi = limits_node("csinode", 2, [EBS])
    assert csi is not None
    objects = [*fixtures([EBS, AWS_IN_TREE]), csi]
    objects += [
        volume_attachment(f"va{i}", n.metadata.name, pv_name, attacher)
        for i, (pv_name, attacher) in enumerate(attachments)
    ]
    snapshot = cluster([n], objects, [on_node(pvc_pod(f"csi-{EBS}-0"))])
    plugin = NodeVolumeLimits(handle(snapshot))
    state = CycleState()
    nodes = Nodes(snapshot, snapshot.present_slots())
    plugin.pre_filter(state, new_pod, nodes)
    [info] = nodes.infos()
    assert plugin.filter(state, new_pod, info) == want
    verdict = plugin.filter_nodes(state, new_pod, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_hint_csi_node_updated() -> None:
    plugin = NodeVolumeLimits(handle(cluster()))
    hint = plugin.is_schedulable_after_csi_node_updated
    pod = pvc_pod("a")
    before = csi_node("n", {EBS: 2, GCE: 3})
    assert hint(pod, before, csi_node("n", {EBS: 3, GCE: 3})) == Q  # a limit went up
    assert hint(pod, before, csi_node("n", {EBS: 2, GCE: 1})) == S  # none did
    assert hint(pod, before, csi_node("n", {EBS: 2, GCE: 3}, migrated=[AWS_IN_TREE])) == S
    assert hint(pod, csi_node("n", {EBS: None}), csi_node("n", {EBS: 1})) == Q  # 0 to 1
    assert hint(pod, before, csi_node("n", {EBS: 2, GCE: 3, "new.csi": 1})) == Q  # a new driver
    assert hint(pod, csi_node("n", {}), csi_node("n", {EBS: None})) == S  # still no limit
    assert hint(pod, "not-a-csinode", before) == Q


def test_hint_pvc_added() -> None:
    plugin = NodeVolumeLimits(handle(cluster()))
    hint = plugin.is_schedulable_after_pvc_added
    assert hint(pvc_pod("a"), None, pvc("a", SC)) == Q
    assert hint(pvc_pod("a"), None, pvc("b", SC)) == S
    assert hint(pvc_pod("a"), None, pvc("a", SC, namespace="other")) == S
    assert hint(EPHEMERAL_POD, None, pvc("abc-xyz", SC, namespace="test")) == Q
    assert hint(pvc_pod("a"), None, "not-a-pvc") == Q


# --- vectorized Filter ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(25))
def test_vectorized_filter_matches_per_node(seed: int) -> None:
    rng = random.Random(seed)
    drivers = [EBS, GCE]
    objects: list[Any] = fixtures(drivers)
    nodes = []
    running = []
    for i in range(rng.randint(1, 10)):
        name = f"n{i}"
        source = rng.choice(["csinode", "node", "none"])
        extra: Mapping[str, str] = {}
        if source == "node":
            extra = {csi_attach_limit_key(EBS): str(rng.randint(0, 3))}
        nodes.append(node(name, extra=extra))
        if source == "csinode":
            objects.append(csi_node(name, {d: rng.randint(0, 3) for d in drivers}))
        for j in range(rng.randint(0, 3)):
            claims = rng.sample(
                [f"csi-{d}-{k}" for d in drivers for k in range(4)], rng.randint(1, 2)
            )
            running.append(claim_pod(f"r{i}-{j}", *claims, node_name=name))
    snapshot = cluster(nodes, objects, running)
    plugin = NodeVolumeLimits(handle(snapshot))
    pod = claim_pod("p", *rng.sample([f"csi-{d}-{k}" for d in drivers for k in range(5)], 2))
    state = CycleState()
    everything = Nodes(snapshot, snapshot.present_slots())
    plugin.pre_filter(state, pod, everything)
    verdict = plugin.filter_nodes(state, pod, everything)
    got = [verdict.statuses[i] for i in verdict.ids.tolist()]
    fresh = NodeVolumeLimits(handle(snapshot))  # no cached counts
    assert got == [fresh.filter(state, pod, info) for info in everything.infos()]


def test_kept_counts_follow_every_change() -> None:
    # One plugin keeps its counts through random changes to the pods, nodes, CSINodes, claims,
    # volumes and classes; after each, its vectorized Filter equals a fresh per-node one.
    seen: set[Code | None] = set()
    for seed in range(20):
        seen |= _kept_counts_run(random.Random(seed))
    # The data reached passing nodes, exceeded limits and nodes whose pods' volumes fail.
    assert seen == {None, Code.UNSCHEDULABLE, Code.ERROR}


def _kept_counts_run(rng: random.Random) -> set[Code | None]:
    drivers = [EBS, GCE, AWS_IN_TREE]
    claims = [f"csi-{d}-{k}" for d in drivers for k in range(5)] + ["csi-4", "csi-5", "csi-6"]
    names = [f"n{i}" for i in range(8)]
    snapshot = cluster([node(name) for name in names], fixtures(drivers))
    plugin = NodeVolumeLimits(handle(snapshot))
    counted: list[tuple[str, str]] = []  # (uid, node)

    def random_csi_node(name: str) -> CSINode:
        migrated = [AWS_IN_TREE] if rng.random() < 0.5 else []
        return csi_node(name, {d: rng.randint(0, 3) for d in (EBS, GCE)}, migrated=migrated)

    seen: set[Code | None] = set()
    for step in range(40):
        change = rng.randrange(8)
        if change == 0 or not counted:
            where = rng.choice(names)
            if snapshot.get(where) is not None:
                pod = claim_pod(f"r{step}", *rng.sample(claims, rng.randint(1, 2)), node_name=where)
                if rng.random() < 0.1:
                    pod = claim_pod(f"r{step}", "", node_name=where)  # no claim name: an error
                info = PodInfo.of(pod)
                snapshot.add_pod(info, where)
                counted.append((info.uid, where))
        elif change == 1:
            uid, _ = counted.pop(rng.randrange(len(counted)))
            snapshot.remove_pod(uid)
        elif change == 2:
            snapshot.objects.set(random_csi_node(rng.choice(names)))
        elif change == 3:
            name = rng.choice(claims[:15])
            snapshot.objects.set(pvc(name, None, bound_to=rng.choice(claims[:15])))
        elif change == 4:
            snapshot.objects.set(
                storage_class(SC, provisioner=rng.choice([EBS, GCE, AWS_IN_TREE, "other"]))
            )
        elif change == 7:
            name = f"va{rng.randrange(4)}"
            if rng.random() < 0.3:
                snapshot.objects.delete(VolumeAttachment, name)
            else:
                pv_name = rng.choice(claims[:15])
                snapshot.objects.set(volume_attachment(name, rng.choice(names), pv_name))
        elif change == 5:
            name = rng.choice(names)
            limit = {csi_attach_limit_key(EBS): str(rng.randint(0, 3))}
            snapshot.set_node(node(name, extra=limit if rng.random() < 0.5 else {}))
        else:
            name = rng.choice(names)
            if snapshot.get(name) is not None and rng.random() < 0.5:
                snapshot.remove_node(name)
                counted = [(u, n) for u, n in counted if n != name]
            else:
                snapshot.objects.delete(CSINode, name)
        pod = claim_pod("p", *rng.sample(claims, rng.randint(1, 3)))
        if rng.random() < 0.2:
            pod = INLINE
        state = CycleState()
        everything = Nodes(snapshot, snapshot.present_slots())
        plugin.pre_filter(state, pod, everything)
        verdict = plugin.filter_nodes(state, pod, everything)
        got = [verdict.statuses[i] for i in verdict.ids.tolist()]
        fresh = NodeVolumeLimits(handle(snapshot))
        want = [fresh.filter(state, pod, info) for info in everything.infos()]
        assert got == want, step
        seen.update(None if s is None else s.code for s in want)
    return seen


def test_cached_counts_follow_the_node_and_the_storage_objects() -> None:
    n, csi = limits_node("csinode", 2, [EBS])
    assert csi is not None
    snapshot = cluster([n], [*fixtures([EBS]), csi], [on_node(RUNNING)])
    plugin = NodeVolumeLimits(handle(snapshot))
    nodes = Nodes(snapshot, snapshot.present_slots())
    [info] = nodes.infos()

    def verdict() -> Status | None:
        state = CycleState()
        plugin.pre_filter(state, EBS_ONE, nodes)
        v = plugin.filter_nodes(state, EBS_ONE, nodes)
        return v.statuses[int(v.ids[0])]

    assert verdict() is None  # 1 attached + 1 new <= 2
    snapshot.add_pod(PodInfo.of(on_node(pvc_pod(f"csi-{EBS}-4"))), info.name)
    assert verdict() == EXCEEDED  # a pod added on the node
    snapshot.objects.set(csi_node(info.name, {EBS: 3}))
    assert verdict() is None  # a new limit
    # The running pod's claim now names another volume handle of the driver: still counted.
    snapshot.objects.set(pvc(f"csi-{EBS}-3", None, bound_to=f"csi-{EBS}-2"))
    assert verdict() is None


class NominatingHandle(FakeHandle):
    """A handle whose pods nominated to nodes are ``nominated``."""

    def __init__(self, snapshot: Snapshot, nominated: Mapping[str, Sequence[Pod]]) -> None:
        super().__init__(snapshot)
        self.nominated = nominated

    def nominated_nodes(self) -> list[str]:
        return list(self.nominated)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return [PodInfo.of(p) for p in self.nominated.get(node_name, ())]


def test_claims_read_as_what_they_count() -> None:
    """A pod's volumes no other pod uses are read as their driver's new volumes (in-tree ones
    apart: nodes that migrated nothing do not count them); one in use, on a node or by a pod
    nominated to one, as itself."""
    n, csi = limits_node("csinode", 2, [EBS], migrated=[AWS_IN_TREE])
    assert csi is not None
    objects = [*fixtures([EBS]), *volumes_of(AWS_IN_TREE), csi]
    nominated = pvc_pod(f"csi-{EBS}-2")
    snapshot = cluster([n], objects, [on_node(RUNNING)])
    plugin = NodeVolumeLimits(
        cast(Handle, NominatingHandle(snapshot, {n.metadata.name: [nominated]}))
    )

    def read(pod: Pod) -> Hashable:
        return plugin.node_local_claims(pod)

    fresh = read(pvc_pod(f"csi-{EBS}-0"))
    assert fresh == ((csi_attach_limit_key(EBS), True, ""),)
    assert read(pvc_pod(f"csi-{EBS}-1")) == fresh
    assert read(pvc_pod(f"csi-{EBS}-0", f"csi-{EBS}-1")) == fresh * 2
    # In-tree: the same limit, not counted where the plugin was not migrated.
    assert read(pvc_pod(f"csi-{AWS_IN_TREE}-0")) == ((csi_attach_limit_key(EBS), False, ""),)
    # In use by the running pod, and by the nominated one (but for that pod itself).
    assert read(pvc_pod(f"csi-{EBS}-3")) == (("", False, f"{EBS}/csi-{EBS}-3"),)
    assert read(pvc_pod(f"csi-{EBS}-2")) == (("", False, f"{EBS}/csi-{EBS}-2"),)
    assert read(nominated) == fresh
    assert read(pvc_pod("nope")) is None
    assert read(make_pod("no-volumes")) == ()
    snapshot.objects.delete(CSINode, csi.metadata.name)
    assert read(pvc_pod(f"csi-{EBS}-3")) == ()  # no CSINode, no limits
    assert read(pvc_pod("nope")) is None  # but a missing claim still fails every node
