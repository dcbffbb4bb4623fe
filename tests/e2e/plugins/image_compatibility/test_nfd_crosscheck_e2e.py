"""NFD's own evaluation against kubesched's: the same rules, the same nodes, the same answer.

A real nfd-master, built from NFD's Go module, evaluates ``NodeFeatureGroup`` objects over
``NodeFeature`` objects in the test apiserver; the in-process engine must find the same nodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nfd import NFD_API_VERSION, NFD_GROUP, install_nfd_crds

if TYPE_CHECKING:
    from conftest import AdminClient


def test_nfd_crds_are_served_and_install_is_idempotent(admin_client: AdminClient) -> None:
    install_nfd_crds(admin_client)
    install_nfd_crds(admin_client)
    for plural in ("nodefeatures", "nodefeaturegroups", "nodefeaturerules"):
        admin_client.get(f"/apis/{NFD_GROUP}/{NFD_API_VERSION}/{plural}").expect(200)
