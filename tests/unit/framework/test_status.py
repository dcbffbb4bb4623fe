"""Status: immutable, so one instance can stand for many nodes and serve as a dict key."""

from __future__ import annotations

import pytest

from kubesched.framework import Code, Status


def test_status_cannot_be_changed() -> None:
    status = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    with pytest.raises(AttributeError, match="immutable"):
        status.plugin = "NodeResourcesFit"  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable"):
        del status.reasons
    assert (status.code, status.reasons, status.plugin) == (
        Code.UNSCHEDULABLE,
        ("Insufficient cpu",),
        "",
    )


def test_with_plugin_leaves_the_original_alone() -> None:
    shared = Status(Code.UNSCHEDULABLE, "Insufficient cpu")
    error = ValueError("x")
    failed = Status(Code.ERROR, "x", error=error)
    fit = shared.with_plugin("NodeResourcesFit")
    assert fit == Status(Code.UNSCHEDULABLE, "Insufficient cpu", plugin="NodeResourcesFit")
    assert shared.plugin == ""
    # A status that names its plugin keeps it; the error travels with the copy.
    assert fit.with_plugin("Other") is fit
    assert failed.with_plugin("P").error is error
    statuses = {shared: 1, fit: 2}
    assert statuses[Status(Code.UNSCHEDULABLE, "Insufficient cpu")] == 1
