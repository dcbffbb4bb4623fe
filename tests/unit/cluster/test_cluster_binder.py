"""The benchmarks' binder as a Go tool: client-go at the control plane's version line, and its
own sources in the version, so that an edit builds it again."""

from __future__ import annotations

import shutil
from pathlib import Path

from kubesched.cluster import BINDER
from kubesched.cluster._gomod import read_modules
from kubesched.cluster._gotools import pinned, sources_digest
from kubesched.cluster._paths import gomod_dir


def test_client_go_is_the_control_planes_version_line() -> None:
    pin = pinned(BINDER)
    kubernetes = read_modules(gomod_dir()).kubernetes_version  # "v1.34.4"
    client_go, digest = pin.version.split("+")
    assert client_go == "v0" + kubernetes.removeprefix("v1")
    assert digest == sources_digest(gomod_dir(name="binder"))
    assert pin.path.parent.name == f"binder-{pin.version}"
    assert pin.path.name == "binder"
    assert pin.expected == (["-version"], f"binder k8s.io/client-go {pin.version}")
    assert (pin.module_dir / "main.go").is_file()


def test_the_digest_follows_the_sources(tmp_path: Path) -> None:
    module = tmp_path / "binder"
    shutil.copytree(gomod_dir(name="binder"), module)
    before = sources_digest(module)
    assert len(before) == 12
    (module / "README").write_text("not a source\n")
    assert sources_digest(module) == before
    main = module / "main.go"
    main.write_text(main.read_text() + "\n// an edit\n")
    assert sources_digest(module) != before
