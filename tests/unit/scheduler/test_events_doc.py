"""docs/events.md's table of registrations is the default profile's, as the plugins declare it."""

from __future__ import annotations

from pathlib import Path

from kubesched.config import default_config
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Snapshot,
    build_frameworks,
)
from kubesched.plugins import default_registry
from kubesched.scheduler._events import event_label

DOC = Path(__file__).resolve().parents[3] / "docs" / "events.md"
BEGIN = "<!-- registrations:begin -->"
END = "<!-- registrations:end -->"
_SINGLE = [a for a in ActionType if a.value and a.value & (a.value - 1) == 0]


def _actions(action: ActionType) -> str:
    if action in (ActionType.ALL, ActionType.UPDATE):
        return event_label(ClusterEvent("", action))
    names = [event_label(ClusterEvent("", a)) for a in _SINGLE if a & action]
    if action & ActionType.UPDATE == ActionType.UPDATE:
        names = [n for n in names if not n.startswith("Update")] + ["Update"]
    return ", ".join(names)


def _row(plugin: str, e: ClusterEventWithHint) -> str:
    hint = "yes" if e.hint is not None else "no: every such event retries"
    return f"| {plugin} | {e.event.resource} | {_actions(e.event.action)} | {hint} |"


def render() -> str:
    fwk = next(iter(build_frameworks(default_config(), default_registry(), Snapshot()).values()))
    rows = [
        "| plugin | resource | actions | hint |",
        "| --- | --- | --- | --- |",
        *(
            _row(plugin, e)
            for plugin, events in sorted(fwk.events_to_register().items())
            for e in events
        ),
    ]
    return "\n".join(rows)


def test_the_documented_registrations_are_the_default_profiles() -> None:
    text = DOC.read_text()
    documented = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    assert documented == render(), "docs/events.md is stale; its table should read:\n" + render()


if __name__ == "__main__":
    print(render())
