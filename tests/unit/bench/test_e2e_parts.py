"""bench e2e's runs as parts of their own: one failing keeps the others' figures, on control
planes of their own; the command still writes its report, and exits non-zero.

The control plane and the measurement are faked here (tests/e2e/bench runs the real ones)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from click.testing import CliRunner

from bench_results import e2e_result
from builders import make_pod
from kubesched import cluster
from kubesched.api import PodCondition
from kubesched.bench import BenchError, E2EFailure, E2EResult, run_e2e, workload
from kubesched.bench import _e2e as e2e
from kubesched.bench._retry import APIUnavailableError
from kubesched.cli import main
from kubesched.kube import APIConnectionError

if TYPE_CHECKING:
    from kubesched.kube import APIClient


class FakeControlPlanes:
    """``cluster.up``/``down`` and the measurement, with a failure per scheduler on demand."""

    def __init__(self, fail: dict[str, BaseException], up_fails: set[str] = frozenset()) -> None:
        self.fail = fail
        self.up_fails = up_fails
        self.log: list[str] = []

    def up(self, name: str, **_: Any) -> None:
        self.log.append(f"up {name}")
        if any(name.startswith(f"bench-{which}-") for which in self.up_fails):
            raise cluster.ClusterStartError("kube-apiserver did not become ready in 60 s")

    def down(self, name: str, **_: Any) -> bool:
        self.log.append(f"down {name}")
        return True

    async def measure(self, which: str, shape: Any, *, cluster: str, **_: Any) -> E2EResult:
        self.log.append(f"measure {which} on {cluster}")
        if which in self.fail:
            raise self.fail[which]
        return e2e_result(which)


@pytest.fixture
def planes(monkeypatch: pytest.MonkeyPatch) -> FakeControlPlanes:
    fake = FakeControlPlanes({})
    monkeypatch.setattr(cluster, "up", fake.up)
    monkeypatch.setattr(cluster, "down", fake.down)
    monkeypatch.setattr(e2e, "_measure", fake.measure)
    return fake


def test_a_failed_run_keeps_the_others_figures(planes: FakeControlPlanes) -> None:
    stalled = APIUnavailableError("counting the Scheduled events", 60.0)
    planes.fail = {"kube-scheduler": stalled}
    parts = run_e2e(["kubesched", "kube-scheduler", "binder"], workload("small"))
    kubesched, failed, binder = parts
    assert isinstance(kubesched, E2EResult)
    assert kubesched.scheduler == "kubesched"
    assert isinstance(binder, E2EResult)
    assert binder.scheduler == "binder"
    assert failed == E2EFailure(
        scheduler="kube-scheduler",
        workload="small",
        arrival="rate",
        nodes=100,
        init_pods=100,
        measured_pods=500,
        error="the API server did not answer for 60 s while counting the Scheduled events",
    )


def test_a_run_failing_once_its_scheduler_runs_reports_what_was_known_then(
    planes: FakeControlPlanes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pods bound so far and the scheduler's peak RSS, read before its control plane stops:
    memory side by side even when a run broke down."""

    async def measure(which: str, shape: Any, *, running: Any, **_: Any) -> E2EResult:
        running.pid = os.getpid()  # this process stands for the scheduler
        running.times = e2e._PodTimes()
        running.measured = ["pod-00000", "pod-00001", "pod-00002"]
        running.times.bound.update({"pod-00000": 1.0, "pod-00002": 2.0})
        raise APIUnavailableError("waiting for the measured pods to be bound", 60.0)

    monkeypatch.setattr(e2e, "_measure", measure)
    [failed] = run_e2e(["kube-scheduler"], workload("small"))
    assert isinstance(failed, E2EFailure)
    assert failed.pods_bound == 2
    assert failed.peak_rss_bytes is not None
    assert failed.peak_rss_bytes > 10_000_000
    done = CliRunner().invoke(
        main, ["bench", "e2e", "--workload=small", "--scheduler=kube-scheduler", "--no-ceiling"]
    )
    assert done.exit_code == 1, done.output
    [line] = [x for x in done.stdout.splitlines() if "failed:" in x]
    assert line.startswith(
        "kube-scheduler failed: the API server did not answer for 60 s while waiting for the "
        "measured pods to be bound (2 of 500 measured pods bound, peak RSS "
    )


def test_each_run_has_a_control_plane_of_its_own_torn_down_after_a_failure(
    planes: FakeControlPlanes,
) -> None:
    planes.fail = {"kubesched": APIUnavailableError("creating 100 nodes", 60.0)}
    run_e2e(["kubesched", "kube-scheduler"], workload("small"))
    names = [entry.split()[-1] for entry in planes.log if entry.startswith("up ")]
    assert len(set(names)) == 2
    first, second = names
    assert planes.log == [
        f"up {first}",
        f"measure kubesched on {first}",
        f"down {first}",
        f"up {second}",
        f"measure kube-scheduler on {second}",
        f"down {second}",
    ]


def test_a_control_plane_that_does_not_start_fails_its_run_only(
    planes: FakeControlPlanes,
) -> None:
    planes.up_fails = {"kubesched"}
    failed, ok = run_e2e(["kubesched", "binder"], workload("small"))
    assert isinstance(failed, E2EFailure)
    assert failed.error == (
        "starting the control plane: kube-apiserver did not become ready in 60 s"
    )
    assert isinstance(ok, E2EResult)


def test_an_unexpected_error_is_a_failure_with_its_type_and_traceback(
    planes: FakeControlPlanes,
) -> None:
    planes.fail = {"binder": KeyError("spec")}
    notes: list[str] = []

    class Notes:
        def note(self, message: str) -> None:
            notes.append(message)

        def bar(self, label: str, total: int) -> Any:
            raise AssertionError("no bars here")

    ok, failed = run_e2e(["kubesched", "binder"], workload("small"), progress=Notes())
    assert isinstance(ok, E2EResult)
    assert isinstance(failed, E2EFailure)
    assert failed.error == "KeyError: 'spec'"
    assert any(n.startswith("Traceback") and "KeyError" in n for n in notes)
    assert "[binder] failed: KeyError: 'spec'" in notes


def test_an_unknown_scheduler_is_bad_input_not_a_failed_run(planes: FakeControlPlanes) -> None:
    with pytest.raises(ValueError, match="unknown scheduler 'kube'"):
        run_e2e(["kubesched", "kube"], workload("small"))
    assert planes.log == []


def test_the_command_writes_every_finished_run_and_exits_1(planes: FakeControlPlanes) -> None:
    planes.fail = {
        "kube-scheduler": APIUnavailableError(
            "waiting for the measured pods to be bound", 60.0, "429 TooManyRequests"
        )
    }
    done = CliRunner().invoke(
        main, ["bench", "e2e", "--workload=small", "--scheduler=both", "-o", "json"]
    )
    assert done.exit_code == 1, done.output
    document = json.loads(done.stdout)
    assert [r["scheduler"] for r in document["results"]] == ["kubesched", "binder"]
    assert document["results"][0]["throughput_pods_per_s"] == 100.0
    [failure] = document["failures"]
    assert failure["scheduler"] == "kube-scheduler"
    assert failure["error"] == (
        "the API server refused or did not answer for 60 s while waiting for the measured "
        "pods to be bound (last: 429 TooManyRequests)"
    )
    assert "throughput_pods_per_s" not in failure
    [comparison] = document["comparisons"]
    assert comparison["failed"] == ["kube-scheduler"]
    assert comparison["of_ceiling"] == {"kubesched": 1.0}
    assert "kube-scheduler failed: the API server refused" in done.stderr


def test_the_table_gives_the_failure_beside_the_figures(planes: FakeControlPlanes) -> None:
    planes.fail = {"kubesched": APIUnavailableError("creating 500 pods", 60.0)}
    done = CliRunner().invoke(main, ["bench", "e2e", "--workload=small", "--no-ceiling"])
    assert done.exit_code == 1, done.output
    lines = done.stdout.splitlines()
    assert lines[1].split() == ["kube-scheduler"]
    assert (
        "kubesched failed: the API server did not answer for 60 s while creating 500 pods" in lines
    )
    # The summary's kubesched column says the run failed rather than giving no figure.
    assert lines[-1].split()[:4] == ["small", "rate", "failed", "100.0"]


def test_all_runs_finishing_exits_0(planes: FakeControlPlanes) -> None:
    done = CliRunner().invoke(main, ["bench", "e2e", "--workload=small", "-o", "json"])
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert document["failures"] == []
    assert len(document["results"]) == 3


class Answering:
    """The API client's ``get``: answers, or raises what it is given."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.paths: list[str] = []

    async def get(self, path: str) -> bytes:
        self.paths.append(path)
        if self.failure is not None:
            raise self.failure
        return b"{}"


def _statuses(running: bool) -> list[cluster.ClusterStatus]:
    component = cluster.ProcessStatus("kube-scheduler", 42, running, Path("/x/kube-scheduler.log"))
    return [
        cluster.ClusterStatus(
            name="bench-kube-scheduler-1",
            state="running",
            state_dir=Path("/x"),
            kubeconfig=None,
            server="",
            apiserver_port=0,
            etcd_client_port=0,
            version="",
            processes=(),
            components=(component,),
        )
    ]


def _explain(client: Answering, within: float = 0.3) -> None:
    asyncio.run(
        e2e._explain_stall(
            cast("APIClient", client),
            cluster="bench-kube-scheduler-1",
            which="kube-scheduler",
            what="waiting for the measured pods to be bound",
            within=within,
        )
    )


def test_a_quiet_wait_with_the_scheduler_gone_fails_naming_its_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "status", lambda: _statuses(running=False))
    with pytest.raises(BenchError) as failed:
        _explain(Answering())
    assert str(failed.value) == (
        "kube-scheduler exited while waiting for the measured pods to be bound "
        "(its log: /x/kube-scheduler.log)"
    )


def test_a_quiet_wait_with_the_api_server_not_answering_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "status", lambda: _statuses(running=True))
    client = Answering(APIConnectionError("GET /api/v1/namespaces/bench: connection refused"))
    with pytest.raises(APIUnavailableError, match="while waiting for the measured pods"):
        _explain(client)
    assert client.paths[0] == "/api/v1/namespaces/bench"


def test_a_quiet_wait_with_both_alive_is_the_schedulers_own_stall(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cluster, "status", lambda: _statuses(running=True))
    client = Answering()
    _explain(client)
    assert client.paths == ["/api/v1/namespaces/bench"]


def test_a_pod_left_unbound_is_reported_with_what_the_scheduler_last_said() -> None:
    waiting = make_pod("measured-1")
    waiting.status.conditions = [
        PodCondition(type="PodScheduled", status="False", reason="Unschedulable", message="0/5")
    ]
    waiting.status.nominated_node_name = "n2"
    assert e2e._unbound(waiting) == (
        "pod measured-1 left unbound (Unschedulable: 0/5; nominated to n2)"
    )
    assert e2e._unbound(make_pod("measured-2")) == (
        "pod measured-2 left unbound (no PodScheduled condition)"
    )
