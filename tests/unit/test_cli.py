"""The ``kubesched`` command group itself."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import kubesched
from kubesched import KubeschedError, simulate
from kubesched.cli import main
from kubesched.kube import APIError, KubeConfigError


def test_every_package_error_has_the_one_root() -> None:
    from kubesched.bench import BenchError
    from kubesched.cluster import ClusterError
    from kubesched.config import ConfigError
    from kubesched.extender import ExtenderError
    from kubesched.framework import FrameworkError

    for error in (
        APIError,
        KubeConfigError,
        BenchError,
        ClusterError,
        ConfigError,
        ExtenderError,
        FrameworkError,
        simulate.SimulateError,
    ):
        assert issubclass(error, kubesched.KubeschedError), error


def test_an_error_no_command_handles_ends_with_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: object, **kwargs: object) -> int:
        raise APIError(500, "InternalError", "etcd is unhappy")

    monkeypatch.setattr(simulate, "run_why", failing)
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n")
    result = CliRunner().invoke(main, ["why", "p", "-f", str(manifest)])
    assert result.exit_code == 1
    assert "Error: 500 InternalError: etcd is unhappy" in result.output
    # Ended by click's message, not by the error itself.
    assert isinstance(result.exception, SystemExit)


def test_other_exceptions_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kwargs: object) -> int:
        raise RuntimeError("a bug")

    monkeypatch.setattr(simulate, "run_why", failing)
    result = CliRunner().invoke(main, ["why", "p", "-f", "/dev/null"])
    assert isinstance(result.exception, RuntimeError)
    assert not isinstance(result.exception, KubeschedError)


def test_debug_logging_is_about_kubesched_other_libraries_stay_at_info() -> None:
    # A fresh interpreter: logging is configured once per process.
    import subprocess
    import sys

    probe = (
        "import logging; from kubesched.cli import _setup_logging; _setup_logging('debug'); "
        "print(logging.getLogger('kubesched.scheduler').isEnabledFor(logging.DEBUG), "
        "logging.getLogger('celpy').isEnabledFor(logging.DEBUG), "
        "logging.getLogger('celpy').isEnabledFor(logging.INFO))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "True"]
