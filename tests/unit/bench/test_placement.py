"""The correctness check of a placement: recomputed from the bound pods alone."""

from __future__ import annotations

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import Namespace, Pod, ResourceClaim
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


def test_anti_affinity_violations() -> None:
    nodes = [make_node(n, labels={"kubernetes.io/hostname": n}) for n in ("a", "b")]
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    anti = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }
    green = {"color": "green"}
    apart = [
        on(make_pod("g1", labels=green, spec=anti), "a"),
        on(make_pod("g2", labels=green), "b"),
    ]
    assert check_placement(nodes, apart).violations == []
    # Another namespace is not matched by a term without namespaces.
    elsewhere = on(make_pod("g3", namespace="other", labels=green), "a")
    assert check_placement(nodes, [*apart, elsewhere]).violations == []
    together = on(make_pod("g4", labels=green), "a")
    assert check_placement(nodes, [*apart, together]).violations == [
        "default/g1 on a: anti-affinity to default/g4"
    ]


def test_affinity_violations() -> None:
    nodes = [make_node(n, labels={"zone": z}) for n, z in (("a1", "z1"), ("a2", "z1"), ("b", "z2"))]
    nodes.append(make_node("nolabel"))
    term = {"labelSelector": {"matchLabels": {"color": "blue"}}, "topologyKey": "zone"}
    near = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    blue = {"color": "blue"}
    # The first of a group, its own term matching it and no other pod: allowed.
    first = on(make_pod("b1", labels=blue, spec=near), "a1")
    assert check_placement(nodes, [first]).violations == []
    # With another blue pod in the zone, on another node of it.
    joined = on(make_pod("b2", labels=blue, spec=near), "a2")
    assert check_placement(nodes, [first, joined]).violations == []
    # A blue pod in the other zone: the first is no longer alone, and the other has no partner.
    away = on(make_pod("b3", labels=blue, spec=near), "b")
    assert check_placement(nodes, [first, away]).violations == [
        "default/b1 on a1: no pod its affinity matches in zone=z1",
        "default/b3 on b: no pod its affinity matches in zone=z2",
    ]
    # A pod its own term does not match needs a partner even when alone; another namespace's
    # blue pod is not one.
    plain = on(make_pod("p", spec=near), "b")
    elsewhere = on(make_pod("o", namespace="other", labels=blue), "b")
    assert check_placement(nodes, [plain, elsewhere]).violations == [
        "default/p on b: no pod its affinity matches in zone=z2"
    ]
    # A node without the topology key is no domain.
    unlabelled = on(make_pod("n", labels=blue, spec=near), "nolabel")
    assert check_placement(nodes, [first, joined, unlabelled]).violations == [
        "default/n on nolabel: no zone label"
    ]


def test_spread_violations() -> None:
    nodes = [make_node(f"n{z}", labels={"zone": z}) for z in ("z1", "z2", "z3")]
    nodes.append(make_node("nolabel"))
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    }
    web = {"app": "web"}
    pods = [on(make_pod(f"w{i}", labels=web, spec=spread), "nz1") for i in range(2)]
    # z2 and z3 hold none: a skew of 2; pods on a node without the key do not count.
    pods.append(on(make_pod("w-nolabel", labels=web), "nolabel"))
    assert check_placement(nodes, pods).violations == [
        "default/w0's spread by zone: skew 2 > maxSkew 1"
    ]
    pods.append(on(make_pod("w2", labels=web), "nz2"))
    assert check_placement(nodes, pods).violations == [
        "default/w0's spread by zone: skew 2 > maxSkew 1"
    ]
    pods.append(on(make_pod("w3", labels=web), "nz3"))
    assert check_placement(nodes, pods).violations == []


def namespace(name: str, **labels: str) -> Namespace:
    return msgspec.convert({"metadata": {"name": name, "labels": labels}}, Namespace)


def test_namespace_selectors_of_required_terms() -> None:
    """A term's namespaces are those it names and those its namespaceSelector selects (an empty
    selector: every namespace); the pod's own only when it has neither."""
    nodes = [make_node(n, labels={"kubernetes.io/hostname": n}) for n in ("a", "b")]
    namespaces = [namespace("dev", team="devops"), namespace("ops", team="devops"), namespace("x")]
    green = {"color": "green"}

    def anti(scope: dict[str, object]) -> dict[str, object]:
        term = {
            "labelSelector": {"matchLabels": green},
            "topologyKey": "kubernetes.io/hostname",
            **scope,
        }
        return {
            "affinity": {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
            }
        }

    team = {"namespaceSelector": {"matchLabels": {"team": "devops"}}}
    owner = on(make_pod("g", namespace="dev", labels=green, spec=anti(team)), "a")
    in_team = on(make_pod("o", namespace="ops", labels=green), "a")
    outside = on(make_pod("y", namespace="x", labels=green), "a")
    assert check_placement(nodes, [owner, outside], namespaces).violations == []
    assert check_placement(nodes, [owner, in_team], namespaces).violations == [
        "dev/g on a: anti-affinity to ops/o"
    ]
    # Without the namespaces' labels, the selector selects none of them.
    assert check_placement(nodes, [owner, in_team]).violations == []
    # Named namespaces and the selected ones together.
    both = {**team, "namespaces": ["x"]}
    owner = on(make_pod("g", namespace="dev", labels=green, spec=anti(both)), "a")
    assert check_placement(nodes, [owner, outside, in_team], namespaces).violations == [
        "dev/g on a: anti-affinity to x/y",
        "dev/g on a: anti-affinity to ops/o",
    ]
    # An empty selector selects every namespace.
    anywhere = on(
        make_pod("g", namespace="dev", labels=green, spec=anti({"namespaceSelector": {}})), "a"
    )
    assert check_placement(nodes, [anywhere, outside], namespaces).violations == [
        "dev/g on a: anti-affinity to x/y"
    ]

    # Required affinity: a partner in a selected namespace is one, elsewhere it is not.
    zones = [make_node(n, labels={"zone": z}) for n, z in (("za", "z1"), ("zb", "z2"))]
    blue = {"color": "blue"}
    near = {
        "affinity": {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": blue}, "topologyKey": "zone", **team}
                ]
            }
        }
    }
    joining = on(make_pod("b", namespace="dev", spec=near), "za")
    partner = on(make_pod("p", namespace="ops", labels=blue), "za")
    stranger = on(make_pod("s", namespace="x", labels=blue), "za")
    assert check_placement(zones, [joining, partner], namespaces).violations == []
    assert check_placement(zones, [joining, stranger], namespaces).violations == [
        "dev/b on za: no pod its affinity matches in zone=z1"
    ]


@pytest.mark.parametrize(
    ("policies", "third_node_counts"),
    [
        ({"nodeTaintsPolicy": "Honor"}, False),
        ({}, True),  # the tainted t
        ({"nodeTaintsPolicy": "Honor", "nodeAffinityPolicy": "Ignore"}, True),  # h, not ssd
    ],
)
def test_spread_over_the_nodes_the_inclusion_policies_count(
    policies: dict[str, str], third_node_counts: bool
) -> None:
    """nodeTaintsPolicy Honor leaves out the nodes whose taints the pod does not tolerate
    (Ignore, the default, counts them); nodeAffinityPolicy Honor, the default, leaves out those
    its node selector or required node affinity rule out. Two pods on a and one on b: skew 1
    over a and b, 2 when a third node holding none counts."""
    ssd = {"disk": "ssd"}
    nodes = [make_node(n, labels={"kubernetes.io/hostname": n, **ssd}) for n in ("a", "b")]
    taint = {"key": "foo", "effect": "NoSchedule"}
    nodes.append(make_node("t", labels={"kubernetes.io/hostname": "t", **ssd}, taints=[taint]))
    nodes.append(make_node("h", labels={"kubernetes.io/hostname": "h"}))
    constraint = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"foo": "bar"}},
        **policies,
    }
    spec = {"topologySpreadConstraints": [constraint], "nodeSelector": ssd}
    pods = [
        on(make_pod(name, labels={"foo": "bar"}, spec=spec), node)
        for name, node in (("p1", "a"), ("p2", "a"), ("p3", "b"))
    ]
    skew = "default/p1's spread by kubernetes.io/hostname: skew 2 > maxSkew 1"
    assert check_placement(nodes, pods).violations == ([skew] if third_node_counts else [])


def _claim(name: str, node: str, device: str, reserved_for: list[Pod]) -> ResourceClaim:
    selector = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [{"request": "r", "driver": "d", "pool": node, "device": device}]
                    },
                    "nodeSelector": {"nodeSelectorTerms": [selector]},
                },
                "reservedFor": [
                    {"resource": "pods", "name": p.metadata.name, "uid": p.metadata.uid}
                    for p in reserved_for
                ],
            },
        },
        ResourceClaim,
    )


def _claiming(name: str, **source: str) -> Pod:
    return make_pod(name, uid=f"{name}-uid", spec={"resourceClaims": [{"name": "r", **source}]})


def test_claims_allocated_for_the_pods_node_reserved_for_it_devices_once() -> None:
    nodes = [make_node("n1"), make_node("n2")]
    ok, elsewhere, unreserved = (_claiming(n, resourceClaimName="c") for n in ("ok", "far", "un"))
    missing = _claiming("missing", resourceClaimName="gone")
    untemplated = _claiming("t", resourceClaimTemplateName="tmpl")
    claims = [
        _claim("c", "n1", "dev-0", [ok, elsewhere]),
        # The same device in a second claim.
        _claim("twice", "n1", "dev-0", []),
    ]
    pods = [
        on(ok, "n1"),
        on(elsewhere, "n2"),
        on(unreserved, "n1"),
        on(missing, "n1"),
        on(untemplated, "n1"),
        _claiming("pending", resourceClaimName="gone"),
    ]
    assert check_placement(nodes, pods, claims=claims).violations == [
        "device d/n1/dev-0 allocated to default/c and default/twice",
        "default/far on n2: claim c allocated for other nodes",
        "default/un on n1: claim c not reserved for it",
        "default/missing on n1: claim gone not allocated",
        'default/t on n1: pod "default/t": ResourceClaim not created yet',
    ]
