"""Closes the fake API servers a test started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kube_fakes import close_servers


@pytest.fixture(autouse=True)
def _close_fake_servers() -> Iterator[None]:
    yield
    close_servers()
