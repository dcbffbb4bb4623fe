"""Node Feature Discovery in the test control plane: its CRDs, from NFD's own Go module.

``install_nfd_crds(admin_client)`` applies NFD's ``NodeFeature``, ``NodeFeatureGroup`` and
``NodeFeatureRule`` CRDs exactly as NFD ships them (``deployment/base/nfd-crds/nfd-api-crds.yaml``
in the module ``sigs.k8s.io/node-feature-discovery``) and waits until the apiserver serves them.
It uses server-side apply, so calling it again (another test module, a reused cluster) is a no-op.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from conftest import AdminClient

NFD_MODULE = "sigs.k8s.io/node-feature-discovery"
NFD_VERSION = "v0.19.0"
NFD_GROUP = "nfd.k8s-sigs.io"
NFD_API_VERSION = "v1alpha1"
#: The CRD manifest inside the module.
CRDS_PATH = "deployment/base/nfd-crds/nfd-api-crds.yaml"

_CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
_FIELD_MANAGER = "kubesched-e2e"
_ESTABLISH_TIMEOUT = 60.0


def nfd_module_dir(version: str = NFD_VERSION) -> Path:
    """The NFD module's source directory in the Go module cache (downloaded if missing)."""
    try:
        done = subprocess.run(
            ["go", "mod", "download", "-json", f"{NFD_MODULE}@{version}"],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(f"cannot run `go mod download {NFD_MODULE}@{version}`: {err}") from err
    try:
        info = json.loads(done.stdout)
    except json.JSONDecodeError:
        info = {}
    directory = info.get("Dir", "")
    if done.returncode != 0 or not directory:
        raise RuntimeError(
            f"`go mod download -json {NFD_MODULE}@{version}` failed "
            f"(exit {done.returncode}): {info.get('Error') or done.stderr.strip()}"
        )
    return Path(directory)


def nfd_crds(version: str = NFD_VERSION) -> list[dict[str, Any]]:
    """NFD's CustomResourceDefinition objects, parsed from the module's manifest."""
    path = nfd_module_dir(version) / CRDS_PATH
    documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    crds = [doc for doc in documents if doc.get("kind") == "CustomResourceDefinition"]
    if not crds:
        raise RuntimeError(f"{path} holds no CustomResourceDefinition")
    return crds


def _established(crd: dict[str, Any]) -> bool:
    conditions = crd.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_nfd_crds(admin_client: AdminClient, version: str = NFD_VERSION) -> None:
    """Apply NFD's CRDs and wait until each is Established and its resource is served."""
    crds = nfd_crds(version)
    for crd in crds:
        name = crd["metadata"]["name"]
        admin_client.request(
            "PATCH",
            f"{_CRDS}/{name}",
            crd,
            content_type="application/apply-patch+yaml",
            params={"fieldManager": _FIELD_MANAGER, "force": "true"},
        ).expect(200, 201)
    deadline = time.monotonic() + _ESTABLISH_TIMEOUT
    for crd in crds:
        name = crd["metadata"]["name"]
        group = crd["spec"]["group"]
        plural = crd["spec"]["names"]["plural"]
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        while True:
            current = admin_client.get(f"{_CRDS}/{name}")
            # Established says the CRD is accepted; a LIST proves the handler is in place too.
            if (
                current.status == 200
                and _established(current.json())
                and all(
                    admin_client.get(f"/apis/{group}/{v}/{plural}", limit="1").status == 200
                    for v in served
                )
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"CRD {name} not established and served after {_ESTABLISH_TIMEOUT:.0f}s: "
                    f"HTTP {current.status} {current.body[:500]!r}"
                )
            time.sleep(0.2)
