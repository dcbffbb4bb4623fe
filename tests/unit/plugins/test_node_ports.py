"""NodePorts: kube-scheduler's Filter and queueing-hint cases, sidecar ports (1.34), and the
vectorized Filter equal to the per-node one on random clusters."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import pytest

from builders import make_node, make_pod
from kubesched.api import Pod
from kubesched.framework import (
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Handle,
    Nodes,
    PodInfo,
    QueueingHint,
    Snapshot,
    Status,
    host_ports,
)
from kubesched.plugins.node_ports import NodePorts

PLUGIN = NodePorts(cast(Handle, None))
CONFLICT = Status(Code.UNSCHEDULABLE, "node(s) didn't have free ports for the requested pod ports")

Port = str  # "PROTO/IP/PORT", as upstream's test helper writes them


def ports_pod(
    *ports: Port, name: str = "p", sidecar: tuple[Port, ...] = (), init: tuple[Port, ...] = ()
) -> Pod:
    def to_json(p: Port) -> dict[str, Any]:
        proto, ip, port = p.split("/")
        return {"containerPort": int(port), "hostPort": int(port), "protocol": proto, "hostIP": ip}

    spec: dict[str, Any] = {
        "containers": [{"name": "c", "ports": [to_json(p) for p in ports]}],
        "initContainers": [
            *(
                [
                    {
                        "name": "sidecar",
                        "restartPolicy": "Always",
                        "ports": [to_json(p) for p in sidecar],
                    }
                ]
                if sidecar
                else []
            ),
            *([{"name": "init", "ports": [to_json(p) for p in init]}] if init else []),
        ],
    }
    return make_pod(name, spec=spec)


CASES = [
    pytest.param(ports_pod(), [], None, id="nothing running"),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8080"), [ports_pod("UDP/127.0.0.1/9090")], None, id="other port"
    ),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8080"),
        [ports_pod("UDP/127.0.0.1/8080")],
        CONFLICT,
        id="same udp port",
    ),
    pytest.param(
        ports_pod("TCP/127.0.0.1/8080"),
        [ports_pod("TCP/127.0.0.1/8080")],
        CONFLICT,
        id="same tcp port",
    ),
    pytest.param(
        ports_pod("TCP/127.0.0.1/8080"),
        [ports_pod("TCP/127.0.0.2/8080")],
        None,
        id="different host ip",
    ),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8080"),
        [ports_pod("TCP/127.0.0.1/8080")],
        None,
        id="different protocol",
    ),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
        [ports_pod("UDP/127.0.0.1/8080")],
        CONFLICT,
        id="second udp port conflict",
    ),
    pytest.param(
        ports_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        [ports_pod("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081")],
        CONFLICT,
        id="first tcp port conflict",
    ),
    pytest.param(
        ports_pod("TCP/0.0.0.0/8001"),
        [ports_pod("TCP/127.0.0.1/8001")],
        CONFLICT,
        id="first tcp port conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(
        ports_pod("TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        [ports_pod("TCP/127.0.0.1/8001")],
        CONFLICT,
        id="TCP hostPort conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(
        ports_pod("TCP/127.0.0.1/8001"),
        [ports_pod("TCP/0.0.0.0/8001")],
        CONFLICT,
        id="second tcp port conflict to 0.0.0.0 hostIP",
    ),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8001"),
        [ports_pod("TCP/0.0.0.0/8001")],
        None,
        id="second different protocol",
    ),
    pytest.param(
        ports_pod("UDP/127.0.0.1/8001"),
        [ports_pod("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001")],
        CONFLICT,
        id="UDP hostPort conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(
        ports_pod("TCP//8001"),
        [ports_pod("TCP/127.0.0.1/8001")],
        CONFLICT,
        id="empty hostIP means 0.0.0.0",
    ),
    pytest.param(
        ports_pod(sidecar=("TCP/127.0.0.1/8001",)),
        [ports_pod("TCP/127.0.0.1/8001")],
        CONFLICT,
        id="sidecar port of the incoming pod conflicts",
    ),
    pytest.param(
        ports_pod("TCP/127.0.0.1/8001"),
        [ports_pod(sidecar=("TCP/127.0.0.1/8001",))],
        CONFLICT,
        id="sidecar port of an existing pod conflicts",
    ),
    pytest.param(
        ports_pod(init=("TCP/127.0.0.1/8001",)),
        [ports_pod("TCP/127.0.0.1/8001")],
        None,
        id="a regular init container's port is not held",
    ),
]


@pytest.mark.parametrize(("pod", "existing", "want"), CASES)
def test_filter(pod: Pod, existing: list[Pod], want: Status | None) -> None:
    s = Snapshot()
    info = s.set_node(make_node("n"))
    for i, e in enumerate(existing):
        e.metadata.name = f"e{i}"
        s.add_pod(PodInfo.of(e), "n")
    nodes = Nodes(s, s.present_slots())
    state = CycleState()
    _, pf = PLUGIN.pre_filter(state, pod, nodes)
    if not host_ports(pod):
        assert pf == Status(Code.SKIP)
        return
    assert pf is None
    assert PLUGIN.filter(state, pod, info) == want
    verdict = PLUGIN.filter_nodes(state, pod, nodes)
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_filter_without_pre_filter_is_an_error() -> None:
    s = Snapshot()
    info = s.set_node(make_node("n"))
    want = Status(Code.ERROR, 'reading "PreFilterNodePorts" from cycleState: not found')
    assert PLUGIN.filter(CycleState(), ports_pod("TCP/1.2.3.4/80"), info) == want
    verdict = PLUGIN.filter_nodes(
        CycleState(), ports_pod("TCP/1.2.3.4/80"), Nodes(s, s.present_slots())
    )
    assert verdict.statuses[int(verdict.ids[0])] == want


def test_pod_host_ports_defaults() -> None:
    p = make_pod(
        "p",
        spec={
            "containers": [
                {
                    "name": "c",
                    "ports": [
                        {"containerPort": 80, "hostPort": 80, "protocol": ""},
                        {"containerPort": 81},
                    ],
                }
            ]
        },
    )
    assert host_ports(p) == (("0.0.0.0", "TCP", 80),)


PORTS = [
    f"{proto}/{ip}/{port}"
    for proto in ("TCP", "UDP")
    for ip in ("", "127.0.0.1", "10.0.0.1")
    for port in (80, 81)
]


def test_vectorized_matches_per_node_on_random_clusters() -> None:
    rng = random.Random(9)
    for _ in range(60):
        s = Snapshot()
        n = rng.randint(1, 25)
        for i in range(n):
            s.set_node(make_node(f"n{i}"))
        for j in range(rng.randint(0, 2 * n)):
            node = f"n{rng.randrange(n)}"
            existing = ports_pod(*rng.sample(PORTS, k=rng.randint(0, 2)), name=f"e{j}")
            s.add_pod(PodInfo.of(existing), node)
        for i in rng.sample(range(n), k=n // 5):
            s.remove_node(f"n{i}")
        pod = ports_pod(*rng.sample(PORTS, k=rng.randint(1, 3)))
        nodes = Nodes(s, s.present_slots())
        sub = Nodes(
            s, np.array(rng.sample(nodes.slots.tolist(), k=len(nodes) // 2), dtype=np.int64)
        )
        state = CycleState()
        PLUGIN.pre_filter(state, pod, nodes)
        for group in (nodes, sub):
            verdict = PLUGIN.filter_nodes(state, pod, group)
            per_node = [PLUGIN.filter(state, pod, info) for info in group.infos()]
            assert [verdict.statuses[int(k)] for k in verdict.ids] == per_node


def test_events_to_register() -> None:
    events = PLUGIN.events_to_register()
    assert [e.event for e in events] == [
        ClusterEvent("Pod", ActionType.DELETE),
        ClusterEvent("Node", ActionType.ADD),
    ]
    assert events[0].hint is not None
    assert events[1].hint is None


def scheduled(p: Pod, node: str = "", nominated: str = "") -> Pod:
    p.spec.node_name = node
    p.status.nominated_node_name = nominated
    return p


@pytest.mark.parametrize(
    ("deleted", "want"),
    [
        pytest.param("not-a-pod", QueueingHint.QUEUE, id="backoff-wrong-old-object"),
        pytest.param(
            scheduled(ports_pod("TCP/127.0.0.1/8080")),
            QueueingHint.SKIP,
            id="skip-queue-on-unscheduled",
        ),
        pytest.param(
            scheduled(ports_pod(), node="n"), QueueingHint.SKIP, id="skip-queue-on-non-hostport"
        ),
        pytest.param(
            scheduled(ports_pod("TCP/127.0.0.1/8081"), node="n"),
            QueueingHint.SKIP,
            id="skip-queue-on-unrelated-hostport",
        ),
        pytest.param(
            scheduled(ports_pod("TCP/127.0.0.1/8080"), node="n"),
            QueueingHint.QUEUE,
            id="queue-on-released-hostport",
        ),
        pytest.param(
            scheduled(ports_pod("TCP/127.0.0.1/8080"), nominated="n"),
            QueueingHint.QUEUE,
            id="queue-on-released-hostport-of-nominated-pod",
        ),
        pytest.param(
            scheduled(ports_pod(sidecar=("TCP/0.0.0.0/8080",)), node="n"),
            QueueingHint.QUEUE,
            id="queue-on-released-sidecar-hostport",
        ),
    ],
)
def test_pod_deleted_hint(deleted: Any, want: QueueingHint) -> None:
    target = ports_pod("TCP/127.0.0.1/8080")
    assert PLUGIN.is_schedulable_after_pod_deleted(target, deleted, None) is want
