"""A running ``kubesched run --debug-queue``'s queue, read by ``kubesched ui --scheduler`` and
shown in a real browser, beside the live cluster's pending pod and its explain table."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from e2e.browser import artifacts_dir, browser, open_page, ui_process
from e2e.scheduler.sched_e2e import (
    create_node,
    create_pod,
    delete_node,
    delete_pods,
    eventually,
    free_port,
    kubesched_argv,
    node_manifest,
    pod_manifest,
    scheduler_config,
    start_scheduler,
)
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from conftest import AdminClient


@pytest.fixture
def stuck_pod(admin_client: AdminClient) -> Iterator[tuple[str, str, str]]:
    """(profile, namespace, node): a node of 4 CPUs and, for the profile, a pod asking 64."""
    suffix = uuid.uuid4().hex[:8]
    profile, ns, node = f"ui-{suffix}", f"ui-e2e-{suffix}", f"ui-{suffix}-node"
    admin_client.post("/api/v1/namespaces", {"metadata": {"name": ns}}).expect(201)
    create_node(admin_client, node_manifest(node, cpu="4"))
    yield profile, ns, node
    delete_pods(admin_client, ns)
    delete_node(admin_client, node)
    admin_client.delete(f"/api/v1/namespaces/{ns}")


def test_queue_of_a_running_scheduler_in_the_page(
    control_plane: ClusterInfo,
    admin_client: AdminClient,
    stuck_pod: tuple[str, str, str],
    tmp_path: Path,
) -> None:
    profile, ns, node = stuck_pod
    sched = start_scheduler(
        scheduler_config(profile),
        tmp_path,
        kubeconfig=control_plane.kubeconfig,
        extra_args=["--debug-queue"],
    )
    try:
        sched.wait_ready()
        create_pod(admin_client, pod_manifest("big", ns, profile, cpu="64"))

        def mine() -> list[dict[str, Any]]:
            code, body = sched.get("/debug/queue")
            assert code == 200, body
            return [p for p in json.loads(body)["pods"] if p["namespace"] == ns]

        (entry,) = eventually(
            mine,
            lambda pods: bool(pods) and pods[0].get("attempts", 0) >= 1,
            timeout=30,
            what="the pod tried once",
            watch=sched,
        )
        assert entry["queue"] in ("unschedulable", "backoff"), entry
        assert entry["unschedulablePlugins"] == ["NodeResourcesFit"]

        port = free_port()
        argv = [
            *kubesched_argv(),
            "ui",
            "--from-cluster",
            "--kubeconfig",
            str(control_plane.kubeconfig),
            "--config",
            str(tmp_path / "kubesched.yaml"),  # the scheduler's, written by start_scheduler
            "--scheduler",
            sched.url,
            "--port",
            str(port),
        ]
        with ui_process(argv, port, tmp_path / "ui.log") as url, browser() as b:
            page, errors = open_page(b, url)
            row = page.wait_for_selector(f'#queue li[data-queued="{ns}/big"]', timeout=15_000)
            assert row is not None
            assert "NodeResourcesFit" in row.inner_text()
            # The same pod, read from the cluster: its explain row on our node.
            page.click(f'li[data-pod="{ns}/big"]')
            page.wait_for_selector(f'#explain tbody tr[data-node="{node}"]')
            cells = page.locator(f'#explain tbody tr[data-node="{node}"] td').all_inner_texts()
            assert cells[2:4] == ["NodeResourcesFit", "Insufficient cpu"]
            page.wait_for_selector("#why .ways")
            page.screenshot(path=str(artifacts_dir() / "queue.png"), full_page=True)
            assert errors == []
    finally:
        sched.stop()
