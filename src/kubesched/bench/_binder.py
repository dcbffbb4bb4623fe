"""The API server's ceiling: a binder that makes no decision at all.

It watches the pods, and binds each pending one to the next node in turn (round-robin over the
nodes listed at start), ``IN_FLIGHT`` bindings at a time, then records the same ``Scheduled``
event kubesched writes, through kubesched's own API client and event recorder (a rate limiter
of its own, backpressure when the recorder's queue is full). What it costs the API server per
pod is what a scheduler's bindings and events cost, with nothing decided: on a machine where the
API server shares the cores, the throughput no scheduler can beat. Pods that carry scheduling
gates are left alone (the API server refuses to bind them).

Run as its own process, like the schedulers it is measured beside::

    python -c "from kubesched.bench._binder import main; main()" --kubeconfig FILE
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
from collections.abc import Sequence

from kubesched.api import Node, ObjectList, Pod
from kubesched.kube import (
    ACTION_BINDING,
    EVENT_TYPE_NORMAL,
    APIClient,
    APIError,
    EventRecorder,
    Reflector,
    api_path,
    bind,
)

log = logging.getLogger(__name__)

#: Bindings in flight at once.
IN_FLIGHT = 64
SCHEDULER_NAME = "default-scheduler"


def pending(pod: Pod) -> bool:
    """Whether the binder binds ``pod``: not bound, not being deleted, not gated, and for the
    default scheduler."""
    return (
        not pod.spec.node_name
        and pod.metadata.deletion_timestamp is None
        and not pod.spec.scheduling_gates
        and pod.spec.scheduler_name == SCHEDULER_NAME
    )


class RoundRobin:
    """The next node, in turn."""

    def __init__(self, nodes: Sequence[str]) -> None:
        if not nodes:
            raise ValueError("no nodes to bind to")
        self._next = itertools.cycle(nodes)

    def __call__(self) -> str:
        return next(self._next)


class _Pending:
    """Pod watch handler: each pending pod is queued once."""

    def __init__(self, queue: asyncio.Queue[Pod]) -> None:
        self.queue = queue
        self.queued: set[str] = set()

    def _offer(self, pod: Pod) -> None:
        key = f"{pod.metadata.namespace}/{pod.metadata.name}/{pod.metadata.uid}"
        if key not in self.queued and pending(pod):
            self.queued.add(key)
            self.queue.put_nowait(pod)

    def on_add(self, obj: Pod) -> None:
        self._offer(obj)

    def on_update(self, old: Pod, new: Pod) -> None:
        self._offer(new)

    def on_delete(self, obj: Pod) -> None:
        pass

    def on_synced(self) -> None:
        pass

    def on_undecodable(self, key: str) -> None:
        pass


async def run(kubeconfig: str, *, qps: float, burst: int, in_flight: int = IN_FLIGHT) -> None:
    """Bind every pending pod until cancelled."""
    client = APIClient.from_kubeconfig(kubeconfig, qps=qps, burst=burst)
    async with client:
        nodes = await client.list("/api/v1/nodes", type=ObjectList[Node])
        next_node = RoundRobin(sorted(n.metadata.name for n in nodes.items))
        recorder = EventRecorder(client.with_own_limiter(), reporting_controller=SCHEDULER_NAME)
        recorder.start()
        queue: asyncio.Queue[Pod] = asyncio.Queue()
        watch = Reflector(client, api_path("pods"), Pod, _Pending(queue), name="binder pods")

        async def binder() -> None:
            while True:
                pod = await queue.get()
                node = next_node()
                meta = pod.metadata
                try:
                    await bind(client, meta.namespace, meta.name, meta.uid, node)
                except APIError as err:
                    log.warning("binding %s/%s: %s", meta.namespace, meta.name, err)
                    continue
                await recorder.room()
                recorder.event(
                    pod,
                    type=EVENT_TYPE_NORMAL,
                    reason="Scheduled",
                    action=ACTION_BINDING,
                    note=f"Successfully assigned {meta.namespace}/{meta.name} to {node}",
                )

        watch.start()
        workers = [asyncio.create_task(binder()) for _ in range(in_flight)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            await watch.stop()
            await recorder.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--qps", type=float, default=5000.0)
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--in-flight", type=int, default=IN_FLIGHT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args.kubeconfig, qps=args.qps, burst=args.burst, in_flight=args.in_flight))


__all__ = ["IN_FLIGHT", "RoundRobin", "main", "pending", "run"]
