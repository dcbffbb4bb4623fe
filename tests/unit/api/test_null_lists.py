"""Lists the API server sends as ``null`` when empty (Go slices without ``omitempty``: an empty
list written comes back ``null`` once stored) decode as empty lists, not as errors that would
make the reflector skip the object."""

from __future__ import annotations

import msgspec
import pytest

from kubesched.api import CSINode, Node, ResourceClaim, ResourceSlice, StorageClass

CASES = [
    (CSINode, {"metadata": {"name": "n1"}, "spec": {"drivers": None}}),
    (
        CSINode,
        {
            "metadata": {"name": "n1"},
            "spec": {"drivers": [{"name": "d", "nodeID": "n1", "topologyKeys": None}]},
        },
    ),
    (Node, {"metadata": {"name": "n1"}, "status": {"images": [{"names": None}]}}),
    (
        ResourceSlice,
        {
            "metadata": {"name": "s"},
            "spec": {
                "driver": "d",
                "pool": {"name": "p", "resourceSliceCount": 1},
                "devices": None,
            },
        },
    ),
    (ResourceClaim, {"metadata": {"name": "c"}, "spec": {"devices": {"requests": None}}}),
    (
        StorageClass,
        {
            "metadata": {"name": "sc"},
            "provisioner": "p",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": None}]}],
        },
    ),
]


def _lists(obj: object) -> list[object]:
    """The values of ``obj``'s list fields that the cases set to null."""
    if isinstance(obj, CSINode):
        return [d.topology_keys for d in obj.spec.drivers] or [obj.spec.drivers]
    if isinstance(obj, Node):
        return [i.names for i in obj.status.images]
    if isinstance(obj, ResourceSlice):
        return [obj.spec.devices]
    if isinstance(obj, ResourceClaim):
        return [obj.spec.devices.requests]
    assert isinstance(obj, StorageClass)
    return [r.values for t in obj.allowed_topologies for r in t.match_label_expressions]


@pytest.mark.parametrize(("kind", "wire"), CASES)
def test_a_null_list_decodes_as_an_empty_one(kind: type, wire: dict[str, object]) -> None:
    for obj in (
        msgspec.json.decode(msgspec.json.encode(wire), type=kind),
        msgspec.convert(wire, kind),
    ):
        lists = _lists(obj)
        assert lists
        assert all(v == [] for v in lists), lists
        # Encoded again, the empty list is left out as any default is.
        assert b"null" not in msgspec.json.encode(obj)
