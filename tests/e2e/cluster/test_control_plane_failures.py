"""Start-up failures: a crashing apiserver, a port taken between picking and binding."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator

import pytest

from kubesched import cluster
from kubesched.cluster import ClusterStartError, _controlplane
from kubesched.cluster._ports import free_ports

pytestmark = pytest.mark.e2e


@pytest.fixture
def name(request: pytest.FixtureRequest) -> Iterator[str]:
    """A cluster name of its own, removed after the test whatever happens."""
    cluster_name = f"e2e-{os.getpid()}-{request.node.name.removeprefix('test_')[:20]}"
    cluster_name = cluster_name.replace("_", "-")
    yield cluster_name
    cluster.down(cluster_name)


def test_a_crashing_apiserver_fails_up_with_its_log_and_leaves_no_process(name: str) -> None:
    with pytest.raises(ClusterStartError) as caught:
        cluster.up(name, apiserver_args=["--no-such-flag=1"])

    assert "kube-apiserver exited while starting" in str(caught.value)
    assert "unknown flag: --no-such-flag" in str(caught.value)
    [found] = [s for s in cluster.status() if s.name == name]
    assert found.state == "stopped"
    assert [p.name for p in found.processes] == ["etcd"]  # started, then stopped
    assert not any(p.running for p in found.processes)
    assert (found.state_dir / "logs" / "kube-apiserver.log").is_file()

    # The failed state is stale: the next `up` cleans it and starts afresh.
    info = cluster.up(name)
    assert not info.reused
    found_again = cluster.info(name)
    assert found_again is not None
    assert found_again.server == info.server


def test_a_port_taken_after_it_was_picked_is_retried_on_another(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        calls: list[int] = []

        def pick(count: int, host: str = "127.0.0.1") -> list[int]:
            calls.append(count)
            if count == 1 and calls.count(1) == 1:
                return [taken]  # the apiserver's first port: someone else has it by now
            return free_ports(count, host)

        monkeypatch.setattr(_controlplane, "free_ports", pick)
        lines: list[str] = []

        info = cluster.up(name, progress=lines.append)

    assert info.apiserver_port != taken
    assert calls == [2, 1, 1]
    assert any("retrying on other ports" in line for line in lines)
