"""``kubesched ui``'s data: the grid, the explain table (as simulate computes it), what-if."""

from __future__ import annotations

import textwrap

import pytest

from kubesched.config import default_config
from kubesched.plugins import default_registry
from kubesched.simulate import (
    Inputs,
    example_paths,
    load_inputs,
    load_text,
    profiles_for,
    simulate,
)
from kubesched.ui import Loaded, WhatIfError, load
from kubesched.ui._model import (
    cluster_view,
    explain_view,
    pod_yaml,
    what_if,
    why_view,
)

#: Two nodes: ImageLocality prefers the one with the image (it wins with the default weights),
#: LeastAllocated the roomy one.
TWO_NODES = textwrap.dedent("""
    kind: Node
    metadata: {name: roomy, labels: {topology.kubernetes.io/zone: a}}
    status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: cached, labels: {topology.kubernetes.io/zone: b}}
    spec: {taints: [{key: k, value: v, effect: PreferNoSchedule}]}
    status:
      allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
      images: [{names: ["example.com/big:1"], sizeBytes: 900000000}]
    ---
    kind: Pod
    metadata: {name: app}
    spec:
      tolerations: [{key: k, operator: Exists, effect: PreferNoSchedule}]
      containers: [{name: c, image: "example.com/big:1", resources: {requests: {cpu: "1"}}}]
    """)


async def _loaded(inputs: Inputs) -> Loaded:
    return await load(inputs, default_config(), default_registry(), source="test", seed=1)


async def test_grid_groups_by_zone_and_counts_placed_pods() -> None:
    loaded = await _loaded(load_inputs(example_paths()))
    view = cluster_view(loaded)
    zones = {z["name"]: {n["name"]: n for n in z["nodes"]} for z in view["zones"]}
    assert sorted(zones) == ["zone-a", "zone-b", "zone-c"]
    gpu = zones["zone-b"]["gpu-b1"]
    assert gpu["taints"] == ["nvidia.com/gpu=present:NoSchedule"]
    assert {"key": "ml/train", "simulated": True} in gpu["pods"]
    assert zones["zone-c"]["general-c2"]["cordoned"] is True
    running = zones["zone-a"]["general-a1"]
    assert {"key": "kube-system/metrics-agent", "simulated": False} in running["pods"]
    assert running["cpu"][1] == 4000


async def test_explain_rows_are_simulates() -> None:
    inputs = load_inputs(example_paths())
    loaded = await _loaded(inputs)
    reference = await simulate(
        inputs, default_config(), default_registry(), seed=1, detail="explain"
    )
    checked = 0
    for expected in reference.pods:
        if expected.nodes is None:
            continue
        view = await explain_view(loaded, expected.key)
        assert view is not None
        assert view["pod"]["node"] == expected.node, expected.key
        rows = {r["node"]: r for r in view["rows"]}
        assert set(rows) == set(expected.nodes)
        for name, n in expected.nodes.items():
            assert rows[name]["feasible"] == n.feasible
            assert rows[name]["scores"] == n.scores
            assert rows[name]["total"] == n.total
            failing = [(k, v) for k, v in n.filter.items() if v != "ok"]
            if failing:
                assert (rows[name]["plugin"], rows[name]["reason"]) == failing[0]
        checked += 1
    assert checked >= 8


async def test_a_weight_changes_the_pick() -> None:
    loaded = await _loaded(load_text(TWO_NODES))
    assert loaded.result.pods[0].node == "cached"
    out = await what_if(loaded, {"target": "default/app", "weights": {"NodeResourcesFit": 5}})
    assert out["before"]["node"] == "cached"
    assert out["after"]["pod"]["node"] == "roomy"
    assert out["pods"][0]["node"] == "roomy"
    # Nothing kept: the loaded state is as it was.
    assert loaded.result.pods[0].node == "cached"
    off = await what_if(loaded, {"target": "default/app", "disabled": ["NodeResourcesFit"]})
    assert "NodeResourcesFit" not in off["after"]["plugins"]


async def test_an_edited_pod_replaces_the_one_selected() -> None:
    loaded = await _loaded(load_inputs(example_paths()))
    text = pod_yaml(loaded, "ml/notebook")
    assert text is not None
    edited = text.replace(
        "spec:\n",
        "spec:\n  tolerations:\n  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}\n",
        1,
    )
    out = await what_if(loaded, {"target": "ml/notebook", "pod": edited})
    assert out["before"]["reason"] == "Unschedulable"
    assert out["after"]["pod"]["node"] == "gpu-b1"
    assert [p["key"] for p in out["pods"]].count("ml/notebook") == 1


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ({"pod": "kind: Pod\nmetadata: {name: x}\nspec: {nodeName: a}"}, "pod: spec.nodeName"),
        ({"pod": "kind: Node\nmetadata: {name: x}"}, "pod: must be exactly one Pod"),
        ({"pod": "kind: Pod\nmetadata: {}\n"}, "pod: "),
        ({"weights": {"NodeResourcesFit": "high"}}, "weights: must map plugin names to integers"),
        ({"disabled": "NodeResourcesFit"}, "disabled: must be a list"),
        ({"config": "profiles: [{schedulerName: 3}]"}, "config: "),
        ({"config": "{"}, "config: not YAML"),
        ({"target": 3}, "target: must be a string"),
    ],
)
async def test_what_if_errors_name_the_field(request_: dict[str, object], error: str) -> None:
    loaded = await _loaded(load_text(TWO_NODES))
    with pytest.raises(WhatIfError, match=error.replace(".", r"\.")):
        await what_if(loaded, request_)


async def test_why_sees_the_pods_placed_before() -> None:
    loaded = await _loaded(load_inputs(example_paths()))
    doc = await why_view(loaded, "default/huge-batch")
    assert doc["reason"] == "Unschedulable"
    assert doc["rejections"][0]["plugin"] == "NodeResourcesFit"


def test_profiles_for_copies_the_first_profile_per_name() -> None:
    config = profiles_for(default_config(), ["kubesched", "default-scheduler", "kubesched"])
    assert [p.scheduler_name for p in config.profiles] == ["kubesched", "default-scheduler"]
    assert config.profiles[0].plugins == default_config().profiles[0].plugins
    assert profiles_for(default_config(), []) == default_config()


async def test_explain_tables_of_the_loaded_run_are_kept_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("kubesched.ui._model.EXPLAINED_KEPT", 3)
    loaded = await _loaded(load_inputs(example_paths()))
    first = await explain_view(loaded, "ml/train")
    assert await explain_view(loaded, "ml/train") is first
    keys = [p.key for p in loaded.result.pods]
    for key in keys:
        await explain_view(loaded, key)
    assert list(loaded.explained) == keys[-3:]  # the latest three
    # A what-if's own tables are never kept.
    out = await what_if(loaded, {"target": keys[-1], "weights": {"ImageLocality": 9}})
    assert loaded.explained[keys[-1]] is not out["after"]
