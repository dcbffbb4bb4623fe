"""TakenDevices: kept up to date claim by claim, it always equals a count of every claim."""

from __future__ import annotations

import random

import msgspec
import pytest

from kubesched.api import ResourceClaim
from kubesched.framework import ObjectStore
from kubesched.plugins.dynamic_resources._taken import TakenDevices

POOLS = ("pool-a", "pool-b", "pool-c")


def claim(
    name: str, uid: str, devices: list[tuple[str, str]], admin: bool = False
) -> ResourceClaim:
    status = {}
    if devices:
        status = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "r",
                            "driver": "d",
                            "pool": p,
                            "device": n,
                            "adminAccess": admin,
                        }
                        for p, n in devices
                    ]
                }
            }
        }
    return msgspec.convert(
        {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "status": status},
        ResourceClaim,
    )


def recount(
    store: ObjectStore, assumed: dict[str, ResourceClaim], in_flight: dict[str, ResourceClaim]
) -> set[tuple[str, str, str]]:
    """What the plugin counted before: every claim as it sees it, then orphans in flight."""
    out: set[tuple[str, str, str]] = set()
    names = set()
    seen = []
    for stored in store.list(ResourceClaim):
        names.add(stored.metadata.name)
        uid = stored.metadata.uid
        seen.append(in_flight.get(uid) or assumed.get(uid) or stored)
    seen += [c for c in in_flight.values() if c.metadata.name not in names]
    for c in seen:
        allocation = c.status.allocation
        for r in allocation.devices.results if allocation else ():
            if not r.admin_access:
                out.add((r.driver, r.pool, r.device))
    return out


@pytest.mark.parametrize("seed", range(8))
def test_random_changes_keep_the_set_equal_to_a_recount(seed: int) -> None:
    rng = random.Random(seed)
    store = ObjectStore()
    assumed: dict[str, ResourceClaim] = {}
    in_flight: dict[str, ResourceClaim] = {}
    taken = TakenDevices()
    versions: dict[str, tuple[int, ...]] = {}
    before: set[tuple[str, str, str]] = set()
    for step in range(300):
        name = f"c{rng.randrange(12)}"
        uid = f"{name}-{rng.randrange(2)}"
        devices = [(rng.choice(POOLS), f"dev-{rng.randrange(4)}") for _ in range(rng.randrange(3))]
        made = claim(name, uid, devices, admin=rng.random() < 0.1)
        action = rng.randrange(5)
        if action == 0:
            store.set(made)
        elif action == 1:
            store.delete(ResourceClaim, name, "ns")
        elif action == 2:
            in_flight[uid] = made
            taken.touch("ns", name)
        elif action == 3 and in_flight:
            gone = in_flight.pop(rng.choice(sorted(in_flight)))
            taken.touch("ns", gone.metadata.name)
        else:
            assumed[uid] = made
            taken.touch("ns", name)
        stamp = taken.stamp
        taken.update(store, lambda c: assumed.get(c.metadata.uid) or c, in_flight)
        now = recount(store, assumed, in_flight)
        moved = {
            ("d", p)
            for p in POOLS
            if {d for d in now if d[1] == p} != {d for d in before if d[1] == p}
        }
        assert taken.changed_since(stamp) == moved, step
        assert taken.devices == now, step
        # A pool's version moves exactly when its taken devices do.
        for pool in POOLS:
            version = taken.versions((("d", pool),))
            changed = {d for d in now if d[1] == pool} != {d for d in before if d[1] == pool}
            assert (version != versions.get(pool, (0,))) == changed, (step, pool)
            versions[pool] = version
        before = now


def test_a_log_that_no_longer_reaches_back_recounts_everything() -> None:
    store = ObjectStore()
    taken = TakenDevices()
    store.set(claim("a", "a", [("pool-a", "dev-0")]))
    taken.update(store, lambda c: c, {})
    for i in range(5000):  # more changes than the log keeps
        store.set(claim(f"x{i % 3}", f"x{i % 3}", [("pool-b", f"dev-{i % 7}")]))
    store.delete(ResourceClaim, "a", "ns")
    taken.update(store, lambda c: c, {})
    # x0, x1 and x2 last set at i = 4998, 4999, 4997; claim a gone.
    assert taken.devices == {("d", "pool-b", f"dev-{n}") for n in (0, 1, 6)}


def test_changes_further_back_than_the_log_are_not_told() -> None:
    store = ObjectStore()
    taken = TakenDevices()
    taken.update(store, lambda c: c, {})
    for i in range(5000):  # a pool version moves on each
        store.set(claim("x", "x", [("pool-a", f"dev-{i % 2}")]))
        taken.update(store, lambda c: c, {})
    assert taken.changed_since(0) is None
    assert taken.changed_since(taken.stamp) == set()
    assert taken.changed_since(taken.stamp - 1) == {("d", "pool-a")}
