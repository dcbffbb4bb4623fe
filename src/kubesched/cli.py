"""The ``kubesched`` command.

A thin layer: each command parses its options and delegates to a package. Packages are imported
inside the commands so that ``kubesched --help`` stays fast.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from kubesched import KubeschedError, __version__

if TYPE_CHECKING:
    from kubesched.config import KubeSchedulerConfiguration
    from kubesched.framework import Registry

#: Options several commands share.
_cluster_name = click.option("--name", default="kubesched", show_default=True, help="Cluster name.")
_log_level = click.option(
    "--log-level",
    default="INFO",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)


def _config_option(text: str, *, exists: bool = False) -> Callable[[Any], Any]:
    """``--config FILE``, a KubeSchedulerConfiguration, passed as ``config_path``."""
    path = click.Path(dir_okay=False, exists=exists)
    return click.option("--config", "config_path", type=path, help=text)


def _kubeconfig_option(text: str) -> Callable[[Any], Any]:
    return click.option("--kubeconfig", type=click.Path(dir_okay=False), help=text)


def _progress(message: str) -> None:
    click.echo(message, err=True)


class _Commands(click.Group):
    """The command group: an error of kubesched's that no command turned into a message of its
    own ends the command with its text (``Error: ...``, exit status 1), not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KubeschedError as err:
            raise click.ClickException(err.describe()) from err


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="kubesched")
def main() -> None:
    """kubesched: kube-scheduler's framework and plugins in Python."""


@main.group()
def cluster() -> None:
    """A throwaway local control plane (etcd + kube-apiserver) for tests and benchmarks."""


@cluster.command("up")
@_cluster_name
@click.option(
    "--apiserver-arg",
    "apiserver_args",
    multiple=True,
    metavar="FLAG",
    help="Extra kube-apiserver flag, e.g. --apiserver-arg=--max-requests-inflight=800. "
    "Repeatable; overrides a default flag of the same name.",
)
@click.option(
    "--timeout",
    default=120.0,
    show_default=True,
    metavar="SECONDS",
    help="How long etcd and kube-apiserver may take to get ready.",
)
def cluster_up(name: str, apiserver_args: tuple[str, ...], timeout: float) -> None:
    """Start a cluster (building the binaries on first use), or reuse it if running.

    Progress goes to stderr; the last line on stdout is KUBECONFIG=<path>.
    """
    from kubesched import cluster as control_plane  # noqa: PLC0415 (keeps --help fast)

    try:
        info = control_plane.up(
            name, apiserver_args=apiserver_args, timeout=timeout, progress=_progress
        )
    except control_plane.ClusterError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"KUBECONFIG={info.kubeconfig}")


@cluster.command("down")
@_cluster_name
def cluster_down(name: str) -> None:
    """Stop every process of a cluster and remove its state."""
    from kubesched import cluster as control_plane  # noqa: PLC0415 (keeps --help fast)

    try:
        found = control_plane.down(name)
    except control_plane.ClusterError as err:
        raise click.ClickException(str(err)) from err
    click.echo(f"cluster {name!r} " + ("stopped and removed" if found else "does not exist"))


@cluster.command("binaries")
def cluster_binaries() -> None:
    """Build (once, cached by version) or find etcd, kube-apiserver, kube-scheduler, kubectl,
    what the image-compatibility tests run (nfd-master and two OCI registries), and the binder
    that `bench e2e` measures as the API server's ceiling.

    Prints one `<name> <path>` line per binary.
    """
    from kubesched import cluster as control_plane  # noqa: PLC0415 (keeps --help fast)

    try:
        binaries = control_plane.ensure_binaries(progress=_progress)
        tools = {
            tool.command: control_plane.ensure_tool(tool, progress=_progress)
            for tool in (control_plane.NFD_MASTER, *control_plane.REGISTRIES, control_plane.BINDER)
        }
    except control_plane.ClusterError as err:
        raise click.ClickException(str(err)) from err
    for command, path in {**binaries.paths(), **tools}.items():
        click.echo(f"{command} {path}")


@cluster.command("status")
def cluster_status() -> None:
    """List clusters: state, apiserver address, etcd port, kubeconfig."""
    from kubesched import cluster as control_plane  # noqa: PLC0415 (keeps --help fast)

    clusters = control_plane.status()
    if not clusters:
        click.echo(f"no clusters in {control_plane.state_dir() / 'clusters'}")
        return
    rows = [("NAME", "STATE", "VERSION", "APISERVER", "ETCD", "KUBECONFIG")]
    for found in clusters:
        components = ", ".join(
            f"{c.name} ({'running' if c.running else 'stopped'})" for c in found.components
        )
        rows.append(
            (
                found.name,
                found.state + (f" + {components}" if components else ""),
                found.version or "-",
                found.server or "-",
                f"127.0.0.1:{found.etcd_client_port}" if found.etcd_client_port else "-",
                str(found.kubeconfig) if found.kubeconfig else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[-1]]))


def _setup_logging(level: str) -> None:
    import logging  # noqa: PLC0415

    used = getattr(logging, level.upper())
    # DEBUG is about kubesched, as the extender's: other libraries stay at INFO (the CEL
    # library's DEBUG lines print whole environments for each expression evaluated).
    logging.basicConfig(
        level=max(used, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kubesched").setLevel(used)


def _load_scheduler_config(path: str | None) -> tuple[KubeSchedulerConfiguration, Registry]:
    """The loaded configuration and the plugin registry, or a clear error naming the field."""
    from kubesched.config import ConfigError, default_config, load_config  # noqa: PLC0415
    from kubesched.framework import plugin_args_types  # noqa: PLC0415
    from kubesched.plugins import default_registry  # noqa: PLC0415

    registry = default_registry()
    try:
        config = (
            load_config(path, plugin_args_types=plugin_args_types(registry), plugin_names=registry)
            if path
            else default_config()
        )
    except ConfigError as err:
        raise click.ClickException(f"invalid configuration: {err}") from err
    return config, registry


@main.command("run")
@_config_option(
    "KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1; v1beta1 to v1beta3 "
    "are converted, with a warning per field). Without it, kube-scheduler's default profile."
)
@_kubeconfig_option("Cluster to schedule for.")
@click.option(
    "--port",
    "health_port",
    default=10259,
    show_default=True,
    help="Port of /healthz, /readyz and /metrics (0 picks a free one).",
)
@click.option(
    "--bind-address",
    default="127.0.0.1",
    show_default=True,
    help="Address of /healthz, /readyz and /metrics (0.0.0.0 in a pod, for probes).",
)
@click.option("--identity", help="Leader election identity (default: hostname_uuid).")
@click.option(
    "--debug-queue",
    is_flag=True,
    help="Also serve GET /debug/queue on that address: the scheduling queue as JSON, read-only "
    "(for `kubesched ui --scheduler`). Off by default: it names every pending pod.",
)
@click.option(
    "--pod-max-in-unschedulable-pods-duration",
    "max_unschedulable",
    default="5m",
    show_default=True,
    help="How long a pod may wait for a cluster event before it is tried again anyway "
    "(kube-scheduler's flag of that name; a Go duration).",
)
@_log_level
def run(
    config_path: str | None,
    kubeconfig: str | None,
    health_port: int,
    bind_address: str,
    identity: str | None,
    debug_queue: bool,
    max_unschedulable: str,
    log_level: str,
) -> None:
    """Schedule every pod whose spec.schedulerName names a profile of the configuration."""
    import asyncio  # noqa: PLC0415

    from kubesched.config import (  # noqa: PLC0415
        ConfigError,
        DurationError,
        parse_duration,
    )
    from kubesched.framework import ProfileError  # noqa: PLC0415
    from kubesched.kube import KubeConfigError  # noqa: PLC0415
    from kubesched.scheduler import serve  # noqa: PLC0415

    try:
        max_unschedulable_s = parse_duration(max_unschedulable)
    except DurationError as err:
        raise click.BadParameter(
            str(err), param_hint="--pod-max-in-unschedulable-pods-duration"
        ) from err
    _setup_logging(log_level)
    config, registry = _load_scheduler_config(config_path)
    try:
        # Profiles are built before the first request: a bad profile never reaches the cluster.
        code = asyncio.run(
            serve(
                config,
                registry,
                kubeconfig=kubeconfig,
                health_host=bind_address,
                health_port=health_port,
                identity=identity,
                debug_queue=debug_queue,
                pod_max_in_unschedulable_pods_duration=max_unschedulable_s,
            )
        )
    except ConfigError as err:
        where = err.with_source(config_path) if config_path else err
        raise click.ClickException(f"invalid configuration: {where}") from err
    except ProfileError as err:
        raise click.ClickException(f"invalid configuration: {err}") from err
    except KubeConfigError as err:
        raise click.ClickException(str(err)) from err
    raise SystemExit(code)


@main.group("config")
def config_group() -> None:
    """KubeSchedulerConfiguration files: convert older ones to v1."""


@config_group.command("convert")
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
@click.option(
    "--from-policy",
    "policy",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="A legacy scheduler Policy file (--policy-config-file): write its extenders as v1.",
)
def config_convert(file: str | None, policy: str | None) -> None:
    """Print FILE (v1beta1, v1beta2, v1beta3 or v1) as the equivalent v1 configuration.

    One warning per converted field goes to stderr. The result is checked as kube-scheduler
    v1.34 checks it, and the args of kubesched's plugins as kubesched does; plugin names are
    not looked up, since the file may be meant for a kube-scheduler with plugins of its own.
    See docs/configuration.md.
    """
    import yaml  # noqa: PLC0415

    from kubesched.config import (  # noqa: PLC0415
        ConfigError,
        FieldError,
        convert_config,
        load_config_from_dict,
        parse_yaml,
        policy_to_config,
    )
    from kubesched.framework import plugin_args_types  # noqa: PLC0415
    from kubesched.plugins import default_registry  # noqa: PLC0415

    if (file is None) == (policy is None):
        raise click.UsageError("give exactly one of FILE and --from-policy FILE")
    source = str(file or policy)
    try:
        with click.open_file(source, "rb") as stream:
            data = parse_yaml(stream.read())
        converted = policy_to_config(data) if policy else convert_config(data)

        def warn(warning: FieldError) -> None:
            click.echo(f"Warning: {source}: {warning}", err=True)

        for warning in converted.warnings:
            warn(warning)
        args_types = plugin_args_types(default_registry())
        load_config_from_dict(
            converted.data, plugin_args_types=args_types, source=source, warn=warn
        )
    except OSError as err:
        raise click.ClickException(f"{source}: cannot read the file: {err.strerror}") from err
    except ConfigError as err:
        raise click.ClickException(f"invalid configuration: {err.with_source(source)}") from err
    click.echo(yaml.safe_dump(converted.data, sort_keys=False), nl=False)


@main.command("plugins")
def plugins() -> None:
    """List every registered plugin (in-tree and entry points) with its extension points."""
    from kubesched.framework import extension_points_of  # noqa: PLC0415
    from kubesched.plugins import IN_TREE, default_registry  # noqa: PLC0415

    registry = default_registry()
    rows = [("NAME", "SOURCE", "EXTENSION POINTS")]
    for name in sorted(registry):
        cls = registry[name]
        source = "in-tree" if name in IN_TREE else f"entry point ({cls.__module__})"
        rows.append((name, source, ", ".join(extension_points_of(cls))))
    widths = [max(len(r[i]) for r in rows) for i in range(2)]
    for r in rows:
        click.echo(f"{r[0].ljust(widths[0])}  {r[1].ljust(widths[1])}  {r[2]}")


def _as_invoked() -> str:
    """``kubesched`` when that is this command on PATH, else the path it was started by (make
    demo's ``.venv/bin/kubesched``), so that printed commands work as printed."""
    import os  # noqa: PLC0415
    import shutil  # noqa: PLC0415
    import sys  # noqa: PLC0415

    found = shutil.which("kubesched")
    me = sys.argv[0]
    if found is not None and os.path.exists(me) and os.path.samefile(found, me):
        return "kubesched"
    return me if os.sep in me else "kubesched"


@main.command("demo")
@click.option("--timeout", default=60.0, show_default=True, help="Seconds to wait for decisions.")
def demo(timeout: float) -> None:
    """Bring up the local control plane, create an example cluster and pending pods, schedule
    them with kubesched, and show where each pod went and why a pod could not go."""
    from kubesched.cluster import ClusterError  # noqa: PLC0415
    from kubesched.demo import NAMESPACE, run_demo  # noqa: PLC0415

    try:
        info, outcomes = run_demo(_progress, timeout=timeout)
    except ClusterError as err:
        raise click.ClickException(str(err)) from err
    width = max(len(name) for name in outcomes)
    click.echo(f"\n{'POD'.ljust(width)}  NODE")
    for name, (node, why) in outcomes.items():
        click.echo(f"{name.ljust(width)}  {node or 'unschedulable: ' + why}")
    placed = sum(1 for node, _ in outcomes.values() if node)
    me = _as_invoked()
    click.echo(
        f"\n{placed}/{len(outcomes)} pods scheduled by kubesched. The cluster keeps running:\n"
        f"  {me} kubectl --kubeconfig {info.kubeconfig} get pods -n {NAMESPACE} -o wide\n"
        f"  {me} kubectl --kubeconfig {info.kubeconfig} get events -n {NAMESPACE}\n"
        f"  {me} why too-big -n {NAMESPACE} --kubeconfig {info.kubeconfig}\n"
        f"  {me} cluster down    # when done"
    )


@main.command(
    "kubectl",
    context_settings={"ignore_unknown_options": True, "help_option_names": []},
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def kubectl(args: tuple[str, ...]) -> None:
    """Run the kubectl built with the local control plane (cached under ~/.cache/kubesched)
    with ARGS, so that a machine without kubectl on PATH can still look at the cluster."""
    import os  # noqa: PLC0415

    from kubesched.cluster import find_binaries  # noqa: PLC0415

    binaries = find_binaries()
    if binaries is None:
        raise click.ClickException(
            "kubectl is not built yet: `kubesched cluster binaries` (or `make demo`) builds it"
        )
    os.execv(binaries.kubectl, [str(binaries.kubectl), *args])


@main.command("simulate")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(exists=True, allow_dash=True),
    help="Manifests to simulate: a YAML/JSON file (multi-document, List kinds, `kubectl get "
    "-o yaml` output), a directory of them, or - for stdin. Repeatable. Without -f and "
    "--from-cluster, a built-in example.",
)
@_config_option(
    "KubeSchedulerConfiguration whose profiles (by schedulerName) schedule the pods. "
    "Without it, kube-scheduler's default profile.",
    exists=True,
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
@click.option("--seed", type=int, help="Seed of the random tie-break between equal scores.")
@click.option(
    "--explain",
    is_flag=True,
    help="Per pod and node: the first plugin that rejected the node, or each plugin's score.",
)
@click.option(
    "--from-cluster",
    is_flag=True,
    help="Start from a live cluster's nodes and pods (read-only, list calls only) and simulate "
    "the -f pods, or the cluster's pending pods without -f.",
)
@_kubeconfig_option("Cluster to read with --from-cluster (default: $KUBECONFIG, ~/.kube/config).")
def simulate(
    files: tuple[str, ...],
    config_path: str | None,
    output: str,
    seed: int | None,
    explain: bool,
    from_cluster: bool,
    kubeconfig: str | None,
) -> None:
    """Schedule pods on an in-memory cluster, as `kubesched run` would, and explain why.

    Pods are tried one at a time, once each; a pod placed counts for the pods after it.
    Exit code 1 if an input object was invalid (and skipped). See docs/simulate.md.
    """
    from kubesched import simulate as simulator  # noqa: PLC0415 (keeps --help fast)

    if kubeconfig and not from_cluster:
        raise click.UsageError("--kubeconfig is only read with --from-cluster")
    config, registry = _load_scheduler_config(config_path)
    try:
        code = simulator.run(
            list(files),
            config,
            registry,
            output=output,
            seed=seed,
            explain=explain,
            from_cluster=from_cluster,
            kubeconfig=kubeconfig,
            out=lambda text: click.echo(text, nl=False),
        )
    except simulator.SimulateError as err:
        raise click.ClickException(str(err)) from err
    raise SystemExit(code)


@main.command("why")
@click.argument("pod")
@click.option("-n", "--namespace", default="default", show_default=True)
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(exists=True, allow_dash=True),
    help="Read the cluster from manifests instead (as `simulate -f`); the pod is one of them.",
)
@click.option(
    "--from-cluster",
    is_flag=True,
    help="With -f: the live cluster's nodes and running pods too, the pod from the manifests.",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True),
    help="KubeSchedulerConfiguration whose profile (by schedulerName) judges the pod. "
    "Without it, kube-scheduler's default profile, whatever the pod's schedulerName.",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Cluster to read (default: $KUBECONFIG, ~/.kube/config).",
)
@click.option(
    "-o",
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
@click.option("--closest", default=5, show_default=True, help="How many closest nodes to show.")
def why(
    pod: str,
    namespace: str,
    files: tuple[str, ...],
    from_cluster: bool,
    config_path: str | None,
    kubeconfig: str | None,
    output: str,
    closest: int,
) -> None:
    """Why POD is pending: the plugins that reject nodes, the closest nodes, and ways out.

    Reads the live cluster (list calls only, as `simulate --from-cluster`); every way out is
    checked by simulating it. Nothing is written. See docs/why.md.
    """
    from kubesched import simulate as simulator  # noqa: PLC0415 (keeps --help fast)
    from kubesched.config import KubeSchedulerConfiguration  # noqa: PLC0415
    from kubesched.framework import Registry  # noqa: PLC0415

    if from_cluster and not files:
        raise click.UsageError("--from-cluster goes with -f (without -f the cluster is read)")
    if kubeconfig and files and not from_cluster:
        raise click.UsageError("--kubeconfig is not read with -f unless --from-cluster")
    config, registry = _load_scheduler_config(config_path)
    assert isinstance(config, KubeSchedulerConfiguration)
    assert isinstance(registry, Registry)
    try:
        code = simulator.run_why(
            namespace,
            pod,
            config,
            registry,
            files=list(files),
            from_cluster=from_cluster,
            kubeconfig=kubeconfig,
            output=output,
            closest=closest,
            any_scheduler_name=config_path is None,
            out=lambda text: click.echo(text, nl=False),
        )
    except simulator.SimulateError as err:
        raise click.ClickException(str(err)) from err
    raise SystemExit(code)


@main.command("ui")
@click.option(
    "-f",
    "--filename",
    "files",
    multiple=True,
    type=click.Path(exists=True, allow_dash=True),
    help="Manifests to show, as `simulate -f`. Without -f and --from-cluster, a built-in example.",
)
@click.option(
    "--from-cluster",
    is_flag=True,
    help="Start from a live cluster's nodes and pods (read once, list calls only).",
)
@click.option(
    "--kubeconfig",
    type=click.Path(dir_okay=False),
    help="Cluster to read with --from-cluster (default: $KUBECONFIG, ~/.kube/config).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, exists=True),
    help="KubeSchedulerConfiguration, as `simulate --config`. Without it, kube-scheduler's "
    "default profile judges every pod, whatever its schedulerName.",
)
@click.option("--seed", type=int, help="Seed of the random tie-break between equal scores.")
@click.option("--address", default="127.0.0.1", show_default=True, help="Address to serve on.")
@click.option("--port", default=10270, show_default=True, help="Port to serve on.")
@click.option(
    "--scheduler",
    default="",
    help="Base URL of a `kubesched run --debug-queue` health listener (e.g. "
    "http://127.0.0.1:10259): its queue is shown too.",
)
def ui(
    files: tuple[str, ...],
    from_cluster: bool,
    kubeconfig: str | None,
    config_path: str | None,
    seed: int | None,
    address: str,
    port: int,
    scheduler: str,
) -> None:
    """Serve a web page on the simulation: nodes by zone, per pod the explain table and why,
    what-if runs in memory, and a running scheduler's queue. Nothing is written to a cluster.
    See docs/ui.md."""
    from kubesched import ui as page  # noqa: PLC0415 (keeps --help fast)
    from kubesched.config import KubeSchedulerConfiguration  # noqa: PLC0415
    from kubesched.framework import Registry  # noqa: PLC0415
    from kubesched.simulate import SimulateError  # noqa: PLC0415

    if kubeconfig and not from_cluster:
        raise click.UsageError("--kubeconfig is only read with --from-cluster")
    config, registry = _load_scheduler_config(config_path)
    assert isinstance(config, KubeSchedulerConfiguration)
    assert isinstance(registry, Registry)
    try:
        page.serve(
            list(files),
            config,
            registry,
            from_cluster=from_cluster,
            kubeconfig=kubeconfig,
            host=address,
            port=port,
            seed=seed,
            scheduler=scheduler,
            any_scheduler_name=config_path is None,
            progress=_progress,
        )
    except SimulateError as err:
        raise click.ClickException(str(err)) from err


@main.group()
def bench() -> None:
    """Benchmarks: the scheduling loop in memory, or kubesched and kube-scheduler end to end."""


@bench.command("core")
@click.option("--nodes", default=5000, show_default=True, help="Nodes (4 CPU, 32Gi, 110 pods).")
@click.option("--pods", default=10000, show_default=True, help="Pods to schedule.")
@click.option(
    "--profile",
    type=click.Choice(["default", "mixed", "spread", "daemonset"]),
    default="default",
    show_default=True,
    help="default: SchedulingBasic's nodes and pods; mixed: zones, taints, affinity, sizes; "
    "spread: TopologySpreading's zones and pods with pod anti-affinity mixed in; daemonset: "
    "SchedulingDaemonset's pods, all pinned by node name to the first node.",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--plugins",
    "plugin_set",
    type=click.Choice(["core", "default"]),
    help="core: kube-scheduler's default profile without InterPodAffinity, PodTopologySpread, "
    "the volume plugins, DynamicResources and DefaultPreemption; default: all of it. "
    "[default: core; default with --profile spread]",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the tie-breaking RNG.")
@click.option(
    "--distinct",
    is_flag=True,
    help="Give each pod a label of its own: no two pods alike, so no decision comes from the "
    "per-shape cache (the cost of a pod unlike any before it).",
)
def bench_core(
    nodes: int,
    pods: int,
    profile: str,
    plugin_set: str | None,
    output: str,
    seed: int,
    distinct: bool,
) -> None:
    """Schedule PODS pods onto NODES nodes in memory, through `run`'s scheduling loop.

    Reports decisions per second, per-cycle latency percentiles and peak RSS.
    """
    import json  # noqa: PLC0415

    from kubesched.bench import StderrProgress, core_table, run_core  # noqa: PLC0415

    result = run_core(
        nodes=nodes,
        pods=pods,
        profile=profile,
        seed=seed,
        plugin_set=plugin_set,
        distinct=distinct,
        progress=StderrProgress(),
    )
    if output == "json":
        click.echo(json.dumps(result.to_json(), indent=2))
    else:
        click.echo(core_table(result))


@bench.command("e2e")
@click.option("--nodes", type=int, help="Nodes (default: the workload's).")
@click.option("--pods", type=int, help="Measured pods (default: the workload's).")
@click.option(
    "--init-pods", type=int, help="Pods scheduled before measuring (default: the workload's)."
)
@click.option(
    "--scheduler",
    "which",
    type=click.Choice(["kubesched", "kube-scheduler", "binder", "both"]),
    default="both",
    show_default=True,
    help="binder: binds round-robin and writes the events, deciding nothing.",
)
@click.option(
    "--ceiling/--no-ceiling",
    default=True,
    show_default=True,
    help="Also run the binder: the API server's ceiling on the same control plane shape.",
)
@click.option(
    "--workload",
    default="basic",
    show_default=True,
    help="basic: SchedulingBasic (5000 nodes, 1000 + 10000 pods); mixed: taints, affinity, "
    "sizes at the same scale; small: mixed at CI size (100 nodes, 100 + 500 pods); or a "
    "scheduler_perf workload by its upstream name, e.g. SchedulingBasic/5000Nodes_10000Pods "
    "(docs/benchmarks.md lists them); all: each of those in turn.",
)
@click.option(
    "--arrival",
    type=click.Choice(["rate", "backlog"]),
    default="rate",
    show_default=True,
    help="rate: measured pods are created while the scheduler runs, as fast as the API server "
    "takes them; backlog: all exist before the scheduler starts (its own ceiling).",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("--plot", type=click.Path(dir_okay=False), help="Write throughput over time (PNG).")
@click.option(
    "--stall-timeout",
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Give up waiting when for this long no pod got bound and nothing happened to any; "
    "a run also fails when the API server refuses or does not answer the bench's requests "
    "for this long.",
)
def bench_e2e(
    nodes: int | None,
    pods: int | None,
    init_pods: int | None,
    which: str,
    ceiling: bool,
    workload: str,
    arrival: str,
    output: str,
    plot: str | None,
    stall_timeout: float,
) -> None:
    """Each scheduler against its own fresh local control plane, measured from the apiserver.

    Progress goes to stderr; the table or JSON to stdout. A scheduler's run that fails is
    reported with its error beside the others' figures, and the exit status is then 1.
    """
    import json  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    from kubesched.bench import (  # noqa: PLC0415
        ALL,
        E2EFailure,
        E2EResult,
        StderrProgress,
        compare,
        e2e_table,
        plot_throughput,
        run_e2e,
        summary_table,
    )
    from kubesched.bench import workload as get_workload  # noqa: PLC0415

    try:
        shapes = [get_workload(w) for w in (ALL if workload == "all" else [workload])]
    except ValueError as err:
        raise click.BadParameter(f"{err}, or all", param_hint="--workload") from err
    if plot and len(shapes) > 1:
        raise click.BadParameter("takes one workload, not all", param_hint="--plot")
    schedulers = ["kubesched", "kube-scheduler"] if which == "both" else [which]
    if ceiling and "binder" not in schedulers:
        schedulers.append("binder")
    # Stopped by a signal, as by Ctrl-C: each control plane started is taken down on the way out.
    signal.signal(signal.SIGTERM, _interrupted)
    runs = []
    for shape in shapes:
        parts = run_e2e(
            schedulers,
            shape,
            nodes=nodes,
            init_pods=init_pods,
            measured_pods=pods,
            arrival=arrival,
            stall_timeout=stall_timeout,
            progress=StderrProgress(),
        )
        runs.append((parts, compare(parts, threshold=shape.threshold)))
    results = [p for parts, _ in runs for p in parts if isinstance(p, E2EResult)]
    failures = [p for parts, _ in runs for p in parts if isinstance(p, E2EFailure)]
    if plot:
        plot_throughput(results, Path(plot))
    if output == "json":
        document = {
            "arrival": arrival,
            "results": [r.to_json() for r in results],
            "failures": [f.to_json() for f in failures],
            "comparisons": [c.to_json() for _, c in runs],
        }
        click.echo(json.dumps(document, indent=2))
    else:
        tables = [e2e_table(parts, c) for parts, c in runs]
        click.echo("\n\n".join([*tables, summary_table([c for _, c in runs])]))
    if failures:
        for f in failures:
            click.echo(f"bench e2e: {f.workload}: {f.scheduler} failed: {f.error}", err=True)
        raise SystemExit(1)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@main.command("extender")
@_config_option("KubeSchedulerConfiguration whose profiles to serve (the first is the default).")
@click.option(
    "--agents",
    metavar="A,B,...",
    help="Serve agents' profiles instead: safe, congestion, pigeon, network-traffic, "
    "image-compatibility, annotation-gate.",
)
@click.option(
    "--port",
    default=8888,
    show_default=True,
    envvar="HTTP_PORT",
    show_envvar=True,
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--bind-address",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 in a pod, for probes).",
)
@click.option("--tls-cert", type=click.Path(dir_okay=False), help="Serve HTTPS with this cert.")
@click.option("--tls-key", type=click.Path(dir_okay=False), help="The key of --tls-cert.")
@click.option(
    "--client-ca",
    type=click.Path(dir_okay=False),
    help="Require client certificates signed by this CA (mutual TLS).",
)
@_kubeconfig_option(
    "Cluster for the node and pod informers and for binding "
    "(default: $KUBECONFIG, in-cluster, ~/.kube/config)."
)
@click.option(
    "--standalone",
    is_flag=True,
    help="No cluster: serve full Nodes bodies only (no informers, no bind).",
)
@click.option("--path-prefix", default="", help="Path before the verbs, e.g. /scheduler.")
@click.option("--filter-verb", default="filter", show_default=True)
@click.option("--prioritize-verb", default="prioritize", show_default=True)
@click.option("--preempt-verb", default="preempt", show_default=True)
@click.option("--bind-verb", default="bind", show_default=True)
@click.option(
    "--log-level",
    envvar="LOG_LEVEL",
    show_envvar=True,
    default="INFO",
    show_default=True,
    help="TRACE, DEBUG, INFO, WARNING, ERROR or ALERT.",
)
def extender(
    config_path: str | None,
    agents: str | None,
    port: int,
    bind_address: str,
    tls_cert: str | None,
    tls_key: str | None,
    client_ca: str | None,
    kubeconfig: str | None,
    standalone: bool,
    path_prefix: str,
    filter_verb: str,
    prioritize_verb: str,
    preempt_verb: str,
    bind_verb: str,
    log_level: str,
) -> None:
    """Serve kube-scheduler's extender protocol (filter, prioritize, preempt, bind) by running
    a kubesched profile. See docs/extender.md."""
    from kubesched.extender import CommandError, ExtenderCommand  # noqa: PLC0415

    command = ExtenderCommand(
        config_path=config_path,
        agents=agents,
        host=bind_address,
        port=port,
        tls_cert=tls_cert,
        tls_key=tls_key,
        client_ca=client_ca,
        kubeconfig=kubeconfig,
        standalone=standalone,
        path_prefix=path_prefix,
        filter_verb=filter_verb,
        prioritize_verb=prioritize_verb,
        preempt_verb=preempt_verb,
        bind_verb=bind_verb,
        log_level=log_level,
    )
    try:
        code = command.run()
    except CommandError as err:
        raise click.ClickException(str(err)) from err
    raise SystemExit(code)


@main.command("annotate-nodes")
@click.option(
    "--prometheus",
    required=True,
    help="Prometheus URL (http://prometheus.monitoring:9090); user:password@ for basic auth.",
)
@_kubeconfig_option("Cluster whose nodes to annotate.")
@click.option(
    "--interval", default="60", show_default=True, help="Between rounds: seconds, or 1m, 90s..."
)
@click.option("--once", is_flag=True, help="One round, print what was written, and exit.")
@click.option("--window", default="1h", show_default=True, help="How far back the statistics go.")
@click.option("--step", default="15s", show_default=True, help="Resolution of the range queries.")
@click.option(
    "--rate-window", default="1m", show_default=True, help="rate() window of the CPU query."
)
@click.option(
    "--node-label",
    default="kubernetes_node",
    show_default=True,
    help="Label of the node exporter's series that holds the node name.",
)
@click.option(
    "--node-uname-info",
    is_flag=True,
    help="Take node names from node_uname_info's nodename (joined on instance) instead.",
)
@click.option("--bearer-token-file", default="", help="Bearer token for Prometheus (re-read).")
@click.option("--ca-file", default="", help="CA bundle of an HTTPS Prometheus.")
@_log_level
def annotate_nodes(
    prometheus: str,
    kubeconfig: str | None,
    interval: str,
    once: bool,
    window: str,
    step: str,
    rate_window: str,
    node_label: str,
    node_uname_info: bool,
    bearer_token_file: str,
    ca_file: str,
    log_level: str,
) -> None:
    """Write each node's free CPU and memory statistics from Prometheus as the annotations
    SafeOverload and SafeBalance read (mean-free-cpu, std-free-cpu, ...). See docs/annotator.md."""
    from kubesched import annotator  # noqa: PLC0415
    from kubesched.config import DurationError  # noqa: PLC0415
    from kubesched.plugins.network_traffic import PrometheusError  # noqa: PLC0415

    _setup_logging(log_level)
    try:
        options = annotator.Options(
            prometheus=prometheus,
            kubeconfig=kubeconfig,
            interval=annotator.parse_seconds(interval),
            once=once,
            window=annotator.parse_seconds(window),
            step=annotator.parse_seconds(step),
            rate_window=rate_window,
            node_label=node_label,
            node_uname_info=node_uname_info,
            bearer_token_file=bearer_token_file,
            ca_file=ca_file,
        )
        code = annotator.main(options, out=click.echo)
    except (annotator.AnnotatorError, PrometheusError, DurationError, ValueError) as err:
        raise click.ClickException(str(err)) from err
    raise SystemExit(code)


@bench.command("extender")
@click.option(
    "--nodes", default="1000,5000", show_default=True, help="Node counts, comma-separated."
)
@click.option(
    "--requests",
    default=300,
    show_default=True,
    help="Requests per NodeNames verb (a fifth of that, at least 20, with NodeList bodies).",
)
@click.option("--warmup", default=20, show_default=True, help="Requests before measuring.")
@click.option("--pods-per-node", default=4, show_default=True, help="Assigned pods per node.")
@click.option(
    "--modes",
    default="NodeNames,Nodes",
    show_default=True,
    help="How requests name the nodes: NodeNames (nodeCacheCapable), Nodes (whole NodeLists).",
)
@click.option(
    "-o", "--output", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def bench_extender(
    nodes: str, requests: int, warmup: int, pods_per_node: int, modes: str, output: str
) -> None:
    """Latency of `kubesched extender`'s filter and prioritize, as kube-scheduler sees it:
    with node names and with full NodeList bodies, over HTTP on loopback."""
    import json  # noqa: PLC0415

    from kubesched.extender.bench import run, table  # noqa: PLC0415

    counts = [int(n) for n in nodes.split(",") if n.strip()]
    try:
        rows = run(
            counts,
            requests=requests,
            warmup=warmup,
            pods_per_node=pods_per_node,
            modes=[m.strip() for m in modes.split(",") if m.strip()],
        )
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--modes") from e
    click.echo(json.dumps(rows, indent=2) if output == "json" else table(rows))
