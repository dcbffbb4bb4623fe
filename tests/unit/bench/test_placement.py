"""The correctness check of a placement: recomputed from the bound pods alone."""

from __future__ import annotations

import msgspec

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.bench import check_placement, constraint_violation


def on(pod: Pod, node: str) -> Pod:
    return msgspec.structs.replace(pod, spec=msgspec.structs.replace(pod.spec, node_name=node))


def test_requests_are_summed_per_node_from_the_pods() -> None:
    nodes = [make_node("a", cpu="1", memory="1Gi", pods="3"), make_node("b", cpu="1")]
    pods = [
        on(make_pod("p1", cpu="600m", memory="512Mi"), "a"),
        on(make_pod("p2", cpu="500m", memory="100Mi"), "a"),
        on(make_pod("p3", cpu="250m"), "b"),
        make_pod("pending", cpu="4"),
    ]
    placement = check_placement(nodes, pods)
    assert placement.bound_pods == 3
    assert placement.overcommitted == {"a": ["cpu"]}
    assert placement.violations == []
    # CPU fractions 1.1 and 0.25.
    assert abs(placement.cpu_fraction_std - 0.425) < 1e-9
    assert abs(placement.cpu_fraction_mean - 0.675) < 1e-9


def test_too_many_pods_is_overcommitment() -> None:
    nodes = [make_node("a", pods="2")]
    pods = [on(make_pod(f"p{i}"), "a") for i in range(3)]
    assert check_placement(nodes, pods).overcommitted == {"a": ["pods"]}


def test_pod_on_unknown_node_is_a_violation() -> None:
    placement = check_placement([make_node("a")], [on(make_pod("p"), "ghost")])
    assert placement.violations == ["default/p on ghost: no such node"]


def test_constraint_violations() -> None:
    tainted = make_node(
        "t", labels={"zone": "z1"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]
    )
    prefer = make_node("p", taints=[{"key": "k", "effect": "PreferNoSchedule"}])
    plain = make_node("n", labels={"zone": "z2"})
    tolerating = make_pod(
        "tol",
        spec={"tolerations": [{"key": "k", "operator": "Equal", "value": "v"}]},
    )
    assert constraint_violation(make_pod("x"), tainted) == "untolerated taint k=v:NoSchedule"
    assert constraint_violation(tolerating, tainted) is None
    # PreferNoSchedule is no hard constraint.
    assert constraint_violation(make_pod("x"), prefer) is None

    selector = make_pod("sel", spec={"nodeSelector": {"zone": "z1"}})
    assert constraint_violation(selector, plain) == "node selector zone=z1 not matched"
    affinity = make_pod(
        "aff",
        spec={
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["z2"]}
                                ]
                            }
                        ]
                    }
                }
            }
        },
    )
    assert constraint_violation(affinity, plain) is None
    assert constraint_violation(affinity, prefer) == "required node affinity not matched"

    placement = check_placement([tainted, plain], [on(make_pod("x"), "t"), on(affinity, "n")])
    assert placement.violations == ["default/x on t: untolerated taint k=v:NoSchedule"]
