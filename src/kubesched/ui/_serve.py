"""Start the page: read the inputs as ``kubesched simulate`` does, simulate, serve until stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from aiohttp import web

from kubesched.config import KubeSchedulerConfiguration
from kubesched.framework import Registry
from kubesched.simulate import load as load_inputs
from kubesched.simulate import profiles_for
from kubesched.ui._model import load
from kubesched.ui._server import build_app

DEFAULT_PORT = 10270


def serve(
    files: Sequence[str],
    config: KubeSchedulerConfiguration,
    registry: Registry,
    *,
    from_cluster: bool = False,
    kubeconfig: str | None = None,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    seed: int | None = None,
    scheduler: str = "",
    any_scheduler_name: bool = False,
    progress: Callable[[str], None] = print,
) -> None:
    """Serve the page until interrupted. Raises :class:`~kubesched.simulate.SimulateError`
    when the inputs cannot be read. With ``any_scheduler_name``, ``config``'s first profile
    judges every pod whatever its schedulerName (the default profile without ``--config``)."""
    inputs = load_inputs(files, from_cluster=from_cluster, kubeconfig=kubeconfig, registry=registry)
    for issue in inputs.issues:
        progress(str(issue))
    if any_scheduler_name:
        config = profiles_for(config, (p.spec.scheduler_name for p in inputs.pending))
    if from_cluster:
        source = "live cluster (read once)" + (f" + {', '.join(files)}" if files else "")
    else:
        source = ", ".join(files) if files else "built-in example"
    loaded = asyncio.run(load(inputs, config, registry, source=source, seed=seed))
    progress(
        f"simulated {len(loaded.result.pods)} pods on {len(inputs.nodes)} nodes "
        f"in {loaded.result.seconds:.2f}s"
    )
    app = build_app(loaded, scheduler=scheduler)
    web.run_app(app, host=host, port=port, print=progress, access_log=None)
