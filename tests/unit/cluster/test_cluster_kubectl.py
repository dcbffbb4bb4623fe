"""``kubesched kubectl`` before the binaries are built: a clear error, not a crash."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kubesched.cli import main


def test_kubectl_not_built_yet_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBESCHED_CACHE_DIR", str(tmp_path / "empty"))
    result = CliRunner().invoke(main, ["kubectl", "get", "pods"])
    assert result.exit_code == 1
    assert "kubectl is not built yet: `kubesched cluster binaries`" in result.stderr
