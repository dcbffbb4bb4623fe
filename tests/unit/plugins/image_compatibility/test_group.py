"""NodeFeatureGroup mode: folding a set into one rule, and the controller on a fake API."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.plugins.image_compatibility._group import (
    GROUP_VERSION,
    MAX_MATCH_ANY,
    OWNER_LABEL,
    CustomObjectsAPIClient,
    NodeFeatureGroups,
    UnsupportedRules,
    conjunction,
    group_name,
)

NS = "node-feature-discovery"
DIGEST = "sha256:" + "ab" * 32


def flag(feature: str, name: str, op: str = "Exists") -> dict[str, Any]:
    return {"feature": feature, "matchExpressions": {name: {"op": op}}}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeAPI:
    """Custom objects in memory, one namespace; ``fail`` makes the next calls raise."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []
        self.fail: Exception | None = None

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise AssertionError("not used")

    def _check(self, call: str, group_version: str, namespace: str) -> None:
        self.calls.append(call)
        assert group_version == GROUP_VERSION
        assert namespace == NS
        if self.fail is not None:
            raise self.fail

    async def list_custom_objects(
        self,
        group_version: str,
        plural: str,
        *,
        namespace: str,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        self._check("list", group_version, namespace)
        wanted = dict(part.split("=") for part in (label_selector or "").split(",") if part)
        return [
            o
            for o in self.objects.values()
            if all(o["metadata"].get("labels", {}).get(k) == v for k, v in wanted.items())
        ]

    async def create_custom_object(
        self, group_version: str, plural: str, body: Mapping[str, Any], *, namespace: str
    ) -> dict[str, Any] | None:
        self._check("create", group_version, namespace)
        assert plural == "nodefeaturegroups"
        name = body["metadata"]["name"]
        if name in self.objects:
            return None
        self.objects[name] = dict(body)
        return self.objects[name]

    async def delete_custom_object(
        self, group_version: str, plural: str, name: str, *, namespace: str
    ) -> bool:
        self._check("delete", group_version, namespace)
        return self.objects.pop(name, None) is not None

    def evaluate(self, name: str, nodes: list[str]) -> None:
        """What nfd-master does: write ``status.nodes`` (nothing at all when none match)."""
        if nodes:
            self.objects[name]["status"] = {"nodes": [{"name": n} for n in nodes]}
        else:
            self.objects[name].pop("status", None)


@pytest.fixture
def api() -> FakeAPI:
    return FakeAPI()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def groups(api: FakeAPI, clock: FakeClock) -> NodeFeatureGroups:
    return NodeFeatureGroups(
        api, NS, "profile-a", ttl=60, settle=5, poll_interval=0.05, clock=clock
    )


def test_the_fake_is_a_custom_objects_client(api: FakeAPI) -> None:
    assert isinstance(api, CustomObjectsAPIClient)


# --- folding a compatibility set into one GroupRule ----------------------------------------


def test_a_single_rule_keeps_its_matchers() -> None:
    rule = {
        "name": "kernel",
        "matchFeatures": [flag("kernel.loadedmodule", "vfio")],
        "matchAny": [{"matchFeatures": [flag("cpu.cpuid", "AVX")]}],
        "vars": {"x": "y"},
    }
    assert conjunction([rule], name="g") == {
        "name": "g",
        "matchFeatures": rule["matchFeatures"],
        "matchAny": rule["matchAny"],
    }


def test_rules_are_anded_and_match_any_is_distributed() -> None:
    a, b, c, d, e = (flag("cpu.cpuid", f) for f in "ABCDE")
    rules = [
        {
            "name": "one",
            "matchFeatures": [a],
            "matchAny": [{"matchFeatures": [b]}, {"matchFeatures": [c]}],
        },
        {"name": "two", "matchFeatures": [d]},
        {"name": "three", "matchAny": [{"matchFeatures": [e]}, {"matchFeatures": []}]},
    ]
    folded = conjunction(rules, name="g")
    assert folded["matchFeatures"] == [a, d]
    assert folded["matchAny"] == [
        {"matchFeatures": [b, e]},
        {"matchFeatures": [b]},
        {"matchFeatures": [c, e]},
        {"matchFeatures": [c]},
    ]


def test_an_empty_set_matches_every_node() -> None:
    assert conjunction([], name="g") == {"name": "g"}


def test_back_references_cannot_be_folded() -> None:
    rules = [
        {"name": "first", "matchFeatures": [flag("cpu.cpuid", "AVX")], "vars": {"avx": "true"}},
        {
            "name": "second",
            "matchAny": [{"matchFeatures": [flag("rule.matched", "avx", "IsTrue")]}],
        },
    ]
    with pytest.raises(UnsupportedRules, match=r"'second' refers back.*rule\.matched"):
        conjunction(rules)


def test_too_many_alternatives_are_refused() -> None:
    four = {"matchAny": [{"matchFeatures": [flag("cpu.cpuid", str(i))]} for i in range(4)]}
    conjunction([four, four, four])  # 64
    with pytest.raises(UnsupportedRules, match=str(MAX_MATCH_ANY)):
        conjunction([four, four, four, {"matchAny": four["matchAny"][:2]}])


def test_a_rule_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(UnsupportedRules, match="rule 0 is not an object"):
        conjunction(["kernel"])  # type: ignore[list-item]


def test_names_are_dns_labels_per_owner_digest_and_set() -> None:
    name = group_name("profile-a", DIGEST, 12)
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)
    assert len(name) <= 63
    assert name == group_name("profile-a", DIGEST, 12)
    assert name != group_name("profile-b", DIGEST, 12)
    assert name != group_name("profile-a", DIGEST, 11)
    assert name != group_name("profile-a", "sha256:" + "cd" * 32, 12)


# --- the controller --------------------------------------------------------------------------


async def test_a_requested_set_becomes_a_labelled_group(
    api: FakeAPI, groups: NodeFeatureGroups
) -> None:
    rules = [{"name": "r", "matchFeatures": [flag("cpu.cpuid", "AVX")]}]
    groups.request(DIGEST, 0, rules)
    assert groups.nodes_for(DIGEST, 0) is None
    assert api.calls == []  # the cycle's side never calls the API
    await groups.sync()
    [group] = api.objects.values()
    name = group_name("profile-a", DIGEST, 0)
    assert group["metadata"]["name"] == name
    assert group["metadata"]["namespace"] == NS
    assert group["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubesched"
    assert OWNER_LABEL in group["metadata"]["labels"]
    assert group["metadata"]["annotations"] == {
        "kubesched.io/spec-digest": DIGEST,
        "kubesched.io/compatibility-set": "0",
    }
    assert group["spec"] == {"featureGroupRules": [conjunction(rules, name=name)]}


async def test_nodes_come_from_the_status(
    api: FakeAPI, groups: NodeFeatureGroups, clock: FakeClock
) -> None:
    groups.request(DIGEST, 1, [{"name": "r"}])
    assert groups.nodes_for(DIGEST, 0) is None  # never requested
    await groups.sync()
    assert groups.nodes_for(DIGEST, 1) is None  # not evaluated yet
    api.evaluate(group_name("profile-a", DIGEST, 1), ["n1", "n2"])
    await groups.sync()
    assert groups.nodes_for(DIGEST, 1) == {"n1", "n2"}
    api.evaluate(group_name("profile-a", DIGEST, 1), ["n2"])
    await groups.sync()
    assert groups.nodes_for(DIGEST, 1) == {"n2"}


async def test_no_node_named_after_settle_means_none_compatible(
    api: FakeAPI, groups: NodeFeatureGroups, clock: FakeClock
) -> None:
    groups.request(DIGEST, 0, [{"name": "r"}])
    await groups.sync()
    clock.now += 4.9
    await groups.sync()
    assert groups.nodes_for(DIGEST, 0) is None
    clock.now += 0.2
    assert groups.nodes_for(DIGEST, 0) == frozenset()


async def test_unused_groups_are_deleted_after_the_ttl(
    api: FakeAPI, groups: NodeFeatureGroups, clock: FakeClock
) -> None:
    groups.request(DIGEST, 0, [{"name": "r"}])
    groups.request(DIGEST, 1, [{"name": "r"}])
    await groups.sync()
    assert len(api.objects) == 2
    clock.now += 40
    groups.nodes_for(DIGEST, 0)  # reading counts as using
    clock.now += 30
    await groups.sync()
    assert list(api.objects) == [group_name("profile-a", DIGEST, 0)]
    assert groups.nodes_for(DIGEST, 1) is None
    groups.request(DIGEST, 1, [{"name": "r"}])  # wanted again: created again
    await groups.sync()
    assert len(api.objects) == 2


async def test_a_group_deleted_behind_our_back_is_created_again(
    api: FakeAPI, groups: NodeFeatureGroups
) -> None:
    groups.request(DIGEST, 0, [{"name": "r"}])
    await groups.sync()
    api.objects.clear()
    await groups.sync()  # notices
    assert groups.nodes_for(DIGEST, 0) is None
    await groups.sync()  # creates
    assert list(api.objects) == [group_name("profile-a", DIGEST, 0)]


async def test_a_restarted_owner_adopts_its_groups_and_others_are_left_alone(
    api: FakeAPI, groups: NodeFeatureGroups, clock: FakeClock
) -> None:
    other = NodeFeatureGroups(api, NS, "profile-b", ttl=60, settle=5, clock=clock)
    other.request(DIGEST, 0, [{"name": "r"}])
    groups.request(DIGEST, 0, [{"name": "r"}])
    await other.sync()
    await groups.sync()
    assert len(api.objects) == 2
    api.evaluate(group_name("profile-a", DIGEST, 0), ["n1"])

    restarted = NodeFeatureGroups(api, NS, "profile-a", ttl=60, settle=5, clock=clock)
    await restarted.sync()
    assert restarted.nodes_for(DIGEST, 0) == {"n1"}
    clock.now += 61
    await restarted.sync()
    assert list(api.objects) == [group_name("profile-b", DIGEST, 0)]


async def test_api_errors_are_logged_once_and_retried(
    api: FakeAPI, groups: NodeFeatureGroups, caplog: pytest.LogCaptureFixture
) -> None:
    groups.request(DIGEST, 0, [{"name": "r"}])
    api.fail = RuntimeError("404 NotFound: the server could not find the requested resource")
    await groups.sync()
    await groups.sync()
    assert groups.nodes_for(DIGEST, 0) is None
    warnings = [r for r in caplog.records if "could not find" in r.getMessage()]
    assert len(warnings) == 1
    api.fail = None
    await groups.sync()
    assert len(api.objects) == 1


async def test_the_background_task_creates_at_once_and_aclose_deletes_everything(
    api: FakeAPI, groups: NodeFeatureGroups, clock: FakeClock
) -> None:
    stray = group_name("profile-a", "sha256:" + "ef" * 32, 3)
    api.objects[stray] = {
        "metadata": {
            "name": stray,
            "labels": {
                "app.kubernetes.io/managed-by": "kubesched",
                OWNER_LABEL: groups.selector.split(f"{OWNER_LABEL}=")[1],
            },
            "annotations": {},
        }
    }
    groups.start()
    groups.request(DIGEST, 0, [{"name": "r"}])
    async with asyncio.timeout(5):
        while group_name("profile-a", DIGEST, 0) not in api.objects:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        api.evaluate(group_name("profile-a", DIGEST, 0), ["n3"])
        assert await groups.wait_for(DIGEST, 0) == {"n3"}
    await groups.aclose()
    assert api.objects == {}
    assert groups.nodes_for(DIGEST, 0) is None


async def test_aclose_survives_an_unreachable_api(
    api: FakeAPI, groups: NodeFeatureGroups, caplog: pytest.LogCaptureFixture
) -> None:
    groups.request(DIGEST, 0, [{"name": "r"}])
    await groups.sync()
    api.fail = ConnectionError("refused")
    await groups.aclose()
    assert any("could not delete" in r.getMessage() for r in caplog.records)


async def test_on_change_names_the_sets_whose_answer_appeared_or_moved(
    api: FakeAPI, clock: FakeClock
) -> None:
    changes: list[list[tuple[str, int]]] = []
    groups = NodeFeatureGroups(api, NS, "p", settle=5, clock=clock, on_change=changes.append)
    groups.request(DIGEST, 0, [{"name": "r"}])
    groups.request(DIGEST, 1, [{"name": "r"}])
    await groups.sync()
    assert changes == []
    api.evaluate(group_name("p", DIGEST, 0), ["n1"])
    await groups.sync()
    assert changes == [[(DIGEST, 0)]]
    await groups.sync()
    assert len(changes) == 1  # nothing moved
    clock.now += 5  # set 1: no node named after settle, so "none"
    await groups.sync()
    assert changes[-1] == [(DIGEST, 1)]
    api.evaluate(group_name("p", DIGEST, 0), ["n1", "n2"])
    await groups.sync()
    assert changes[-1] == [(DIGEST, 0)]


async def test_a_failing_on_change_does_not_stop_the_controller(
    api: FakeAPI, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(keys: list[tuple[str, int]]) -> None:
        raise RuntimeError("boom")

    groups = NodeFeatureGroups(api, NS, "p", settle=0, clock=clock, on_change=broken)
    groups.request(DIGEST, 0, [{"name": "r"}])
    await groups.sync()
    await groups.sync()
    assert groups.nodes_for(DIGEST, 0) == frozenset()
    assert any("on_change failed" in r.getMessage() for r in caplog.records)
