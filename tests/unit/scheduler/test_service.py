"""What ``kubesched run``'s service does before its first cycle."""

from __future__ import annotations

from typing import Any, cast

import pytest

from kubesched.config import default_config
from kubesched.plugins import default_registry
from kubesched.plugins.dynamic_resources import DynamicResources
from kubesched.scheduler import SchedulerService


class _Client:
    """Constructing the service reads nothing from the API server."""

    def with_own_limiter(self) -> _Client:
        return self


def test_every_profile_is_prepared_before_the_first_cycle(monkeypatch: pytest.MonkeyPatch) -> None:
    prepared: list[str] = []
    monkeypatch.setattr(
        DynamicResources, "prepare", lambda self: prepared.append(self.handle.profile_name)
    )
    SchedulerService(default_config(), cast(Any, _Client()), default_registry(), health_port=0)
    assert prepared == ["default-scheduler"]
