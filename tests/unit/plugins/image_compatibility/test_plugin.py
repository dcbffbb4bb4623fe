"""ImageCompatibility: PreFilter's cache by digest and its background fetches (pending, failures
under both failure policies, events, metrics, pull secrets), Filter's verdicts and their cache per
node features, Score's weights and normalization, args, and the plugin inside a framework and a
simulation. The registry is a fake at the RegistryClient boundary; rules and specs are real."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, cast

import msgspec
import numpy as np
import pytest
from prometheus_client import REGISTRY

from builders import make_node, make_pod
from compat_specs import AVX512_OR_NEW_KERNEL, NVIDIA_GPU
from kubesched.api import Pod
from kubesched.config import ConfigError, load_config_from_dict
from kubesched.framework import (
    MAX_NODE_SCORE,
    ActionType,
    Code,
    CycleState,
    FitError,
    Framework,
    Nodes,
    Registry,
    Snapshot,
    Status,
    build_frameworks,
)
from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.helper import default_normalize_score
from kubesched.plugins.image_compatibility import (
    EVENT_REASON,
    NODE_FEATURE_RESOURCE,
    ImageCompatibility,
    ImageCompatibilityArgs,
    pod_images,
)
from kubesched.plugins.image_compatibility._credentials import Credential
from kubesched.plugins.image_compatibility._fetch import retry_delay
from kubesched.plugins.image_compatibility._nfd import NODE_NAME_LABEL, NodeFeature
from kubesched.plugins.image_compatibility._reference import ImageReference
from kubesched.plugins.image_compatibility._registry import (
    Artifact,
    RegistryClient,
    RegistryError,
    TemporaryRegistryError,
)
from kubesched.plugins.priority_sort import PrioritySort
from kubesched.simulate import InputBuilder, simulate

REG = "registry.test:5000"
#: How PreFilter's rejections of a pod waiting for a fetch begin.
WAITING = ("waiting for ", "cannot fetch ")
IMAGE = f"{REG}/app:v1"
DIGEST = "sha256:" + "a" * 64
OTHER_DIGEST = "sha256:" + "b" * 64

SPEC = AVX512_OR_NEW_KERNEL
SIMPLE_SPEC = NVIDIA_GPU


class FakeRegistry:
    """The RegistryClient boundary: tags, artifacts by image digest, failures, a gate."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {IMAGE: DIGEST}
        self.artifacts: dict[str, bytes | None] = {DIGEST: SPEC}
        self.error: RegistryError | None = None
        self.gate: asyncio.Event | None = None
        self.resolves: list[str] = []
        self.finds: list[str] = []
        self.credentials: list[list[Credential]] = []

    async def resolve(self, ref: ImageReference, credentials: Any = ()) -> str:
        self.resolves.append(str(ref))
        if self.error is not None:
            raise self.error
        if ref.digest:
            return ref.digest
        return self.tags[f"{ref.name}:{ref.tag}"]

    async def find_artifact(self, ref: ImageReference, credentials: Any = ()) -> Artifact | None:
        self.credentials.append(list(credentials))
        if self.gate is not None:
            await self.gate.wait()
        self.finds.append(str(ref))
        if self.error is not None:
            raise self.error
        assert ref.digest is not None
        spec = self.artifacts.get(ref.digest)
        if spec is None:
            return None
        return Artifact(ref.digest, "sha256:" + ref.digest[-8:] * 8, "", spec)

    async def aclose(self) -> None:
        pass


class Handle:
    """What the plugin uses of the framework: snapshot, client, events, activation."""

    def __init__(self, snapshot: Snapshot, client: Any = None) -> None:
        self.snapshot = snapshot
        self.profile_name = "ic-test"
        self.client = client
        self.events: list[tuple[str, str, str, str]] = []
        self.activated: list[str] = []

    @property
    def event_recorder(self) -> Handle:
        return self

    def event(self, regarding: Pod, *, type: str, reason: str, action: str, note: str) -> None:
        self.events.append((regarding.metadata.name, type, reason, note))

    def activate(self, pods: Iterable[Pod]) -> None:
        self.activated.extend(p.metadata.name for p in pods)


class SecretsClient:
    """A framework client that also reads Secrets (SecretsAPIClient)."""

    def __init__(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]]) -> None:
        self.secrets = secrets
        self.reads: list[tuple[str, str]] = []

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise AssertionError("not binding here")

    async def get_secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        self.reads.append((namespace, name))
        return self.secrets.get((namespace, name))


def node_feature(node: str, features: Mapping[str, Any], name: str = "") -> NodeFeature:
    return msgspec.convert(
        {
            "metadata": {
                "name": name or node,
                "namespace": "node-feature-discovery",
                "labels": {NODE_NAME_LABEL: node},
            },
            "spec": {"features": features},
        },
        NodeFeature,
    )


AVX512: dict[str, Any] = {"flags": {"cpu.cpuid": {"elements": {"AVX512F": {}, "AVX2": {}}}}}


def kernel(major: str) -> dict[str, Any]:
    return {"attributes": {"kernel.version": {"elements": {"major": major, "minor": "1"}}}}


def cluster(features: Mapping[str, Mapping[str, Any] | None]) -> Snapshot:
    """Nodes by name, each with one NodeFeature of ``features`` (``None``: no NodeFeature)."""
    snap = Snapshot()
    for name, f in features.items():
        snap.set_node(make_node(name))
        if f is not None:
            snap.objects.set(node_feature(name, f))
    return snap


def pod(name: str = "p", image: str = IMAGE, **spec: Any) -> Pod:
    made: Pod = make_pod(name, image=image, spec=spec)
    return made


@pytest.fixture
def fake() -> FakeRegistry:
    return FakeRegistry()


Make = Any


@pytest.fixture
def make(fake: FakeRegistry) -> Iterator[Make]:
    made: list[ImageCompatibility] = []

    def build(snap: Snapshot, args: Mapping[str, Any] | None = None, client: Any = None) -> Any:
        handle = Handle(snap, client)
        plugin = ImageCompatibility(
            cast(Any, handle), args, registry=lambda: cast(RegistryClient, fake)
        )
        made.append(plugin)
        return plugin, handle

    yield build
    for p in made:
        p.close()


def all_nodes(snap: Snapshot) -> Nodes:
    return Nodes(snap, snap.present_slots())


async def prefilter(plugin: ImageCompatibility, p: Pod, snap: Snapshot) -> tuple[CycleState, Any]:
    """PreFilter until the fetches it started have ended; the state and the last status."""
    state = CycleState()
    _, status = plugin.pre_filter(state, p, all_nodes(snap))
    await asyncio.wait_for(plugin.store.settle(), 5)
    if status is not None and status.message.startswith(WAITING):
        state = CycleState()
        _, status = plugin.pre_filter(state, p, all_nodes(snap))
    return state, status


def verdicts(
    plugin: ImageCompatibility, state: CycleState, p: Pod, snap: Snapshot
) -> dict[str, str]:
    nodes = all_nodes(snap)
    result = plugin.filter_nodes(state, p, nodes)
    out = {}
    for name, sid in zip(nodes.names(), result.ids.tolist(), strict=True):
        s = result.statuses[sid]
        out[name] = "ok" if s is None else f"{s.code.label}: {s.message}"
    return out


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# --- images and args ---------------------------------------------------------------------------


def test_pod_images_cover_init_regular_and_ephemeral_containers_once() -> None:
    p = make_pod(
        "p",
        image="a:1",
        spec={
            "initContainers": [{"name": "i", "image": "init:1"}, {"name": "j", "image": "a:1"}],
            "ephemeralContainers": [{"name": "e", "image": "debug:1"}],
        },
    )
    assert pod_images(p) == ["init:1", "a:1", "debug:1"]


def test_args_defaults_and_wire_names() -> None:
    args = msgspec.convert({}, ImageCompatibilityArgs)
    assert (args.mode, args.failure_policy, args.require_artifact) == ("InProcess", "Fail", False)
    assert args.tag_cache_ttl == 300.0
    assert args.spec_cache_size == 1024
    raw = msgspec.json.decode(msgspec.json.encode(args))
    assert {"plainHTTPRegistries", "tagCacheTTL", "maxArtifactBytes", "nfdNamespace"} <= set(raw)


def test_args_errors_name_their_fields(make: Make) -> None:
    with pytest.raises(ConfigError) as err:
        make(
            Snapshot(),
            {
                "mode": "Remote",
                "failurePolicy": "Maybe",
                "maxArtifactBytes": 0,
                "specCacheSize": 0,
                "registryTimeout": "0s",
                "tagCacheTTL": "-1s",
                "plainHTTPRegistries": ["http://x/"],
                "caFile": "/nonexistent/ca.pem",
            },
        )
    text = str(err.value)
    for field in (
        "args.mode",
        "args.failurePolicy",
        "args.maxArtifactBytes",
        "args.specCacheSize",
        "args.registryTimeout",
        "args.tagCacheTTL",
        "args.plainHTTPRegistries[0]",
        "args.caFile",
    ):
        assert field in text, field
    with pytest.raises(ConfigError, match=r"args\.bogus: Unknown field"):
        make(Snapshot(), {"bogus": 1})


# --- PreFilter: the cache and the fetches ---------------------------------------------------------


async def test_a_miss_waits_fetches_in_the_background_and_activates_the_pod(
    make: Make, fake: FakeRegistry
) -> None:
    snap = cluster({"n1": AVX512})
    plugin, handle = make(snap)
    fake.gate = asyncio.Event()
    p = pod()
    state = CycleState()
    _, status = plugin.pre_filter(state, p, all_nodes(snap))
    assert status is not None
    # Unresolvable: preemption cannot help a pod waiting for a registry.
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == f"waiting for the image compatibility artifact of {IMAGE}"
    _, again = plugin.pre_filter(CycleState(), p, all_nodes(snap))
    assert again == status
    assert handle.activated == []
    fake.gate.set()
    await asyncio.wait_for(plugin.store.settle(), 5)
    assert handle.activated == ["p"]
    assert fake.finds == [f"{REG}/app:v1@{DIGEST}"]  # one fetch for both attempts
    state = CycleState()
    _, status = plugin.pre_filter(state, p, all_nodes(snap))
    assert status is None
    assert verdicts(plugin, state, p, snap) == {"n1": "ok"}
    assert (
        metric("kubesched_image_compatibility_fetches_total", profile="ic-test", result="artifact")
        >= 1
    )


async def test_specs_are_cached_by_digest_not_by_tag(make: Make, fake: FakeRegistry) -> None:
    snap = cluster({"n1": AVX512})
    plugin, _ = make(snap)
    fake.tags[f"{REG}/app:latest"] = DIGEST
    await prefilter(plugin, pod("a"), snap)
    _, status = await prefilter(plugin, pod("b", image=f"{REG}/app:latest"), snap)
    assert status is None
    _, status = await prefilter(plugin, pod("c", image=f"{REG}/app@{DIGEST}"), snap)
    assert status is None
    assert len(fake.finds) == 1  # three names, one digest, one artifact lookup
    assert fake.resolves == [f"{REG}/app:v1", f"{REG}/app:latest"]


async def test_an_expired_tag_is_resolved_again_without_holding_pods(make: Make) -> None:
    snap = cluster({"n1": AVX512})
    now = [1000.0]
    fake = FakeRegistry()
    handle = Handle(snap)
    plugin = ImageCompatibility(
        cast(Any, handle),
        {"tagCacheTTL": "1m"},
        registry=lambda: cast(RegistryClient, fake),
        clock=lambda: now[0],
    )
    try:
        await prefilter(plugin, pod(), snap)
        fake.tags[IMAGE] = OTHER_DIGEST
        fake.artifacts[OTHER_DIGEST] = None  # the tag moved to an image without artifact
        now[0] += 30
        state = CycleState()
        assert plugin.pre_filter(state, pod(), all_nodes(snap))[1] is None
        assert len(fake.resolves) == 1
        now[0] += 31
        assert plugin.pre_filter(CycleState(), pod(), all_nodes(snap))[1] is None  # stale: kept
        await asyncio.wait_for(plugin.store.settle(), 5)
        assert len(fake.resolves) == 2
        _, status = plugin.pre_filter(CycleState(), pod(), all_nodes(snap))
        assert status is not None
        assert status.code == Code.SKIP
    finally:
        plugin.close()


async def test_an_image_without_artifact_is_compatible_unless_required(
    make: Make, fake: FakeRegistry
) -> None:
    snap = cluster({"n1": None})
    fake.artifacts[DIGEST] = None
    plugin, _ = make(snap)
    _, status = await prefilter(plugin, pod(), snap)
    assert status is not None
    assert status.code == Code.SKIP
    strict, _ = make(snap, {"requireArtifact": True})
    _, status = await prefilter(strict, pod(), snap)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message == f"image {IMAGE} has no image compatibility artifact"


async def test_an_invalid_spec_rejects_the_pod(make: Make, fake: FakeRegistry) -> None:
    snap = cluster({"n1": AVX512})
    fake.artifacts[DIGEST] = b"version: v9\ncompatibilities: []\n"
    plugin, _ = make(snap)
    _, status = await prefilter(plugin, pod(), snap)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith(f"image {IMAGE}: invalid compatibility spec: version")


async def test_fail_policy_keeps_the_pod_out_retries_and_tells(
    make: Make, fake: FakeRegistry
) -> None:
    snap = cluster({"n1": AVX512})
    plugin, handle = make(snap)
    fake.error = TemporaryRegistryError("image x: cannot connect")
    before = metric(
        "kubesched_image_compatibility_unavailable_total", profile="ic-test", policy="Fail"
    )
    _, status = await prefilter(plugin, pod(), snap)
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message.startswith(f"cannot fetch the image compatibility artifact of {IMAGE}")
    assert "cannot connect" in status.message
    assert handle.activated == ["p"]  # moved back when the fetch failed
    assert [(e[1], e[2]) for e in handle.events] == [("Warning", EVENT_REASON)]
    assert "failurePolicy Fail" in handle.events[0][3]
    assert (
        metric("kubesched_image_compatibility_unavailable_total", profile="ic-test", policy="Fail")
        > before
    )
    # The retry runs in the background after the backoff (1 s), and succeeds now.
    fake.error = None
    await asyncio.sleep(retry_delay(1) + 0.3)
    await asyncio.wait_for(plugin.store.settle(), 5)
    assert handle.activated == ["p", "p"]
    _, status = plugin.pre_filter(CycleState(), pod(), all_nodes(snap))
    assert status is None
    assert len(handle.events) == 1  # one event per failure, not per attempt


async def test_ignore_policy_treats_the_image_as_compatible_and_tells(
    make: Make, fake: FakeRegistry
) -> None:
    snap = cluster({"n1": None})
    plugin, handle = make(snap, {"failurePolicy": "Ignore"})
    fake.error = TemporaryRegistryError("image x: 503 Service Unavailable")
    p = pod()
    _, status = await prefilter(plugin, p, snap)
    assert status is not None
    assert status.code == Code.SKIP
    assert [(e[1], e[2]) for e in handle.events] == [("Warning", EVENT_REASON)]
    assert "failurePolicy Ignore" in handle.events[0][3]
    plugin.pre_filter(CycleState(), p, all_nodes(snap))
    assert len(handle.events) == 1


def test_retry_delays_double_up_to_five_minutes() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 10, 50)] == [1.0, 2.0, 4.0, 300.0, 300.0]


async def test_pull_secrets_are_read_through_the_framework_client(
    make: Make, fake: FakeRegistry
) -> None:
    auth = base64.b64encode(b"user:pw").decode()
    config = json.dumps({"auths": {REG: {"auth": auth}}}).encode()
    secret = {
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config).decode()},
    }
    client = SecretsClient({("default", "pull"): secret})
    snap = cluster({"n1": AVX512})
    plugin, _ = make(snap, client=client)
    p = pod(imagePullSecrets=[{"name": "pull"}, {"name": "missing"}])
    _, status = await prefilter(plugin, p, snap)
    assert status is None
    assert client.reads == [("default", "pull"), ("default", "missing")]
    assert [(c.registry, c.username) for c in fake.credentials[0]] == [(REG, "user")]


# --- Filter ---------------------------------------------------------------------------------------


async def test_filter_keeps_nodes_satisfying_a_set_and_names_the_failed_rules(make: Make) -> None:
    snap = cluster(
        {"avx": AVX512, "new": kernel("6"), "old": kernel("5"), "older": kernel("4"), "bare": None}
    )
    plugin, _ = make(snap)
    state, status = await prefilter(plugin, pod(), snap)
    assert status is None
    reason = (
        f'UnschedulableAndUnresolvable: image {IMAGE} not compatible: rule "avx512", rule "kernel"'
    )
    # "old" and "older" fail on different values, with one reason: it aggregates across nodes.
    assert verdicts(plugin, state, pod(), snap) == {
        "avx": "ok",
        "new": "ok",
        "old": reason,
        "older": reason,
        "bare": reason,  # no NodeFeature: no features, incompatible with any rule
    }


async def test_filter_results_are_cached_until_the_node_features_change(make: Make) -> None:
    snap = cluster({f"n{i}": kernel(str(i % 8)) for i in range(40)})
    plugin, _ = make(snap)
    state, _ = await prefilter(plugin, pod(), snap)
    first = verdicts(plugin, state, pod(), snap)
    table = plugin._verdicts[next(iter(plugin._verdicts))]
    assert table.evaluated == 40
    assert verdicts(plugin, state, pod(), snap) == first
    assert table.evaluated == 40
    snap.objects.set(node_feature("n3", AVX512))  # n3 gains AVX-512
    after = verdicts(plugin, state, pod(), snap)
    assert table.evaluated == 41
    assert after == {**first, "n3": "ok"}
    # A second object for a node merges into its features.
    snap.objects.set(node_feature("n2", kernel("7"), name="n2-local"))
    assert verdicts(plugin, state, pod(), snap)["n2"] in ("ok", first["n2"])
    assert table.evaluated == 42
    snap.objects.delete(NodeFeature, "n3", "node-feature-discovery")
    assert verdicts(plugin, state, pod(), snap)["n3"] == first["n3"]


async def test_every_image_must_be_compatible(make: Make, fake: FakeRegistry) -> None:
    gpu_image = f"{REG}/gpu:v1"
    fake.tags[gpu_image] = OTHER_DIGEST
    fake.artifacts[OTHER_DIGEST] = SIMPLE_SPEC
    gpu = {"instances": {"pci.device": {"elements": [{"attributes": {"vendor": "10de"}}]}}}
    both = {**AVX512, **gpu}
    snap = cluster({"both": both, "cpu": AVX512, "gpu": gpu})
    plugin, _ = make(snap)
    p = pod(initContainers=[{"name": "i", "image": gpu_image}])
    state, status = await prefilter(plugin, p, snap)
    assert status is None
    result = verdicts(plugin, state, p, snap)
    assert result["both"] == "ok"
    assert result["cpu"].endswith(f'image {gpu_image} not compatible: rule "gpu"')
    assert result["gpu"].endswith(f'image {IMAGE} not compatible: rule "avx512", rule "kernel"')


# --- Score ----------------------------------------------------------------------------------------


async def test_score_sums_the_best_weight_per_image_and_normalizes(make: Make) -> None:
    both = {**AVX512, **kernel("6")}
    snap = cluster({"avx": AVX512, "both": both, "kernel": kernel("6")})
    plugin, _ = make(snap)
    state, _ = await prefilter(plugin, pod(), snap)
    nodes = all_nodes(snap)
    assert plugin.pre_score(state, pod(), nodes) is None
    scores, status = plugin.score_nodes(state, pod(), nodes)
    assert status is None
    assert dict(zip(nodes.names(), scores.tolist(), strict=True)) == {
        "avx": 90,
        "both": 90,  # the highest weight of the matched sets, not their sum
        "kernel": 10,
    }
    plugin.normalize_score(state, pod(), nodes, scores)
    assert scores.tolist() == [100, 100, 11]  # 10 * 100 // 90


def test_normalize_maps_the_best_to_100_and_leaves_zeros() -> None:
    scores = np.array([0, 25, 50], dtype=np.int64)
    default_normalize_score(MAX_NODE_SCORE, False, scores)
    assert scores.tolist() == [0, 50, 100]
    zeros = np.zeros(3, dtype=np.int64)
    default_normalize_score(MAX_NODE_SCORE, False, zeros)
    assert zeros.tolist() == [0, 0, 0]


async def test_pods_without_specs_skip_filter_and_score(make: Make, fake: FakeRegistry) -> None:
    fake.artifacts[DIGEST] = None
    snap = cluster({"n1": None})
    plugin, _ = make(snap)
    state, status = await prefilter(plugin, pod(), snap)
    assert status is not None
    assert status.code == Code.SKIP
    assert plugin.pre_score(state, pod(), all_nodes(snap)) == Status(Code.SKIP)


def test_events_to_register_are_node_feature_changes_and_new_nodes(make: Make) -> None:
    plugin, _ = make(Snapshot())
    events = {(e.event.resource, e.event.action) for e in plugin.events_to_register()}
    assert events == {
        (NODE_FEATURE_RESOURCE, ActionType.ADD | ActionType.UPDATE),
        ("Node", ActionType.ADD),
    }
    assert [k.kind for k in ImageCompatibility.watched_kinds] == ["NodeFeature"]


# --- in a framework and a simulation -------------------------------------------------------------


def _with_fake(fake: FakeRegistry) -> type[ImageCompatibility]:
    class Faked(ImageCompatibility):
        def __init__(self, handle: Any, args: Any = None) -> None:
            super().__init__(handle, args, registry=lambda: cast(RegistryClient, fake))

    return Faked


async def test_in_a_framework_the_pod_goes_to_the_only_compatible_node(fake: FakeRegistry) -> None:
    snap = cluster({"a": kernel("5"), "b": AVX512, "c": None})
    registry = Registry(
        {
            "PrioritySort": PrioritySort,
            "DefaultBinder": DefaultBinder,
            "ImageCompatibility": _with_fake(fake),
        }
    )
    fw = Framework(
        profile_name="ic",
        registry=registry,
        plugins={
            "queueSort": [("PrioritySort", 1)],
            "preFilter": [("ImageCompatibility", 1)],
            "filter": [("ImageCompatibility", 1)],
            "preScore": [("ImageCompatibility", 1)],
            "score": [("ImageCompatibility", 1)],
            "bind": [("DefaultBinder", 1)],
        },
        snapshot=snap,
    )
    assert [k.kind for k in fw.watched_kinds()] == ["NodeFeature"]
    plugin = fw.plugin("ImageCompatibility")
    assert isinstance(plugin, ImageCompatibility)
    try:
        p = pod()
        with pytest.raises(Exception, match="waiting for the image compatibility artifact"):
            fw.schedule_pod(CycleState(), p)
        await asyncio.wait_for(plugin.store.settle(), 5)
        result = fw.schedule_pod(CycleState(), p)
        assert result.suggested_host == "b"
        snap.remove_node("b")
        with pytest.raises(FitError) as err:
            fw.schedule_pod(CycleState(), pod("q"))
        assert str(err.value) == (
            f"0/2 nodes are available: 2 image {IMAGE} not compatible: "
            'rule "avx512", rule "kernel".'
        )
    finally:
        plugin.close()


async def test_simulate_reads_node_features_from_manifests(fake: FakeRegistry) -> None:
    registry = Registry()
    registry.register(PrioritySort)
    registry.register(DefaultBinder)
    registry.register(_with_fake(fake), "ImageCompatibility")
    builder = InputBuilder(ImageCompatibility.watched_kinds)
    docs = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "a"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "b"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}},
        },
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeature",
            "metadata": {"name": "b", "namespace": "nfd", "labels": {NODE_NAME_LABEL: "b"}},
            "spec": {"features": AVX512},
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": IMAGE}]},
        },
        {
            "apiVersion": "nfd.k8s-sigs.io/v1alpha1",
            "kind": "NodeFeatureRule",
            "metadata": {"name": "r"},
        },
    ]
    for i, doc in enumerate(docs, 1):
        builder.add_document(doc, "test.yaml", i)
    inputs = builder.finish()
    assert inputs.objects.counts()["NodeFeature"] == 1
    assert [i.message for i in inputs.warnings] == [
        "kind NodeFeatureRule is not simulated; skipped"
    ]
    config = load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"enabled": [{"name": "ImageCompatibility"}]}},
                }
            ],
        }
    )
    frameworks = build_frameworks(config, registry, Snapshot())
    assert [k.kind for f in frameworks.values() for k in f.watched_kinds()] == ["NodeFeature"]
    # The first attempt waits for the artifact; the simulation waits for the fetch, and the
    # second attempt is the result.
    result = await simulate(inputs, config, registry, seed=1)
    assert [(p.name, p.reason, p.node) for p in result.pods] == [("p", "Scheduled", "b")]
    assert len(fake.finds) == 1


async def test_many_feature_updates_renumber_and_reread_without_changing_verdicts(
    make: Make,
) -> None:
    snap = cluster({"a": AVX512, "b": kernel("5")})
    plugin, _ = make(snap)
    state, _ = await prefilter(plugin, pod(), snap)
    first = verdicts(plugin, state, pod(), snap)
    epoch = plugin.features.epoch
    for i in range(5000):  # beyond the store's change log: everything is read again
        snap.objects.set(node_feature("b", kernel(str(4 + i % 2))))
    assert verdicts(plugin, state, pod(), snap) == first
    assert plugin.features.epoch == epoch
    for i in range(1100):  # one new fid each time, beyond 4 per node + 1024: renumbered
        snap.objects.set(node_feature("b", kernel(str(4 + i % 2))))
        assert verdicts(plugin, state, pod(), snap) == first
    assert plugin.features.epoch == epoch + 1
    snap.objects.set(node_feature("b", kernel("7")))
    assert verdicts(plugin, state, pod(), snap)["b"] == "ok"


# --- NodeFeatureGroup mode ------------------------------------------------------------------------


async def test_node_feature_group_mode_reads_nfd_masters_answers(fake: FakeRegistry) -> None:
    from test_group import NS, FakeAPI  # the controller's own fake API server

    api = FakeAPI()
    snap = cluster({"avx": AVX512, "old": kernel("5"), "bare": None})
    handle = Handle(snap, api)
    plugin = ImageCompatibility(
        cast(Any, handle),
        {"mode": "NodeFeatureGroup", "nfdNamespace": NS},
        registry=lambda: cast(RegistryClient, fake),
    )
    assert plugin.groups is not None
    try:
        p = pod()
        _, status = await prefilter(plugin, p, snap)  # the artifact, then the groups
        assert status is not None
        assert status.message == (
            f"waiting for nfd-master to evaluate the compatibility sets of {IMAGE}"
        )
        groups = await _groups_of(api, 2)
        assert sorted(g["spec"]["featureGroupRules"][0]["name"] for g in groups.values()) == sorted(
            groups
        )
        for name in groups:  # nfd-master answers: "avx" matches both sets, no other node does
            api.evaluate(name, ["avx"])
        await _activated(handle, "p")
        state = CycleState()
        _, status = plugin.pre_filter(state, p, all_nodes(snap))
        assert status is None
        reason = (
            f"UnschedulableAndUnresolvable: image {IMAGE} not compatible: not in the "
            'NodeFeatureGroup of set 0 "avx512", set 1 "new-kernel"'
        )
        assert verdicts(plugin, state, p, snap) == {"avx": "ok", "old": reason, "bare": reason}
        scores, _ = plugin.score_nodes(state, p, all_nodes(snap))
        assert scores.tolist() == [90, 0, 0]
    finally:
        plugin.close()
    await _groups_of(api, 0)  # closing deletes the plugin's groups


async def until(done: Callable[[], bool], what: str, seconds: float = 20.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if done():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} after {seconds}s")


async def _groups_of(api: Any, n: int) -> dict[str, Any]:
    await until(lambda: len(api.objects) == n, f"{n} NodeFeatureGroups")
    return dict(api.objects)


async def _activated(handle: Handle, name: str) -> None:
    await until(lambda: handle.activated.count(name) >= 2, f"second activation of {name}")


def test_node_feature_group_mode_needs_an_api_server(make: Make) -> None:
    with pytest.raises(ConfigError, match=r"args\.mode.*needs an API server"):
        make(Snapshot(), {"mode": "NodeFeatureGroup"})
