"""The binder that decides nothing: which pods it takes, and the nodes in turn."""

from __future__ import annotations

import msgspec
import pytest

from kubesched.api import Pod
from kubesched.bench._binder import RoundRobin, pending


def pod(**spec: object) -> Pod:
    body = {"metadata": {"name": "p", "namespace": "bench"}, "spec": {"containers": [], **spec}}
    return msgspec.convert(body, Pod)


def test_pending_pods_only() -> None:
    assert pending(pod())
    assert not pending(pod(nodeName="node-1"))
    assert not pending(pod(schedulingGates=[{"name": "test.k8s.io/hold"}]))
    assert not pending(pod(schedulerName="other"))
    deleting = msgspec.structs.replace(
        pod(),
        metadata=msgspec.structs.replace(pod().metadata, deletion_timestamp="2026-01-01T00:00:00Z"),
    )
    assert not pending(deleting)


def test_round_robin() -> None:
    nodes = RoundRobin(["a", "b", "c"])
    assert [nodes() for _ in range(7)] == ["a", "b", "c", "a", "b", "c", "a"]
    with pytest.raises(ValueError, match="no nodes"):
        RoundRobin([])
