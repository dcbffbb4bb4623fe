"""The structured allocator, on cases of kube-scheduler's shared allocator tests
(``structured/internal/allocatortesting``): same inputs, same devices chosen, same errors."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubesched.api import (
    AllocationResult,
    DeviceClass,
    Node,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.plugins.dynamic_resources._allocator import (
    AllocationError,
    AllocationTimeoutError,
    Allocator,
    DeviceID,
    FailedOnNodeError,
)

DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"
NODE1, NODE2 = "node-1", "node-2"
REGION_KEY = "region"


def node(name: str = NODE1, region: str = "region-1") -> Node:
    return msgspec.convert({"metadata": {"name": name, "labels": {REGION_KEY: region}}}, Node)


def device_class(name: str, driver: str, config: str | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]}
    if config is not None:
        spec["config"] = [{"opaque": {"driver": driver, "parameters": {"attr": config}}}]
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, DeviceClass)


def dev(
    name: str, capacity: dict[str, str] | None = None, attributes: dict[str, Any] | None = None
) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    if capacity:
        d["capacity"] = {k: {"value": v} for k, v in capacity.items()}
    if attributes:
        d["attributes"] = attributes
    return d


def slice_(
    name: str,
    where: str | dict[str, Any],
    pool: str,
    driver: str,
    *devices: dict[str, Any],
    generation: int = 1,
    count: int = 1,
) -> ResourceSlice:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": list(devices) or [dev("device-1")],
    }
    if isinstance(where, str):
        spec["nodeName"] = where
    else:
        spec.update(where)
    return msgspec.convert({"metadata": {"name": name}, "spec": spec}, ResourceSlice)


def request(name: str, cls: str, count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount"}
    exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


def claim(name: str, *requests: dict[str, Any], **devices: Any) -> ResourceClaim:
    return msgspec.convert(
        {
            "metadata": {"name": name},
            "spec": {"devices": {"requests": list(requests), **devices}},
        },
        ResourceClaim,
    )


def allocate(
    claims: list[ResourceClaim],
    classes: list[DeviceClass],
    slices: list[ResourceSlice],
    n: Node | None = None,
    allocated: set[DeviceID] | None = None,
) -> list[AllocationResult] | None:
    by_name = {c.metadata.name: c for c in classes}
    a = Allocator(claims, allocated or set(), by_name.get, slices)
    return a.allocate(n or node())


def results(allocation: AllocationResult) -> list[tuple[str, str, str, str, bool]]:
    return [
        (r.request, r.driver, r.pool, r.device, bool(r.admin_access))
        for r in allocation.devices.results
    ]


def local_selector(allocation: AllocationResult) -> Any:
    assert allocation.node_selector is not None
    return msgspec.to_builtins(allocation.node_selector)


def local(name: str) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}
        ]
    }


def test_simple() -> None:
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A))],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
    )
    assert out is not None
    assert results(out[0]) == [("req-0", DRIVER_A, "pool-1", "device-1", False)]
    assert local_selector(out[0]) == local(NODE1)


def test_other_node() -> None:
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A))],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_("slice-1", NODE1, "pool-1", DRIVER_B),
            slice_("slice-2", NODE2, "pool-2", DRIVER_A),
        ],
        node(NODE2, "region-2"),
    )
    assert out is not None
    assert results(out[0]) == [("req-0", DRIVER_A, "pool-2", "device-1", False)]
    assert local_selector(out[0]) == local(NODE2)


SMALL = 'device.capacity["driver-a"].memory.compareTo(quantity("1Gi")) >= 0'
LARGE = 'device.capacity["driver-a"].memory.compareTo(quantity("2Gi")) >= 0'


@pytest.mark.parametrize("large_first", [False, True])
def test_small_and_large_backtrack_requests(large_first: bool) -> None:
    devices = [dev("device-1", {"memory": "1Gi"}), dev("device-2", {"memory": "2Gi"})]
    if large_first:
        devices.reverse()
    out = allocate(
        [
            claim(
                "claim-0", request("req-0", CLASS_A, 1, SMALL), request("req-1", CLASS_A, 1, LARGE)
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
    )
    assert out is not None
    assert results(out[0]) == [
        ("req-0", DRIVER_A, "pool-1", "device-1", False),
        ("req-1", DRIVER_A, "pool-1", "device-2", False),
    ]


def test_small_and_large_backtrack_claims() -> None:
    out = allocate(
        [
            claim("claim-0", request("req-0", CLASS_A, 1, SMALL)),
            claim("claim-1", request("req-1", CLASS_A, 1, LARGE)),
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_(
                "slice-1",
                NODE1,
                "pool-1",
                DRIVER_A,
                dev("device-2", {"memory": "2Gi"}),
                dev("device-1", {"memory": "1Gi"}),
            )
        ],
    )
    assert out is not None
    assert results(out[0]) == [("req-0", DRIVER_A, "pool-1", "device-1", False)]
    assert results(out[1]) == [("req-1", DRIVER_A, "pool-1", "device-2", False)]


def test_devices_split_across_different_slices() -> None:
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 2))],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_("slice-1", NODE1, "pool-1", DRIVER_A),
            slice_("slice-2", NODE1, "pool-2", DRIVER_A),
        ],
    )
    assert out is not None
    assert results(out[0]) == [
        ("req-0", DRIVER_A, "pool-1", "device-1", False),
        ("req-0", DRIVER_A, "pool-2", "device-1", False),
    ]


def test_obsolete_slice_is_ignored_and_the_pool_incomplete() -> None:
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A))],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_("old", NODE1, "pool-1", DRIVER_A, dev("device-1"), count=2),
            slice_("new", NODE1, "pool-1", DRIVER_A, dev("device-2"), count=2, generation=2),
        ],
    )
    assert out is None


def test_duplicate_slice_makes_the_pool_invalid() -> None:
    s = slice_("slice-1", NODE1, "pool-1", DRIVER_A, count=2)
    dup = msgspec.structs.replace(s, metadata=msgspec.structs.replace(s.metadata, name="slice-2"))
    with pytest.raises(FailedOnNodeError, match="invalid resource pools were encountered"):
        allocate(
            [claim("claim-0", request("req-0", CLASS_A))],
            [device_class(CLASS_A, DRIVER_A)],
            [s, dup],
        )


def test_no_slices_and_not_enough_devices() -> None:
    classes = [device_class(CLASS_A, DRIVER_A)]
    assert allocate([claim("claim-0", request("req-0", CLASS_A))], classes, []) is None
    two = [claim("claim-0", request("req-0", CLASS_A)), claim("claim-1", request("req-1", CLASS_A))]
    assert allocate(two, classes, [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]) is None


def test_missing_and_empty_class() -> None:
    s = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    with pytest.raises(AllocationError, match="could not retrieve device class class-a"):
        allocate([claim("claim-0", request("req-0", CLASS_A))], [], s)
    with pytest.raises(
        AllocationError,
        match=r"claim claim-0, request req-0: missing device class name \(unsupported request",
    ):
        allocate([claim("claim-0", request("req-0", ""))], [device_class(CLASS_A, DRIVER_A)], s)


def all_request(name: str, cls: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, "allocationMode": "All"}}


def test_all_devices_many() -> None:
    out = allocate(
        [claim("claim-0", all_request("req-0", CLASS_A))],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_("slice-1", NODE1, "pool-1", DRIVER_A),
            slice_("slice-1", NODE1, "pool-2", DRIVER_A),
        ],
    )
    assert out is not None
    assert results(out[0]) == [
        ("req-0", DRIVER_A, "pool-1", "device-1", False),
        ("req-0", DRIVER_A, "pool-2", "device-1", False),
    ]


def test_all_devices_of_an_incomplete_pool_is_an_error() -> None:
    with pytest.raises(
        AllocationError,
        match="claim claim-0, request req-0: asks for all devices, but resource pool "
        "driver-a/pool-1 is currently being updated",
    ):
        allocate(
            [claim("claim-0", all_request("req-0", CLASS_A))],
            [device_class(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, "pool-1", DRIVER_A, count=2)],
        )


def test_all_devices_plus_another_in_either_order() -> None:
    classes = [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)]
    slices = [
        slice_("slice-1", NODE1, "pool-1", DRIVER_A),
        slice_("slice-1", NODE1, "pool-1", DRIVER_B),
    ]
    all_a = claim("claim-0", all_request("req-0", CLASS_A))
    one_b = claim("claim-1", request("req-0", CLASS_B))
    for claims in ([all_a, one_b], [one_b, all_a]):
        out = allocate(claims, classes, slices)
        assert out is not None
        by_claim = {c.metadata.name: results(r) for c, r in zip(claims, out, strict=True)}
        assert by_claim == {
            "claim-0": [("req-0", DRIVER_A, "pool-1", "device-1", False)],
            "claim-1": [("req-0", DRIVER_B, "pool-1", "device-1", False)],
        }


def test_network_attached_device_gets_the_slices_node_selector() -> None:
    region = {
        "nodeSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": REGION_KEY, "operator": "In", "values": ["region-1"]}
                    ]
                }
            ]
        }
    }
    classes = [device_class(CLASS_A, DRIVER_A)]
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A))],
        classes,
        [slice_("slice-1", region, "pool-1", DRIVER_A)],
    )
    assert out is not None
    assert local_selector(out[0]) == region["nodeSelector"]
    # Out of the region: nothing reachable.
    other = node(NODE2, "region-2")
    assert (
        allocate(
            [claim("claim-0", request("req-0", CLASS_A))],
            classes,
            [slice_("slice-1", region, "pool-1", DRIVER_A)],
            other,
        )
        is None
    )
    # Every node, no selector at all; a node-local device then makes the selector that node's.
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 2))],
        classes,
        [
            slice_("slice-1", {"allNodes": True}, "pool-1", DRIVER_A),
            slice_("slice-2", NODE1, "pool-2", DRIVER_A),
        ],
    )
    assert out is not None
    assert local_selector(out[0]) == local(NODE1)
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A))],
        classes,
        [slice_("slice-1", {"allNodes": True}, "pool-1", DRIVER_A)],
    )
    assert out is not None
    assert out[0].node_selector is None


def test_already_allocated_devices_and_admin_access() -> None:
    allocated = {(DRIVER_A, "pool-1", "device-1")}
    classes = [device_class(CLASS_A, DRIVER_A)]
    slices = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    assert (
        allocate([claim("claim-0", request("req-0", CLASS_A))], classes, slices, None, allocated)
        is None
    )
    admin = claim("claim-0", request("req-0", CLASS_A, 1, adminAccess=True))
    out = allocate([admin], classes, slices, None, allocated)
    assert out is not None
    assert results(out[0]) == [("req-0", DRIVER_A, "pool-1", "device-1", True)]


def attrs(**values: Any) -> dict[str, Any]:
    kinds = {bool: "bool", int: "int", str: "string"}
    out = {}
    for k, v in values.items():
        if k == "driverVersion":
            out[k] = {"version": v}
        else:
            out[k] = {kinds[type(v)]: v}
    return out


def test_with_constraint_on_every_attribute_type() -> None:
    a = attrs(driverVersion="1.0.0", numa=1, stringAttribute="x", boolAttribute=True)
    constraints = [
        {"matchAttribute": f"{DRIVER_A}/{n}"}
        for n in ("numa", "driverVersion", "stringAttribute", "boolAttribute")
    ]
    out = allocate(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                request("req-1", CLASS_A),
                constraints=constraints,
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [
            slice_(
                "slice-1",
                NODE1,
                "pool-1",
                DRIVER_A,
                dev("device-1", None, a),
                dev("device-2", None, a),
            )
        ],
    )
    assert out is not None
    assert [r[3] for r in results(out[0])] == ["device-1", "device-2"]


@pytest.mark.parametrize(
    ("name", "first", "second"),
    [
        ("numa", 1, 2),
        ("stringAttribute", "a", "b"),
        ("boolAttribute", True, False),
        ("driverVersion", "1.0.0", "2.0.0"),
        ("NonExistentAttribute", None, None),
    ],
)
def test_with_constraint_not_matching(name: str, first: Any, second: Any) -> None:
    d1 = dev("device-1", None, attrs(**{name: first}) if first is not None else None)
    d2 = dev("device-2", None, attrs(**{name: second}) if second is not None else None)
    out = allocate(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                constraints=[{"matchAttribute": f"{DRIVER_A}/{name}"}],
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, d1, d2)],
    )
    assert out is None


def test_with_constraint_not_matching_all_devices_is_an_error() -> None:
    d1 = dev("device-1", None, attrs(numa=1))
    d2 = dev("device-2", None, attrs(numa=2))
    with pytest.raises(
        AllocationError,
        match="claim claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a "
        "claim constraint would not be satisfied",
    ):
        allocate(
            [
                claim(
                    "claim-0",
                    all_request("req-0", CLASS_A),
                    constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}],
                )
            ],
            [device_class(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, "pool-1", DRIVER_A, d1, d2)],
        )


def test_with_constraint_for_request_retry() -> None:
    devices = [
        dev("device-1", None, attrs(driverVersion="1.0.0", stringAttribute="a")),
        dev("device-2", None, attrs(driverVersion="2.0.0", stringAttribute="b")),
        dev("device-3", None, attrs(driverVersion="3.0.0", stringAttribute="b")),
    ]
    out = allocate(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                request("req-1", CLASS_A),
                constraints=[
                    {"requests": ["req-0"], "matchAttribute": f"{DRIVER_A}/driverVersion"},
                    {"matchAttribute": f"{DRIVER_A}/stringAttribute"},
                ],
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
    )
    assert out is not None
    assert [r[3] for r in results(out[0])] == ["device-2", "device-3"]


def test_class_config_once_per_class_naming_its_requests() -> None:
    out = allocate(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                request("req-1", CLASS_A),
                request("req-2", CLASS_B),
            )
        ],
        [
            device_class(CLASS_A, DRIVER_A, "classAttribute-A"),
            device_class(CLASS_B, DRIVER_B, "classAttribute-B"),
        ],
        [
            slice_("slice-1", NODE1, "pool-1", DRIVER_A, dev("device-0"), dev("device-1")),
            slice_("slice-2", NODE1, "pool-1", DRIVER_B),
        ],
    )
    assert out is not None
    config = msgspec.to_builtins(out[0].devices.config)
    assert config == [
        {
            "source": "FromClass",
            "requests": ["req-0", "req-1"],
            "opaque": {"driver": DRIVER_A, "parameters": {"attr": "classAttribute-A"}},
        },
        {
            "source": "FromClass",
            "requests": ["req-2"],
            "opaque": {"driver": DRIVER_B, "parameters": {"attr": "classAttribute-B"}},
        },
    ]


def test_claim_config_for_all_requests_names_none() -> None:
    opaque = {"driver": DRIVER_A, "parameters": {"attr": "deviceAttribute"}}
    out = allocate(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A),
                config=[{"requests": ["req-0"], "opaque": opaque}],
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
    )
    assert out is not None
    assert msgspec.to_builtins(out[0].devices.config) == [{"source": "FromClaim", "opaque": opaque}]


def test_unknown_selector_mode_and_constraint_are_errors() -> None:
    classes = [device_class(CLASS_A, DRIVER_A)]
    s = [slice_("slice-1", NODE1, "pool-1", DRIVER_A)]
    bad_selector = request("req-0", CLASS_A)
    bad_selector["exactly"]["selectors"] = [{}]
    with pytest.raises(
        AllocationError, match=r"CEL expression empty \(unsupported selector type\?\)"
    ):
        allocate([claim("claim-0", bad_selector)], classes, s)
    with pytest.raises(AllocationError, match="unsupported count mode future-mode"):
        allocate(
            [claim("claim-0", request("req-0", CLASS_A, allocationMode="future-mode"))], classes, s
        )
    with pytest.raises(
        AllocationError, match=r"empty constraint \(unsupported constraint type\?\)"
    ):
        allocate([claim("claim-0", request("req-0", CLASS_A), constraints=[{}])], classes, s)


def test_cel_runtime_error_names_claim_and_selector() -> None:
    with pytest.raises(
        AllocationError,
        match=r"^claim claim-0: selector #0: CEL runtime error: no such key: nosuchkey$",
    ):
        allocate(
            [
                claim(
                    "claim-0",
                    request("req-0", CLASS_A, 1, 'device.attributes["driver-a"].nosuchkey'),
                )
            ],
            [device_class(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
        )


def test_cel_compile_error_names_the_class() -> None:
    bad = device_class(CLASS_A, DRIVER_A)
    bad.spec.selectors[0].cel.expression = "device.driver =="  # type: ignore[union-attr]
    with pytest.raises(AllocationError, match=r"^class class-a: selector #0: CEL compile error: "):
        allocate(
            [claim("claim-0", request("req-0", CLASS_A))],
            [bad],
            [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
        )


def sub(name: str, cls: str, count: int = 1, *selectors: str) -> dict[str, Any]:
    s: dict[str, Any] = {"name": name, "deviceClassName": cls, "allocationMode": "ExactCount"}
    s["count"] = count
    if selectors:
        s["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return s


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    out = allocate(
        [
            claim(
                "claim-0",
                {
                    "name": "req-0",
                    "firstAvailable": [sub("sub-0", CLASS_A, 2), sub("sub-1", CLASS_B, 1)],
                },
            )
        ],
        [device_class(CLASS_A, DRIVER_A), device_class(CLASS_B, DRIVER_B)],
        [
            slice_("slice-1", NODE1, "pool-1", DRIVER_A),
            slice_("slice-2", NODE1, "pool-2", DRIVER_B),
        ],
    )
    assert out is not None
    assert results(out[0]) == [("req-0/sub-1", DRIVER_B, "pool-2", "device-1", False)]


def test_first_available_with_constraint_on_the_subrequest() -> None:
    devices = [
        dev("device-1", None, attrs(numa=1)),
        dev("device-2", None, attrs(numa=2)),
        dev("device-3", None, attrs(numa=2)),
    ]
    out = allocate(
        [
            claim(
                "claim-0",
                {"name": "req-0", "firstAvailable": [sub("sub-0", CLASS_A, 2)]},
                constraints=[{"requests": ["req-0/sub-0"], "matchAttribute": f"{DRIVER_A}/numa"}],
            )
        ],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
    )
    assert out is not None
    assert [r[3] for r in results(out[0])] == ["device-2", "device-3"]


def test_too_many_devices_for_one_claim() -> None:
    with pytest.raises(
        AllocationError,
        match="claim claim-0: number of requested devices 33 exceeds the claim limit of 32",
    ):
        allocate(
            [claim("claim-0", request("req-0", CLASS_A, 33))],
            [device_class(CLASS_A, DRIVER_A)],
            [slice_("slice-1", NODE1, "pool-1", DRIVER_A)],
        )


def test_semver_and_quantity_selectors() -> None:
    devices = [
        dev("device-1", {"memory": "16Gi"}, attrs(driverVersion="1.9.0")),
        dev("device-2", {"memory": "80Gi"}, attrs(driverVersion="1.10.0-rc.1")),
        dev("device-3", {"memory": "80Gi"}, attrs(driverVersion="1.10.0")),
    ]
    expr = (
        'device.attributes["driver-a"].driverVersion.isGreaterThan(semver("1.10.0-rc.1")) && '
        'device.capacity["driver-a"].memory.isGreaterThan(quantity("64Gi"))'
    )
    out = allocate(
        [claim("claim-0", request("req-0", CLASS_A, 1, expr))],
        [device_class(CLASS_A, DRIVER_A)],
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
    )
    assert out is not None
    assert [r[3] for r in results(out[0])] == ["device-3"]


def test_search_stops_at_the_filter_timeout() -> None:
    # No two devices share a NUMA node: every pair is tried before giving up.
    devices = [dev(f"device-{i}", None, attrs(numa=i)) for i in range(40)]
    a = Allocator(
        [
            claim(
                "claim-0",
                request("req-0", CLASS_A, 2),
                constraints=[{"matchAttribute": f"{DRIVER_A}/numa"}],
            )
        ],
        set(),
        {CLASS_A: device_class(CLASS_A, DRIVER_A)}.get,
        [slice_("slice-1", NODE1, "pool-1", DRIVER_A, *devices)],
        timeout=1e-9,
    )
    with pytest.raises(AllocationTimeoutError):
        a.allocate(node())
