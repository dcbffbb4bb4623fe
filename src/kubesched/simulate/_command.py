"""``kubesched simulate``: read the inputs, simulate, print; the exit code.

Exit codes: 0 when the simulation ran over valid input (unschedulable pods are a result, not
an error); 1 when some input object was invalid and skipped (the results of the rest are still
printed), or when nothing could run (unreadable file, bad configuration, cluster unreachable).
"""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TextIO

from kubesched.api import collect_before_loading, freeze_loaded, gc_paused
from kubesched.config import ConfigError, KubeSchedulerConfiguration, enabled_plugin_names
from kubesched.framework import Plugin, ProfileError, Registry, watched_kinds
from kubesched.simulate._errors import SimulateError
from kubesched.simulate._input import InputBuilder, Inputs
from kubesched.simulate._output import render_json, render_table
from kubesched.simulate._run import Detail, SimulationResult, simulate

#: Progress is shown once a run has taken this long, then at most every ``_PROGRESS_EVERY``.
_PROGRESS_AFTER = 1.0
_PROGRESS_EVERY = 0.5


def example_paths() -> list[Path]:
    """The built-in example: the cluster, then the workload."""
    root = resources.files("kubesched.simulate") / "examples"
    return [Path(str(root / "cluster.yaml")), Path(str(root / "workload.yaml"))]


class ProgressLine:
    """``scheduling: 5000/10000 pods (2.1s)`` on stderr, rewritten in place on a terminal."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._last = 0.0
        self._shown = False

    def __call__(self, done: int, total: int, elapsed: float) -> None:
        final = done >= total
        if elapsed < _PROGRESS_AFTER or (not final and elapsed - self._last < _PROGRESS_EVERY):
            return
        if not self._tty and not final and elapsed - self._last < 5 * _PROGRESS_EVERY:
            return
        self._last = elapsed
        rate = done / elapsed if elapsed > 0 else 0.0
        line = f"scheduling: {done}/{total} pods ({elapsed:.1f}s, {rate:.0f} pods/s)"
        if self._tty:
            self._stream.write("\r" + line + ("\n" if final else ""))
        else:
            self._stream.write(line + "\n")
        self._stream.flush()
        self._shown = True


def load(
    files: Sequence[str],
    *,
    from_cluster: bool = False,
    kubeconfig: str | None = None,
    registry: Registry | None = None,
    config: KubeSchedulerConfiguration | None = None,
) -> Inputs:
    """The inputs: ``files`` (the built-in example when empty and not ``from_cluster``), on
    top of the live cluster's objects with ``from_cluster``; objects of the kinds ``registry``'s
    plugins read are kept too (of the plugins ``config``'s profiles enable, when given)."""
    plugins: list[type[Plugin]] = []
    if registry is not None:
        names = (
            registry
            if config is None
            else {n for p in config.profiles for n in enabled_plugin_names(p)} & set(registry)
        )
        # Only these plugins' modules are imported here.
        plugins = [registry[n] for n in sorted(names)]
    builder = InputBuilder(watched_kinds(plugins))
    if from_cluster:
        asyncio.run(_read_cluster(builder, kubeconfig, pending=not files))
    paths: Sequence[str | Path] = files if files or from_cluster else example_paths()
    with gc_paused():
        builder.add_paths(paths)  # an unreadable path: InputError, a SimulateError
        return builder.finish()


async def _read_cluster(builder: InputBuilder, kubeconfig: str | None, *, pending: bool) -> None:
    from kubesched.kube import APIClient, APIError, KubeConfigError  # noqa: PLC0415
    from kubesched.simulate._live import read_cluster  # noqa: PLC0415

    try:
        client = APIClient.from_kubeconfig(kubeconfig)
    except KubeConfigError as e:
        raise SimulateError(str(e)) from e
    async with client:
        try:
            await read_cluster(client, builder, pending=pending)
        except APIError as e:
            raise SimulateError(f"cannot read the cluster at {client.base_url}: {e}") from e


def run(
    files: Sequence[str],
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    output: str = "table",
    seed: int | None = None,
    explain: bool = False,
    from_cluster: bool = False,
    kubeconfig: str | None = None,
    out: Callable[[str], None] | None = None,
    err: TextIO | None = None,
) -> int:
    """The whole command; returns the exit code. Raises :class:`SimulateError` when nothing
    could be simulated."""
    err = err or sys.stderr
    write = out or sys.stdout.write
    t0 = time.perf_counter()
    if not files and not from_cluster:
        err.write("no -f given: simulating the built-in example (see docs/simulate.md)\n")
    collect_before_loading()
    inputs = load(
        files, from_cluster=from_cluster, kubeconfig=kubeconfig, registry=registry, config=config
    )
    # What was read lives as long as the command; thawed when it ends.
    freeze_loaded()
    try:
        for issue in inputs.issues:
            err.write(f"{issue}\n")
        if len(inputs.pods) + len(inputs.nodes) > 2000:
            err.write(
                f"read {len(inputs.nodes)} nodes and {len(inputs.pods)} pods "
                f"in {time.perf_counter() - t0:.1f}s\n"
            )
        detail: Detail = "explain" if explain else ("feasible" if output == "json" else "outcome")
        try:
            result: SimulationResult = asyncio.run(
                simulate(
                    inputs, config, registry, seed=seed, detail=detail, progress=ProgressLine(err)
                )
            )
        except (ConfigError, ProfileError) as e:
            raise SimulateError(f"invalid configuration: {e}") from e
        write(render_json(result) if output == "json" else render_table(result, explain=explain))
        errors = inputs.errors
        if errors:
            err.write(f"{len(errors)} invalid object(s) skipped; see the errors above\n")
            return 1
        return 0
    finally:
        gc.unfreeze()
