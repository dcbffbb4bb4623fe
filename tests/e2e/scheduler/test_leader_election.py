"""Two replicas, one Lease: only the leader binds; when it dies the other takes over.

Short lease durations keep the test quick: the standby may take the lease 6 s after the
leader's last renewal.
"""

from __future__ import annotations

import re
import signal
from collections import Counter
from typing import TYPE_CHECKING

from sched_e2e import (
    bound,
    create_all,
    create_pod,
    eventually,
    list_events,
    list_pods,
    node_manifest,
    occurrences,
    pod_manifest,
    scheduler_config,
)

if TYPE_CHECKING:
    from sched_e2e import Client, MakeNodes, SchedulerProcess, StartScheduler

_BOUND = re.compile(r"Successfully bound pod to node pod=(\S+) node=(\S+)")


def _bound_by(proc: SchedulerProcess) -> Counter[str]:
    """Pods this replica says it bound, with how many times."""
    return Counter(m.group(1).split("/", 1)[1] for m in _BOUND.finditer(proc.log()))


def _holder(client: Client, namespace: str, name: str) -> tuple[str, int]:
    answer = client.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")
    if answer.status == 404:
        return "", 0
    spec = answer.expect(200).json()["spec"]
    return spec.get("holderIdentity") or "", int(spec.get("leaseTransitions") or 0)


def _binding_conflicts(proc: SchedulerProcess) -> list[str]:
    return [
        line
        for line in proc.log().splitlines()
        if "binding" in line and ("409" in line or "Conflict" in line)
    ]


def test_only_the_leader_binds_and_the_standby_takes_over(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    make_nodes([node_manifest(f"le-{i}", cpu="16", memory="32Gi") for i in range(5)])
    lease = f"lease-{profile}"
    config = scheduler_config(
        profile,
        leader_elect=True,
        lease_name=lease,
        lease_namespace=namespace,
        lease_duration="6s",
        renew_deadline="4s",
        retry_period="1s",
        # Slow enough that the leader is still binding the second batch when it is killed
        # (bindings and events have a limiter each, as in kube-scheduler).
        qps=10,
        burst=10,
    )
    a = kubesched(config, name="replica-a", identity="replica-a")
    eventually(
        lambda: _holder(admin_client, namespace, lease),
        lambda h: h[0] == "replica-a",
        timeout=30,
        what="replica-a to hold the lease",
        watch=a,
    )
    b = kubesched(config, name="replica-b", identity="replica-b")

    # Phase 1: both run; only the leader binds.
    first = [pod_manifest(f"one-{i:02d}", namespace, profile, cpu="100m") for i in range(40)]
    create_all(admin_client, create_pod, first)
    eventually(
        lambda: list_pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == len(first),
        timeout=60,
        what="the first pods bound",
        watch=[a, b],
    )
    eventually(
        lambda: sum(
            occurrences(e)
            for e in list_events(admin_client, namespace)
            if e["reason"] == "Scheduled"
        ),
        lambda n: n == len(first),
        timeout=30,
        what="a Scheduled event for each",
    )
    assert _bound_by(a) == Counter({p["metadata"]["name"]: 1 for p in first})
    assert _bound_by(b) == Counter()
    assert (
        b.metric("scheduler_schedule_attempts_total", profile=profile, result="scheduled") is None
    )
    assert _holder(admin_client, namespace, lease)[0] == "replica-a"

    # Phase 2: the leader dies (SIGKILL: no release of the lease) while it is binding.
    second = [pod_manifest(f"two-{i:03d}", namespace, profile, cpu="100m") for i in range(120)]
    create_all(admin_client, create_pod, second)
    eventually(
        lambda: list_pods(admin_client, namespace),
        lambda ps: len(bound(ps)) >= len(first) + 5,
        timeout=60,
        interval=0.05,
        what="the leader to start on the second batch",
        watch=[a, b],
    )
    a.kill()
    _, transitions = _holder(admin_client, namespace, lease)

    holder = eventually(
        lambda: _holder(admin_client, namespace, lease),
        lambda h: h[0] == "replica-b",
        timeout=30,
        what="replica-b to take the lease over",
        watch=b,
    )
    final = eventually(
        lambda: list_pods(admin_client, namespace),
        lambda ps: len(bound(ps)) == len(first) + len(second),
        timeout=90,
        interval=0.5,
        what="every pod bound after the takeover",
        watch=b,
    )

    assert holder[1] == transitions + 1
    by_a, by_b = _bound_by(a), _bound_by(b)
    # Each replica bound each pod at most once, and no pod was bound by both.
    assert max([*by_a.values(), *by_b.values()]) == 1
    assert set(by_a) & set(by_b) == set()
    assert len(by_a) < len(first) + len(second), "the standby must have had pods to bind"
    assert set(by_b) <= {p["metadata"]["name"] for p in second}
    assert len(final) == len(first) + len(second)

    # One Scheduled event at most per pod (the leader may die between a binding and its event).
    def scheduled_events() -> Counter[str]:
        counts: Counter[str] = Counter()
        for event in list_events(admin_client, namespace):
            if event["reason"] == "Scheduled":
                counts[event["regarding"]["name"]] += occurrences(event)
        return counts

    scheduled = eventually(
        scheduled_events,
        lambda c: set(by_b) <= set(c),
        timeout=30,
        what="the new leader's Scheduled events",
    )
    assert max(scheduled.values()) == 1
    assert _binding_conflicts(a) == []
    assert _binding_conflicts(b) == []
    assert b.alive()


def test_a_leader_that_could_not_renew_stops_and_exits_1(
    admin_client: Client,
    kubesched: StartScheduler,
    make_nodes: MakeNodes,
    namespace: str,
    profile: str,
) -> None:
    """A frozen leader (a long GC pause, a stopped VM) wakes up to find the lease taken."""
    make_nodes([node_manifest(f"le-{i}", cpu="16", memory="32Gi") for i in range(2)])
    lease = f"lease-{profile}"
    config = scheduler_config(
        profile,
        leader_elect=True,
        lease_name=lease,
        lease_namespace=namespace,
        lease_duration="6s",
        renew_deadline="4s",
        retry_period="1s",
    )
    a = kubesched(config, name="replica-a", identity="replica-a")
    eventually(
        lambda: _holder(admin_client, namespace, lease),
        lambda h: h[0] == "replica-a",
        timeout=30,
        what="replica-a to hold the lease",
        watch=a,
    )
    b = kubesched(config, name="replica-b", identity="replica-b")

    a.popen.send_signal(signal.SIGSTOP)
    try:
        eventually(
            lambda: _holder(admin_client, namespace, lease),
            lambda h: h[0] == "replica-b",
            timeout=30,
            what="replica-b to take the lease over",
            watch=b,
        )
        pods = [pod_manifest(f"p-{i:02d}", namespace, profile, cpu="100m") for i in range(20)]
        create_all(admin_client, create_pod, pods)
        eventually(
            lambda: list_pods(admin_client, namespace),
            lambda ps: len(bound(ps)) == len(pods),
            timeout=60,
            what="the new leader to bind every pod",
            watch=b,
        )
    finally:
        a.popen.send_signal(signal.SIGCONT)

    # kube-scheduler's behaviour: leadership lost, exit 1 (and let the Deployment restart it).
    assert a.wait_exit(30) == 1
    assert "leaderelection lost" in a.log()
    assert _bound_by(a) == Counter()
    assert _bound_by(b) == Counter({p["metadata"]["name"]: 1 for p in pods})
    assert b.alive()
