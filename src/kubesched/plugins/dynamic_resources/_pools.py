"""Resource pools as the allocator sees them from one node (``GatherPools``).

A pool is a driver's named set of devices, published in one or more ResourceSlices of one
generation. Slices of an older generation than the newest seen are out of date and ignored. A
pool with fewer slices than its ``resourceSliceCount`` is incomplete (being updated), one that
names a device twice is invalid; devices are taken from neither.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kubesched.api import Node, NodeSelector, ResourceSlice, node_selector_matches


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    slices: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    invalid: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(
    node: Node, node_name: str | None, all_nodes: bool | None, selector: NodeSelector | None
) -> bool:
    """``nodeMatches``: a slice for one node by name, for all nodes, or for those selected."""
    if node_name:
        return node.metadata.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node.metadata.labels, node.metadata.name)
    return False


def slice_reaches(s: ResourceSlice, node: Node) -> bool:
    """Whether the slice's devices are available on ``node``. Slices with per-device node
    selection (partitionable devices, off in v1.34) and slices that say nothing are skipped."""
    spec = s.spec
    if spec.per_device_node_selection is not None:
        return False
    return node_matches(node, spec.node_name, spec.all_nodes, spec.node_selector)


def gather_pools(slices: Iterable[ResourceSlice]) -> list[Pool]:
    """The pools of ``slices`` (those reaching the node), in the order first seen."""
    pools: dict[tuple[str, str], Pool] = {}
    for s in slices:
        key = (s.spec.driver, s.spec.pool.name)
        pool = pools.get(key)
        if pool is None:
            pools[key] = Pool(s.spec.driver, s.spec.pool.name, [s])
            continue
        generation = pool.slices[0].spec.pool.generation
        if s.spec.pool.generation < generation:
            continue
        if s.spec.pool.generation > generation:
            pool.slices = []
        pool.slices.append(s)
    for pool in pools.values():
        pool.incomplete = len(pool.slices) != pool.slices[0].spec.pool.resource_slice_count
        names: set[str] = set()
        for s in pool.slices:
            for d in s.spec.devices:
                if d.name in names:
                    pool.invalid = True
                names.add(d.name)
    return list(pools.values())
