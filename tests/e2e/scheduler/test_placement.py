"""Where ``kubesched run`` puts pods on a real apiserver: filters and scores, end to end.

Each test has its own nodes (no others in the cluster), its own profile and namespace, and its
own scheduler process; it checks the node each pod was bound to, or for a pod that fits nowhere,
the ``PodScheduled=False`` condition with kube-scheduler's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest
from sched_e2e import (
    NO_VICTIMS,
    NOT_HELPFUL,
    condition,
    create_pod,
    eventually,
    fit_error,
    get_pod,
    node_manifest,
    pod_manifest,
    scheduler_config,
)

if TYPE_CHECKING:
    from sched_e2e import Client, MakeNodes, StartScheduler

pytestmark = pytest.mark.usefixtures("only_our_nodes")


def _bound_to(client: Client, namespace: str, name: str, timeout: float = 30.0) -> str:
    pod = eventually(
        lambda: get_pod(client, namespace, name),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=timeout,
        what=f"pod {name} to be bound",
    )
    return str(pod["spec"]["nodeName"])


def _unschedulable(client: Client, namespace: str, name: str, timeout: float = 30.0) -> str:
    """The message of the pod's ``PodScheduled=False`` condition (reason Unschedulable)."""
    pod = eventually(
        lambda: get_pod(client, namespace, name),
        lambda p: (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable",
        timeout=timeout,
        what=f"pod {name} to be marked Unschedulable",
    )
    assert not pod["spec"].get("nodeName")
    cond = condition(pod, "PodScheduled")
    assert cond is not None
    assert cond["status"] == "False"
    return str(cond["message"])


def _pod(client: Client, namespace: str, profile: str, name: str, **kwargs: Any) -> str:
    create_pod(client, pod_manifest(name, namespace, profile, **kwargs))
    return name


UNTOLERATED = "node(s) had untolerated taint(s)"
NOT_MATCHING = "node(s) didn't match Pod's node affinity/selector"


def _taint(key: str, value: str, effect: str) -> Mapping[str, str]:
    return {"key": key, "value": value, "effect": effect}


def test_taints_keep_pods_off_unless_tolerated(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes(
        [
            node_manifest("gpu", taints=[_taint("dedicated", "gpu", "NoSchedule")]),
            node_manifest("soft", taints=[_taint("spot", "true", "PreferNoSchedule")]),
            node_manifest("clean"),
        ]
    )
    kubesched(scheduler_config(profile))

    plain = [_pod(admin_client, namespace, profile, f"plain-{i}", cpu="100m") for i in range(3)]
    tolerating = _pod(
        admin_client,
        namespace,
        profile,
        "tolerating",
        cpu="100m",
        spec={
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu"}],
            "nodeSelector": {"kubernetes.io/hostname": "gpu"},
        },
    )

    # NoSchedule filters "gpu" out; PreferNoSchedule scores "soft" below "clean" (weight 3
    # outweighs the few points LeastAllocated gives the emptier "soft").
    assert {_bound_to(admin_client, namespace, p) for p in plain} == {"clean"}
    assert _bound_to(admin_client, namespace, tolerating) == "gpu"

    # Sent to "gpu" without the toleration: no node will do.
    _pod(
        admin_client,
        namespace,
        profile,
        "untolerating",
        spec={"nodeSelector": {"kubernetes.io/hostname": "gpu"}},
    )
    assert _unschedulable(admin_client, namespace, "untolerating") == fit_error(
        3, {UNTOLERATED: 1, NOT_MATCHING: 2}, {NOT_HELPFUL: 3}
    )


def test_node_affinity_required_and_preferred(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    zone = "topology.kubernetes.io/zone"
    make_nodes([node_manifest(f"zone-{z}", labels={zone: z}) for z in "abc"])
    kubesched(scheduler_config(profile))

    def affinity(required: list[str] | None, preferred: str | None) -> dict[str, Any]:
        node_affinity: dict[str, Any] = {}
        if required is not None:
            node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": zone, "operator": "In", "values": required}]}
                ]
            }
        if preferred is not None:
            node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": zone, "operator": "In", "values": [preferred]}]
                    },
                }
            ]
        return {"affinity": {"nodeAffinity": node_affinity}}

    cases = {
        "required-a": (["a"], None, "zone-a"),
        "required-bc-prefers-c": (["b", "c"], "c", "zone-c"),
        "prefers-b": (None, "b", "zone-b"),
        # A preference the requirement rules out changes nothing.
        "required-a-prefers-b": (["a"], "b", "zone-a"),
    }
    for name, (required, preferred, _) in cases.items():
        _pod(admin_client, namespace, profile, name, spec=affinity(required, preferred))
    _pod(admin_client, namespace, profile, "required-d", spec=affinity(["d"], None))

    placed = {name: _bound_to(admin_client, namespace, name) for name in cases}
    assert placed == {name: node for name, (_, _, node) in cases.items()}
    assert _unschedulable(admin_client, namespace, "required-d") == fit_error(
        3, {NOT_MATCHING: 3}, {NOT_HELPFUL: 3}
    )


def test_node_selector(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes(
        [
            node_manifest("ssd-1", labels={"disktype": "ssd"}),
            node_manifest("hdd-1", labels={"disktype": "hdd"}),
            node_manifest("hdd-2", labels={"disktype": "hdd"}),
        ]
    )
    kubesched(scheduler_config(profile))

    on_ssd = [
        _pod(
            admin_client, namespace, profile, f"ssd-{i}", spec={"nodeSelector": {"disktype": "ssd"}}
        )
        for i in range(3)
    ]
    _pod(admin_client, namespace, profile, "nvme", spec={"nodeSelector": {"disktype": "nvme"}})

    assert {_bound_to(admin_client, namespace, p) for p in on_ssd} == {"ssd-1"}
    assert _unschedulable(admin_client, namespace, "nvme") == fit_error(
        3, {NOT_MATCHING: 3}, {NOT_HELPFUL: 3}
    )


def test_host_ports(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes([node_manifest("ports-1"), node_manifest("ports-2")])
    kubesched(scheduler_config(profile))

    first = _pod(admin_client, namespace, profile, "http-1", host_port=8080)
    first_node = _bound_to(admin_client, namespace, first)
    second = _pod(admin_client, namespace, profile, "http-2", host_port=8080)
    second_node = _bound_to(admin_client, namespace, second)
    # Another port fits next to them.
    other = _pod(admin_client, namespace, profile, "https-1", host_port=8443)
    _bound_to(admin_client, namespace, other)
    _pod(admin_client, namespace, profile, "http-3", host_port=8080)

    assert {first_node, second_node} == {"ports-1", "ports-2"}
    # Ports can be freed by preemption; no pod here has a lower priority to give them up.
    assert _unschedulable(admin_client, namespace, "http-3") == fit_error(
        2, {"node(s) didn't have free ports for the requested pod ports": 2}, {NO_VICTIMS: 2}
    )


def test_resources_and_a_full_node(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes(
        [
            node_manifest("small", cpu="1", memory="2Gi"),
            node_manifest("big", cpu="4", memory="8Gi"),
            node_manifest("one-pod", cpu="8", memory="16Gi", pods="1"),
        ]
    )
    # Already running (bound by someone else): "big" has 500m left, "one-pod" no pod slot.
    create_pod(
        admin_client,
        pod_manifest("running-big", namespace, "elsewhere", cpu="3500m", node_name="big"),
    )
    create_pod(
        admin_client,
        pod_manifest("running-one", namespace, "elsewhere", cpu="100m", node_name="one-pod"),
    )
    kubesched(scheduler_config(profile))

    fits_small = _pod(admin_client, namespace, profile, "one-cpu", cpu="1", memory="1Gi")
    assert _bound_to(admin_client, namespace, fits_small) == "small"
    # "small" is now full; only "big" has room for 500m.
    last = _pod(admin_client, namespace, profile, "half-cpu", cpu="500m")
    assert _bound_to(admin_client, namespace, last) == "big"
    _pod(admin_client, namespace, profile, "no-room", cpu="100m")
    _pod(admin_client, namespace, profile, "no-memory", memory="12Gi")

    # Preemption cannot help where the pod needs more than the node has at all (12Gi of
    # memory on "small" and "big"); elsewhere, no pod has a lower priority to give way.
    assert _unschedulable(admin_client, namespace, "no-room") == fit_error(
        3, {"Too many pods": 1, "Insufficient cpu": 2}, {NO_VICTIMS: 3}
    )
    assert _unschedulable(admin_client, namespace, "no-memory") == fit_error(
        3, {"Too many pods": 1, "Insufficient memory": 2}, {NO_VICTIMS: 1, NOT_HELPFUL: 2}
    )


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("LeastAllocated", "empty"), ("MostAllocated", "half-full")],
)
def test_the_chosen_node_is_the_best_scored(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
    strategy: str,
    expected: str,
) -> None:
    make_nodes([node_manifest("half-full"), node_manifest("empty")])
    # Half of "half-full" in use, in the same proportion of cpu and memory: only the
    # NodeResourcesFit score tells the nodes apart (BalancedAllocation scores both the same).
    create_pod(
        admin_client,
        pod_manifest(
            "running", namespace, "elsewhere", cpu="2", memory="4Gi", node_name="half-full"
        ),
    )
    config = scheduler_config(
        profile,
        profile_fields={
            "pluginConfig": [
                {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": strategy}}}
            ]
        },
    )
    kubesched(config)

    names = [
        _pod(admin_client, namespace, profile, f"p-{i}", cpu="250m", memory="512Mi")
        for i in range(3)
    ]

    assert [_bound_to(admin_client, namespace, n) for n in names] == [expected] * 3
