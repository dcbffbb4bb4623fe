"""``kubesched annotate-nodes``: write the usage statistics SafeOverload and SafeBalance read.

kube-safe-scheduler's node annotator: every ``--interval`` it asks Prometheus for each node's free
CPU and memory over the last ``--window`` and writes their mean and standard deviation on the
node. The queries, the annotations, the statistics and how nodes are named: docs/annotator.md.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kubesched import KubeschedError
from kubesched.api import Node, ObjectList
from kubesched.kube import APIClient, APIError, KubeConfigError, api_path
from kubesched.plugins.network_traffic import (
    DEFAULT_NODE_LABEL,
    UNAME_NODE_LABEL,
    PrometheusClient,
    PrometheusError,
    Series,
)
from kubesched.plugins.safe import (
    MEAN_FREE_CPU,
    MEAN_FREE_MEMORY,
    STATS_UPDATED_AT,
    STD_FREE_CPU,
    STD_FREE_MEMORY,
)

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 60.0
DEFAULT_WINDOW = 3600.0
DEFAULT_STEP = 15.0
DEFAULT_RATE_WINDOW = "1m"
#: Node patches in flight at once.
_CONCURRENCY = 16
#: Prometheus refuses range queries of more points per series.
_MAX_POINTS = 11000


class AnnotatorError(KubeschedError):
    """A round that could not run at all: Prometheus or the cluster unreachable."""


@dataclass(frozen=True, slots=True)
class Options:
    """What ``kubesched annotate-nodes`` was asked to do."""

    prometheus: str
    kubeconfig: str | None = None
    interval: float = DEFAULT_INTERVAL
    once: bool = False
    window: float = DEFAULT_WINDOW
    step: float = DEFAULT_STEP
    rate_window: str = DEFAULT_RATE_WINDOW
    node_label: str = DEFAULT_NODE_LABEL
    node_uname_info: bool = False
    bearer_token_file: str = ""
    ca_file: str = ""
    timeout: float = 30.0

    def __post_init__(self) -> None:
        for name in ("interval", "window", "step", "timeout"):
            if not getattr(self, name) > 0:
                raise AnnotatorError(f"--{name} must be positive, not {getattr(self, name)}")
        if self.window / self.step > _MAX_POINTS:
            raise AnnotatorError(
                f"--window / --step is {self.window / self.step:.0f} points per node; "
                f"Prometheus answers at most {_MAX_POINTS}"
            )


def _by_node(expr: str, options: Options, *, total: bool = False) -> tuple[str, str]:
    """``expr`` aggregated per node name, and the label carrying the name."""
    how = "sum" if total else "max"
    if options.node_uname_info:
        joined = f"{expr} * on(instance) group_left({UNAME_NODE_LABEL}) node_uname_info"
        return f"{how} by ({UNAME_NODE_LABEL}) ({joined})", UNAME_NODE_LABEL
    return f"{how} by ({options.node_label}) ({expr})", options.node_label


def memory_query(options: Options) -> tuple[str, str]:
    """Free memory in bytes per node."""
    return _by_node("node_memory_MemAvailable_bytes", options)


def cpu_query(options: Options) -> tuple[str, str]:
    """Free (idle) CPU in millicores per node."""
    idle = f'rate(node_cpu_seconds_total{{mode="idle"}}[{options.rate_window}])'
    expr, label = _by_node(idle, options, total=True)
    return f"{expr} * 1000", label


@dataclass(frozen=True, slots=True)
class Stats:
    """Mean and sample standard deviation of one node's points."""

    mean: float
    sd: float
    points: int


def statistics(values: Sequence[float]) -> Stats | None:
    """Mean and sample standard deviation of the finite ``values`` (``None`` without any)."""
    finite = [v for v in values if math.isfinite(v)]
    n = len(finite)
    if not n:
        return None
    mean = math.fsum(finite) / n
    if n < 2:
        return Stats(mean, 0.0, n)
    var = math.fsum((v - mean) ** 2 for v in finite) / (n - 1)
    return Stats(mean, math.sqrt(var), n)


def per_node(series: Sequence[Series], label: str) -> dict[str, Stats]:
    """Node name -> statistics of its points (series without the label are left out)."""
    values: dict[str, list[float]] = {}
    for s in series:
        name = s.labels.get(label)
        if name:
            values.setdefault(name, []).extend(v for _, v in s.points)
    out = {}
    for name, vs in values.items():
        st = statistics(vs)
        if st is not None:
            out[name] = st
    return out


def format_number(value: float) -> str:
    """A value as an annotation: integers without a fraction, others as Python writes them."""
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def annotations_for(cpu: Stats | None, memory: Stats | None, now: float) -> dict[str, str | None]:
    """The merge patch of one node's annotations (``None`` removes a key)."""
    out: dict[str, str | None] = {STATS_UPDATED_AT: rfc3339(now)}
    for stats, mean_key, sd_key in (
        (cpu, MEAN_FREE_CPU, STD_FREE_CPU),
        (memory, MEAN_FREE_MEMORY, STD_FREE_MEMORY),
    ):
        out[mean_key] = None if stats is None else format_number(stats.mean)
        out[sd_key] = None if stats is None else format_number(stats.sd)
    return out


@dataclass(slots=True)
class Round:
    """What one round found and wrote."""

    at: float
    cpu: dict[str, Stats] = field(default_factory=dict)
    memory: dict[str, Stats] = field(default_factory=dict)
    #: Node -> the annotations written (``None``: removed).
    annotated: dict[str, dict[str, str | None]] = field(default_factory=dict)
    #: Nodes of the cluster without any points.
    without_data: list[str] = field(default_factory=list)
    #: Node names in Prometheus's answers that the cluster does not have.
    unknown: list[str] = field(default_factory=list)
    #: Node -> why its patch failed.
    failed: dict[str, str] = field(default_factory=dict)


def query_statistics(
    prometheus: PrometheusClient, options: Options, now: float
) -> tuple[dict[str, Stats], dict[str, Stats]]:
    """(cpu, memory) statistics per node over ``[now - window, now]``."""
    start = now - options.window
    cpu_expr, cpu_label = cpu_query(options)
    memory_expr, memory_label = memory_query(options)
    cpu = per_node(prometheus.query_range(cpu_expr, start, now, options.step), cpu_label)
    memory = per_node(prometheus.query_range(memory_expr, start, now, options.step), memory_label)
    return cpu, memory


async def list_node_names(api: APIClient) -> list[str]:
    names: list[str] = []
    cont = ""
    while True:
        page = await api.list(
            api_path("nodes"), type=ObjectList[Node], limit=500, continue_=cont or None
        )
        names.extend(n.metadata.name for n in page.items)
        cont = page.metadata.continue_
        if not cont:
            return names


async def annotate_once(
    api: APIClient,
    prometheus: PrometheusClient,
    options: Options,
    *,
    clock: Callable[[], float] = time.time,
) -> Round:
    """Query Prometheus and patch every node with data; raises :class:`AnnotatorError` when
    Prometheus or the node list cannot be read."""
    now = clock()
    try:
        cpu, memory = await asyncio.to_thread(query_statistics, prometheus, options, now)
    except PrometheusError as err:
        raise AnnotatorError(f"Prometheus at {prometheus.base_url}: {err}") from err
    try:
        nodes = await list_node_names(api)
    except APIError as err:
        raise AnnotatorError(f"cannot list nodes: {err}") from err
    result = Round(now, cpu, memory)
    cluster = set(nodes)
    result.unknown = sorted((cpu.keys() | memory.keys()) - cluster)
    limit = asyncio.Semaphore(_CONCURRENCY)

    async def patch(name: str, body: dict[str, str | None]) -> None:
        async with limit:
            try:
                await api.patch(api_path("nodes", name=name), {"metadata": {"annotations": body}})
            except APIError as err:
                result.failed[name] = str(err)
                return
        result.annotated[name] = body

    tasks = []
    for name in sorted(cluster):
        c, m = cpu.get(name), memory.get(name)
        if c is None and m is None:
            result.without_data.append(name)
            continue
        tasks.append(patch(name, annotations_for(c, m, now)))
    await asyncio.gather(*tasks)
    return result


def _report(r: Round) -> None:
    log.info(
        "annotated %d node(s); %d without data%s%s",
        len(r.annotated),
        len(r.without_data),
        f"; {len(r.failed)} failed" if r.failed else "",
        f"; not in the cluster: {', '.join(r.unknown)}" if r.unknown else "",
    )
    for name, why in sorted(r.failed.items()):
        log.warning("cannot annotate node %s: %s", name, why)
    if r.without_data:
        log.info("no data for node(s): %s", ", ".join(r.without_data))


def summary(r: Round) -> str:
    """A table of what a round wrote."""
    head = ("NODE", MEAN_FREE_CPU, STD_FREE_CPU, MEAN_FREE_MEMORY, STD_FREE_MEMORY)
    rows: list[tuple[str, ...]] = [head]
    for name in sorted(r.annotated):
        a = r.annotated[name]
        rows.append((name, *(a.get(k) or "-" for k in head[1:])))
    for name in r.without_data:
        rows.append((name, "-", "-", "-", "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


async def serve(
    options: Options,
    *,
    out: Callable[[str], None] = print,
    api: APIClient | None = None,
    stop: asyncio.Event | None = None,
) -> int:
    """Annotate once (``options.once``: exit 0 when the round ran, 1 when it could not), or
    every ``interval`` seconds until ``stop`` is set, logging failed rounds and going on."""
    prometheus = PrometheusClient(
        options.prometheus,
        bearer_token_file=options.bearer_token_file,
        ca_file=options.ca_file,
        timeout=options.timeout,
    )
    own = api is None
    if api is None:
        try:
            api = APIClient.from_kubeconfig(options.kubeconfig)
        except KubeConfigError as err:
            raise AnnotatorError(str(err)) from err
    stop = stop or asyncio.Event()
    try:
        while True:
            try:
                result = await annotate_once(api, prometheus, options)
            except AnnotatorError as err:
                if options.once:
                    raise
                log.warning("round failed: %s", err)
            else:
                _report(result)
                if options.once:
                    out(summary(result))
                    return 1 if result.failed else 0
            try:
                await asyncio.wait_for(stop.wait(), options.interval)
            except TimeoutError:
                continue
            return 0
    finally:
        if own:
            await api.aclose()


def main(options: Options, out: Callable[[str], None] = print) -> int:
    """Run :func:`serve` until done or interrupted (Ctrl-C, SIGTERM)."""
    import contextlib  # noqa: PLC0415
    import signal  # noqa: PLC0415

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):  # not the main thread
                loop.add_signal_handler(sig, stop.set)
        return await serve(options, out=out, stop=stop)

    return asyncio.run(run())


def parse_seconds(text: str) -> float:
    """``"60"`` or a Go duration (``"1m"``, ``"90s"``) as seconds."""
    from kubesched.config import parse_duration  # noqa: PLC0415

    try:
        return float(text)
    except ValueError:
        return parse_duration(text)


__all__ = [
    "AnnotatorError",
    "Options",
    "Round",
    "Stats",
    "annotate_once",
    "annotations_for",
    "cpu_query",
    "format_number",
    "main",
    "memory_query",
    "parse_seconds",
    "per_node",
    "serve",
    "statistics",
    "summary",
]
