"""The control plane and kube-scheduler listen on 127.0.0.1 only: etcd's client and peer ports,
kube-apiserver's secure port, kube-scheduler's secure port, and nothing besides."""

from __future__ import annotations

from e2e.listeners import listeners, process_tree
from kubesched import cluster
from kubesched.cluster import ClusterInfo

_NAME = "kube-scheduler-listeners"


def test_control_plane_and_kube_scheduler_listen_on_loopback_only(
    control_plane: ClusterInfo,
) -> None:
    scheduler = cluster.start_kube_scheduler(cluster=control_plane.name, name=_NAME)
    try:
        [status] = [s for s in cluster.status() if s.name == control_plane.name]
        found = listeners(process_tree([*(p.pid for p in status.processes), scheduler.pid]))
    finally:
        cluster.stop_component(_NAME, cluster=control_plane.name)

    commands = sorted(f.command for f in found)
    # Two ports of etcd (client, peer), one of each of the others: a new one is a new server.
    assert commands == ["etcd", "etcd", "kube-apiserver", "kube-scheduler"], [str(f) for f in found]
    assert all(f.address == "127.0.0.1" for f in found), [str(f) for f in found]
