"""Fixtures shared by the plugins' end-to-end tests: a run id and a namespace of its own."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import AdminClient


@pytest.fixture
def run_id() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture
def namespace(
    request: pytest.FixtureRequest, admin_client: AdminClient, run_id: str
) -> Iterator[str]:
    """A namespace ``<NAMESPACE_PREFIX of the test module>-<run id>``, emptied and deleted after."""
    name = f"{request.module.NAMESPACE_PREFIX}-{run_id}"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
    try:
        yield name
    finally:
        admin_client.request(
            "DELETE", f"/api/v1/namespaces/{name}/pods", params={"gracePeriodSeconds": "0"}
        )
        admin_client.delete(f"/api/v1/namespaces/{name}")
