"""DynamicResources for pods with claims: PreEnqueue to PreBind as kube-scheduler v1.34, with the
writes landing in a simulated store, and the plugin inside ``kubesched simulate``."""

from __future__ import annotations

import asyncio
import random
from typing import Any, cast

import msgspec
import pytest

from builders import make_node, make_pod
from kubesched.api import (
    DeviceClass,
    OwnerReference,
    Pod,
    PodResourceClaimStatus,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.config import default_config
from kubesched.framework import (
    Code,
    CycleState,
    FilterPlugin,
    Handle,
    Nodes,
    QueueingHint,
    Snapshot,
    Status,
)
from kubesched.kube import Conflict
from kubesched.plugins import default_registry
from kubesched.plugins.dynamic_resources import (
    ERR_CANNOT_ALLOCATE,
    ERR_NOT_AVAILABLE,
    MSG_STILL_NOT_SCHEDULABLE,
    DynamicResources,
)
from kubesched.plugins.dynamic_resources._allocator import Allocator
from kubesched.plugins.dynamic_resources._plugin import claim_keys
from kubesched.simulate import load_text, simulate
from kubesched.simulate._storage import MemoryStorage

UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
DRIVER = "gpu.example.com"


class _Handle:
    def __init__(self, snapshot: Snapshot, client: Any) -> None:
        self.snapshot = snapshot
        self.client = client
        self.profile_name = "test"


def gpu_class() -> DeviceClass:
    return msgspec.convert(
        {
            "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
        DeviceClass,
    )


def gpus(node: str, *names: str) -> ResourceSlice:
    return msgspec.convert(
        {
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": n} for n in names],
            },
        },
        ResourceSlice,
    )


def gpu_claim(name: str, selector: str | None = None, **status: Any) -> ResourceClaim:
    exactly: dict[str, Any] = {"deviceClassName": "gpu"}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return msgspec.convert(
        {
            "metadata": {"name": name, "namespace": "default", "uid": f"{name}-uid"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
            "status": status,
        },
        ResourceClaim,
    )


def claiming(name: str, claim: str) -> Pod:
    return make_pod(name, spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]})


class _Client(MemoryStorage):
    """The front end's API client: ResourceClaim reads and writes in the simulated store."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        raise AssertionError("DynamicResources does not bind")


class Cluster:
    def __init__(self, *objects: Any) -> None:
        self.snapshot = Snapshot()
        for n in ("node-a", "node-b"):
            self.snapshot.set_node(make_node(n))
        for obj in objects:
            self.snapshot.objects.set(obj)
        client = _Client(self.snapshot)
        self.plugin = DynamicResources(cast(Handle, _Handle(self.snapshot, client)))

    def nodes(self) -> Nodes:
        return Nodes(self.snapshot, self.snapshot.present_slots())

    def verdicts(self, pod: Pod) -> tuple[CycleState, Status | None, dict[str, Status | None]]:
        state = CycleState()
        _, status = self.plugin.pre_filter(state, pod, self.nodes())
        if status is not None:
            return state, status, {}
        out = {}
        for info in self.nodes().infos():
            assert info.node is not None
            out[info.node.metadata.name] = self.plugin.filter(state, pod, info)
        return state, None, out

    def claim(self, name: str) -> ResourceClaim:
        c = self.snapshot.objects.get(ResourceClaim, name, "default")
        assert c is not None
        return c


def test_claim_allocated_on_the_node_with_a_device_then_written_at_pre_bind() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("c"))
    pod = claiming("p", "c")
    assert c.plugin.pre_enqueue(pod) is None
    state, status, verdicts = c.verdicts(pod)
    assert status is None
    assert verdicts == {"node-a": None, "node-b": Status(UU, ERR_CANNOT_ALLOCATE)}
    assert c.plugin.reserve(state, pod, "node-a") is None
    # In flight: the device is taken for every other pod.
    other = claiming("q", "d")
    c.snapshot.objects.set(gpu_claim("d"))
    _, _, others = c.verdicts(other)
    assert others == {
        "node-a": Status(UU, ERR_CANNOT_ALLOCATE),
        "node-b": Status(UU, ERR_CANNOT_ALLOCATE),
    }
    _, status, _ = c.verdicts(pod)
    assert status == Status(UU, "resource claim default/c is in the process of being allocated")
    assert asyncio.run(c.plugin.pre_bind(state, pod, "node-a")) is None
    written = msgspec.to_builtins(c.claim("c"))
    assert written["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert written["status"] == {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-a"]}
                        ]
                    }
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": pod.metadata.uid}],
    }
    # Allocated now: still taken, and the claim's pod only goes where its devices are.
    _, _, others = c.verdicts(other)
    assert others["node-a"] == Status(UU, ERR_CANNOT_ALLOCATE)


def test_an_answer_kept_for_a_node_serves_the_next_pod_alike_until_its_devices_change() -> None:
    """Pods whose claims ask for the same are answered from the node's kept search while the
    node's pools are untouched; a device taken there (a claim allocated in the store, or in
    flight), a changed class or slice, or a changed node asks again."""
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpus("node-b", "gpu-0", "gpu-1"))
    searches = 0
    search = Allocator.search

    def counting(self: Allocator, node: Any, pools: Any) -> Any:
        nonlocal searches
        searches += 1
        return search(self, node, pools)

    def ask(name: str) -> dict[str, Status | None]:
        c.snapshot.objects.set(gpu_claim(name))
        return c.verdicts(claiming(f"pod-{name}", name))[2]

    Allocator.search = counting  # type: ignore[method-assign]
    try:
        assert ask("c1") == {"node-a": None, "node-b": None}
        assert searches == 2
        assert ask("c2") == {"node-a": None, "node-b": None}
        assert searches == 2  # both kept
        # node-a's only GPU allocated to another claim: node-a asked again, node-b kept.
        c.snapshot.objects.set(gpu_claim("other", **allocated_on("node-a", "gpu-0")))
        assert ask("c3") == {"node-a": Status(UU, ERR_CANNOT_ALLOCATE), "node-b": None}
        assert searches == 3
        # In flight: node-b's two GPUs taken by Reserve of two pods.
        for name in ("c4", "c5"):
            pod = claiming(f"pod-{name}", name)
            c.snapshot.objects.set(gpu_claim(name))
            state, _, _ = c.verdicts(pod)
            assert c.plugin.reserve(state, pod, "node-b") is None
        assert ask("c6")["node-b"] == Status(UU, ERR_CANNOT_ALLOCATE)
        searches = 0
        # A claim asking for something else is answered afresh on every node.
        c.snapshot.objects.set(gpu_claim("picky", selector='device.attributes["x"].y == 1'))
        c.verdicts(claiming("pod-picky", "picky"))
        assert searches == 2
        # The slices changed: every node asked again.
        searches = 0
        c.snapshot.objects.set(gpus("node-b", "gpu-0", "gpu-1", "gpu-2"))
        assert ask("c7") == {"node-a": Status(UU, ERR_CANNOT_ALLOCATE), "node-b": None}
        assert searches == 2
        # The node object replaced (its labels may differ): asked again.
        c.snapshot.set_node(make_node("node-b", labels={"x": "y"}))
        assert ask("c8")["node-b"] is None
        assert searches == 3
    finally:
        Allocator.search = search  # type: ignore[method-assign]


def test_unreserve_releases_the_devices_allocated_in_flight() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("c"), gpu_claim("d"))
    pod = claiming("p", "c")
    state, _, _ = c.verdicts(pod)
    c.plugin.reserve(state, pod, "node-a")
    c.plugin.unreserve(state, pod, "node-a")
    _, _, verdicts = c.verdicts(claiming("q", "d"))
    assert verdicts["node-a"] is None


def allocated_on(node: str, device: str) -> dict[str, Any]:
    """A claim's status: ``device`` of ``node``'s pool allocated, reserved for no pod."""
    return {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": device}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            },
        }
    }


#: Claim ``shared``: allocated gpu-0 on node-a, reserved for pod ``first``.
ALLOCATED_ON_A = {
    "allocation": {
        "devices": {
            "results": [{"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}
            ]
        },
    },
    "reservedFor": [{"resource": "pods", "name": "first", "uid": "first-uid"}],
}


def test_shared_claim_already_allocated_is_reserved_for_one_more_pod() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("shared", **ALLOCATED_ON_A))
    pod = claiming("second", "shared")
    state, status, verdicts = c.verdicts(pod)
    assert status is None
    assert verdicts == {"node-a": None, "node-b": Status(UU, ERR_NOT_AVAILABLE)}
    assert c.plugin.reserve(state, pod, "node-a") is None
    assert asyncio.run(c.plugin.pre_bind(state, pod, "node-a")) is None
    reserved = [r.name for r in c.claim("shared").status.reserved_for]
    assert reserved == ["first", "second"]


class _Conflicting(_Client):
    """The first ``refused`` claim writes refused as a conflict; writes, conflicts (those and
    the store's own) and reads counted."""

    def __init__(self, snapshot: Snapshot, refused: int = 0) -> None:
        super().__init__(snapshot)
        self.refused = refused
        self.writes = self.conflicts = self.reads = 0

    async def patch_resource_claim(
        self, namespace: str, name: str, patch: Any, *, status: bool = False
    ) -> ResourceClaim:
        self.writes += 1
        try:
            if self.writes <= self.refused:
                raise Conflict(409, "Conflict", "the object has been modified")
            return await super().patch_resource_claim(namespace, name, patch, status=status)
        except Conflict:
            self.conflicts += 1
            raise

    async def get_resource_claim(self, namespace: str, name: str) -> ResourceClaim:
        self.reads += 1
        return await super().get_resource_claim(namespace, name)


def _with_client(c: Cluster, client: _Client) -> None:
    c.plugin = DynamicResources(cast(Handle, _Handle(c.snapshot, client)))


def test_pods_sharing_a_claim_write_it_in_turn_without_refusing_each_other() -> None:
    """Two pods decided on the same version of a shared claim, bound at once: the second
    writes from the claim as the first wrote it, so neither write is refused."""
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("shared", **ALLOCATED_ON_A))
    client = _Conflicting(c.snapshot)
    _with_client(c, client)
    pods = [claiming(name, "shared") for name in ("second", "third")]
    states = [c.verdicts(pod)[0] for pod in pods]

    async def bind_both() -> list[Status | None]:
        binds = [c.plugin.pre_bind(s, pod, "node-a") for s, pod in zip(states, pods, strict=True)]
        return list(await asyncio.gather(*binds))

    assert asyncio.run(bind_both()) == [None, None]
    reserved = [r.name for r in c.claim("shared").status.reserved_for]
    assert reserved == ["first", "second", "third"]
    assert (client.writes, client.conflicts, client.reads) == (2, 0, 0)


def test_a_claim_write_refused_as_a_conflict_reads_the_claim_and_writes_again() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("shared", **ALLOCATED_ON_A))
    client = _Conflicting(c.snapshot, refused=1)
    _with_client(c, client)
    pod = claiming("second", "shared")
    state, _, _ = c.verdicts(pod)
    assert asyncio.run(c.plugin.pre_bind(state, pod, "node-a")) is None
    assert [r.name for r in c.claim("shared").status.reserved_for] == ["first", "second"]
    assert (client.writes, client.conflicts, client.reads) == (2, 1, 1)


def test_a_claim_write_refused_as_a_conflict_five_times_fails_the_binding() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("shared", **ALLOCATED_ON_A))
    client = _Conflicting(c.snapshot, refused=5)
    _with_client(c, client)
    pod = claiming("second", "shared")
    state, _, _ = c.verdicts(pod)
    status = asyncio.run(c.plugin.pre_bind(state, pod, "node-a"))
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == (
        "add reservation to claim default/shared: the object has been modified"
    )
    assert (client.writes, client.reads) == (5, 4)


def test_missing_claim_class_and_template_claim_keep_the_pod_out() -> None:
    c = Cluster(gpu_class())
    assert c.plugin.pre_enqueue(claiming("p", "nope")) == Status(
        UU, 'could not find ResourceClaim "default/nope"'
    )
    templated = make_pod(
        "t", spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}
    )
    assert c.plugin.pre_enqueue(templated) == Status(
        UU, 'pod "default/t": ResourceClaim not created yet'
    )
    no_class = gpu_claim("c")
    no_class.spec.devices.requests[0].exactly.device_class_name = "tpu"  # type: ignore[union-attr]
    c.snapshot.objects.set(no_class)
    _, status, _ = c.verdicts(claiming("p", "c"))
    assert status == Status(UU, "request gpu: device class tpu does not exist")


def test_a_claim_made_for_another_pod_is_not_used() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"))
    made = gpu_claim("t-gpu-abcde")
    made.metadata.owner_references = msgspec.convert(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "other",
                "uid": "other-uid",
                "controller": True,
            }
        ],
        list[Any],
    )
    c.snapshot.objects.set(msgspec.convert(msgspec.to_builtins(made), ResourceClaim))
    pod = make_pod(
        "t", spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}
    )
    pod.status.resource_claim_statuses = [
        PodResourceClaimStatus(name="gpu", resource_claim_name="t-gpu-abcde")
    ]
    assert c.plugin.pre_enqueue(pod) == Status(
        UU,
        "ResourceClaim default/t-gpu-abcde was not created for pod default/t (pod is not owner)",
    )


def test_a_bad_selector_is_an_error_for_its_pod_only() -> None:
    c = Cluster(
        gpu_class(),
        gpus("node-a", "gpu-0"),
        gpu_claim("bad", f'device.attributes["{DRIVER}"].model == "x"'),
    )
    _, _, verdicts = c.verdicts(claiming("p", "bad"))
    status = verdicts["node-a"]
    assert status is not None
    assert status.code == Code.ERROR
    assert status.message == (
        "claim default/bad: selector #0: CEL runtime error: no such key: model"
    )


def test_claim_event_hints() -> None:
    c = Cluster(gpu_class(), gpu_claim("c"), gpu_claim("unrelated"))
    pod = claiming("p", "c")
    hint = c.plugin.is_schedulable_after_claim_change
    mine, other = c.claim("c"), c.claim("unrelated")
    assert hint(pod, None, mine) == QueueingHint.QUEUE
    assert hint(pod, mine, mine) == QueueingHint.SKIP
    assert hint(pod, None, other) == QueueingHint.SKIP
    allocated = msgspec.structs.replace(
        other,
        status=msgspec.convert({"allocation": {"devices": {"results": []}}}, type(other.status)),
    )
    assert hint(pod, allocated, other) == QueueingHint.QUEUE  # devices freed
    assert hint(claiming("q", "missing"), None, mine) == QueueingHint.SKIP
    # Freed devices, but the pod's own claim is missing: it could not use them yet.
    assert hint(claiming("q", "missing"), allocated, other) == QueueingHint.SKIP
    # A claim of the same name in another namespace is not the pod's.
    elsewhere = msgspec.structs.replace(
        mine, metadata=msgspec.structs.replace(mine.metadata, namespace="other")
    )
    assert hint(pod, None, elsewhere) == QueueingHint.SKIP


def test_a_claim_event_skips_every_pod_whose_gate_keys_miss_its_object_keys() -> None:
    """The contract the queue relies on to ask only the gated pods waiting for a claim: where
    ``claim_keys`` names the claim and a pod's ``gate_keys`` do not, the hint says Skip."""
    c = Cluster(gpu_class(), gpu_claim("c"), gpu_claim("unrelated"))
    mine, other = c.claim("c"), c.claim("unrelated")
    allocated = msgspec.structs.replace(
        other,
        status=msgspec.convert({"allocation": {"devices": {"results": []}}}, type(other.status)),
    )
    elsewhere = msgspec.structs.replace(
        mine, metadata=msgspec.structs.replace(mine.metadata, namespace="other")
    )
    template = make_pod(
        "t", spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}
    )
    pods = [claiming("p", "c"), claiming("q", "missing"), template]
    events = [(None, mine), (mine, mine), (None, other), (allocated, other), (None, elsewhere)]
    assert c.plugin.gate_keys(pods[0]) == [("default", "c")]
    assert c.plugin.gate_keys(template) == ()  # its claim not named yet
    assert claim_keys(allocated, other) is None  # deallocated: may concern any pod
    hint = c.plugin.is_schedulable_after_claim_change
    for pod in pods:
        gate = set(c.plugin.gate_keys(pod) or ())
        for old, new in events:
            keys = claim_keys(old, new)
            if keys is not None and not gate & set(keys):
                assert hint(pod, old, new) == QueueingHint.SKIP, (pod.metadata.name, new)
    assert hint(pods[0], None, mine) == QueueingHint.QUEUE


MANIFESTS = f"""
kind: Node
metadata: {{name: node-a}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
---
kind: Node
metadata: {{name: node-b}}
status: {{allocatable: {{cpu: "4", memory: 8Gi, pods: "110"}}}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: gpu}}
spec:
  selectors: [{{cel: {{expression: 'device.driver == "{DRIVER}"'}}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: node-b-gpus}}
spec:
  driver: {DRIVER}
  nodeName: node-b
  pool: {{name: node-b, generation: 1, resourceSliceCount: 1}}
  devices:
  - name: gpu-0
    attributes: {{model: {{string: a100}}}}
    capacity: {{memory: {{value: 40Gi}}}}
  - name: gpu-1
    attributes: {{model: {{string: h100}}}}
    capacity: {{memory: {{value: 80Gi}}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: big-gpu}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu
          selectors:
          - cel:
              expression: 'device.capacity["{DRIVER}"].memory.compareTo(quantity("64Gi")) >= 0'
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: broken}}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu
        selectors: [{{cel: {{expression: 'device.attributes["{DRIVER}"].nosuch == 1'}}}}]
---
kind: Pod
metadata: {{name: broken}}
spec:
  containers: [{{name: c, image: x}}]
  resourceClaims: [{{name: gpu, resourceClaimName: broken}}]
---
kind: Pod
metadata: {{name: big}}
spec:
  containers: [{{name: c, image: x}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: big-gpu}}]
---
kind: Pod
metadata: {{name: another-big}}
spec:
  containers: [{{name: c, image: x}}]
  resourceClaims: [{{name: gpu, resourceClaimTemplateName: big-gpu}}]
---
kind: Pod
metadata: {{name: no-claims}}
spec:
  containers: [{{name: c, image: x}}]
"""


def test_simulate_makes_claims_from_templates_and_counts_allocated_devices() -> None:
    inputs = load_text(MANIFESTS)
    assert not inputs.errors
    result = asyncio.run(simulate(inputs, default_config(), default_registry(), seed=1))
    by_name = {p.name: p for p in result.pods}
    assert by_name["big"].node == "node-b"
    assert by_name["no-claims"].node is not None
    assert by_name["another-big"].node is None
    assert by_name["another-big"].message == (
        "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    broken = by_name["broken"]
    assert broken.reason == "SchedulerError"
    # kube-scheduler prefixes 'running "DynamicResources" filter plugin: ' (the framework's
    # part); the plugin's error is this.
    assert broken.message.endswith(
        "claim default/broken: selector #0: CEL runtime error: no such key: nosuch"
    )


@pytest.mark.parametrize("expression", ["device.driver ==", "1 + 1"])
def test_simulate_reports_a_selector_that_does_not_compile_or_is_not_bool(expression: str) -> None:
    text = MANIFESTS.replace(f'device.attributes["{DRIVER}"].nosuch == 1', expression)
    result = asyncio.run(simulate(load_text(text), default_config(), default_registry(), seed=1))
    broken = next(p for p in result.pods if p.name == "broken")
    assert broken.reason == "SchedulerError"
    assert "claim default/broken: selector #0: CEL " in broken.message
    assert next(p for p in result.pods if p.name == "big").node == "node-b"


def test_post_filter_deallocates_a_claim_out_of_reach_that_no_other_pod_uses() -> None:
    on_b = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpu", "driver": DRIVER, "pool": "node-b", "device": "x"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": ["node-b"]}
                        ]
                    }
                ]
            },
        }
    }
    c = Cluster(gpu_class(), gpu_claim("stranded", **on_b))
    pod = claiming("p", "stranded")

    async def attempt() -> tuple[str | None, Status | None]:
        state, _, verdicts = c.verdicts(pod)
        assert verdicts["node-a"] == Status(UU, ERR_NOT_AVAILABLE)
        # As if node-b were ruled out by another plugin.
        result = c.plugin.post_filter(state, pod, {})
        await c.plugin.aclose()
        return result

    assert asyncio.run(attempt()) == (
        None,
        Status(Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed"),
    )
    assert c.claim("stranded").status.allocation is None
    # Used by another pod: left as it is.
    shared = dict(on_b, reservedFor=[{"resource": "pods", "name": "o", "uid": "o-uid"}])
    c = Cluster(gpu_class(), gpu_claim("shared", **shared))
    pod = claiming("p", "shared")
    state, _, _ = c.verdicts(pod)
    assert c.plugin.post_filter(state, pod, {}) == (
        None,
        Status(Code.UNSCHEDULABLE, MSG_STILL_NOT_SCHEDULABLE),
    )


def test_pod_change_hint_waits_for_every_claim() -> None:
    c = Cluster(gpu_class())
    pod = make_pod(
        "t", spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "tmpl"}]}
    )
    hint = c.plugin.is_schedulable_after_pod_change
    assert hint(pod, pod, pod) == QueueingHint.SKIP
    made = gpu_claim("t-gpu-x")
    made.metadata.owner_references = [
        OwnerReference(
            api_version="v1", kind="Pod", name="t", uid=pod.metadata.uid, controller=True
        )
    ]
    c.snapshot.objects.set(made)
    updated = msgspec.structs.replace(
        pod,
        status=msgspec.structs.replace(
            pod.status,
            resource_claim_statuses=[
                PodResourceClaimStatus(name="gpu", resource_claim_name="t-gpu-x")
            ],
        ),
    )
    assert hint(pod, pod, updated) == QueueingHint.QUEUE
    assert hint(claiming("other", "c"), pod, updated) == QueueingHint.SKIP
    assert c.plugin.pre_enqueue(updated) is None


def test_unreserve_after_pre_bind_takes_the_pod_out_of_reserved_for() -> None:
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("c"))
    pod = claiming("p", "c")

    async def cycle() -> None:
        state, _, _ = c.verdicts(pod)
        c.plugin.reserve(state, pod, "node-a")
        assert await c.plugin.pre_bind(state, pod, "node-a") is None
        assert [r.name for r in c.claim("c").status.reserved_for] == ["p"]
        # Binding failed after PreBind: the claim stays allocated, reserved for nobody.
        c.plugin.unreserve(state, pod, "node-a")
        await c.plugin.aclose()

    asyncio.run(cycle())
    claim = c.claim("c")
    assert claim.status.reserved_for == []
    assert claim.status.allocation is not None


def test_unreserve_takes_out_only_the_pod_though_the_claim_changed_since() -> None:
    """Another pod joined the shared claim after this one: Unreserve deletes this pod's entry
    by its UID (a strategic merge patch, as upstream), the other's stays."""
    c = Cluster(gpu_class(), gpus("node-a", "gpu-0"), gpu_claim("shared", **ALLOCATED_ON_A))
    second, third = claiming("second", "shared"), claiming("third", "shared")

    async def cycle() -> None:
        state, _, _ = c.verdicts(second)
        assert await c.plugin.pre_bind(state, second, "node-a") is None
        other, _, _ = c.verdicts(third)
        assert await c.plugin.pre_bind(other, third, "node-a") is None
        c.plugin.unreserve(state, second, "node-a")
        await c.plugin.aclose()

    asyncio.run(cycle())
    assert [r.name for r in c.claim("shared").status.reserved_for] == ["first", "third"]


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _random_selector(rng: random.Random, names: list[str]) -> dict[str, Any]:
    terms = []
    for _ in range(rng.randrange(1, 3)):
        if rng.random() < 0.4:
            op = rng.choice(("In", "NotIn"))
            field = {"key": "metadata.name", "operator": op, "values": [rng.choice(names)]}
            terms.append({"matchFields": [field]})
            continue
        expressions = []
        for _ in range(rng.randrange(1, 3)):
            op = rng.choice(_OPERATORS)
            values: list[str] = []
            if op in ("In", "NotIn"):
                values = rng.sample(["a", "b", "c"], rng.randrange(1, 3))
            elif op in ("Gt", "Lt"):
                values = [str(rng.randrange(4))]
            expressions.append(
                {"key": rng.choice(("zone", "rank")), "operator": op, "values": values}
            )
        terms.append({"matchExpressions": expressions})
    return {"nodeSelectorTerms": terms}


@pytest.mark.parametrize("seed", range(6))
def test_filter_on_every_node_at_once_equals_filter_node_by_node(seed: int) -> None:
    """A pod whose claims are all allocated: the vectorized Filter passes and rejects the
    nodes the per-node one does, and marks the same claims unavailable (for PostFilter)."""
    rng = random.Random(seed)
    names = [f"node-{i}" for i in range(8)]
    c = Cluster(gpu_class())
    for name in names:
        labels = {}
        if rng.random() < 0.8:
            labels["zone"] = rng.choice("abc")
        if rng.random() < 0.8:
            labels["rank"] = str(rng.randrange(4))
        c.snapshot.set_node(make_node(name, labels=labels))
    claims = []
    for k in range(rng.randrange(1, 4)):
        status = allocated_on("node-0", f"gpu-{k}")
        status["allocation"]["nodeSelector"] = _random_selector(rng, names)
        c.snapshot.objects.set(gpu_claim(f"c{k}", **status))
        claims.append({"name": f"r{k}", "resourceClaimName": f"c{k}"})
    pod = make_pod("p", spec={"resourceClaims": claims})
    nodes = c.nodes()
    results = []
    for form in (FilterPlugin.filter_nodes, DynamicResources.filter_nodes):
        state = CycleState()
        _, status = c.plugin.pre_filter(state, pod, nodes)
        assert status is None
        verdict = form(c.plugin, state, pod, nodes)
        said = [verdict.statuses[i] for i in verdict.ids.tolist()]
        results.append((said, state.read("DynamicResources", object).unavailable))
    assert results[0] == results[1]


def zone_gpus(zone: str, *names: str) -> ResourceSlice:
    """A slice of GPUs reachable from the nodes labelled ``zone``, a pool of its own."""
    selector = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [zone]}]}
    return msgspec.convert(
        {
            "metadata": {"name": f"zone-{zone}-gpus"},
            "spec": {
                "driver": DRIVER,
                "nodeSelector": {"nodeSelectorTerms": [selector]},
                "pool": {"name": f"zone-{zone}", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": n} for n in names],
            },
        },
        ResourceSlice,
    )


def _allocations(state: CycleState, snapshot: Snapshot, name: str) -> Any:
    """The allocation Filter left for Reserve on node ``name``, as JSON."""
    s: Any = state.read("DynamicResources", object)
    found = s.node_allocations.get(name)
    if found is None and s.verdicts is not None:
        found = s.verdicts.found.get(snapshot.slot_of(name))
    return None if found is None else msgspec.to_builtins(found.results())


@pytest.mark.parametrize("seed", range(8))
def test_verdicts_kept_per_slot_equal_a_fresh_filter_over_many_cycles(seed: int) -> None:
    """Pods whose claims ask for the same, one per cycle, while devices are allocated and
    freed, nodes relabelled and slices replaced: Filter from the kept verdicts says what a
    fresh plugin says node by node, and leaves the same allocation for each node that passes."""
    rng = random.Random(seed)
    names = [f"node-{i}" for i in range(6)]
    c = Cluster(gpu_class())
    for name in names:
        c.snapshot.set_node(make_node(name, labels={"zone": rng.choice("ab")}))
        c.snapshot.objects.set(gpus(name, *[f"gpu-{k}" for k in range(rng.randrange(3))]))
    # Network-attached GPUs for the nodes of zone a: a node's label decides whether they reach.
    c.snapshot.objects.set(zone_gpus("a", *[f"fabric-{k}" for k in range(rng.randrange(3))]))
    for step in range(40):
        action = rng.randrange(4)
        node = rng.choice(names)
        if action == 0:
            pool = rng.choice((node, "zone-a"))
            device = f"{'gpu' if pool == node else 'fabric'}-{rng.randrange(3)}"
            claim = gpu_claim(f"held-{pool}-{device}", **allocated_on(pool, device))
            c.snapshot.objects.set(claim)
        elif action == 1:
            held = [x.metadata.name for x in c.snapshot.objects.list(ResourceClaim)]
            held = [h for h in held if h.startswith("held-")]
            if held:
                c.snapshot.objects.delete(ResourceClaim, rng.choice(held), "default")
        elif action == 2:
            c.snapshot.set_node(make_node(node, labels={"zone": rng.choice("ab")}))
        else:
            c.snapshot.objects.set(gpus(node, *[f"gpu-{k}" for k in range(rng.randrange(3))]))
        c.snapshot.objects.set(gpu_claim(f"c{step}"))
        pod = claiming(f"p{step}", f"c{step}")
        nodes = c.nodes()
        fresh = DynamicResources(cast(Handle, _Handle(c.snapshot, _Client(c.snapshot))))
        results = []
        for plugin, form in (
            (fresh, FilterPlugin.filter_nodes),
            (c.plugin, DynamicResources.filter_nodes),
        ):
            state = CycleState()
            _, status = plugin.pre_filter(state, pod, nodes)
            assert status is None
            verdict = form(plugin, state, pod, nodes)
            said = [verdict.statuses[i] for i in verdict.ids.tolist()]
            left = [_allocations(state, c.snapshot, n) for n in names]
            results.append((said, left))
        assert results[0] == results[1], step


@pytest.mark.parametrize(
    ("newer", "older"),
    [
        ("10", "9"),  # an API server's integers
        ("sim-10", "sim-9"),  # simulate's writes, by their number
        ("sim-1", "12345"),  # a simulated write after a claim read from a cluster
    ],
)
def test_a_claim_written_since_is_the_newer(newer: str, older: str) -> None:
    """The claim PreBind wrote is used while the store has an older version, and dropped once
    the store has one as new."""
    c = Cluster(gpu_class(), gpu_claim("c"))

    def version(rv: str) -> ResourceClaim:
        claim = c.claim("c")
        return msgspec.structs.replace(
            claim, metadata=msgspec.structs.replace(claim.metadata, resource_version=rv)
        )

    c.snapshot.objects.set(version(older))
    c.plugin._assumed["c-uid"] = version(newer)
    assert c.plugin._current(c.claim("c")).metadata.resource_version == newer
    c.snapshot.objects.set(version(newer))
    assert c.plugin._current(c.claim("c")).metadata.resource_version == newer
    assert "c-uid" not in c.plugin._assumed


def test_cel_loads_when_a_front_end_prepares_the_plugins_not_before() -> None:
    # Fresh interpreters: other tests may have loaded CEL already. A what-if run has a client
    # too (in memory), so building the frameworks must not load it.
    import subprocess
    import sys

    probe = (
        "import random, sys; from kubesched.config import default_config; "
        "from kubesched.plugins import default_registry; "
        "from kubesched.framework import Snapshot, build_frameworks; "
        "fwks = build_frameworks(default_config(), default_registry(), Snapshot(), "
        "client=object(), rng=random.Random(0)); "
        "built = 'kubesched.plugins.dynamic_resources._cel' in sys.modules; "
        "{prepare}"
        "print(built, 'kubesched.plugins.dynamic_resources._cel' in sys.modules)"
    )
    loaded = [
        subprocess.run(
            [sys.executable, "-c", probe.format(prepare=prepare)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for prepare in ("[f.prepare() for f in fwks.values()]; ", "")
    ]
    assert loaded == ["False True", "False False"]
