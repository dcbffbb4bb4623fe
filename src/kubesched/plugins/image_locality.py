"""ImageLocality: favour nodes that already have the pod's container images.

A node earns the size of each of the pod's images it reports, scaled by how widely the image is
spread over the nodes (a rare image must not draw pods to the few nodes holding it), clamped and
mapped onto 0..100 as kube-scheduler does. The formula and an example:
docs/plugins/image-locality.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np

from kubesched.api import Pod
from kubesched.framework import (
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    NodeTable,
    RowDerived,
    ScorePlugin,
    Status,
)

NAME = "ImageLocality"

MB = 1024 * 1024
#: Below this sum a node scores 0.
MIN_THRESHOLD = 23 * MB
#: Per container: at or above ``MAX_CONTAINER_THRESHOLD * containers`` a node scores 100.
MAX_CONTAINER_THRESHOLD = 1000 * MB
MAX_NODE_SCORE = 100
DEFAULT_IMAGE_TAG = "latest"

_CACHE_SIZE = 64
#: At most this many nodes are scored one by one rather than over arrays.
_FEW_ROWS = 16


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: ``name:latest`` when ``name`` has neither tag nor digest."""
    if name.rfind(":") <= name.rfind("/"):
        name = f"{name}:{DEFAULT_IMAGE_TAG}"
    return name


def _pod_images(pod: Pod) -> Iterator[str]:
    for c in pod.spec.init_containers:
        yield normalized_image_name(c.image)
    for c in pod.spec.containers:
        yield normalized_image_name(c.image)


def scaled_image_score(size: int, num_nodes: int, total_num_nodes: int) -> int:
    """``scaledImageScore``: the size weighted by the share of nodes having the image (float64,
    truncated, as upstream)."""
    spread = float(num_nodes) / float(total_num_nodes)
    return int(float(size) * spread)


def calculate_priority(sum_scores: int, num_containers: int) -> int:
    """``calculatePriority``: the clamped sum mapped onto 0..100."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    if sum_scores < MIN_THRESHOLD:
        sum_scores = MIN_THRESHOLD
    elif sum_scores > max_threshold:
        sum_scores = max_threshold
    num = MAX_NODE_SCORE * (sum_scores - MIN_THRESHOLD)
    den = max_threshold - MIN_THRESHOLD
    # Go truncates toward zero (only reachable negative with no containers at all).
    q = abs(num) // abs(den)
    return q if (num >= 0) == (den > 0) else -q


class ImageLocality(ScorePlugin):
    """Scores nodes by the (spread-weighted) size of the pod's images they already have."""

    name = NAME
    node_local = True
    node_local_reads_pods = False

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        # image name -> ((images version, node count) made at, holders' slots, scaled scores)
        self._arrays: dict[str, tuple[tuple[int, int], IntArray, IntArray]] = {}
        self._acc: IntArray = np.zeros(0, dtype=np.int64)
        # Per pod images: a node's score changes only when its images, or how many nodes
        # have each image, do (both in the key's epoch).
        self._scores = RowDerived(reads_pods=False)

    def node_local_epoch(self) -> Hashable:
        # A node's score weighs each image by the share of nodes that have it.
        snapshot = self.handle.snapshot
        return (len(snapshot), snapshot.table.images_version)

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        table = self.handle.snapshot.table
        total = len(self.handle.snapshot)
        total_sum = 0
        for image in _pod_images(pod):
            holders = table.images.get(image)
            if holders is not None and node.slot in holders:
                total_sum += scaled_image_score(holders[node.slot], len(holders), total)
        num_containers = len(pod.spec.init_containers) + len(pod.spec.containers)
        return calculate_priority(total_sum, num_containers), None

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        num_containers = len(pod.spec.init_containers) + len(pod.spec.containers)
        if num_containers == 0:
            return np.zeros(len(nodes), dtype=np.int64), None
        images = tuple(_pod_images(pod))
        table = nodes.table
        total = len(nodes.snapshot)
        at = nodes.snapshot.at

        def scores_of(slots: IntArray) -> IntArray:
            if len(slots) > _FEW_ROWS:
                return self._scores_of(table, slots, images, num_containers, total)
            return np.fromiter(
                (self.score(state, pod, at(slot))[0] for slot in slots.tolist()),
                np.int64,
                len(slots),
            )

        key = (images, num_containers, table.images_version, total)
        return self._scores.get(table, key, nodes.slots, scores_of), None

    def _scores_of(
        self,
        table: NodeTable,
        slots: IntArray,
        images: tuple[str, ...],
        num_containers: int,
        total: int,
    ) -> IntArray:
        acc: IntArray | None = None
        for image in images:
            holders = table.images.get(image)
            if not holders:
                continue
            held, scaled = self._scaled(table, image, holders, total)
            if acc is None:
                acc = self._accumulator(table.capacity)
            acc[held] += scaled
        if acc is None:
            return np.zeros(len(slots), dtype=np.int64)
        max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
        sums = acc.take(slots).astype(np.float64)
        np.clip(sums, MIN_THRESHOLD, max_threshold, out=sums)
        # Integers below 2**53 with a quotient of at most 100: the floored float quotient is
        # the integer one.
        sums -= MIN_THRESHOLD
        sums *= MAX_NODE_SCORE
        sums /= max_threshold - MIN_THRESHOLD
        np.floor(sums, out=sums)
        return sums.astype(np.int64)

    def _accumulator(self, capacity: int) -> IntArray:
        """A zeroed per-slot sum, reusing one array across calls (allocating and freeing arrays
        this large on every call makes malloc hand memory back and fault it in again)."""
        if len(self._acc) < capacity:
            self._acc = np.zeros(capacity, dtype=np.int64)
        acc = self._acc[:capacity]
        acc.fill(0)
        return acc

    def _scaled(
        self, table: NodeTable, image: str, holders: dict[int, int], total: int
    ) -> tuple[IntArray, IntArray]:
        """The holders of ``image`` as slots and their ``scaledImageScore``s, made again only
        when some node's images or the node count changed."""
        version = (table.images_version, total)
        hit = self._arrays.get(image)
        if hit is not None and hit[0] == version:
            return hit[1], hit[2]
        slots = np.fromiter(holders.keys(), dtype=np.int64, count=len(holders))
        sizes = np.fromiter(holders.values(), dtype=np.int64, count=len(holders))
        spread = float(len(holders)) / float(total)
        scaled = (sizes.astype(np.float64) * spread).astype(np.int64)
        if hit is None and len(self._arrays) >= _CACHE_SIZE:
            self._arrays.pop(next(iter(self._arrays)))
        self._arrays[image] = (version, slots, scaled)
        return slots, scaled


__all__ = [
    "DEFAULT_IMAGE_TAG",
    "MAX_CONTAINER_THRESHOLD",
    "MIN_THRESHOLD",
    "NAME",
    "ImageLocality",
    "calculate_priority",
    "normalized_image_name",
    "scaled_image_score",
]
