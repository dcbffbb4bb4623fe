"""NFD's own evaluation against kubesched's: the same rules, the same nodes, the same answer.

A real nfd-master, built from NFD's Go module (``hack/nfd``), evaluates one ``NodeFeatureGroup``
per rule over ``NodeFeature`` objects of real Node objects in the test apiserver; the in-process
engine (``_nfd.match_group_rule`` over ``_nfd.node_features``) must name exactly the nodes
nfd-master writes to ``status.nodes``. The rules cover every operator, ``type: version``,
``matchName``, ``matchAny``, instances, NodeFeature objects merged per node, errors, and groups
of several rules (which nfd-master ORs, back-references included). Then the NodeFeatureGroup
mode's controller (``_group.NodeFeatureGroups``) runs against the same nfd-master.

A disagreement fails with a table: rule, nodes per nfd-master, nodes per kubesched.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
import pytest

from e2e.nfd import (
    NFD_API_VERSION,
    NFD_GROUP,
    NFD_NAMESPACE,
    NfdMaster,
    install_nfd_crds,
)
from kubesched.cluster import ClusterInfo
from kubesched.kube import APIClient, PluginAPIClient
from kubesched.plugins.image_compatibility._group import (
    CustomObjectsAPIClient,
    NodeFeatureGroups,
    conjunction,
)
from kubesched.plugins.image_compatibility._nfd import (
    NODE_NAME_LABEL,
    GroupRule,
    NodeFeature,
    match_group_rule,
    node_features,
)
from kubesched.plugins.image_compatibility._spec import CompatibilitySpec, evaluate

if TYPE_CHECKING:
    from conftest import AdminClient

GV = f"{NFD_GROUP}/{NFD_API_VERSION}"
NODE_FEATURES = f"/apis/{GV}/namespaces/{NFD_NAMESPACE}/nodefeatures"
GROUPS = f"/apis/{GV}/namespaces/{NFD_NAMESPACE}/nodefeaturegroups"
#: How long nfd-master gets to write a status before "no node" is believed.
EVALUATION_TIMEOUT = 60.0
QUIET = 3.0


def test_nfd_crds_are_served_and_install_is_idempotent(admin_client: AdminClient) -> None:
    install_nfd_crds(admin_client)
    install_nfd_crds(admin_client)
    for plural in ("nodefeatures", "nodefeaturegroups", "nodefeaturerules"):
        admin_client.get(f"/apis/{NFD_GROUP}/{NFD_API_VERSION}/{plural}").expect(200)


# --- the nodes ---------------------------------------------------------------------------------


def flags(*names: str) -> dict[str, Any]:
    return {"elements": {n: {} for n in names}}


def attrs(**values: str) -> dict[str, Any]:
    return {"elements": values}


def instances(*elements: Mapping[str, str]) -> dict[str, Any]:
    return {"elements": [{"attributes": dict(e)} for e in elements]}


def features_of(
    node: str,
    *,
    flag_sets: Mapping[str, Any] | None = None,
    attribute_sets: Mapping[str, Any] | None = None,
    instance_sets: Mapping[str, Any] | None = None,
    system: bool = True,
) -> dict[str, Any]:
    """NodeFeature ``spec.features``; nfd-worker always sends ``system.name``'s ``nodename``,
    which is what nfd-master calls the node in a group's status."""
    attributes = dict(attribute_sets or {})
    if system:
        attributes["system.name"] = attrs(nodename=node)
    return {
        "flags": dict(flag_sets or {}),
        "attributes": attributes,
        "instances": dict(instance_sets or {}),
    }


def node_feature_objects(prefix: str) -> list[dict[str, Any]]:
    """The NodeFeature objects: (object name, node, features)."""
    n = [f"{prefix}-n{i}" for i in range(1, 7)]
    objects = [
        (
            n[0],
            n[0],
            features_of(
                n[0],
                flag_sets={
                    "cpu.cpuid": flags("AVX", "AVX2", "AVX512F"),
                    "kernel.loadedmodule": flags("vfio", "nvidia", "nvidia_uvm"),
                },
                attribute_sets={
                    "kernel.version": attrs(
                        full="6.8.0-45-generic", major="6", minor="8", revision="0"
                    ),
                    "kernel.config": attrs(NO_HZ="y", PREEMPT="n"),
                    "memory.numa": attrs(node_count="2", is_numa="true"),
                    "local.custom": attrs(count="12", zone="a", ver="v2.1"),
                },
                instance_sets={
                    "pci.device": instances(
                        {"vendor": "10de", "class": "0300", "device": "20b0"},
                        {"vendor": "8086", "class": "0200", "device": "1572"},
                    )
                },
            ),
        ),
        (
            n[1],
            n[1],
            features_of(
                n[1],
                flag_sets={
                    "cpu.cpuid": flags("AVX", "AVX2"),
                    "kernel.loadedmodule": flags("vfio"),
                },
                attribute_sets={
                    "kernel.version": attrs(
                        full="5.15.0-91-generic", major="5", minor="15", revision="0"
                    ),
                    "kernel.config": attrs(PREEMPT="y"),
                    "memory.numa": attrs(node_count="1", is_numa="false"),
                    "local.custom": attrs(count="7", zone="b", ver="2.1.0-rc.1"),
                },
                instance_sets={"pci.device": instances({"vendor": "8086", "class": "0200"})},
            ),
        ),
        (
            n[2],
            n[2],
            features_of(
                n[2],
                flag_sets={"cpu.cpuid": flags("SSE4", "AVX")},
                attribute_sets={
                    "kernel.version": attrs(full="4.18.0", major="4", minor="18"),
                    "local.custom": attrs(count="abc", zone="c", ver="two"),
                },
            ),
        ),
        # n4 is described by two objects, merged by nfd-master.
        (
            n[3],
            n[3],
            features_of(
                n[3],
                flag_sets={"cpu.cpuid": flags("AVX")},
                attribute_sets={"kernel.version": attrs(full="6.1.0", major="6", minor="1")},
            ),
        ),
        (
            f"{n[3]}-extra",
            n[3],
            features_of(
                n[3],
                flag_sets={"cpu.cpuid": flags("AVX2")},
                attribute_sets={
                    "local.custom": attrs(zone="b", count="3", ver="2"),
                    "kernel.version": attrs(minor="2"),
                },
                instance_sets={"pci.device": instances({"vendor": "10de", "class": "0302"})},
                system=False,
            ),
        ),
        # n5 has a Node and no NodeFeature; n6 has a NodeFeature and no Node.
        (n[5], n[5], features_of(n[5], flag_sets={"cpu.cpuid": flags("AVX", "AVX2")})),
    ]
    return [
        {
            "apiVersion": GV,
            "kind": "NodeFeature",
            "metadata": {
                "name": name,
                "namespace": NFD_NAMESPACE,
                "labels": {NODE_NAME_LABEL: node},
            },
            "spec": {"features": features},
        }
        for name, node, features in objects
    ]


def expr(op: str, *values: str, type: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {"op": op}
    if values:
        out["value"] = list(values)
    if type:
        out["type"] = type
    return out


def term(feature: str, **expressions: dict[str, Any]) -> dict[str, Any]:
    return {"feature": feature, "matchExpressions": expressions}


def rule(name: str, *terms: dict[str, Any], **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if terms:
        out["matchFeatures"] = list(terms)
    return out


def any_of(*alternatives: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"matchFeatures": list(a)} for a in alternatives]


#: One NodeFeatureGroup each: a list of GroupRules (nfd-master ORs them, in order).
GROUPS_UNDER_TEST: dict[str, list[dict[str, Any]]] = {
    "in": [rule("in", term("kernel.version", major=expr("In", "6", "5")))],
    "in-on-a-flag": [rule("in-flag", term("cpu.cpuid", AVX=expr("In", "AVX")))],
    "notin": [rule("notin", term("kernel.version", major=expr("NotIn", "4")))],
    "notin-missing": [rule("notin-missing", term("memory.numa", is_numa=expr("NotIn", "x")))],
    "inregexp": [
        rule("inregexp", term("kernel.version", full=expr("InRegexp", r"^6\.", r"^5\.15")))
    ],
    "exists-flag": [rule("exists", term("cpu.cpuid", AVX2=expr("Exists")))],
    "exists-attribute": [rule("exists-attr", term("kernel.config", NO_HZ=expr("Exists")))],
    "doesnotexist": [rule("dne", term("cpu.cpuid", AVX512F=expr("DoesNotExist")))],
    "doesnotexist-feature": [
        rule("dne-feature", term("memory.numa", is_numa=expr("DoesNotExist")))
    ],
    "gt": [rule("gt", term("memory.numa", node_count=expr("Gt", "1")))],
    "ge": [rule("ge", term("kernel.version", major=expr("Ge", "5")))],
    "lt": [rule("lt", term("kernel.version", minor=expr("Lt", "10")))],
    "le": [rule("le", term("kernel.version", minor=expr("Le", "15")))],
    "gtlt": [rule("gtlt", term("kernel.version", minor=expr("GtLt", "1", "16")))],
    "gele": [rule("gele", term("memory.numa", node_count=expr("GeLe", "1", "2")))],
    "gt-not-a-number": [rule("gt-nan", term("local.custom", count=expr("Gt", "5")))],
    "istrue": [rule("istrue", term("memory.numa", is_numa=expr("IsTrue")))],
    "isfalse": [rule("isfalse", term("memory.numa", is_numa=expr("IsFalse")))],
    "istrue-kconfig-y": [rule("istrue-y", term("kernel.config", PREEMPT=expr("IsTrue")))],
    "version-gt": [rule("v-gt", term("kernel.version", full=expr("Gt", "5.15.0", type="version")))],
    "version-ge-prerelease": [
        rule("v-ge", term("kernel.version", full=expr("Ge", "5.15.0-91", type="version")))
    ],
    "version-lt": [rule("v-lt", term("kernel.version", full=expr("Lt", "6", type="version")))],
    "version-le": [rule("v-le", term("kernel.version", full=expr("Le", "6.1.0", type="version")))],
    "version-gtlt": [
        rule(
            "v-gtlt",
            term("kernel.version", full=expr("GtLt", "4.18.0", "6.8.0", type="version")),
        )
    ],
    "version-gele": [
        rule(
            "v-gele",
            term("kernel.version", full=expr("GeLe", "4.18", "5.15.0", type="version")),
        )
    ],
    "matchname-flags": [
        rule("mn-flags", {"feature": "kernel.loadedmodule", "matchName": expr("InRegexp", "^nv")})
    ],
    "matchname-attributes": [
        rule("mn-attrs", {"feature": "kernel.config", "matchName": expr("In", "NO_HZ", "X")})
    ],
    "matchname-and-expressions": [
        rule(
            "mn-and",
            {
                "feature": "cpu.cpuid",
                "matchName": expr("InRegexp", "^AVX"),
                "matchExpressions": {"AVX2": expr("Exists")},
            },
        )
    ],
    "instance-same-device": [
        rule(
            "pci-same",
            term("pci.device", vendor=expr("In", "10de"), **{"class": expr("InRegexp", "^03")}),
        )
    ],
    "instance-not-on-one-device": [
        rule(
            "pci-split",
            term("pci.device", vendor=expr("In", "10de"), **{"class": expr("In", "0200")}),
        )
    ],
    "instance-matchname": [
        rule("pci-name", {"feature": "pci.device", "matchName": expr("In", "device")})
    ],
    "merged-objects": [
        rule(
            "merged",
            term("local.custom", zone=expr("In", "b")),
            term("cpu.cpuid", AVX2=expr("Exists"), AVX=expr("Exists")),
            term("kernel.version", minor=expr("In", "2")),
        )
    ],
    "matchany": [
        rule(
            "any",
            matchAny=any_of(
                [term("cpu.cpuid", AVX512F=expr("Exists"))],
                [term("kernel.version", major=expr("In", "4"))],
            ),
        )
    ],
    "matchany-and-features": [
        rule(
            "any-and",
            term("cpu.cpuid", AVX=expr("Exists")),
            matchAny=any_of(
                [term("local.custom", zone=expr("In", "a"))],
                [
                    term("local.custom", zone=expr("In", "b")),
                    term("kernel.config", PREEMPT=expr("Exists")),
                ],
            ),
        )
    ],
    "empty-rule": [rule("everything")],
    "feature-name-case": [rule("case", term("CPU.cpuid", AVX2=expr("Exists")))],
    "gt-on-a-flag": [rule("gt-flag", term("cpu.cpuid", AVX=expr("Gt", "1")))],
    "istrue-on-a-flag": [rule("istrue-flag", term("cpu.cpuid", AVX=expr("IsTrue")))],
    "doesnotexist-attribute": [rule("dne-attr", term("kernel.config", NO_HZ=expr("DoesNotExist")))],
    "number-with-sign": [rule("plus", term("local.custom", count=expr("Ge", "+5")))],
    "version-v-prefix": [
        rule("v-prefix", term("local.custom", ver=expr("Ge", "2.1", type="version")))
    ],
    "version-short": [
        rule("v-short", term("local.custom", ver=expr("GeLe", "2", "2.1", type="version")))
    ],
    "matchname-notin": [
        rule("mn-notin", {"feature": "kernel.loadedmodule", "matchName": expr("NotIn", "vfio")})
    ],
    "matchname-exists": [
        rule("mn-exists", {"feature": "kernel.loadedmodule", "matchName": expr("Exists")})
    ],
    "no-expressions-instances": [
        rule("no-exprs-inst", {"feature": "pci.device", "matchExpressions": {}})
    ],
    "no-expressions-attributes": [
        rule("no-exprs-attr", {"feature": "kernel.config", "matchExpressions": {}})
    ],
    "several-rules-are-ored": [
        rule("first", term("memory.numa", is_numa=expr("IsTrue"))),
        rule("second", term("kernel.version", major=expr("In", "4"))),
    ],
    "back-reference": [
        rule("avx2", term("cpu.cpuid", AVX2=expr("Exists")), vars={"avx2": "yes"}),
        rule(
            "numa-after-avx2",
            term("rule.matched", avx2=expr("In", "yes")),
            term("memory.numa", node_count=expr("Gt", "1")),
        ),
    ],
}


def group_manifest(name: str, rules: list[dict[str, Any]], run: str) -> dict[str, Any]:
    return {
        "apiVersion": GV,
        "kind": "NodeFeatureGroup",
        "metadata": {
            "name": name,
            "namespace": NFD_NAMESPACE,
            "labels": {"kubesched.io/e2e": run},
        },
        "spec": {"featureGroupRules": rules},
    }


# --- kubesched's side ------------------------------------------------------------------------


def in_process_nodes(
    rules: list[dict[str, Any]],
    objects: list[NodeFeature],
    nodes: Sequence[str],
    *,
    fail_fast: bool = True,
) -> frozenset[str]:
    """The nodes nfd-master would put into a group of ``rules``, by the in-process engine.

    As nfd-master: only Nodes that have NodeFeature objects; a node is in when any rule
    matches; rules run in order and see the vars of the matched ones as ``rule.matched``;
    evaluation is fail-fast unless ``fail_fast=False`` (the image compatibility validator's).
    """
    decoded = [msgspec.convert(r, GroupRule) for r in rules]
    out = set()
    for node in nodes:
        if not any(o.metadata.labels.get(NODE_NAME_LABEL) == node for o in objects):
            continue
        features = node_features(objects, node, nfd_namespace=NFD_NAMESPACE)
        seen: dict[str, str] | None = None
        for r in decoded:
            result = match_group_rule(r, features, seen, fail_fast=fail_fast)
            seen = {**(seen or {}), **result.vars}
            if result.matched:
                out.add(node)
    return frozenset(out)


def status_nodes(item: Mapping[str, Any]) -> frozenset[str]:
    return frozenset(n["name"] for n in (item.get("status") or {}).get("nodes") or [])


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nfd_world(
    nfd_master: NfdMaster, admin_client: AdminClient
) -> Iterator[tuple[str, list[str], list[NodeFeature]]]:
    """Nodes n1..n5 and the NodeFeature objects (n6's has no Node); removed afterwards."""
    run = f"nfdx{uuid.uuid4().hex[:6]}"
    nodes = [f"{run}-n{i}" for i in range(1, 6)]
    objects = node_feature_objects(run)
    try:
        for node in nodes:
            admin_client.post(
                "/api/v1/nodes", {"metadata": {"name": node, "labels": {"kubesched.io/e2e": run}}}
            ).expect(201)
        for obj in objects:
            admin_client.post(NODE_FEATURES, obj).expect(201)
        decoded = [msgspec.convert(o, NodeFeature) for o in objects]
        yield run, nodes, decoded
    finally:
        for obj in objects:
            admin_client.delete(f"{NODE_FEATURES}/{obj['metadata']['name']}")
        for node in nodes:
            admin_client.delete(f"/api/v1/nodes/{node}")
        admin_client.request("DELETE", GROUPS, params={"labelSelector": f"kubesched.io/e2e={run}"})


def wait_for_groups(
    admin_client: AdminClient,
    expected: Mapping[str, frozenset[str]],
    master: NfdMaster,
) -> dict[str, frozenset[str]]:
    """The groups' status once it equals ``expected``, or after it stopped changing for
    :data:`QUIET` seconds past :data:`EVALUATION_TIMEOUT` (a group nfd-master finds empty
    keeps no status at all, so agreement is the only early way out)."""
    deadline = time.monotonic() + EVALUATION_TIMEOUT
    seen: dict[str, frozenset[str]] = {}
    changed = time.monotonic()
    while True:
        current = {
            name: status_nodes(admin_client.get(f"{GROUPS}/{name}").expect(200).json())
            for name in expected
        }
        if current != seen:
            seen, changed = current, time.monotonic()
        settled = time.monotonic() - changed >= QUIET
        if settled and (current == expected or time.monotonic() > deadline):
            return current
        time.sleep(0.5)
    raise AssertionError(master.log_tail())  # pragma: no cover


def disagreements(
    nfd: Mapping[str, frozenset[str]], kubesched: Mapping[str, frozenset[str]], prefix: str
) -> str:
    rows = []
    for name in sorted(kubesched):
        if nfd[name] != kubesched[name]:
            short = lambda nodes: sorted(n.removeprefix(prefix + "-") for n in nodes)  # noqa: E731
            rows.append(
                f"  {name}: nfd-master {short(nfd[name])}, kubesched {short(kubesched[name])}"
            )
    return "\n".join(rows)


# --- the cross-check -------------------------------------------------------------------------


def test_in_process_evaluation_names_the_nodes_nfd_master_names(
    nfd_world: tuple[str, list[str], list[NodeFeature]],
    admin_client: AdminClient,
    nfd_master: NfdMaster,
) -> None:
    run, nodes, objects = nfd_world
    names = {key: f"{run}-{key}" for key in GROUPS_UNDER_TEST}
    expected = {
        names[key]: in_process_nodes(rules, objects, nodes)
        for key, rules in GROUPS_UNDER_TEST.items()
    }
    for key, rules in GROUPS_UNDER_TEST.items():
        admin_client.post(GROUPS, group_manifest(names[key], rules, run)).expect(201)

    nfd = wait_for_groups(admin_client, expected, nfd_master)

    differences = disagreements(nfd, expected, run)
    assert not differences, (
        f"nfd-master and the in-process engine disagree:\n{differences}\n"
        f"nfd-master's log:\n{nfd_master.log_tail(30)}"
    )
    # The suite is not vacuous: these groups name nodes, and not all of them.
    n = {i: f"{run}-n{i}" for i in range(1, 7)}
    assert nfd[names["exists-flag"]] == {n[1], n[2], n[4]}
    assert nfd[names["merged-objects"]] == {n[4]}
    assert nfd[names["instance-same-device"]] == {n[1], n[4]}
    assert nfd[names["instance-not-on-one-device"]] == frozenset()
    assert nfd[names["several-rules-are-ored"]] == {n[1], n[3]}
    assert nfd[names["back-reference"]] == {n[1], n[2], n[4]}
    assert nfd[names["gt-not-a-number"]] == {n[1], n[2]}  # n3's "abc" is an error, not a match
    # Nodes without NodeFeature objects (n5) and NodeFeatures without a Node (n6) are in none.
    assert all(n[5] not in v and n[6] not in v for v in nfd.values())
    assert nfd[names["empty-rule"]] == {n[1], n[2], n[3], n[4]}


def test_match_any_stops_at_the_first_match_in_nfd_master(
    nfd_world: tuple[str, list[str], list[NodeFeature]],
    admin_client: AdminClient,
    nfd_master: NfdMaster,
) -> None:
    """nfd-master evaluates groups fail-fast: a matched ``matchAny`` element ends the rule, so a
    later element that cannot be evaluated (n3's ``count: abc`` under ``Gt``) is never reached.
    The image compatibility validator evaluates every element, and an error fails the rule.
    The in-process engine does either (``fail_fast``); a spec is evaluated the validator's way,
    so this is where the NodeFeatureGroup mode and the in-process mode part ways."""
    run, nodes, objects = nfd_world
    rules = [
        rule(
            "first-matches",
            matchAny=any_of(
                [term("cpu.cpuid", AVX=expr("Exists"))],
                [term("local.custom", count=expr("Gt", "5"))],
            ),
        )
    ]
    name = f"{run}-failfast"
    n3 = f"{run}-n3"
    fail_fast = in_process_nodes(rules, objects, nodes)
    validator = in_process_nodes(rules, objects, nodes, fail_fast=False)
    everyone = frozenset(f"{run}-n{i}" for i in range(1, 5))
    admin_client.post(GROUPS, group_manifest(name, rules, run)).expect(201)
    nfd = wait_for_groups(admin_client, {name: everyone}, nfd_master)
    assert nfd[name] == everyone == fail_fast
    assert validator == everyone - {n3}


# --- the NodeFeatureGroup mode against nfd-master ----------------------------------------------


SPEC = {
    "version": "v1alpha1",
    "compatibilities": [
        {
            "tag": "avx2-and-new-kernel",
            "rules": [
                rule("avx2", term("cpu.cpuid", AVX2=expr("Exists"))),
                rule("kernel", term("kernel.version", full=expr("Ge", "5.15", type="version"))),
            ],
        },
        {
            "tag": "nvidia-or-numa",
            "rules": [
                rule(
                    "gpu",
                    matchAny=any_of(
                        [term("pci.device", vendor=expr("In", "10de"))],
                        [term("memory.numa", is_numa=expr("IsTrue"))],
                    ),
                ),
                rule("zone", term("local.custom", zone=expr("In", "a", "b"))),
            ],
        },
        {"tag": "nowhere", "rules": [rule("none", term("cpu.cpuid", SVE=expr("Exists")))]},
    ],
}


async def test_node_feature_group_mode_agrees_with_evaluate(
    nfd_world: tuple[str, list[str], list[NodeFeature]],
    control_plane: ClusterInfo,
    admin_client: AdminClient,
    nfd_master: NfdMaster,
) -> None:
    run, nodes, objects = nfd_world
    spec = msgspec.convert(SPEC, CompatibilitySpec)
    digest = f"sha256:{run}"
    # What the in-process mode says for each set, on the nodes nfd-master looks at.
    described = [n for n in nodes if any(o.metadata.labels[NODE_NAME_LABEL] == n for o in objects)]
    per_set: list[set[str]] = [set() for _ in SPEC["compatibilities"]]
    for node in described:
        result = evaluate(spec, node_features(objects, node, nfd_namespace=NFD_NAMESPACE))
        for i in result.matched_sets:
            per_set[i].add(node)
    n = {i: f"{run}-n{i}" for i in range(1, 5)}
    assert per_set == [{n[1], n[2], n[4]}, {n[1], n[4]}, set()]

    async with APIClient.from_kubeconfig(control_plane.kubeconfig) as client:
        api = PluginAPIClient(client)
        assert isinstance(api, CustomObjectsAPIClient)
        groups = NodeFeatureGroups(api, NFD_NAMESPACE, f"e2e-{run}", settle=5, poll_interval=0.5)
        groups.start()
        try:
            for i, compatibility in enumerate(spec.compatibilities):
                groups.request(digest, i, compatibility.rules)
            async with asyncio.timeout(EVALUATION_TIMEOUT):
                answers = [await groups.wait_for(digest, i) for i in range(len(per_set))]
            assert [set(a) for a in answers] == per_set, nfd_master.log_tail(30)

            # Had set 1's rules gone into featureGroupRules as they are, nfd-master would have
            # ORed them and named n2 too ("zone" matches it, "gpu" does not): they are folded.
            listed = await api.list_custom_objects(
                GV, "nodefeaturegroups", namespace=NFD_NAMESPACE, label_selector=groups.selector
            )
            assert len(listed) == 3
            folded = {
                i["metadata"]["annotations"]["kubesched.io/compatibility-set"]: i for i in listed
            }
            rules1 = msgspec.to_builtins(spec.compatibilities[1].rules)
            assert folded["1"]["spec"]["featureGroupRules"] == [
                conjunction(rules1, name=folded["1"]["metadata"]["name"])
            ]
        finally:
            await groups.aclose()
        left = await api.list_custom_objects(
            GV, "nodefeaturegroups", namespace=NFD_NAMESPACE, label_selector=groups.selector
        )
        assert left == []
