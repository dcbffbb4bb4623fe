"""AnnotationGate: rejects annotated pods at PreFilter; args decoded and validated; registered
through the ``kubesched.plugins`` entry point declared in pyproject.toml."""

from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.config import ConfigError
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    FitError,
    Framework,
    Handle,
    Nodes,
    QueueingHint,
    Registry,
    Snapshot,
    Status,
)
from kubesched.framework import _registry as registry_module
from kubesched.plugins import IN_TREE
from kubesched.plugins.annotation_gate import AnnotationGate, AnnotationGateArgs
from kubesched.plugins.default_binder import DefaultBinder
from kubesched.plugins.priority_sort import PrioritySort

NO_HANDLE = cast(Handle, None)
NO_NODES = Nodes(Snapshot(), np.zeros(0, dtype=np.int64))
ROOT = Path(__file__).resolve().parents[3]


def rejected(key: str) -> Status:
    return Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        f'pod has annotation "{key}", which this scheduler does not admit',
    )


@pytest.mark.parametrize(
    ("args", "annotations", "want"),
    [
        pytest.param(None, {}, None, id="default args, no annotations"),
        pytest.param(
            None,
            {"mycompany.com/environment": "staging"},
            rejected("mycompany.com/environment"),
            id="default args, annotated",
        ),
        pytest.param(
            None,
            {"mycompany.com/environment": ""},
            rejected("mycompany.com/environment"),
            id="any value counts, even empty",
        ),
        pytest.param(None, {"mycompany.com/team": "x"}, None, id="other annotations pass"),
        pytest.param(
            {"annotations": ["a.io/x", "b.io/y"]},
            {"b.io/y": "1", "a.io/x": "1"},
            rejected("a.io/x"),
            id="the first configured key is named",
        ),
        pytest.param(
            {"annotations": []},
            {"mycompany.com/environment": "prod"},
            None,
            id="empty list admits every pod",
        ),
        pytest.param(
            AnnotationGateArgs(annotations=["b.io/y"]),
            {"b.io/y": "1"},
            rejected("b.io/y"),
            id="typed args",
        ),
    ],
)
def test_pre_filter(args: Any, annotations: dict[str, str], want: Status | None) -> None:
    plugin = AnnotationGate(NO_HANDLE, args)
    result, status = plugin.pre_filter(
        CycleState(), make_pod("p", annotations=annotations), NO_NODES
    )
    assert result is None
    assert status == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"annotations": ["not a key"]},
            'args.annotations[0]: Invalid value: "not a key": must be a valid annotation key',
        ),
        ({"annotations": ["a.io/x", "a.io/x"]}, 'args.annotations[1]: Duplicate value: "a.io/x"'),
        ({"annotation": ["a.io/x"]}, "args.annotation: Unknown field"),
        ({"annotations": "a.io/x"}, 'args.annotations: Invalid value: "a.io/x": expected an array'),
    ],
)
def test_bad_args_are_refused_naming_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        AnnotationGate(NO_HANDLE, args)


def test_default_args() -> None:
    assert AnnotationGateArgs().annotations == ["mycompany.com/environment"]
    assert AnnotationGate(NO_HANDLE).annotations == ("mycompany.com/environment",)


def test_events_and_hint() -> None:
    plugin = AnnotationGate(NO_HANDLE)
    [registered] = plugin.events_to_register()
    assert registered.event == ClusterEvent("Pod", ActionType.UPDATE)
    target = make_pod("p", annotations={"mycompany.com/environment": "x"})
    same_cleared = make_pod("p", annotations={})
    same_cleared.metadata.uid = target.metadata.uid
    other_cleared = make_pod("q")
    still = make_pod("p", annotations={"mycompany.com/environment": "y"})
    still.metadata.uid = target.metadata.uid
    hint = plugin.is_schedulable_after_pod_update
    assert hint(target, target, same_cleared) is QueueingHint.QUEUE
    assert hint(target, target, still) is QueueingHint.SKIP
    assert hint(target, target, other_cleared) is QueueingHint.SKIP
    assert hint(target, None, make_node("n")) is QueueingHint.QUEUE


def declared_entry_point() -> EntryPoint:
    with (ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    value = project["entry-points"]["kubesched.plugins"]["AnnotationGate"]
    return EntryPoint(name="AnnotationGate", value=value, group="kubesched.plugins")


def test_pyproject_declares_the_entry_point() -> None:
    assert declared_entry_point().load() is AnnotationGate


def test_registry_loads_it_from_the_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = declared_entry_point()
    monkeypatch.setattr(
        registry_module, "entry_points", lambda group: [ep] if group == ep.group else []
    )
    assert "AnnotationGate" not in IN_TREE  # not in-tree: it comes in like any other package's
    registry = Registry()
    assert registry.load_entry_points() == ["AnnotationGate"]
    assert registry["AnnotationGate"] is AnnotationGate


def test_in_a_profile_the_rejection_is_the_whole_message() -> None:
    registry = Registry(
        {
            "PrioritySort": PrioritySort,
            "DefaultBinder": DefaultBinder,
            "AnnotationGate": AnnotationGate,
        }
    )
    s = Snapshot()
    s.set_node(make_node("n1"))
    s.set_node(make_node("n2"))
    fw = Framework(
        profile_name="default-scheduler",
        registry=registry,
        plugins={
            "queueSort": [("PrioritySort", 1)],
            "preFilter": [("AnnotationGate", 1)],
            "bind": [("DefaultBinder", 1)],
        },
        plugin_args={"AnnotationGate": {"annotations": ["mycompany.com/environment"]}},
        snapshot=s,
    )
    pod = make_pod("p", annotations={"mycompany.com/environment": "legacy"})
    with pytest.raises(FitError) as e:
        fw.schedule_pod(CycleState(), pod)
    assert str(e.value) == (
        '0/2 nodes are available: pod has annotation "mycompany.com/environment", '
        "which this scheduler does not admit."
    )
    assert e.value.diagnosis.unschedulable_plugins == {"AnnotationGate"}
    assert fw.schedule_pod(CycleState(), make_pod("ok")).suggested_host in {"n1", "n2"}
