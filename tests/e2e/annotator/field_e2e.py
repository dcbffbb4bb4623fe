"""Shared pieces of the end-to-end tests of kubesched's plugins from the field (NetworkTraffic,
SafeOverload, SafeBalance, Congestion, PigeonHole) and of ``kubesched annotate-nodes``: nodes and
namespaces of a test's own, and ``kubesched run`` with one profile.

Every test labels its nodes with a group of its own and gives its pods a ``nodeSelector`` on it,
so a node another test left behind can never take one of its pods.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e.scheduler.sched_e2e import (
    SchedulerProcess,
    create_pod,
    delete_node,
    delete_pods,
    eventually,
    get_pod,
    node_manifest,
    pod_manifest,
    scheduler_config,
    start_scheduler,
    tail,
)

if TYPE_CHECKING:
    from conftest import AdminClient

GROUP_LABEL = "field.e2e.kubesched.io/group"


def new_group() -> str:
    return uuid.uuid4().hex[:8]


def annotated_node(
    name: str,
    group: str,
    *,
    annotations: Mapping[str, str] | None = None,
    cpu: str = "4",
    memory: str = "8Gi",
) -> dict[str, Any]:
    manifest = node_manifest(name, cpu=cpu, memory=memory, labels={GROUP_LABEL: group})
    manifest["metadata"]["annotations"] = dict(annotations or {})
    return manifest


@contextlib.contextmanager
def nodes(client: AdminClient, manifests: Sequence[Mapping[str, Any]]) -> Iterator[list[str]]:
    """Create the nodes now, delete them at the end."""
    names = [m["metadata"]["name"] for m in manifests]
    try:
        for m in manifests:
            delete_node(client, m["metadata"]["name"])  # a leftover of an interrupted run
            client.post("/api/v1/nodes", m).expect(201)
        yield names
    finally:
        for name in names:
            delete_node(client, name)


@contextlib.contextmanager
def namespace(client: AdminClient) -> Iterator[str]:
    name = f"field-e2e-{uuid.uuid4().hex[:8]}"
    client.post("/api/v1/namespaces", {"metadata": {"name": name}}).expect(201)
    try:
        yield name
    finally:
        delete_pods(client, name)
        client.delete(f"/api/v1/namespaces/{name}")


def profile_config(
    profile: str,
    *,
    score: Sequence[tuple[str, int]],
    filters: Sequence[str] = (),
    args: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """One profile: kube-scheduler's default filters plus ``filters``, and only ``score``."""
    plugins: dict[str, Any] = {
        "score": {
            "disabled": [{"name": "*"}],
            "enabled": [{"name": n, "weight": w} for n, w in score],
        }
    }
    if filters:
        plugins["filter"] = {"enabled": [{"name": n} for n in filters]}
    fields: dict[str, Any] = {"plugins": plugins}
    if args:
        fields["pluginConfig"] = [{"name": n, "args": dict(a)} for n, a in args.items()]
    return scheduler_config(profile, profile_fields=fields)


@contextlib.contextmanager
def scheduler(
    config: Mapping[str, Any], directory: Path, kubeconfig: Path
) -> Iterator[SchedulerProcess]:
    """``kubesched run`` with ``config``, ready; its log is printed if the test fails."""
    proc = start_scheduler(config, directory, kubeconfig=kubeconfig)
    try:
        proc.wait_ready()
        yield proc
    finally:
        proc.stop()
        print(f"\n===== kubesched (exit {proc.popen.returncode}) =====\n{tail(proc.log(), 200)}")


def pod_in_group(
    client: AdminClient,
    ns: str,
    profile: str,
    name: str,
    group: str,
    *,
    cpu: str | None = None,
    memory: str | None = None,
) -> str:
    create_pod(
        client,
        pod_manifest(
            name, ns, profile, cpu=cpu, memory=memory, spec={"nodeSelector": {GROUP_LABEL: group}}
        ),
    )
    return name


def bound_node(
    client: AdminClient, ns: str, name: str, *, watch: SchedulerProcess, timeout: float = 30.0
) -> str:
    pod = eventually(
        lambda: get_pod(client, ns, name),
        lambda p: bool(p["spec"].get("nodeName")),
        timeout=timeout,
        what=f"pod {name} to be bound",
        watch=watch,
    )
    return str(pod["spec"]["nodeName"])


def wait_for_log(proc: SchedulerProcess, text: str, timeout: float = 30.0) -> None:
    eventually(
        proc.log,
        lambda log: text in log,
        timeout=timeout,
        what=f"{text!r} in the scheduler's log",
        watch=proc,
    )
