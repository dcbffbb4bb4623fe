"""Real OCI registries on 127.0.0.1 for the image-compatibility end-to-end tests (tests/oci.py).

* ``oci_registry``: distribution v3 without auth and without the Referrers API (artifacts are
  found through the referrers tag schema);
* ``oci_auth_registry``: distribution v3 behind htpasswd Basic auth; its ``username`` and
  ``password`` are set, ``dockerconfigjson_secret()`` gives a matching image pull secret;
* ``oci_referrers_registry``: cuelabs' ociserver, with the Referrers API.

Each is started once per session (a missing binary fails the test with what to run) and
stopped at the end. Tests keep apart by pushing to repositories of their own (``unique_repo``).

``nfd_master`` (from tests/e2e/nfd.py): NFD's CRDs and a real nfd-master for the session.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Iterator

import pytest

from e2e.nfd import nfd_master_fixture  # noqa: F401 (the nfd_master fixture)
from oci import Registry, start_distribution, start_ociserver


def _until_done(registry: Registry) -> Iterator[Registry]:
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="session")
def oci_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    yield from _until_done(start_distribution(tmp_path_factory.mktemp("distribution")))


@pytest.fixture(scope="session")
def oci_auth_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    auth = ("kubesched", secrets.token_urlsafe(12))
    workdir = tmp_path_factory.mktemp("distribution-auth")
    yield from _until_done(start_distribution(workdir, auth=auth))


@pytest.fixture(scope="session")
def oci_referrers_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    yield from _until_done(start_ociserver(tmp_path_factory.mktemp("ociserver")))


@pytest.fixture
def unique_repo() -> str:
    """A repository name no other test pushes to."""
    return f"test/app-{uuid.uuid4().hex[:8]}"
