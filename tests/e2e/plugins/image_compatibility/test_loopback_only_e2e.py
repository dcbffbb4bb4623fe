"""The servers of the image-compatibility tests listen where only this machine reaches them.

The OCI registries bind 127.0.0.1; nfd-master, which takes no address, runs in a network
namespace with only a loopback interface, its port published on the host's 127.0.0.1.
"""

from __future__ import annotations

import os

from e2e.listeners import listeners, process_tree, reachable_from_outside
from e2e.nfd import NfdMaster
from kubesched import cluster
from kubesched.cluster import ClusterInfo
from oci import Registry


def test_registries_and_nfd_master_listen_on_loopback_only(
    control_plane: ClusterInfo,
    nfd_master: NfdMaster,
    oci_registry: Registry,
    oci_auth_registry: Registry,
    oci_referrers_registry: Registry,
) -> None:
    [status] = [s for s in cluster.status() if s.name == control_plane.name]
    [component] = [c for c in status.components if c.name == "nfd-master"]
    # The registries are our children; nfd-master and its forwarders, the component's tree.
    found = listeners(process_tree([os.getpid(), component.pid]))
    nfd = [f for f in found if f.command == "nfd-master"]

    assert nfd, f"nfd-master listens nowhere: {[str(f) for f in found]}"
    assert all(f.isolated for f in nfd), [str(f) for f in nfd]
    assert {"registry", "ociserver"} <= {f.command for f in found}, [str(f) for f in found]
    assert reachable_from_outside(found) == []
