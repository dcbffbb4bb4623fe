"""``kubesched why``: read the cluster (or manifests), report on one pending pod; the exit code.

Exit codes as ``kubesched simulate``'s: 0 when the report was made, whatever it says; 1 when it
could not be (the pod is not there or not pending, the cluster cannot be read, a bad
configuration).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from kubesched.config import ConfigError, KubeSchedulerConfiguration
from kubesched.framework import FrameworkError, Registry
from kubesched.simulate._command import load
from kubesched.simulate._errors import SimulateError
from kubesched.simulate._profiles import profiles_for
from kubesched.simulate._why import WhyError, only_pod, why
from kubesched.simulate._why_output import render_why_json, render_why_table


def run_why(
    namespace: str,
    name: str,
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    files: Sequence[str] = (),
    from_cluster: bool = False,
    kubeconfig: str | None = None,
    output: str = "table",
    closest: int = 5,
    any_scheduler_name: bool = False,
    out: Callable[[str], None] | None = None,
    err: TextIO | None = None,
) -> int:
    """The whole command; raises :class:`SimulateError` when no report can be made. Without
    ``files`` the live cluster is read; with them, the cluster too only with ``from_cluster``.
    With ``any_scheduler_name``, ``config``'s first profile judges the pod whatever its
    schedulerName (the default profile when no configuration was given)."""
    err = err or sys.stderr
    write = out or sys.stdout.write
    inputs = load(
        files,
        from_cluster=from_cluster or not files,
        kubeconfig=kubeconfig,
        registry=registry,
        config=config,
    )
    for issue in inputs.issues:
        err.write(f"{issue}\n")
    try:
        one = only_pod(inputs, namespace, name)
        if any_scheduler_name:
            config = profiles_for(config, [one.pending[0].spec.scheduler_name])
        report = asyncio.run(why(one, config, registry, closest=closest))
    except WhyError as e:
        raise SimulateError(str(e)) from e
    except (ConfigError, FrameworkError) as e:
        raise SimulateError(f"invalid configuration: {e}") from e
    write(render_why_json(report) if output == "json" else render_why_table(report))
    return 0
