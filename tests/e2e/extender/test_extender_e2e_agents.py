"""The real kube-scheduler v1.34.4 with ``kubesched extender --agents``: the congestion agent
steers pods to the least congested node, the safe agent keeps them off overloaded ones.

Each test has nodes of its own (see :class:`ext_e2e.World`) annotated as the agents' data sources
would annotate them, and an extender with informers (``nodeCacheCapable``), started after the
nodes exist so that its first answers already see them. A later annotation change is waited for
by asking the extender directly, the way kube-scheduler asks it, until its answer reflects the
change.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ext_e2e import (
    Extender,
    KubeScheduler,
    World,
    scheduler_config,
    scheduler_kubeconfig,
    wait_for,
)

from kubesched.cluster import ClusterInfo
from kubesched.plugins.safe import ERR_REASON_CPU

StartExtender = Callable[..., Extender]
StartScheduler = Callable[[dict[str, Any]], KubeScheduler]

#: The score plugins of kube-scheduler v1.34's default profile and their weights
#: (``pkg/scheduler/apis/config/v1/default_plugins.go``; VolumeBinding has no weight there and
#: gets the framework's default of 1).
DEFAULT_SCORE_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "VolumeBinding": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
#: kube-scheduler adds ``score × weight × (MaxNodeScore / MaxExtenderPriority = 10)`` for an
#: extender, on top of the default plugins' ``Σ (0..100) × weight``, at most 13 × 100 = 1300
#: apart between two nodes. Two extender scores differ by at least 1 × weight × 10, so with
#: weight 131 (1310 > 1300) a better extender score always wins, whatever the plugins think.
CONGESTION_WEIGHT = sum(DEFAULT_SCORE_WEIGHTS.values()) * 100 // 10 + 1


def _agents(agents: str, extender: StartExtender, control_plane: ClusterInfo) -> Extender:
    ext = extender(
        ["--agents", agents, "--kubeconfig", scheduler_kubeconfig(control_plane)],
        env={"LOG_LEVEL": "TRACE"},  # the answers go to the log, where the test reads them
    )
    ext.wait_ready()
    return ext


def _extender_config(ext: Extender, *, weight: int, filter_verb: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "urlPrefix": ext.url,
        "prioritizeVerb": "prioritize",
        "weight": weight,
        "nodeCacheCapable": True,
    }
    if filter_verb:
        config["filterVerb"] = "filter"
    return config


def test_congestion_agent_steers_pods_to_the_least_congested_node(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
) -> None:
    factors = {"low": "10", "mid": "45", "high": "250"}
    nodes = {k: world.node(k, annotations={"congestion-factor": v}) for k, v in factors.items()}
    ext = _agents("congestion", extender, control_plane)
    # By hand, from docs/plugins/congestion.md with congestionFactorMax 100:
    # score = 100 * (1 - min(cf, 100) / 100), and the extender's 0..10 is round(score / 10) half
    # up (one Score plugin of weight 1):
    #   low  cf 10:  100 * (1 - 0.10) = 90 -> 9
    #   mid  cf 45:  100 * (1 - 0.45) = 55 -> 5.5 -> 6
    #   high cf 250: 100 * (1 - 1.00) = 0  -> 0
    expected = {nodes["low"]: 9, nodes["mid"]: 6, nodes["high"]: 0}
    kube_scheduler(
        scheduler_config(
            world.profile, [_extender_config(ext, weight=CONGESTION_WEIGHT, filter_verb=False)]
        )
    )
    pods = 3
    # One at a time: kube-scheduler would spread them otherwise (they all fit everywhere).
    for i in range(pods):
        world.pod(f"calm-{i}")
        assert world.wait_bound(f"calm-{i}") == nodes["low"]
    answers = ext.answers("prioritize")
    assert len(answers) >= pods
    for answer in answers:
        assert {a["Host"]: a["Score"] for a in answer} == expected

    # The low node gets congested; the next pod goes to the one now least congested.
    world.annotate_node(nodes["low"], {"congestion-factor": "100"})
    expected[nodes["low"]] = 0
    args = {"Pod": world.pod_manifest("probe"), "NodeNames": list(nodes.values())}
    wait_for(
        lambda: {a["Host"]: a["Score"] for a in ext.call("prioritize", args)} == expected,
        30,
        "the extender to see the new congestion factor",
    )
    world.pod("moved")
    assert world.wait_bound("moved") == nodes["mid"]
    assert {a["Host"]: a["Score"] for a in ext.answers("prioritize")[-1]} == expected


#: Statistics of a node whose CPU use, for the tests' 100m pods, is Beta(24, 2) distributed on
#: 3900m: mu = (3900 - 400 + 100) / 3900 = 12/13, sigma = 200 / 3900 = 2/39, and Beta(24, 2)
#: has mean 24/26 = 12/13 and variance 24*2 / (26**2 * 27) = (2/39)**2. Its risk of going over
#: the default 90% is 1 - I_0.9(24, 2) = 1 - P(Bin(25, 0.9) >= 24)
#: = 1 - (0.9**25 + 25 * 0.9**24 * 0.1) = 1 - 0.2712 = 0.7288, above the default 30%.
OVERLOADED = {"mean-free-cpu": "400", "std-free-cpu": "200"}
#: mu = (3900 - 3000 + 100) / 3900 = 0.26, sigma = 0.05: the risk is below 1e-12.
HEALTHY = {"mean-free-cpu": "3000", "std-free-cpu": "200"}
NODE_CPU = "3900m"


def test_safe_agent_keeps_pods_off_overloaded_nodes_and_says_why(
    world: World,
    extender: StartExtender,
    kube_scheduler: StartScheduler,
    control_plane: ClusterInfo,
) -> None:
    healthy = [world.node(f"healthy-{i}", annotations=HEALTHY, cpu=NODE_CPU) for i in range(2)]
    overloaded = world.node("overloaded", annotations=OVERLOADED, cpu=NODE_CPU)
    ext = _agents("safe", extender, control_plane)
    kube_scheduler(
        scheduler_config(world.profile, [_extender_config(ext, weight=1, filter_verb=True)])
    )
    pods = [world.pod(f"safe-{i}") for i in range(4)]
    assert {world.wait_bound(p) for p in pods} <= set(healthy)
    for answer in ext.answers("filter"):
        assert answer["FailedAndUnresolvableNodes"] == {overloaded: ERR_REASON_CPU}
        assert answer["FailedNodes"] == {}
        assert sorted(answer["NodeNames"]) == sorted(healthy)

    # Every node overloaded: the pod stays pending with the extender's reason.
    for name in healthy:
        world.annotate_node(name, OVERLOADED)
    everyone = [*healthy, overloaded]
    args = {"Pod": world.pod_manifest("probe"), "NodeNames": everyone}
    wait_for(
        lambda: len(ext.call("filter", args)["FailedAndUnresolvableNodes"]) == 3,
        30,
        "the extender to see the new statistics",
    )
    world.pod("nowhere")
    assert_fit_error(world.wait_unschedulable("nowhere"), f"3 {ERR_REASON_CPU}")
    condition = world.scheduled_condition("nowhere")
    assert condition is not None
    assert condition["reason"] == "Unschedulable"
    assert world.get_pod("nowhere")["spec"].get("nodeName") is None
    event = wait_for(
        lambda: [e for e in world.events("nowhere") if e["reason"] == "FailedScheduling"],
        15,
        "a FailedScheduling event",
    )
    assert_fit_error(event[0]["message"], f"3 {ERR_REASON_CPU}")


def assert_fit_error(message: str, reason: str) -> None:
    """``message`` is kube-scheduler's FitError for a pod every node turned down, ``reason``
    among its counts.

    Each node's status from ``FailedAndUnresolvableNodes`` is one reason, counted per node; the
    session's other nodes fail kube-scheduler's own filters. Then come the PostFilter plugins'
    reasons, joined by ", ": DynamicResources (on by default) has no claim to deallocate, and
    DefaultPreemption skips unresolvable nodes, so it finds every node "not helpful".
    """
    fit = re.fullmatch(
        r"0/(\d+) nodes are available: (.+)\. no new claims to deallocate, preemption: "
        r"0/\1 nodes are available: \1 Preemption is not helpful for scheduling\.",
        message,
    )
    assert fit, message
    reasons = fit.group(2).split(", ")
    assert reason in reasons, message
    assert sum(int(r.split(" ", 1)[0]) for r in reasons) == int(fit.group(1)), message
