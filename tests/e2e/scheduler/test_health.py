"""The health listener of ``kubesched run``: probes, metrics, and the address it binds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from sched_e2e import Runner, scheduler_config, start_scheduler

from e2e.listeners import listeners, process_tree
from kubesched.cluster import ClusterInfo

if TYPE_CHECKING:
    from sched_e2e import StartScheduler


def test_probes_and_metrics_over_plain_http(kubesched: StartScheduler, profile: str) -> None:
    sched = kubesched(scheduler_config(profile))

    assert sched.get("/healthz") == (200, "ok")
    assert sched.get("/livez") == (200, "ok")
    assert sched.get("/readyz") == (200, "ok")
    assert sched.get("/nothing-here")[0] == 404
    assert sched.get("/debug/queue")[0] == 404  # only with --debug-queue
    code, body = sched.get("/metrics")
    assert code == 200
    # kube-scheduler's metric names, and the profile label.
    assert "# TYPE scheduler_schedule_attempts_total counter" in body
    assert "# TYPE scheduler_pending_pods gauge" in body
    assert sched.metric("scheduler_pending_pods", queue="active") == 0
    # Informer changes the scheduler failed to take in, per resource: none.
    assert sched.metric("kubesched_informer_handler_errors_total", resource="/api/v1/pods") == 0
    # Without --bind-address: its one listener, on 127.0.0.1 only.
    found = listeners(process_tree([sched.pid]))
    assert [(f.address, f.port) for f in found] == [("127.0.0.1", sched.port)], found


def test_leader_and_standby_are_both_live_and_ready(
    kubesched: StartScheduler, profile: str, namespace: str
) -> None:
    """With leader election on, the standby is ready too (synced), so a rollout proceeds."""
    config = scheduler_config(profile, leader_elect=True, lease_namespace=namespace)
    leader = kubesched(config, name="leader", identity="leader")
    standby = kubesched(config, name="standby", identity="standby")

    assert leader.get("/healthz") == (200, "ok")
    assert standby.get("/healthz") == (200, "ok")
    assert standby.get("/readyz") == (200, "ok")


def test_bind_address_is_where_the_health_listener_listens(
    control_plane: ClusterInfo, tmp_path: Path, profile: str
) -> None:
    runner = Runner(tmp_path, control_plane.kubeconfig)
    proc = start_scheduler(
        scheduler_config(profile),
        tmp_path,
        kubeconfig=control_plane.kubeconfig,
        extra_args=["--bind-address=127.0.0.2"],
    )
    runner.started.append(proc)
    try:
        answers: dict[str, int | str] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not any(v == 200 for v in answers.values()):
            for host in ("127.0.0.2", "127.0.0.1"):
                try:
                    answers[host] = proc.get("/healthz", timeout=1, host=host)[0]
                except OSError as err:
                    answers[host] = type(err).__name__
            time.sleep(0.2)
        assert answers["127.0.0.2"] == 200, answers
        assert answers["127.0.0.1"] != 200, answers
    finally:
        runner.close()
