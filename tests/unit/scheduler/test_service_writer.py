"""The scheduler's writer of pod conditions: one write per pod at a time, newest last."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from builders import make_pod
from kubesched.scheduler._service import _Writer


class _SlowFirstPatch:
    """An API client whose first status patch takes longest, as a busy connection would."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.calls = 0

    def with_own_limiter(self) -> _SlowFirstPatch:
        return self

    async def patch(self, path: str, body: Any, *, patch_type: str) -> Any:
        self.calls += 1
        if self.calls == 1:
            await asyncio.sleep(0.05)
        self.patches.append(body["status"])
        return {}


async def test_a_slow_write_never_lands_after_a_newer_one() -> None:
    client = _SlowFirstPatch()
    writer = _Writer(cast(Any, client), cast(Any, {"default-scheduler": None}))
    pod = make_pod("p")
    for message in ("first", "second", "third"):
        writer.failed(pod, "Unschedulable", message, "default-scheduler", None)
        await asyncio.sleep(0)
    await writer.aclose()
    # "second" was superseded while "first" was being written.
    assert [p["conditions"][0]["message"] for p in client.patches] == ["first", "third"]


async def test_an_unwritten_nomination_survives_a_newer_update_that_leaves_it() -> None:
    client = _SlowFirstPatch()
    writer = _Writer(cast(Any, client), cast(Any, {"default-scheduler": None}))
    pod = make_pod("p")
    writer.failed(pod, "Unschedulable", "first", "default-scheduler", None)
    await asyncio.sleep(0)
    writer.failed(pod, "Unschedulable", "second", "default-scheduler", "n2")
    writer.failed(pod, "Unschedulable", "third", "default-scheduler", None)
    await writer.aclose()
    assert client.patches[-1] == {
        "conditions": [client.patches[-1]["conditions"][0]],
        "nominatedNodeName": "n2",
    }
    assert client.patches[-1]["conditions"][0]["message"] == "third"


async def test_a_long_failure_message_is_cut_in_the_event_only() -> None:
    """kube-scheduler cuts the FailedScheduling note (``truncateMessage``), not the condition."""
    client = _SlowFirstPatch()
    writer = _Writer(cast(Any, client), cast(Any, {"default-scheduler": None}))
    recorder = writer.recorders["default-scheduler"]
    notes: list[str] = []
    recorder.event = lambda obj, **kw: notes.append(kw["note"])  # type: ignore[method-assign]
    message = "0/5000 nodes are available: " + "x" * 2000
    writer.failed(make_pod("p"), "Unschedulable", message, "default-scheduler", None)
    await writer.aclose()
    assert notes == [message[:1020] + " ..."]
    assert client.patches[0]["conditions"][0]["message"] == message
