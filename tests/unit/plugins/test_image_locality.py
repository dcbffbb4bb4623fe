"""ImageLocality: kube-scheduler's image_locality_test.go table with its expected scores, and
randomized checks that the vectorized score equals the per-node one."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import pytest

from builders import NodeWrapper, PodWrapper
from kubesched.api import Node, Pod
from kubesched.framework import CycleState, Nodes, Snapshot
from kubesched.plugins.image_locality import (
    ImageLocality,
    calculate_priority,
    normalized_image_name,
)

MB = 1024 * 1024


ALLOCATABLE = {"cpu": "4", "memory": "8Gi", "pods": "110"}


def pod(containers: Sequence[str], init: Sequence[str] = (), ephemeral: Sequence[str] = ()) -> Pod:
    """A pod running these images in its regular, init and ephemeral containers."""
    built = PodWrapper("p").uid("p")
    for image in containers:
        built.container(image=image)
    for image in init:
        built.init_container(image=image)
    for i, image in enumerate(ephemeral):
        built.ephemeral_container(f"e{i}", image=image)
    return built.obj()


def image_node(name: str, images: Sequence[tuple[Sequence[str], int]]) -> Node:
    return NodeWrapper(name).allocatable(ALLOCATABLE).images(images).obj()


class _Handle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot


def scores(nodes: Sequence[Node], incoming: Pod) -> list[int]:
    snap = Snapshot()
    for n in nodes:
        snap.set_node(n)
    return scores_in(snap, incoming)


def scores_in(snap: Snapshot, incoming: Pod, p: ImageLocality | None = None) -> list[int]:
    p = p or ImageLocality(_Handle(snap))  # type: ignore[arg-type]
    state = CycleState()
    nodes = Nodes(snap, snap.present_slots())
    per_node = []
    for info in nodes.infos():
        v, s = p.score(state, incoming, info)
        assert s is None
        per_node.append(v)
    vec, s = p.score_nodes(state, incoming, nodes)
    assert s is None
    assert vec.tolist() == per_node
    return per_node


NODE_40_300_2000 = [
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40 * MB),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300 * MB),
    (["gcr.io/2000:latest"], 2000 * MB),
]
NODE_250_10 = [(["gcr.io/250:latest"], 250 * MB), (["gcr.io/10:latest", "gcr.io/10:v1"], 10 * MB)]
NODE_600_40_900 = [
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/40:latest"], 40 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_300_600_900 = [
    (["gcr.io/300:latest"], 300 * MB),
    (["gcr.io/600:latest"], 600 * MB),
    (["gcr.io/900:latest"], 900 * MB),
]
NODE_4000_30 = [(["gcr.io/4000:latest"], 4000 * MB), (["gcr.io/30:latest"], 30 * MB)]
NODE_20_30_40 = [
    (["gcr.io/20:latest"], 20 * MB),
    (["gcr.io/30:latest"], 30 * MB),
    (["gcr.io/40:latest"], 40 * MB),
]

CASES = [
    (
        "two images spread on two nodes, prefer the larger image one",
        pod(["gcr.io/40", "gcr.io/250"]),
        [NODE_40_300_2000, NODE_250_10],
        [0, 5],
    ),
    (
        "two images on one node, prefer this node",
        pod(["gcr.io/40", "gcr.io/300"]),
        [NODE_40_300_2000, NODE_250_10],
        [7, 0],
    ),
    (
        "if exceed limit, use limit",
        pod(["gcr.io/10", "gcr.io/4000"]),
        [NODE_4000_30, NODE_250_10],
        [100, 0],
    ),
    (
        "if exceed limit, use limit (with node which has no images present)",
        pod(["gcr.io/10", "gcr.io/4000"]),
        [NODE_4000_30, NODE_250_10, []],
        [66, 0, 0],
    ),
    (
        "pod with multiple large images, node2 is preferred",
        pod(["gcr.io/300", "gcr.io/600", "gcr.io/900"]),
        [NODE_600_40_900, NODE_300_600_900, []],
        [32, 36, 0],
    ),
    (
        "pod with multiple small images",
        pod(["gcr.io/30", "gcr.io/40"]),
        [NODE_20_30_40, NODE_4000_30],
        [1, 0],
    ),
    (
        "include InitContainers: two images spread on two nodes, prefer the larger image one",
        pod(["gcr.io/30"], init=["gcr.io/300"]),
        [NODE_40_300_2000, NODE_20_30_40],
        [6, 0],
    ),
]


@pytest.mark.parametrize(
    ("incoming", "node_images", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_image_locality_priority(
    incoming: Pod, node_images: list[list[tuple[list[str], int]]], want: list[int]
) -> None:
    nodes = [image_node(f"node{i + 1}", imgs) for i, imgs in enumerate(node_images)]
    assert scores(nodes, incoming) == want


def fake_digest(content: str) -> str:
    return "sha256:" + hashlib.sha256(content.encode()).hexdigest()


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("root", "root:latest"),
        ("gcr.io:5000/root", "gcr.io:5000/root:latest"),
        ("root:tag", "root:tag"),
        ("root@" + fake_digest("root"), "root@" + fake_digest("root")),
    ],
    ids=["add :latest postfix 1", "add :latest postfix 2", "keep it as is 1", "keep it as is 2"],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


def test_calculate_priority_thresholds() -> None:
    assert calculate_priority(0, 1) == 0
    assert calculate_priority(23 * MB, 1) == 0
    assert calculate_priority(1000 * MB, 1) == 100
    assert calculate_priority(10**12, 1) == 100
    # (512 - 23) * 100 // (1000 - 23) = 50.05 -> 50
    assert calculate_priority(512 * MB, 1) == 50
    assert calculate_priority(0, 0) == 0
    # One byte below the sum that scores 50 exactly.
    half = 23 * MB + 977 * MB // 2
    assert calculate_priority(half, 1) == 50
    assert calculate_priority(half - 1, 1) == 49


def test_same_image_in_two_containers_counts_twice_ephemeral_not_at_all() -> None:
    nodes = [image_node("a", [(["img:1"], 500 * MB)]), image_node("b", [])]
    # 500/2 = 250 per container: 2 containers -> 500 of 2000: (500 - 23) * 100 // 1977 = 24
    assert scores(nodes, pod(["img:1", "img:1"])) == [24, 0]
    # Ephemeral containers neither add images nor raise the threshold.
    assert scores(nodes, pod(["img:1"], ephemeral=["img:1"])) == [23, 0]


def test_spread_counts_every_node_not_just_the_scored_ones() -> None:
    snap = Snapshot()
    for i in range(4):
        snap.set_node(image_node(f"n{i}", [(["big:1"], 1000 * MB)] if i < 2 else []))
    p = ImageLocality(_Handle(snap))  # type: ignore[arg-type]
    subset = Nodes(snap, snap.present_slots()[:1])
    vec, _ = p.score_nodes(CycleState(), pod(["big:1"]), subset)
    # 1000 MiB * 2/4 = 500 MiB: (500 - 23) * 100 // 977 = 48
    assert vec.tolist() == [48]


def test_image_changes_between_pods_are_seen() -> None:
    snap = Snapshot()
    snap.set_node(image_node("a", [(["app:1"], 800 * MB)]))
    snap.set_node(image_node("b", []))
    p = ImageLocality(_Handle(snap))  # type: ignore[arg-type]
    assert scores_in(snap, pod(["app:1"]), p) == [38, 0]  # 400 MiB: 377 * 100 // 977
    # b pulls the image: the spread doubles, and b scores too.
    snap.set_node(image_node("b", [(["app:1"], 800 * MB)]))
    assert scores_in(snap, pod(["app:1"]), p) == [79, 79]
    # a reports a different size for the same name.
    snap.set_node(image_node("a", [(["app:1"], 600 * MB)]))
    assert scores_in(snap, pod(["app:1"]), p) == [59, 79]
    snap.remove_node("b")
    assert scores_in(snap, pod(["app:1"]), p) == [59]


def test_random_vectorized_equals_per_node() -> None:
    rng = random.Random(11)
    catalog = [f"reg.io/img{i}" for i in range(12)]
    distinct: set[int] = set()
    for _ in range(60):
        n = rng.randint(1, 80)
        snap = Snapshot()
        for i in range(n):
            held = rng.sample(catalog, rng.randint(0, 6))
            imgs = [
                ([f"{h}:latest", f"{h}:v{rng.randint(1, 3)}"], rng.randint(1, 3000) * MB // 2)
                for h in held
            ]
            snap.set_node(image_node(f"n{i}", imgs))
        for i in rng.sample(range(n), n // 10):
            snap.remove_node(f"n{i}")
        p = ImageLocality(_Handle(snap))  # type: ignore[arg-type]
        for _ in range(4):
            containers = [
                rng.choice(catalog) + rng.choice(["", ":latest", ":v1", ":v9"])
                for _ in range(rng.randint(1, 4))
            ]
            init = [rng.choice(catalog) for _ in range(rng.randint(0, 2))]
            distinct.update(scores_in(snap, pod(containers, init=init), p))
    assert len(distinct) > 40
