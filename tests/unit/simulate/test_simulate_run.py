"""The simulation: the scheduler loop's path, sequential state, order, seeds and explanations."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any, ClassVar

import pytest

from kubesched.api import Pod
from kubesched.config import default_config, load_config_from_dict
from kubesched.framework import (
    Code,
    CycleState,
    PermitPlugin,
    Registry,
    ReservePlugin,
    Status,
    plugin_args_types,
)
from kubesched.plugins import default_registry
from kubesched.simulate import (
    FILTER_OK,
    PRE_FILTER_RESULT,
    InputBuilder,
    Inputs,
    SimulationResult,
    load_text,
    simulate,
)
from kubesched.simulate.synthetic import synthetic_manifests


def _node(name: str, cpu: str = "4", memory: str = "8Gi", extra: str = "") -> str:
    return textwrap.dedent(f"""
        kind: Node
        metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
        {extra}
        status: {{allocatable: {{cpu: "{cpu}", memory: {memory}, pods: "110"}}}}
        """)


def _pod(name: str, cpu: str = "1", memory: str = "1Gi", spec: str = "") -> str:
    return textwrap.dedent(f"""
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          containers:
          - name: c
            image: registry.k8s.io/pause:3.10
            resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}
        """) + textwrap.indent(textwrap.dedent(spec), "  ")


def _inputs(*docs: str) -> Inputs:
    inputs = load_text("\n---\n".join(docs))
    assert inputs.errors == [], [str(i) for i in inputs.errors]
    return inputs


def _run(inputs: Inputs, **kwargs: Any) -> SimulationResult:
    config = kwargs.pop("config", None) or default_config()
    registry = kwargs.pop("registry", None) or default_registry()
    return asyncio.run(simulate(inputs, config, registry, **kwargs))


def _placements(result: SimulationResult) -> dict[str, str | None]:
    return {p.name: p.node for p in result.pods}


def test_a_placed_pod_counts_for_the_next() -> None:
    inputs = _inputs(_node("a", cpu="2"), _node("b", cpu="2"), *[_pod(f"p{i}") for i in range(5)])
    result = _run(inputs, seed=0)
    placed = _placements(result)
    assert sorted(n for n in placed.values() if n) == ["a", "a", "b", "b"]
    last = result.pods[-1]
    assert (last.name, last.node, last.reason) == ("p4", None, "Unschedulable")
    assert last.message == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod."
    )
    assert [p.attempt for p in result.pods] == [1, 2, 3, 4, 5]
    assert result.counts() == {"Scheduled": 4, "Unschedulable": 1}


def test_running_pods_count_and_are_not_scheduled() -> None:
    inputs = _inputs(
        _node("a", cpu="2"),
        _node("b", cpu="8"),
        _pod("big-running", cpu="7", spec="nodeName: b"),
        _pod("new", cpu="2"),
    )
    result = _run(inputs)
    assert [p.name for p in result.pods] == ["new"]
    assert result.pods[0].node == "a"
    assert result.num_running == 1


def test_one_attempt_per_pod_even_when_room_appears_later() -> None:
    # p-big fails first; p-small then fits; nothing would ever free room, and even an event the
    # real scheduler would react to does not bring p-big back here.
    inputs = _inputs(_node("a", cpu="2"), _pod("p-big", cpu="3"), _pod("p-small", cpu="1"))
    result = _run(inputs)
    assert _placements(result) == {"p-big": None, "p-small": "a"}
    assert [p.attempt for p in result.pods] == [1, 2]


def test_queue_order_is_priority_then_input_order() -> None:
    classes = textwrap.dedent("""
        apiVersion: scheduling.k8s.io/v1
        kind: PriorityClass
        metadata: {name: high}
        value: 100
        """)
    inputs = _inputs(
        classes,
        _node("a", cpu="2"),
        _pod("first", cpu="1"),
        _pod("second", cpu="1"),
        _pod("urgent", cpu="1", spec="priorityClassName: high"),
    )
    result = _run(inputs)
    assert [p.name for p in result.pods] == ["urgent", "first", "second"]
    assert _placements(result) == {"urgent": "a", "first": "a", "second": None}


def test_gated_and_not_handled_pods() -> None:
    inputs = _inputs(
        _node("a"),
        _pod("gated", spec="schedulingGates: [{name: example.com/wait}]"),
        _pod("elsewhere", spec="schedulerName: other"),
        _pod("normal"),
    )
    result = _run(inputs)
    by_name = {p.name: p for p in result.pods}
    assert [p.name for p in result.pods] == ["normal", "gated", "elsewhere"]
    assert by_name["gated"].reason == "SchedulingGated"
    assert by_name["gated"].message == "waiting for scheduling gates: [example.com/wait]"
    assert by_name["gated"].attempt is None
    assert by_name["elsewhere"].reason == "NotHandled"
    assert "'other'" in by_name["elsewhere"].message


def test_no_nodes() -> None:
    result = _run(_inputs(_pod("p")))
    assert result.pods[0].reason == "Unschedulable"
    assert result.pods[0].message == "no nodes available to schedule pods"


def test_profiles_by_scheduler_name() -> None:
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {"schedulerName": "default-scheduler"},
                {
                    "schedulerName": "packer",
                    "pluginConfig": [
                        {
                            "name": "NodeResourcesFit",
                            "args": {"scoringStrategy": {"type": "MostAllocated"}},
                        }
                    ],
                },
            ],
        },
        plugin_args_types=plugin_args_types(default_registry()),
    )
    inputs = _inputs(
        _node("a", cpu="8", memory="16Gi"),
        _node("b", cpu="8", memory="16Gi"),
        _pod("seed", cpu="2", memory="2Gi", spec="nodeName: a"),
        _pod("spread", spec="schedulerName: default-scheduler"),
        _pod("pack", spec="schedulerName: packer"),
    )
    result = _run(inputs, config=config)
    assert _placements(result) == {"spread": "b", "pack": "a"}
    assert [p.scheduler_name for p in result.pods] == ["default-scheduler", "packer"]


def _identical_nodes(n: int) -> list[str]:
    return [_node(f"n{i}") for i in range(n)]


def test_same_seed_same_result_and_seeds_break_ties() -> None:
    inputs_text = [*_identical_nodes(8), _pod("p", cpu="100m", memory="64Mi")]

    def place(seed: int) -> str | None:
        return _run(_inputs(*inputs_text), seed=seed).pods[0].node

    assert len({place(7) for _ in range(3)}) == 1
    # Eight nodes tie: different seeds pick different ones.
    assert len({place(seed) for seed in range(12)}) > 1


def test_synthetic_run_is_reproducible_and_never_overcommits() -> None:
    docs = synthetic_manifests(60, 300, running=30, seed=3)
    builder = InputBuilder()
    for doc in docs:
        builder.add_object(doc, "synthetic")
    inputs = builder.finish()
    assert inputs.issues == []
    first = _run(inputs, seed=5)
    second = _run(inputs, seed=5)
    assert _placements(first) == _placements(second)
    assert first.counts()["Scheduled"] > 200
    assert first.counts().get("Unschedulable", 0) > 0
    # No node gets more than it can hold.
    cpu = {n.metadata.name: _milli(n.status.allocatable["cpu"]) for n in inputs.nodes}
    used = dict.fromkeys(cpu, 0)
    pods = {p.metadata.uid: p for p in inputs.pods}
    for p in inputs.running:
        used[p.spec.node_name] += _milli(p.spec.containers[0].resources.requests["cpu"])
    for r in first.pods:
        if r.node:
            used[r.node] += _milli(pods[r.uid].spec.containers[0].resources.requests["cpu"])
    assert all(used[n] <= cpu[n] for n in cpu)


def _milli(q: str) -> int:
    return int(q[:-1]) if q.endswith("m") else int(q) * 1000


# -- explain ---------------------------------------------------------------------------------


def test_explain_filters_in_order_until_the_first_rejection() -> None:
    inputs = _inputs(
        _node("cordoned", extra="spec: {unschedulable: true}"),
        _node("tainted", extra="spec: {taints: [{key: k, value: v, effect: NoSchedule}]}"),
        _node("small", cpu="1"),
        _node("good-1"),
        _node("good-2", cpu="8", memory="16Gi"),
        _pod("p", cpu="2"),
    )
    (pod,) = _run(inputs, detail="explain", seed=0).pods
    assert pod.node == "good-2"
    assert pod.feasible_nodes == ["good-1", "good-2"]
    assert pod.scored is True
    nodes = pod.nodes
    assert nodes is not None
    assert list(nodes) == sorted(nodes)
    # NodeAffinity and NodePorts skip themselves at PreFilter for this pod: not run, not listed.
    assert nodes["cordoned"].filter == {"NodeUnschedulable": "node(s) were unschedulable"}
    assert nodes["tainted"].filter == {
        "NodeUnschedulable": FILTER_OK,
        "NodeName": FILTER_OK,
        "TaintToleration": "node(s) had untolerated taint(s)",
    }
    assert list(nodes["small"].filter.items())[-1] == ("NodeResourcesFit", "Insufficient cpu")
    assert nodes["good-1"].filter == dict.fromkeys(
        ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit"], FILTER_OK
    )
    for name in ("cordoned", "tainted", "small"):
        assert nodes[name].scores == {}
        assert nodes[name].total is None
        assert not nodes[name].feasible
    good1, good2 = nodes["good-1"], nodes["good-2"]
    assert good1.total == sum(good1.scores.values())
    assert good2.total == sum(good2.scores.values())
    assert good2.total is not None
    assert good1.total is not None
    assert good2.total > good1.total
    # Weighted: TaintToleration's weight is 3, so an untainted node gets 300.
    assert good1.scores["TaintToleration"] == 300
    assert set(good1.scores) == {
        "TaintToleration",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    }


def test_explain_says_when_scoring_was_skipped() -> None:
    inputs = _inputs(_node("only"), _node("full", cpu="500m"), _pod("p"))
    (pod,) = _run(inputs, detail="explain").pods
    assert pod.scored is False
    assert pod.nodes is not None
    assert pod.nodes["only"].scores == {}
    assert pod.nodes["only"].total is None
    assert pod.nodes["only"].feasible


def test_explain_pre_filter_rejection_per_node() -> None:
    affinity = """
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchFields: [{key: metadata.name, operator: In, values: [%s]}]
    """
    inputs = _inputs(
        _node("a"),
        _node("b"),
        _pod("pinned", spec=affinity % "b"),
        _pod("nowhere", spec=affinity % "gone"),
    )
    result = _run(inputs, detail="explain")
    pinned, nowhere = result.pods
    assert pinned.node == "b"
    assert pinned.nodes is not None
    assert nowhere.nodes is not None
    reason = "node(s) didn't satisfy plugin(s) [NodeAffinity]"
    assert pinned.nodes["a"].pre_filter == {PRE_FILTER_RESULT: reason}
    assert pinned.nodes["a"].filter == {}
    assert nowhere.message == (
        f"0/2 nodes are available: 2 {reason}. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling."
    )
    assert {n: e.pre_filter for n, e in nowhere.nodes.items()} == {
        "a": {PRE_FILTER_RESULT: reason},
        "b": {PRE_FILTER_RESULT: reason},
    }


def test_detail_levels() -> None:
    inputs = _inputs(_node("a"), _node("b"), _pod("p"))
    plain = _run(inputs).pods[0]
    assert (plain.feasible_nodes, plain.nodes, plain.scored) == (None, None, None)
    feasible = _run(inputs, detail="feasible").pods[0]
    assert feasible.feasible_nodes == ["a", "b"]
    assert feasible.nodes is None


# -- the scheduler's path ----------------------------------------------------------------------


class _Recording(ReservePlugin, PermitPlugin):
    """Sees Reserve and Permit, and rejects pods named ``reject-*`` at Permit."""

    name = "Recording"
    calls: ClassVar[list[str]] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.calls.append(f"reserve {pod.metadata.name} {node_name}")
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.calls.append(f"unreserve {pod.metadata.name} {node_name}")

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if pod.metadata.name.startswith("reject-"):
            return Status(Code.UNSCHEDULABLE, "not today"), 0.0
        return None, 0.0


def test_the_scheduling_and_binding_cycles_run_as_in_kubesched_run() -> None:
    registry = Registry({**default_registry(), "Recording": _Recording})
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"enabled": [{"name": "Recording"}]}},
                }
            ],
        },
        plugin_args_types=plugin_args_types(registry),
    )
    _Recording.calls.clear()
    inputs = _inputs(_node("a", cpu="2"), _pod("ok"), _pod("reject-me"), _pod("after"))
    result = _run(inputs, config=config, registry=registry)
    assert _placements(result) == {"ok": "a", "reject-me": None, "after": "a"}
    rejected = result.pods[1]
    # As kube-scheduler words a rejection at Permit: a FitError about the one node.
    assert (rejected.reason, rejected.message) == (
        "Unschedulable",
        "0/1 nodes are available: 1 not today.",
    )
    assert _Recording.calls == [
        "reserve ok a",
        "reserve reject-me a",
        "unreserve reject-me a",
        "reserve after a",
    ]
    # The rejected pod was forgotten: "after" found the room it would have taken.
    assert result.pods[2].message == "Successfully assigned default/after to a"


def test_bindings_run_in_the_simulation_not_as_tasks() -> None:
    """Each pod's binding runs right after its scheduling cycle, in the simulation itself: no
    task (a turn of the event loop) per pod."""
    nodes = [_node(f"n{i}") for i in range(3)]
    inputs = _inputs(*nodes, *(_pod(f"p{i}", cpu="100m", memory="64Mi") for i in range(30)))
    created = 0

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        nonlocal created
        created += 1
        return asyncio.Task(coro, loop=loop, **kwargs)

    async def run() -> SimulationResult:
        asyncio.get_running_loop().set_task_factory(counting)
        return await simulate(inputs, default_config(), default_registry())

    result = asyncio.run(run())
    assert all(p.node for p in result.pods)
    assert created < 10


@pytest.mark.parametrize("detail", ["outcome", "explain"])
def test_scheduled_message_is_the_event_note(detail: str) -> None:
    result = _run(_inputs(_node("a"), _pod("p")), detail=detail)
    assert result.pods[0].message == "Successfully assigned default/p to a"


_HIGH = """
kind: PriorityClass
apiVersion: scheduling.k8s.io/v1
metadata: {name: high}
value: 1000
---
kind: PriorityClass
apiVersion: scheduling.k8s.io/v1
metadata: {name: high-never}
value: 1000
preemptionPolicy: Never
"""


def _pdb(app: str) -> str:
    return textwrap.dedent(f"""
        kind: PodDisruptionBudget
        apiVersion: policy/v1
        metadata: {{name: guard-{app}}}
        spec: {{selector: {{matchLabels: {{app: {app}}}}}, maxUnavailable: 0}}
        status: {{disruptionsAllowed: 0}}
        """)


def _preemption_inputs(guarded: str, priority_class: str = "high") -> Inputs:
    running = [
        _pod("a", cpu="3", spec="nodeName: n1\n").replace(
            "{name: a}", "{name: a, labels: {app: a}}"
        ),
        _pod("b", cpu="3", spec="nodeName: n2\n").replace(
            "{name: b}", "{name: b, labels: {app: b}}"
        ),
    ]
    preemptor = _pod("hi", cpu="2", spec=f"priorityClassName: {priority_class}\n")
    return _inputs(_HIGH, _node("n1"), _node("n2"), *running, _pdb(guarded), preemptor)


@pytest.mark.parametrize(("guarded", "victim", "node"), [("a", "b", "n2"), ("b", "a", "n1")])
def test_preemption_evicts_the_victims_and_retries_the_preemptor(
    guarded: str, victim: str, node: str
) -> None:
    # Both nodes need one victim of the same priority: the PodDisruptionBudget on the other
    # node's pod decides (pickOneNodeForPreemption: fewest PDB violations first).
    for seed in range(4):
        result = _run(_preemption_inputs(guarded), seed=seed)
        (hi,) = result.pods
        assert (hi.node, hi.reason, hi.nominated_node) == (node, "Scheduled", node)
        assert hi.victims == [f"default/{victim}"]


def test_preemption_policy_never_leaves_the_victims_alone() -> None:
    result = _run(_preemption_inputs("a", priority_class="high-never"))
    (hi,) = result.pods
    assert (hi.node, hi.nominated_node, hi.victims) == (None, None, [])
    assert hi.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
