"""``kubesched ui`` in a real browser (Debian's chromium, headless): the page's explain table
is simulate's, and a weight changed in the page changes the pick."""

from __future__ import annotations

import json
import textwrap
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from playwright.sync_api import Page

from e2e.browser import artifacts_dir, browser, open_page, ui_process
from e2e.scheduler.sched_e2e import free_port, kubesched_argv
from kubesched.cli import main

#: ``app`` goes to ``roomy`` (LeastAllocated) with the default weights and to ``cached`` (its
#: image is there) when ImageLocality weighs 5; ``huge`` fits nowhere.
MANIFESTS = textwrap.dedent("""
    kind: Node
    metadata: {name: roomy, labels: {topology.kubernetes.io/zone: a}}
    status: {allocatable: {cpu: "16", memory: 64Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: cached, labels: {topology.kubernetes.io/zone: b}}
    status:
      allocatable: {cpu: "4", memory: 8Gi, pods: "110"}
      images: [{names: ["example.com/big:1"], sizeBytes: 500000000}]
    ---
    kind: Node
    metadata: {name: gpu, labels: {topology.kubernetes.io/zone: b}}
    spec: {taints: [{key: gpu, value: "yes", effect: NoSchedule}]}
    status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}
    ---
    kind: Node
    metadata: {name: drained, labels: {topology.kubernetes.io/zone: a}}
    spec: {unschedulable: true}
    status: {allocatable: {cpu: "8", memory: 16Gi, pods: "110"}}
    ---
    kind: Pod
    metadata: {name: app}
    spec:
      containers: [{name: c, image: "example.com/big:1", resources: {requests: {cpu: "1"}}}]
    ---
    kind: Pod
    metadata: {name: huge}
    spec:
      containers: [{name: c, image: "example.com/other:1", resources: {requests: {cpu: "20"}}}]
    """)


def _rows(page: Page) -> dict[str, dict[str, str]]:
    """The explain table as the page shows it: node -> column label -> text."""
    heads = page.locator("#explain thead th").all_inner_texts()
    heads = [h.replace("▲", "").replace("▼", "").strip() for h in heads]
    out = {}
    for row in page.locator("#explain tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        out[cells[0]] = dict(zip(heads, cells, strict=True))
    return out


def _select(page: Page, key: str) -> None:
    page.click(f'li[data-pod="{key}"]')
    page.wait_for_selector(f'#pod-title:text-is("{key}")')
    page.wait_for_selector("#explain tbody tr")


def _simulated(manifests: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        main,
        ["simulate", "-f", str(manifests), "--explain", "-o", "json", "--seed", "1"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.stderr
    return {f"{p['namespace']}/{p['name']}": p for p in json.loads(result.stdout)["pods"]}


def test_explain_table_is_simulates_and_a_weight_changes_the_pick(tmp_path: Path) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(MANIFESTS)
    expected = _simulated(manifests)
    port = free_port()
    argv = [*kubesched_argv(), "ui", "-f", str(manifests), "--seed", "1", "--port", str(port)]
    shots = artifacts_dir()
    with ui_process(argv, port, tmp_path / "ui.log") as url, browser() as b:
        page, errors = open_page(b, url)
        # The grid: every node, by zone, the cordon and the taint shown.
        assert page.locator(".zone").count() == 2
        assert page.locator(".node").count() == 4
        assert page.locator('.node.cordoned[data-node="drained"]').count() == 1
        assert page.locator('.node.tainted[data-node="gpu"]').count() == 1

        # The pending pod that fits nowhere: each node's first failing plugin, as simulate's.
        _select(page, "default/huge")
        page.wait_for_selector("#why .ways")
        shown = _rows(page)
        huge = expected["default/huge"]
        assert set(shown) == set(huge["nodes"])
        for node, verdict in huge["nodes"].items():
            first = next((k, v) for k, v in verdict["filter"].items() if v != "ok")
            assert (shown[node]["rejected by"], shown[node]["reason"]) == first, node
        assert page.inner_text("#pick") == "Unschedulable"
        ways = page.locator("#why .ways li").all_inner_texts()
        assert any("if its cpu request were at most" in w for w in ways), ways
        page.screenshot(path=str(shots / "explain-unschedulable.png"), full_page=True)

        # A pod that fits: each plugin's weighted score and the total, as simulate's.
        _select(page, "default/app")
        shown = _rows(page)
        app = expected["default/app"]
        assert page.inner_text("#pick") == app["node"] == "roomy"
        for node, verdict in app["nodes"].items():
            if verdict["total"] is None:
                continue
            assert shown[node]["total"] == str(verdict["total"]), node
            for plugin, score in verdict["scores"].items():
                assert shown[node][plugin] == str(score), (node, plugin)
        # Sortable: by node name, then back.
        page.click('#explain th[data-col="node"]')
        names = [r.split("\t")[0] for r in page.locator("#explain tbody tr").all_inner_texts()]
        assert names == sorted(names)
        # Filterable.
        page.fill("#row-filter", "drained")
        assert list(_rows(page)) == ["drained"]
        page.fill("#row-filter", "")
        page.screenshot(path=str(shots / "explain-scores.png"), full_page=True)

        # What-if: ImageLocality weighing 5 sends the pod where its image is.
        page.fill('input[data-weight="ImageLocality"]', "5")
        page.click("#run")
        page.wait_for_selector("#whatif-pick")
        assert page.inner_text("#whatif-pick") == "default/app: roomy → cached"
        assert page.inner_text("#pick") == "cached"
        assert page.inner_text('li[data-pod="default/app"] .where') == "cached"
        assert page.inner_text("#explain tr.chosen td:first-child") == "cached"
        page.screenshot(path=str(shots / "what-if.png"), full_page=True)
        # A pod that cannot be read: the error names the field, nothing else changes.
        page.fill("#pod-yaml", "kind: Pod\nspec: {nodeName: roomy}\n")
        page.click("#run")
        error = page.wait_for_selector("#whatif-result .error")
        assert error is not None
        assert error.inner_text().startswith("pod: ")
        assert page.inner_text("#pick") == "cached"
        assert errors == []

        # Read-only: nothing but the what-if endpoint takes a write.
        for method, path in (("POST", "api/cluster"), ("DELETE", "api/pods"), ("PUT", "")):
            request = urllib.request.Request(url + path, method=method, data=b"{}")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=5)
            assert refused.value.code == 405, (method, path)
