"""DefaultPreemption: kube-scheduler's table tests (default_preemption_test.go: PostFilter,
DryRunPreemption, SelectBestCandidate, PodEligibleToPreemptOthers, Preempt) with NodeResourcesFit
as the Filter, plus the asynchronous eviction and its PreEnqueue gate."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import msgspec
import pytest

from builders import PAUSE_IMAGE, PodWrapper, make_node
from kubesched.api import (
    LabelSelector,
    Node,
    ObjectMeta,
    Pod,
    PodCondition,
    PodDisruptionBudget,
    PodDisruptionBudgetSpec,
    PodDisruptionBudgetStatus,
)
from kubesched.config import ConfigError
from kubesched.framework import (
    Code,
    CycleState,
    Framework,
    NodeInfo,
    Nodes,
    PermitPlugin,
    PodInfo,
    PreFilterPlugin,
    PreFilterResult,
    Registry,
    Snapshot,
    Status,
)
from kubesched.plugins import in_tree_registry
from kubesched.plugins.default_preemption import (
    NAME,
    Candidate,
    DefaultPreemption,
    Victims,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000

SMALL = ("100m", "100")
MEDIUM = ("200m", "200")
LARGE = ("300m", "300")
VERY_LARGE = ("500m", "500")

#: Start times, one second apart (Go's tests use nanoseconds; the API has seconds).
EPOCH = [f"1970-01-01T00:00:0{i}Z" for i in range(7)]

VIOLATING_KEY = "test.kubernetes.io/is-violating-pdb"


# --- building blocks ------------------------------------------------------------------------


def node(name: str, res: tuple[str, str] = VERY_LARGE, *, pods: str = "32", **labels: str) -> Node:
    """A node like upstream's ``st.MakeNode().Capacity(res)``: 32 pods unless told."""
    return make_node(name, cpu=res[0], memory=res[1], pods=pods, labels=labels)


def pod(
    name: str,
    *,
    priority: int | None = None,
    res: tuple[str, str] | None = None,
    node_name: str = "",
    labels: Mapping[str, str] | None = None,
    start: str | None = None,
    nominated: str = "",
    policy: str | None = None,
    namespace: str = "default",
) -> Pod:
    """upstream's ``st.MakePod().Name(name).UID(name)`` with what is given."""
    requests = {"cpu": res[0], "memory": res[1]} if res else {}
    built = (
        PodWrapper(name)
        .namespace(namespace)
        .uid(name)
        .labels(labels or {})
        .container("c", image=PAUSE_IMAGE, requests=requests)
        .node(node_name)
        .nominated(nominated)
    )
    if priority is not None:
        built.priority(priority)
    if policy is not None:
        built.preemption_policy(policy)
    if start is not None:
        built.start_time(start)
    return built.obj()


def terminating(p: Pod, *, by_preemption: bool) -> Pod:
    meta = msgspec.structs.replace(p.metadata, deletion_timestamp="2024-01-01T00:00:00Z")
    conditions = (
        [PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")]
        if by_preemption
        else []
    )
    status = msgspec.structs.replace(p.status, conditions=conditions)
    return msgspec.structs.replace(p, metadata=meta, status=status)


def pdb(
    match: Mapping[str, str] | None,
    allowed: int,
    *,
    disrupted: Sequence[str] = (),
    name: str = "pdb",
    namespace: str = "default",
) -> PodDisruptionBudget:
    return PodDisruptionBudget(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=PodDisruptionBudgetSpec(
            selector=None if match is None else LabelSelector(match_labels=dict(match))
        ),
        status=PodDisruptionBudgetStatus(
            disruptions_allowed=allowed,
            disrupted_pods=dict.fromkeys(disrupted, "2024-01-01T00:00:00Z"),
        ),
    )


class RemovePodFails(PreFilterPlugin):
    """Upstream's ``TestPlugin``: AddPod/RemovePod fail on nodes labelled ``error=true``."""

    name = "test-plugin"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._maybe_fail(pod, node, "add")

    def remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        return self._maybe_fail(pod, node, "remove")

    @staticmethod
    def _maybe_fail(pod: Pod, node: NodeInfo, what: str) -> Status | None:
        assert node.node is not None
        if node.node.metadata.labels.get("error") == "true":
            return Status(Code.ERROR, f"failed to {what} pod: {pod.metadata.name}")
        return None


class Hold(PermitPlugin):
    name = "Hold"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return Status(Code.WAIT), 30.0


class Evictor:
    """The front end's side of an eviction, recorded; deleted pods leave the snapshot, except
    the ``graceful`` ones (their deletion not seen yet when the eviction returns)."""

    def __init__(self, snapshot: Snapshot, fail: Sequence[str] = ()) -> None:
        self.snapshot = snapshot
        self.fail = set(fail)
        self.graceful: set[str] = set()
        self.evicted: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        self.cleared: list[str] = []

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        await asyncio.sleep(0)
        if victim.metadata.name in self.fail:
            raise RuntimeError(f"cannot delete {victim.metadata.name}")
        self.evicted.append(victim.metadata.name)
        if victim.metadata.name not in self.graceful:
            self.snapshot.remove_pod(victim.metadata.uid)
        return True

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        note = f"Preempted by pod {preemptor.metadata.uid} on node {node}"
        self.events.append((victim.metadata.name, note, profile))

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        self.cleared.append(pod.metadata.name)


class Nominator:
    def __init__(self) -> None:
        self.pods: dict[str, list[PodInfo]] = {}

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.pods.get(node_name, []))

    def nominated_nodes(self) -> list[str]:
        return [n for n, p in self.pods.items() if p]

    def nominations_stamp(self, node_name: str) -> Hashable:
        return tuple(id(pi) for pi in self.pods.get(node_name, []))


class Activator:
    def __init__(self) -> None:
        self.activated: list[str] = []

    def activate(self, pods: Any) -> None:
        self.activated.extend(p.metadata.name for p in pods)


REGISTRY = Registry(
    {
        **in_tree_registry(),
        NAME: DefaultPreemption,
        RemovePodFails.name: RemovePodFails,
        Hold.name: Hold,
    }
)


class Env:
    """A profile with NodeResourcesFit (plus ``extra`` PreFilter plugins) and DefaultPreemption
    over a snapshot of ``nodes`` and ``pods``."""

    def __init__(
        self,
        nodes: Sequence[Node],
        pods: Sequence[Pod] = (),
        *,
        pdbs: Sequence[PodDisruptionBudget] = (),
        args: Mapping[str, Any] | None = None,
        extra: Sequence[str] = (),
        permit: bool = False,
    ) -> None:
        self.snapshot = Snapshot()
        for n in nodes:
            self.snapshot.set_node(n)
        for p in pods:
            self.snapshot.add_pod(PodInfo.of(p), p.spec.node_name)
        plugins: dict[str, list[tuple[str, int]]] = {
            "queueSort": [("PrioritySort", 1)],
            "preFilter": [("NodeResourcesFit", 1), *((e, 1) for e in extra)],
            "filter": [("NodeResourcesFit", 1)],
            "postFilter": [(NAME, 1)],
            "preEnqueue": [(NAME, 1)],
            "bind": [("DefaultBinder", 1)],
        }
        if permit:
            plugins["permit"] = [("Hold", 1)]
        self.fw = Framework(
            profile_name="default-scheduler",
            registry=REGISTRY,
            plugins=plugins,
            plugin_args={NAME: dict(args)} if args else None,
            snapshot=self.snapshot,
            rng=random.Random(1),
        )
        self.pdbs = list(pdbs)
        self.fw.register_lister(PodDisruptionBudget, lambda: self.pdbs)
        self.evictor = Evictor(self.snapshot)
        self.fw.set_evictor(self.evictor)
        self.nominator = Nominator()
        self.fw.set_pod_nominator(self.nominator)
        self.activator = Activator()
        self.fw.set_pod_activator(self.activator)
        plugin = self.fw.plugin(NAME)
        assert isinstance(plugin, DefaultPreemption)
        self.plugin = plugin

    def state_for(self, p: Pod) -> CycleState:
        state = CycleState()
        _, status, _ = self.fw.run_pre_filter(state, p, self.fw.all_nodes())
        assert status is None, status
        return state

    def dry_run(
        self, p: Pod, offset: int = 0, num: int | None = None
    ) -> dict[str, tuple[list[str], int]]:
        """Candidates of a dry run over every node: node -> (victim names sorted, violations)."""
        nodes = sorted(self.snapshot.node_infos(), key=lambda i: i.name)
        if num is None:
            num = self.plugin.calculate_num_candidates(len(nodes))
        got, _, _ = self.plugin.dry_run_preemption(
            self.state_for(p), p, nodes, self.pdbs, offset, num, 0.0
        )
        return {
            c.name: (sorted(v.metadata.name for v in c.victims.pods), c.victims.num_pdb_violations)
            for c in got
        }


UNSCHEDULABLE = Status(Code.UNSCHEDULABLE)
UNRESOLVABLE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
ONE_POD = ("1", "1")


# --- PostFilter ---------------------------------------------------------------------------


POST_FILTER_CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "pod with higher priority can be made schedulable",
        {
            "pod": pod("p", priority=HIGH),
            "pods": [pod("p1", node_name="node1")],
            "nodes": [node("node1", pods="1")],
            "filtered": {"node1": UNSCHEDULABLE},
            "want": ("node1", None),
        },
    ),
    (
        "pod with tied priority is still unschedulable",
        {
            "pod": pod("p"),
            "pods": [pod("p1", node_name="node1")],
            "nodes": [node("node1", pods="1")],
            "filtered": {"node1": UNSCHEDULABLE},
            "want": (
                "",
                "preemption: 0/1 nodes are available: 1 No preemption victims found for "
                "incoming pod.",
            ),
        },
    ),
    (
        "preemption should respect filteredNodesStatuses",
        {
            "pod": pod("p", priority=HIGH),
            "pods": [pod("p1", node_name="node1")],
            "nodes": [node("node1", pods="1")],
            "filtered": {"node1": UNRESOLVABLE},
            "want": (
                "",
                "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            ),
        },
    ),
    (
        "a node absent from the statuses counts as UnschedulableAndUnresolvable",
        {
            "pod": pod("p", priority=HIGH),
            "pods": [pod("p1", node_name="node1")],
            "nodes": [node("node1", pods="1")],
            "filtered": {},
            "want": (
                "",
                "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
            ),
        },
    ),
    (
        "pod can be made schedulable on one node",
        {
            "pod": pod("p", priority=MID),
            "pods": [
                pod("p1", priority=HIGH, node_name="node1"),
                pod("p2", priority=LOW, node_name="node2"),
            ],
            "nodes": [node("node1", pods="1"), node("node2", pods="1")],
            "filtered": {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
            "want": ("node2", None),
        },
    ),
    (
        "pod can be made schedulable on minHighestPriority node",
        {
            "pod": pod("p", priority=VERY_HIGH),
            "pods": [
                pod(
                    "p1",
                    priority=HIGH,
                    node_name="node1",
                    labels={VIOLATING_KEY: "non-violating"},
                ),
                pod("p2", priority=LOW, node_name="node1", labels={VIOLATING_KEY: "violating"}),
                pod("p3", priority=MID, node_name="node2", labels={VIOLATING_KEY: "violating"}),
            ],
            "pdbs": [
                pdb({VIOLATING_KEY: "violating"}, 0, name="violating-pdb"),
                pdb({VIOLATING_KEY: "non-violating"}, 2**31 - 1, name="non-violating-pdb"),
            ],
            "nodes": [node("node1", pods="1"), node("node2", pods="1")],
            "filtered": {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
            "want": ("node2", None),
        },
    ),
    (
        "no candidate nodes found, no enough resource after removing low priority pods",
        {
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [pod("p1", node_name="node1"), pod("p2", node_name="node2")],
            "nodes": [node("node1", ("200m", "400")), node("node2", ("200m", "400"))],
            "filtered": {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
            "want": ("", "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
        },
    ),
    (
        "no candidate nodes found with mixed reasons, no lower priority pod and no enough CPU",
        {
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1", node_name="node1", priority=HIGH),
                pod("p2", node_name="node2"),
                pod("p3", node_name="node3", priority=HIGH),
            ],
            "nodes": [
                node("node1", ONE_POD, pods="1"),
                node("node2", ("200m", "400")),
                node("node3", ONE_POD, pods="1"),
            ],
            "filtered": dict.fromkeys(("node1", "node2", "node3"), UNSCHEDULABLE),
            "want": (
                "",
                "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption "
                "victims found for incoming pod.",
            ),
        },
    ),
    (
        "no candidate nodes found with mixed reason, 2 unresolvable nodes, 2 without CPU",
        {
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [pod("p1", node_name="node1"), pod("p2", node_name="node2")],
            "nodes": [node(f"node{i}", ("200m", "400")) for i in range(1, 5)],
            "filtered": {
                "node1": UNSCHEDULABLE,
                "node2": UNSCHEDULABLE,
                "node4": UNRESOLVABLE,
            },
            "want": (
                "",
                "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not "
                "helpful for scheduling.",
            ),
        },
    ),
    (
        "only one node but failed with TestPlugin",
        {
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [pod("p1", node_name="node1")],
            "nodes": [node("node1", LARGE, error="true")],
            "filtered": {"node1": UNSCHEDULABLE},
            "want": (
                None,
                'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to '
                "remove pod: p",
            ),
            "code": Code.ERROR,
        },
    ),
    (
        "one failed with TestPlugin and the other pass",
        {
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [pod("p1", node_name="node1"), pod("p2", node_name="node2", res=MEDIUM)],
            "nodes": [node("node1", LARGE, error="true"), node("node2", LARGE)],
            "filtered": {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE},
            "want": ("node2", None),
        },
    ),
]


@pytest.mark.parametrize(
    "case", [c for _, c in POST_FILTER_CASES], ids=[n for n, _ in POST_FILTER_CASES]
)
async def test_post_filter(case: dict[str, Any]) -> None:
    env = Env(case["nodes"], case["pods"], pdbs=case.get("pdbs", ()), extra=["test-plugin"])
    p = case["pod"]
    node_name, status = env.fw.run_post_filter(env.state_for(p), p, case["filtered"])
    want_node, want_message = case["want"]
    assert node_name == want_node
    if want_message is None:
        assert status is None
    else:
        assert status is not None
        assert status.code == case.get("code", Code.UNSCHEDULABLE)
        assert status.message == want_message
        assert status.plugin == NAME
    await env.plugin.wait_for_evictions()


# --- DryRunPreemption --------------------------------------------------------------------


DRY_RUN_CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "a pod that fits on both nodes when lower priority pods are preempted",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1", node_name="node1", priority=MID, res=LARGE),
                pod("p2", node_name="node2", priority=MID, res=LARGE),
            ],
            "want": {"node1": (["p1"], 0), "node2": (["p2"], 0)},
        },
    ),
    (
        "other pods running are higher priority, no preemption would happen",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=LOW, res=LARGE),
            "pods": [
                pod("p1", node_name="node1", priority=MID, res=LARGE),
                pod("p2", node_name="node2", priority=MID, res=LARGE),
            ],
            "want": {},
        },
    ),
    (
        "medium priority pod is preempted, but lower priority one stays as it is small",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1.1", node_name="node1", priority=LOW, res=SMALL),
                pod("p1.2", node_name="node1", priority=MID, res=LARGE),
                pod("p2", node_name="node2", priority=MID, res=LARGE),
            ],
            "want": {"node1": (["p1.2"], 0), "node2": (["p2"], 0)},
        },
    ),
    (
        "mixed priority pods are preempted",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1.1", node_name="node1", priority=MID, res=SMALL),
                pod("p1.2", node_name="node1", priority=LOW, res=SMALL),
                pod("p1.3", node_name="node1", priority=MID, res=MEDIUM),
                pod("p1.4", node_name="node1", priority=HIGH, res=SMALL),
                pod("p2", node_name="node2", priority=HIGH, res=LARGE),
            ],
            "want": {"node1": (["p1.2", "p1.3"], 0)},
        },
    ),
    (
        "mixed priority pods are preempted, pick later StartTime one when priorities are equal",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1.1", node_name="node1", priority=LOW, res=SMALL, start=EPOCH[5]),
                pod("p1.2", node_name="node1", priority=LOW, res=SMALL, start=EPOCH[4]),
                pod("p1.3", node_name="node1", priority=MID, res=MEDIUM, start=EPOCH[3]),
                pod("p1.4", node_name="node1", priority=HIGH, res=SMALL, start=EPOCH[2]),
                pod("p2", node_name="node2", priority=HIGH, res=LARGE, start=EPOCH[1]),
            ],
            "want": {"node1": (["p1.1", "p1.3"], 0)},
        },
    ),
    (
        "preemption with violation of same pdb",
        {
            "nodes": ["node1"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": [
                pod("p1.1", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
                pod("p1.2", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
            ],
            "pdbs": [pdb({"app": "foo"}, 1)],
            "want": {"node1": (["p1.1", "p1.2"], 1)},
        },
    ),
    (
        "violation of the pdb, the victim does not belong to DisruptedPods",
        {
            "nodes": ["node1"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": [
                pod("p1.1", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
                pod("p1.2", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
            ],
            "pdbs": [pdb({"app": "foo"}, 1, disrupted=["p2"])],
            "want": {"node1": (["p1.1", "p1.2"], 1)},
        },
    ),
    (
        "violation of the pdb, the victim belongs to DisruptedPods",
        {
            "nodes": ["node1"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": [
                pod("p1.1", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
                pod("p1.2", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM),
            ],
            "pdbs": [pdb({"app": "foo"}, 1, disrupted=["p1.2"])],
            "want": {"node1": (["p1.1", "p1.2"], 0)},
        },
    ),
    (
        "the victim in DisruptedPods is treated as non-violating",
        {
            "nodes": ["node1"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": [
                pod(f"p1.{i}", node_name="node1", labels={"app": "foo"}, priority=MID, res=MEDIUM)
                for i in (1, 2, 3)
            ],
            "pdbs": [pdb({"app": "foo"}, 1, disrupted=["p1.3"])],
            "want": {"node1": (["p1.1", "p1.2", "p1.3"], 1)},
        },
    ),
    (
        "all nodes are possible candidates, but DefaultPreemptionArgs limits to 2",
        {
            "args": {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1},
            "nodes": [f"node{i}" for i in range(1, 6)],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod(f"p{i}", node_name=f"node{i}", priority=MID, res=LARGE) for i in range(1, 6)
            ],
            # Upstream's seeded offset: 4, so node5 then node1.
            "offset": 4,
            "want": {"node5": (["p5"], 0), "node1": (["p1"], 0)},
        },
    ),
    (
        "some nodes are not possible candidates, DefaultPreemptionArgs limits to 2",
        {
            "args": {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1},
            "nodes": [f"node{i}" for i in range(1, 6)],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1", node_name="node1", priority=MID, res=LARGE),
                pod("p2", node_name="node2", priority=VERY_HIGH, res=LARGE),
                pod("p3", node_name="node3", priority=MID, res=LARGE),
                pod("p4", node_name="node4", priority=MID, res=LARGE),
                pod("p5", node_name="node5", priority=VERY_HIGH, res=LARGE),
            ],
            "offset": 4,
            "want": {"node1": (["p1"], 0), "node3": (["p3"], 0)},
        },
    ),
    (
        "preemption looks past numCandidates until a non-PDB violating node is found",
        {
            "args": {"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 2},
            "nodes": [f"node{i}" for i in range(1, 6)],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": [
                pod("p1", node_name="node1", labels={"app": "foo"}, priority=MID, res=LARGE),
                pod("p2", node_name="node2", labels={"app": "foo"}, priority=MID, res=LARGE),
                pod("p3", node_name="node3", priority=MID, res=LARGE),
                pod("p4", node_name="node4", priority=MID, res=LARGE),
                pod("p5", node_name="node5", labels={"app": "foo"}, priority=MID, res=LARGE),
            ],
            "pdbs": [pdb({"app": "foo"}, 0)],
            # node5 (violating), node1 (violating), node2 (violating, over the limit), node3.
            "offset": 4,
            "want": {"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)},
        },
    ),
]


@pytest.mark.parametrize("case", [c for _, c in DRY_RUN_CASES], ids=[n for n, _ in DRY_RUN_CASES])
def test_dry_run_preemption(case: dict[str, Any]) -> None:
    env = Env(
        [node(n) for n in case["nodes"]],
        case["pods"],
        pdbs=case.get("pdbs", ()),
        args=case.get("args"),
    )
    assert env.dry_run(case["pod"], offset=case.get("offset", 0)) == case["want"]


def test_dry_run_offsets_move_across_cycles() -> None:
    """Upstream's "preemption offset across multiple scheduling cycles and wrap around": the
    seeded offsets 4, 1 and 3 pick node5+node1, node2+node3, node4+node5."""
    env = Env(
        [node(f"node{i}") for i in range(1, 6)],
        [pod(f"p{i}", node_name=f"node{i}", priority=MID, res=LARGE) for i in range(1, 6)],
        args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": 1},
    )
    got = [
        sorted(env.dry_run(pod(f"tp{c}", priority=HIGH, res=LARGE), offset=offset))
        for c, offset in enumerate((4, 1, 3))
    ]
    assert got == [["node1", "node5"], ["node2", "node3"], ["node4", "node5"]]


def test_dry_run_leaves_the_snapshot_as_it_was() -> None:
    pods = [
        pod("p1.1", node_name="node1", priority=LOW, res=SMALL),
        pod("p1.2", node_name="node1", priority=MID, res=LARGE),
    ]
    env = Env([node("node1")], pods)
    info = env.snapshot.get("node1")
    assert info is not None
    before = (list(info.pods), dict(info.requested), env.snapshot.table.requested.copy())
    assert env.dry_run(pod("p", priority=HIGH, res=LARGE)) == {"node1": (["p1.2"], 0)}
    assert (list(info.pods), dict(info.requested)) == before[:2]
    assert (env.snapshot.table.requested == before[2]).all()


def test_victims_are_most_important_first_and_respect_nominated_pods() -> None:
    """The victims come out ordered (violating ones sorted back in); a pod of higher priority
    nominated to the node keeps its room, so more victims are needed."""
    pods = [
        pod("a", node_name="node1", priority=LOW, res=SMALL, start=EPOCH[1]),
        pod("b", node_name="node1", priority=MID, res=SMALL, start=EPOCH[2], labels={"x": "y"}),
        pod("c", node_name="node1", priority=LOW, res=SMALL, start=EPOCH[3]),
    ]
    env = Env([node("node1", ("300m", "300"))], pods, pdbs=[pdb({"x": "y"}, 0)])
    preemptor = pod("p", priority=HIGH, res=MEDIUM)
    info = env.snapshot.get("node1")
    assert info is not None
    victims, violations, status = env.plugin.select_victims_on_node(
        env.state_for(preemptor), preemptor, info, env.pdbs, 0.0
    )
    assert status is None
    assert ([v.metadata.name for v in victims], violations) == (["a", "c"], 0)

    env.nominator.pods["node1"] = [PodInfo.of(pod("nom", priority=VERY_HIGH, res=SMALL))]
    victims, violations, status = env.plugin.select_victims_on_node(
        env.state_for(preemptor), preemptor, info, env.pdbs, 0.0
    )
    assert status is None
    assert ([v.metadata.name for v in victims], violations) == (["b", "a", "c"], 1)


# --- SelectBestCandidate --------------------------------------------------------------------


def _node_pods(spec: Sequence[tuple[str, str, int, tuple[str, str], str]]) -> list[Pod]:
    return [
        pod(name, node_name=n, priority=prio, res=res, start=start)
        for name, n, prio, res, start in spec
    ]


SELECT_CASES: list[tuple[str, dict[str, Any]]] = [
    (
        "a pod that fits on both nodes when lower priority pods are preempted",
        {
            "nodes": ["node1", "node2"],
            "pod": pod("p", priority=HIGH, res=LARGE),
            "pods": _node_pods(
                [
                    ("p1", "node1", MID, LARGE, EPOCH[0]),
                    ("p2", "node2", MID, LARGE, EPOCH[0]),
                ]
            ),
            "want": {"node1", "node2"},
        },
    ),
    (
        "node with min highest priority pod is picked",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, MEDIUM, EPOCH[0]),
                    ("p1.2", "node1", MID, LARGE, EPOCH[0]),
                    ("p2.1", "node2", MID, MEDIUM, EPOCH[0]),
                    ("p2.2", "node2", LOW, MEDIUM, EPOCH[0]),
                    ("p3.1", "node3", LOW, MEDIUM, EPOCH[0]),
                    ("p3.2", "node3", LOW, MEDIUM, EPOCH[0]),
                ]
            ),
            "want": {"node3"},
        },
    ),
    (
        "when highest priorities are the same, minimum sum of priorities is picked",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, MEDIUM, EPOCH[0]),
                    ("p1.2", "node1", MID, LARGE, EPOCH[0]),
                    ("p2.1", "node2", MID, LARGE, EPOCH[0]),
                    ("p2.2", "node2", LOW, MEDIUM, EPOCH[0]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[0]),
                    ("p3.2", "node3", MID, MEDIUM, EPOCH[0]),
                ]
            ),
            "want": {"node2"},
        },
    ),
    (
        "when highest priority and sum are the same, minimum number of pods is picked",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, SMALL, EPOCH[0]),
                    ("p1.2", "node1", NEG, SMALL, EPOCH[0]),
                    ("p1.3", "node1", MID, SMALL, EPOCH[0]),
                    ("p1.4", "node1", NEG, SMALL, EPOCH[0]),
                    ("p2.1", "node2", MID, LARGE, EPOCH[0]),
                    ("p2.2", "node2", NEG, MEDIUM, EPOCH[0]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[0]),
                    ("p3.2", "node3", NEG, SMALL, EPOCH[0]),
                    ("p3.3", "node3", LOW, SMALL, EPOCH[0]),
                ]
            ),
            "want": {"node2"},
        },
    ),
    (
        "sum of adjusted priorities is considered",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, SMALL, EPOCH[0]),
                    ("p1.2", "node1", NEG, SMALL, EPOCH[0]),
                    ("p1.3", "node1", NEG, SMALL, EPOCH[0]),
                    ("p2.1", "node2", MID, LARGE, EPOCH[0]),
                    ("p2.2", "node2", NEG, MEDIUM, EPOCH[0]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[0]),
                    ("p3.2", "node3", NEG, SMALL, EPOCH[0]),
                    ("p3.3", "node3", LOW, SMALL, EPOCH[0]),
                ]
            ),
            "want": {"node2"},
        },
    ),
    (
        "non-overlapping lowest high priority, sum priorities, and number of pods",
        {
            "nodes": ["node1", "node2", "node3", "node4"],
            "pod": pod("p", priority=VERY_HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, SMALL, EPOCH[0]),
                    ("p1.2", "node1", LOW, SMALL, EPOCH[0]),
                    ("p1.3", "node1", LOW, SMALL, EPOCH[0]),
                    ("p2.1", "node2", HIGH, LARGE, EPOCH[0]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[0]),
                    ("p3.2", "node3", LOW, SMALL, EPOCH[0]),
                    ("p3.3", "node3", LOW, SMALL, EPOCH[0]),
                    ("p3.4", "node3", LOW, MEDIUM, EPOCH[0]),
                    ("p4.1", "node4", MID, MEDIUM, EPOCH[0]),
                    ("p4.2", "node4", MID, SMALL, EPOCH[0]),
                    ("p4.3", "node4", MID, SMALL, EPOCH[0]),
                    ("p4.4", "node4", NEG, SMALL, EPOCH[0]),
                ]
            ),
            "want": {"node1"},
        },
    ),
    (
        "same priority, same number of victims, different start time for each node's pod",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, MEDIUM, EPOCH[2]),
                    ("p1.2", "node1", MID, MEDIUM, EPOCH[2]),
                    ("p2.1", "node2", MID, MEDIUM, EPOCH[3]),
                    ("p2.2", "node2", MID, MEDIUM, EPOCH[3]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[1]),
                    ("p3.2", "node3", MID, MEDIUM, EPOCH[1]),
                ]
            ),
            "want": {"node2"},
        },
    ),
    (
        "same priority, same number of victims, different start time for all pods",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", MID, MEDIUM, EPOCH[4]),
                    ("p1.2", "node1", MID, MEDIUM, EPOCH[2]),
                    ("p2.1", "node2", MID, MEDIUM, EPOCH[5]),
                    ("p2.2", "node2", MID, MEDIUM, EPOCH[1]),
                    ("p3.1", "node3", MID, MEDIUM, EPOCH[3]),
                    ("p3.2", "node3", MID, MEDIUM, EPOCH[6]),
                ]
            ),
            "want": {"node3"},
        },
    ),
    (
        "different priority, same number of victims, different start time for all pods",
        {
            "nodes": ["node1", "node2", "node3"],
            "pod": pod("p", priority=HIGH, res=VERY_LARGE),
            "pods": _node_pods(
                [
                    ("p1.1", "node1", LOW, MEDIUM, EPOCH[4]),
                    ("p1.2", "node1", MID, MEDIUM, EPOCH[2]),
                    ("p2.1", "node2", MID, MEDIUM, EPOCH[6]),
                    ("p2.2", "node2", LOW, MEDIUM, EPOCH[1]),
                    ("p3.1", "node3", LOW, MEDIUM, EPOCH[3]),
                    ("p3.2", "node3", MID, MEDIUM, EPOCH[5]),
                ]
            ),
            "want": {"node2"},
        },
    ),
]


@pytest.mark.parametrize("case", [c for _, c in SELECT_CASES], ids=[n for n, _ in SELECT_CASES])
def test_select_best_candidate(case: dict[str, Any]) -> None:
    env = Env([node(n) for n in case["nodes"]], case["pods"])
    p = case["pod"]
    nodes = list(env.snapshot.node_infos())
    candidates, _, _ = env.plugin.dry_run_preemption(
        env.state_for(p), p, nodes, [], 0, len(nodes), 0.0
    )
    best = env.plugin.select_candidate(candidates, 0.0)
    assert best is not None
    assert best.name in case["want"]


def test_pick_one_node_criteria_in_order() -> None:
    def c(name: str, prios: Sequence[int], violations: int = 0) -> Candidate:
        return Candidate(
            name, Victims([pod(f"{name}-{i}", priority=p) for i, p in enumerate(prios)], violations)
        )

    assert pick_one_node_for_preemption([]) == ""
    # Fewer PDB violations beats everything else.
    assert pick_one_node_for_preemption([c("a", [NEG], 1), c("b", [HIGH, HIGH], 0)]) == "b"
    # Then the lowest most important victim.
    assert pick_one_node_for_preemption([c("a", [MID]), c("b", [LOW, LOW, LOW])]) == "b"
    # Then the lowest sum, negative priorities shifted: two NEG victims cost more than one.
    assert pick_one_node_for_preemption([c("a", [LOW, NEG, NEG]), c("b", [LOW, NEG])]) == "b"
    # Then the fewest victims, before start times: equal adjusted sums (0 + 2^31 against
    # 0 + (-2^31) + 2 * 2^31), and b's victims started later.
    one = Candidate("a", Victims([pod("a-0", priority=LOW, start=EPOCH[0])]))
    two = Candidate(
        "b",
        Victims([pod("b-0", priority=LOW, start=EPOCH[5]), pod("b-1", priority=-(2**31))]),
    )
    assert pick_one_node_for_preemption([two, one], 10.0) == "a"
    # Then the latest start among the most important victims.
    late = Candidate("c", Victims([pod("c-0", priority=LOW, start=EPOCH[5])]))
    assert pick_one_node_for_preemption([one, late], 10.0) == "c"
    # Then the first of equals.
    assert pick_one_node_for_preemption([c("a", [LOW]), c("b", [LOW])], 0.0) == "a"


# --- PodEligibleToPreemptOthers --------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "pods", "nodes", "nominated_status", "expected"),
    [
        pytest.param(
            pod("p_with_nominated_node", priority=HIGH, nominated="node1"),
            [terminating(pod("p1", priority=LOW, node_name="node1"), by_preemption=True)],
            ["node1"],
            Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) had untolerated taint(s)"),
            True,
            id="nominated node now unresolvable",
        ),
        pytest.param(
            pod("p_without_nominated_node", priority=HIGH),
            [],
            [],
            None,
            True,
            id="no nominated node",
        ),
        pytest.param(
            pod("p_with_preempt_never_policy", priority=HIGH, policy="Never"),
            [],
            [],
            None,
            False,
            id="preemptionPolicy Never",
        ),
        pytest.param(
            pod("p_with_nominated_node", priority=HIGH, nominated="node1"),
            [terminating(pod("p1", priority=LOW, node_name="node1"), by_preemption=True)],
            ["node1"],
            None,
            False,
            id="victim terminating, as its DisruptionTarget condition says",
        ),
        pytest.param(
            pod("p_with_nominated_node", priority=HIGH, nominated="node1"),
            [terminating(pod("p1", priority=LOW, node_name="node1"), by_preemption=False)],
            ["node1"],
            None,
            True,
            id="non-victim pods terminating",
        ),
    ],
)
def test_pod_eligible_to_preempt_others(
    p: Pod, pods: list[Pod], nodes: list[str], nominated_status: Status | None, expected: bool
) -> None:
    env = Env([node(n) for n in nodes], pods)
    assert env.plugin.pod_eligible_to_preempt_others(p, nominated_status)[0] is expected


async def test_ineligible_pods_keep_their_nomination_and_say_why() -> None:
    env = Env(
        [node("node1", pods="1")],
        [terminating(pod("p1", priority=LOW, node_name="node1"), by_preemption=True)],
    )
    never = pod("never", priority=HIGH, policy="Never")
    nominated = pod("nominated", priority=HIGH, nominated="node1")
    filtered = {"node1": UNSCHEDULABLE}
    assert env.fw.run_post_filter(CycleState(), never, filtered) == (
        None,
        Status(
            Code.UNSCHEDULABLE,
            "preemption: not eligible due to preemptionPolicy=Never.",
            plugin=NAME,
        ),
    )
    assert env.fw.run_post_filter(CycleState(), nominated, filtered) == (
        None,
        Status(
            Code.UNSCHEDULABLE,
            "preemption: not eligible due to a terminating pod on the nominated node.",
            plugin=NAME,
        ),
    )


# --- Preempt: the evictions ---------------------------------------------------------------


async def test_preempt_evicts_victims_and_clears_lower_nominations() -> None:
    """Upstream's "basic preemption logic": node1's two small low-priority pods go."""
    pods = [
        pod("p1.1", node_name="node1", priority=LOW, res=SMALL),
        pod("p1.2", node_name="node1", priority=LOW, res=SMALL),
        pod("p2.1", node_name="node2", priority=HIGH, res=LARGE),
        pod("p3.1", node_name="node3", priority=MID, res=MEDIUM),
    ]
    env = Env([node(n) for n in ("node1", "node2", "node3")], pods)
    env.nominator.pods["node1"] = [
        PodInfo.of(pod("lower", priority=LOW, nominated="node1")),
        PodInfo.of(pod("equal", priority=HIGH, nominated="node1")),
        PodInfo.of(pod("in-memory-only", priority=LOW)),
    ]
    p = pod("p", priority=HIGH, res=VERY_LARGE)
    filtered = dict.fromkeys(("node1", "node2", "node3"), UNSCHEDULABLE)

    assert env.fw.run_post_filter(env.state_for(p), p, filtered) == ("node1", None)
    # Until the victims are gone, the preemptor is held before the active queue.
    assert env.fw.run_pre_enqueue(p) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "waiting for the preemption for this pod to be finished",
        plugin=NAME,
    )
    await env.plugin.wait_for_evictions()
    assert env.fw.run_pre_enqueue(p) is None
    assert sorted(env.evictor.evicted) == ["p1.1", "p1.2"]
    assert sorted(env.evictor.events) == [
        ("p1.1", "Preempted by pod p on node node1", "default-scheduler"),
        ("p1.2", "Preempted by pod p on node node1", "default-scheduler"),
    ]
    assert env.evictor.cleared == ["lower"]
    # The victims' deletions reached the snapshot before their evictions returned, so no event
    # is left to bring the preemptor back: the end of its preemption does.
    assert env.activator.activated == ["p"]


@pytest.mark.parametrize("seen", ["deleted", "terminating"])
async def test_a_preemptor_is_held_until_its_last_victim_is_seen_going(seen: str) -> None:
    """Evictions that returned before the snapshot shows their victims go (the watch events
    still on their way): the preemptor stays held, as it would be had those events come first,
    and is not activated; a cycle now would count the victims and preempt them again. Held until
    the last victim is seen deleted or being deleted."""
    pods = [
        pod("a", node_name="node1", priority=LOW, res=SMALL),
        pod("b", node_name="node1", priority=LOW, res=SMALL),
    ]
    env = Env([node("node1", MEDIUM)], pods)
    env.evictor.graceful = {"a", "b"}
    p = pod("p", priority=HIGH, res=MEDIUM)
    assert env.fw.run_post_filter(env.state_for(p), p, {"node1": UNSCHEDULABLE}) == (
        "node1",
        None,
    )
    await env.plugin.wait_for_evictions()
    assert sorted(env.evictor.evicted) == ["a", "b"]
    assert env.fw.run_pre_enqueue(p) is not None
    assert env.activator.activated == []
    for victim in pods:
        env.snapshot.remove_pod(victim.metadata.uid)
        if seen == "terminating":
            going = msgspec.structs.replace(
                victim,
                metadata=msgspec.structs.replace(
                    victim.metadata, deletion_timestamp="2026-01-01T00:00:00Z"
                ),
            )
            env.snapshot.add_pod(PodInfo.of(going), "node1")
    assert env.fw.run_pre_enqueue(p) is None


async def test_a_held_preemptor_deleted_before_it_is_asked_again_is_forgotten() -> None:
    """A preemptor held for its last victim and then deleted is never asked about again: the
    next preemption forgets it once its victim is gone, so nothing piles up."""
    pods = [
        pod("a", node_name="node1", priority=LOW, res=MEDIUM),
        pod("b", node_name="node2", priority=LOW, res=MEDIUM),
    ]
    env = Env([node("node1", MEDIUM), node("node2", MEDIUM)], pods)
    env.evictor.graceful = {"a", "b"}
    running = env.plugin._running_preemptions
    first = pod("first", priority=HIGH, res=MEDIUM)
    filtered = {"node1": UNSCHEDULABLE, "node2": UNSCHEDULABLE}
    nominated, _ = env.fw.run_post_filter(env.state_for(first), first, filtered)
    await env.plugin.wait_for_evictions()
    assert "first" in running  # its victim not seen going yet
    victim = "a" if nominated == "node1" else "b"
    env.snapshot.remove_pod(victim)  # it goes; the preemptor, deleted, is not asked again
    second = pod("second", priority=HIGH, res=MEDIUM)
    env.fw.run_post_filter(env.state_for(second), second, filtered)
    assert set(running._last_victim) <= {"second"}
    await env.plugin.wait_for_evictions()


async def test_preempt_with_policy_never_evicts_nothing() -> None:
    pods = [pod("p1.1", node_name="node1", priority=LOW, res=SMALL)]
    env = Env([node("node1", SMALL)], pods)
    p = pod("p", priority=HIGH, res=SMALL, policy="Never")
    node_name, status = env.fw.run_post_filter(env.state_for(p), p, {"node1": UNSCHEDULABLE})
    assert node_name is None
    assert status is not None
    await env.plugin.wait_for_evictions()
    assert env.evictor.evicted == []


async def test_a_failed_eviction_activates_the_preemptor() -> None:
    pods = [
        pod("a", node_name="node1", priority=LOW, res=SMALL),
        pod("b", node_name="node1", priority=LOW, res=SMALL),
    ]
    env = Env([node("node1", MEDIUM)], pods)
    env.evictor.fail = {"a"}
    p = pod("p", priority=HIGH, res=MEDIUM)
    assert env.fw.run_post_filter(env.state_for(p), p, {"node1": UNSCHEDULABLE}) == (
        "node1",
        None,
    )
    await env.plugin.wait_for_evictions()
    assert env.activator.activated == ["p"]
    assert env.fw.run_pre_enqueue(p) is None


async def test_the_last_victim_being_deleted_ends_the_wait() -> None:
    """While only the last victim is left, the preemption counts as done once that victim is
    gone or has a deletion timestamp (its deletion event may come before the call returns)."""
    victim = pod("v", node_name="node1", priority=LOW, res=SMALL)
    env = Env([node("node1", SMALL)], [victim])
    plugin = env.plugin
    plugin._running_preemptions.start("p")
    assert plugin.is_pod_running_preemption("p")
    plugin._running_preemptions.last_victim_left("p", "v")
    assert plugin.is_pod_running_preemption("p")
    env.snapshot.add_pod(PodInfo.of(terminating(victim, by_preemption=True)), "node1")
    assert not plugin.is_pod_running_preemption("p")
    env.snapshot.remove_pod("v")
    assert not plugin.is_pod_running_preemption("p")


async def test_held_pods_are_the_preemptors_pre_enqueue_holds() -> None:
    """``held_pods`` names a preemptor exactly while PreEnqueue holds it: through each
    eviction, and no longer once the last victim is gone."""
    pods = [pod(n, node_name="node1", priority=LOW, res=SMALL) for n in ("a", "b", "c")]
    env = Env([node("node1", MEDIUM)], pods)
    p = pod("p", priority=HIGH, res=MEDIUM)
    seen: list[tuple[bool, bool]] = []
    evict = env.evictor.evict

    def look() -> None:
        held = p.metadata.uid in env.plugin.held_pods()
        seen.append((held, env.fw.run_pre_enqueue(p) is not None))

    async def watching(victim: Pod, preemptor: Pod) -> None:
        look()
        await evict(victim, preemptor)
        look()

    env.evictor.evict = watching  # type: ignore[method-assign]
    assert env.fw.run_post_filter(env.state_for(p), p, {"node1": UNSCHEDULABLE}) == (
        "node1",
        None,
    )
    await env.plugin.wait_for_evictions()
    look()
    assert [held for held, _ in seen] == [gated for _, gated in seen]
    assert seen[0] == (True, True)
    assert seen[-1] == (False, False)
    assert seen[-2] == (False, False)  # the last victim gone: held no more


def test_a_customized_pre_enqueue_is_asked_itself() -> None:
    """A subclass that decides PreEnqueue differently names no held pods: the queue asks it."""

    class Patient(DefaultPreemption):
        def is_pod_running_preemption(self, uid: str) -> bool:
            return False

    env = Env([node("node1", SMALL)])
    assert env.plugin.held_pods() is not None
    assert Patient(env.fw).held_pods() is None


async def test_a_victim_waiting_at_permit_is_rejected_not_deleted() -> None:
    env = Env([node("node1", SMALL)], permit=True)
    waiting = pod("waiting", priority=LOW, res=SMALL)
    env.snapshot.add_pod(PodInfo.of(waiting), "node1")
    assert env.fw.run_permit(CycleState(), waiting, "node1") is not None
    outcome = asyncio.ensure_future(env.fw.wait_on_permit(waiting))
    p = pod("p", priority=HIGH, res=SMALL)
    assert env.fw.run_post_filter(env.state_for(p), p, {"node1": UNSCHEDULABLE}) == (
        "node1",
        None,
    )
    await env.plugin.wait_for_evictions()
    assert await outcome == Status(Code.UNSCHEDULABLE, "preempted", plugin=NAME)
    assert env.evictor.evicted == []
    assert env.evictor.events == [
        ("waiting", "Preempted by pod p on node node1", "default-scheduler")
    ]


# --- args, PDBs, the queue hooks ------------------------------------------------------------


@pytest.mark.parametrize(
    ("percentage", "absolute", "nodes", "expected"),
    [
        (10, 100, 1000, 100),
        (40, 1, 10, 4),
        (40, 8, 10, 8),
        (40, 12, 10, 10),
        (50, 0, 5, 2),
        (0, 3, 10, 3),
    ],
)
def test_number_of_candidates(percentage: int, absolute: int, nodes: int, expected: int) -> None:
    env = Env(
        [node("n")],
        args={"minCandidateNodesPercentage": percentage, "minCandidateNodesAbsolute": absolute},
    )
    assert env.plugin.calculate_num_candidates(nodes) == expected
    offset, num = env.plugin.get_offset_and_num_candidates(nodes)
    assert 0 <= offset < nodes
    assert num == expected


def test_bad_args_are_refused() -> None:
    with pytest.raises(ConfigError, match="minCandidateNodesPercentage"):
        Env([node("n")], args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})


def test_pdb_matching() -> None:
    pods = [
        PodInfo.of(pod("a", labels={"app": "x"})),
        PodInfo.of(pod("b", labels={"app": "x"})),
        PodInfo.of(pod("c", labels={"app": "x"}, namespace="other")),
        PodInfo.of(pod("d")),
        PodInfo.of(pod("e", labels={"app": "y"})),
    ]
    budgets = [
        pdb({"app": "x"}, 1),
        pdb(None, 0, name="nil-selector"),
        pdb({}, 0, name="empty-selector"),
        pdb({"app": "y"}, 5, name="generous"),
    ]
    violating, non_violating = filter_pods_with_pdb_violation(pods, budgets)
    assert [p.pod.metadata.name for p in violating] == ["b"]
    assert [p.pod.metadata.name for p in non_violating] == ["a", "c", "d", "e"]


def test_events_and_hint() -> None:
    env = Env([node("n")])
    [registered] = env.plugin.events_to_register()
    assert (registered.event.resource, registered.event.action.name) == ("AssignedPod", "DELETE")
    assert registered.hint is not None
    assert registered.hint(pod("p"), pod("x"), None).value == "QueueSkip"


def test_nodes_without_lower_priority_pods_are_skipped_until_their_pods_change() -> None:
    env = Env([node("node1", SMALL)], [pod("high", node_name="node1", priority=HIGH, res=SMALL)])
    preemptor = pod("p", priority=MID, res=SMALL)
    assert env.dry_run(preemptor) == {}
    # A pod of lower priority arrives (and the high one leaves): the node is tried again.
    env.snapshot.remove_pod("high")
    env.snapshot.add_pod(
        PodInfo.of(pod("low", node_name="node1", priority=LOW, res=SMALL)), "node1"
    )
    assert env.dry_run(preemptor) == {"node1": (["low"], 0)}


class _CountingDryRuns:
    """Counts the dry runs ``plugin`` really makes, by node."""

    def __init__(self, plugin: DefaultPreemption) -> None:
        self.nodes: list[str] = []
        inner = plugin.select_victims_on_node

        def counted(
            state: CycleState,
            p: Pod,
            info: NodeInfo,
            pdbs: Sequence[PodDisruptionBudget],
            now: float | None = None,
        ) -> tuple[list[Pod], int, Status | None]:
            self.nodes.append(info.name)
            return inner(state, p, info, pdbs, now)

        plugin.select_victims_on_node = counted  # type: ignore[method-assign]
        together = plugin._select_victims_on_nodes

        def counted_together(
            state: CycleState,
            p: Pod,
            nodes: Sequence[NodeInfo],
            pdbs: Sequence[PodDisruptionBudget],
            now: float,
        ) -> list[tuple[list[Pod], int, Status | None]]:
            self.nodes += [info.name for info in nodes]
            return together(state, p, nodes, pdbs, now)

        plugin._select_victims_on_nodes = counted_together  # type: ignore[method-assign]

    def taken(self) -> list[str]:
        out, self.nodes = sorted(self.nodes), []
        return out


def _three_nodes(extra: Sequence[str] = (), start: str | None = None) -> Env:
    return Env(
        [node(f"node{i}", LARGE) for i in (1, 2, 3)],
        [
            pod(f"low{i}", node_name=f"node{i}", priority=LOW, res=MEDIUM, start=start)
            for i in (1, 2, 3)
        ],
        extra=extra,
    )


def test_a_dry_run_stands_for_the_next_on_a_node_unchanged_since() -> None:
    """Preemptors alike find the same victims on a node whose pods, nominated pods and
    budgets have not changed: the dry run there is not made again."""
    env = _three_nodes()
    counted = _CountingDryRuns(env.plugin)
    want = {f"node{i}": ([f"low{i}"], 0) for i in (1, 2, 3)}
    assert env.dry_run(pod("p1", priority=HIGH, res=MEDIUM)) == want
    assert counted.taken() == ["node1", "node2", "node3"]
    assert env.dry_run(pod("p2", priority=HIGH, res=MEDIUM)) == want
    assert counted.taken() == []
    # A node's pods change; a pod is nominated to another: those two are tried again.
    env.snapshot.remove_pod("low1")
    env.snapshot.add_pod(PodInfo.of(pod("new1", priority=LOW, res=MEDIUM)), "node1")
    env.nominator.pods["node2"] = [PodInfo.of(pod("nom", priority=VERY_HIGH, res=MEDIUM))]
    got = env.dry_run(pod("p3", priority=HIGH, res=MEDIUM))
    assert counted.taken() == ["node1", "node2"]
    assert got == {"node1": (["new1"], 0), "node3": (["low3"], 0)}
    env.nominator.pods["node2"] = [PodInfo.of(pod("nom2", priority=VERY_HIGH, res=SMALL))]
    got = env.dry_run(pod("p3b", priority=HIGH, res=MEDIUM))
    assert counted.taken() == ["node2"]
    assert got == {"node1": (["new1"], 0), "node2": (["low2"], 0), "node3": (["low3"], 0)}
    # Other budgets: every node is tried again.
    env.pdbs = [pdb({"app": "x"}, 1)]
    env.dry_run(pod("p4", priority=HIGH, res=MEDIUM))
    assert counted.taken() == ["node1", "node2", "node3"]
    # A pod of another shape: its own dry runs.
    env.dry_run(pod("p5", priority=VERY_HIGH, res=MEDIUM))
    assert counted.taken() == ["node1", "node2", "node3"]


def test_a_dry_run_is_made_again_once_a_pod_nominated_there_counts_on_a_node() -> None:
    """A pod nominated to a node and then counted on a node (bound, its nomination not yet
    cleared) no longer counts there as nominated: the node's kept dry run does not stand."""
    env = _three_nodes()
    counted = _CountingDryRuns(env.plugin)
    nominated = PodInfo.of(pod("nom", priority=VERY_HIGH, res=SMALL))
    env.nominator.pods["node2"] = [nominated]
    env.dry_run(pod("p1", priority=HIGH, res=MEDIUM))
    assert counted.taken() == ["node1", "node2", "node3"]
    env.dry_run(pod("p2", priority=HIGH, res=MEDIUM))
    assert counted.taken() == []
    env.snapshot.add_pod(nominated, "node3")
    env.dry_run(pod("p3", priority=HIGH, res=MEDIUM))
    assert counted.taken() == ["node2", "node3"]


class _Customized(DefaultPreemption):
    def more_important_pod(self, a: Pod, b: Pod, now: float) -> bool:
        return a.metadata.name < b.metadata.name


@pytest.mark.parametrize("why", ["customized", "extensions", "future start"])
def test_dry_runs_are_made_each_time_when_an_earlier_one_may_not_stand(why: str) -> None:
    """A customized evaluator may read anything; a PreFilter plugin following removed pods may
    carry one node's dry run into another's verdict; a start time still to come would order
    the victims otherwise later."""
    env = _three_nodes(
        extra=[RemovePodFails.name] if why == "extensions" else (),
        # Env's dry runs happen at time 0: any start time is still to come.
        start=EPOCH[1] if why == "future start" else None,
    )
    if why == "customized":
        env.plugin = _Customized(env.fw)
    counted = _CountingDryRuns(env.plugin)
    for name in ("p1", "p2"):
        env.dry_run(pod(name, priority=HIGH, res=MEDIUM))
        assert counted.taken() == ["node1", "node2", "node3"]


@pytest.mark.parametrize("seed", range(8))
def test_nodes_dry_run_together_find_each_nodes_own_victims(seed: int) -> None:
    """Dry runs of many nodes at once (one Filter pass per step over all of them) give each
    node the victims, PDB violations and statuses of its own dry run, and leave every node as
    it was; nominated pods, budgets, start times and pod limits vary at random."""
    rng = random.Random(seed)
    sizes = [SMALL, MEDIUM, LARGE, VERY_LARGE]
    nodes = [node(f"n{i}", rng.choice(sizes[1:]), pods=str(rng.randint(2, 6))) for i in range(40)]
    pods = []
    for i in range(160):
        n = rng.randrange(len(nodes))
        pods.append(
            pod(
                f"p{i}",
                priority=rng.choice([LOW, MID, HIGH]),
                res=rng.choice([SMALL, MEDIUM]),
                node_name=f"n{n}",
                labels={"app": rng.choice("xyz")},
                start=rng.choice([None, *EPOCH[:3]]),
            )
        )
    env = Env(nodes, pods, pdbs=[pdb({"app": "x"}, rng.randint(0, 2)), pdb({"app": "y"}, 0)])
    for i in range(0, 40, 3):
        env.nominator.pods[f"n{i}"] = [
            PodInfo.of(pod(f"nom{i}", priority=rng.choice([MID, VERY_HIGH]), res=SMALL))
        ]
    preemptor = pod("preemptor", priority=HIGH, res=rng.choice(sizes))
    state = env.state_for(preemptor)
    infos = sorted(env.snapshot.node_infos(), key=lambda i: i.name)

    def as_now(i: NodeInfo) -> Any:
        # Content, order and generation: what was derived from a node still holds after.
        return (
            i.node,
            list(i.pods.items()),
            i.generation,
            env.snapshot.table.requested[i.slot].tolist(),
        )

    before = [as_now(i) for i in infos]
    passes = 0
    inner = env.fw._vectorized_verdicts

    def counted(*args: Any) -> Any:
        nonlocal passes
        passes += 1
        return inner(*args)

    env.fw._vectorized_verdicts = counted  # type: ignore[method-assign]
    clock = 10.0
    together = env.plugin._select_victims_on_nodes(state, preemptor, infos, env.pdbs, clock)
    assert passes > 0
    assert [as_now(i) for i in infos] == before
    alone = [
        env.plugin.select_victims_on_node(state.clone(), preemptor, i, env.pdbs, clock)
        for i in infos
    ]

    def named(o: tuple[list[Pod], int, Status | None]) -> Any:
        victims, violations, status = o
        said = None if status is None else (status.code, status.reasons)
        return [v.metadata.name for v in victims], violations, said

    assert [named(o) for o in together] == [named(o) for o in alone]
    assert any(o[0] for o in alone)
    assert any(o[2] is not None for o in alone)
