"""The test registries as Go tools: what hack/registry pins, where they are cached, how checked."""

from __future__ import annotations

from kubesched.cluster import DISTRIBUTION_REGISTRY, OCISERVER, REGISTRIES
from kubesched.cluster._gotools import pinned
from kubesched.cluster._paths import gomod_dir


def test_distribution_is_pinned_at_v3_1_2() -> None:
    pin = pinned(DISTRIBUTION_REGISTRY)
    assert pin.version == "v3.1.2"
    assert pin.module_dir == gomod_dir(name="registry")
    assert pin.path.parent.name == "distribution-v3.1.2"
    assert pin.path.name == "registry"
    assert pin.expected == (["--version"], "github.com/distribution/distribution/v3 v3.1.2")


def test_ociserver_is_pinned_by_hack_registry() -> None:
    pin = pinned(OCISERVER)
    gomod = (gomod_dir(name="registry") / "go.mod").read_text()
    assert f"\t{OCISERVER.module} {pin.version}" in gomod
    assert pin.path.parent.name == f"ociregistry-{pin.version}"
    assert pin.expected == (["-version"], f"ociserver {OCISERVER.module} {pin.version}")


def test_each_main_package_exists() -> None:
    module = gomod_dir(name="registry")
    for tool in REGISTRIES:
        assert (module / tool.package / "main.go").is_file()
