"""``kubesched kubectl`` before the binaries are built, and the commands ``make demo`` prints."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kubesched.cli import _as_invoked, main


def test_kubectl_not_built_yet_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBESCHED_CACHE_DIR", str(tmp_path / "empty"))
    result = CliRunner().invoke(main, ["kubectl", "get", "pods"])
    assert result.exit_code == 1
    assert "kubectl is not built yet: `kubesched cluster binaries`" in result.stderr


def test_demo_prints_commands_as_they_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "venv" / "bin" / "kubesched"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", ["venv/bin/kubesched", "demo"])
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert _as_invoked() == "venv/bin/kubesched"  # not on PATH: the path make demo used
    monkeypatch.setenv("PATH", f"{script.parent}:/usr/bin:/bin")
    assert _as_invoked() == "kubesched"  # on PATH: as the README writes it
