"""The DynamicResources plugin (see the package docstring)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec
import numpy as np

from kubesched.api import (
    FINALIZER,
    ClaimNameError,
    DeviceClass,
    Node,
    NodeSelector,
    Pod,
    ResourceClaim,
    ResourceSlice,
    claim_can_be_reserved,
    claim_is_for_pod,
    claim_reserved_for_pod,
    node_selector_matches,
    resource_claim_name,
)
from kubesched.config import DynamicResourcesArgs
from kubesched.framework import (
    SKIP,
    ActionType,
    APIClient,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
    ReservePlugin,
    Status,
    WatchedKind,
)
from kubesched.plugins.dynamic_resources._allocator import (
    AllocationError,
    AllocationTimeoutError,
    Allocator,
    FailedOnNodeError,
    Found,
    Solved,
    claim_ref,
)
from kubesched.plugins.dynamic_resources._pools import Pool, gather_pools, slice_reaches
from kubesched.plugins.dynamic_resources._taken import PoolKey, TakenDevices
from kubesched.plugins.helper import as_objects
from kubesched.plugins.node_affinity import NodeSelectorMatcher

log = logging.getLogger(__name__)

NAME = "DynamicResources"
_STATE_KEY = NAME

#: PostFilter for a pod without claims: there is no allocation to undo to make room.
MSG_NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
#: PostFilter for a pod with claims when none could be deallocated to help.
MSG_STILL_NOT_SCHEDULABLE = "still not schedulable"
#: PostFilter when PreFilter did not run (CycleState's ``ErrNotFound``).
ERR_STATE_NOT_FOUND = "not found"
#: Filter: the allocator found no devices for the pod's claims on the node.
ERR_CANNOT_ALLOCATE = "cannot allocate all claims"
#: Filter: an allocated claim's devices are not reachable from the node.
ERR_NOT_AVAILABLE = "resourceclaim not available on the node"
#: PreFilter: an allocated claim is reserved for as many consumers as it may have.
ERR_IN_USE = "resourceclaim in use"
#: Filter: the search for devices ran out of ``filterTimeout``.
ERR_TIMED_OUT = "timed out trying to allocate devices"

#: kube-scheduler's names of the resources whose events DynamicResources registers.
RESOURCE_CLAIM = "resource.k8s.io/ResourceClaim"
DEVICE_CLASS = "resource.k8s.io/DeviceClass"
RESOURCE_SLICE = "resource.k8s.io/ResourceSlice"

RESOURCE_CLAIM_KIND = WatchedKind(
    ResourceClaim,
    "resource.k8s.io/v1",
    "ResourceClaim",
    "/apis/resource.k8s.io/v1/resourceclaims",
    RESOURCE_CLAIM,
)
DEVICE_CLASS_KIND = WatchedKind(
    DeviceClass,
    "resource.k8s.io/v1",
    "DeviceClass",
    "/apis/resource.k8s.io/v1/deviceclasses",
    DEVICE_CLASS,
    namespaced=False,
)
RESOURCE_SLICE_KIND = WatchedKind(
    ResourceSlice,
    "resource.k8s.io/v1",
    "ResourceSlice",
    "/apis/resource.k8s.io/v1/resourceslices",
    RESOURCE_SLICE,
    namespaced=False,
)


@runtime_checkable
class ResourceClaimAPIClient(APIClient, Protocol):
    """An :class:`APIClient` that also reads and writes ResourceClaims: JSON merge patches, of
    the claim or (``status``) of its status subresource."""

    async def patch_resource_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> ResourceClaim: ...

    async def get_resource_claim(self, namespace: str, name: str) -> ResourceClaim: ...

    async def unreserve_resource_claim(
        self, namespace: str, name: str, claim_uid: str, pod_uid: str
    ) -> ResourceClaim:
        """Take pod ``pod_uid`` out of the claim's ``reservedFor``: a strategic merge patch of
        its status deleting that entry, conditional on the claim's UID only, so that the
        reservations other pods made meanwhile stay."""
        ...

    def is_conflict(self, error: BaseException) -> bool:
        """Whether ``error`` is a write refused because the object changed since the
        ``resourceVersion`` it named (409 ``Conflict``)."""
        ...


#: ``retry.DefaultRetry``: attempts of a claim write refused as a conflict, and the pause
#: between them (seconds, plus up to 10% jitter).
CONFLICT_RETRY_STEPS = 5
CONFLICT_RETRY_DELAY = 0.01


class _WriteError(Exception):
    """A claim write the API server refused: the message to report, and its cause (which the
    client tells a conflict by)."""

    def __init__(self, message: str, cause: BaseException) -> None:
        super().__init__(message)
        self.cause = cause


def _unschedulable(message: str) -> Status:
    """``statusUnschedulable``: kube-scheduler's plugin rejects as unresolvable (preemption
    cannot free devices)."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


@dataclass(slots=True, eq=False)
class _State:
    """``stateData``: shared by the cycle's clones, as upstream."""

    #: The pod's claims, in ``spec.resourceClaims`` order (those with a claim).
    claims: list[ResourceClaim] = field(default_factory=list)
    #: Per claim: where an allocated claim's devices are reachable.
    available_on: list[NodeSelector | None] = field(default_factory=list)
    #: Per claim: the allocation Reserve made, PreBind writes.
    allocations: list[Any] = field(default_factory=list)
    allocator: Allocator | None = None
    #: Indices of the claims allocated by the scheduler in this cycle (claims[i] unallocated).
    to_allocate: list[int] = field(default_factory=list)
    #: The slices, indexed by the nodes they reach.
    slices: _Slices | None = None
    #: Claims allocated on some node, not reachable from at least one node.
    unavailable: set[int] = field(default_factory=set)
    node_allocations: dict[str, Found] = field(default_factory=dict)
    #: The allocator's answer for nodes reached by the same shared slices and none of their
    #: own (network-attached devices): it is the same for all of them.
    by_reach: dict[tuple[int, ...], Found | None] = field(default_factory=dict)
    #: What the allocator's answer depends on besides the node and its devices: the claims to
    #: allocate (their namespaces and specs), the classes and the slices (their versions).
    signature: Hashable = None
    taken: TakenDevices | None = None
    #: The verdicts Filter read, whose ``found`` serves Reserve for the nodes not asked.
    verdicts: _Verdicts | None = None


class _Verdicts:
    """Filter's verdict per slot for one signature of claims to allocate (-1: not known,
    0: passes, 1: cannot allocate) and the allocation of each slot that passes, kept across
    cycles up to the table's version and the taken devices' stamp they saw."""

    __slots__ = ("found", "layout", "signature", "status", "table_version", "taken_stamp")

    def __init__(self, signature: Hashable, layout: int, capacity: int) -> None:
        self.signature = signature
        self.layout = layout
        self.status = np.full(capacity, -1, dtype=np.int32)
        self.found: dict[int, Found] = {}
        self.table_version = -1
        self.taken_stamp = -1

    def forget(self, rows: list[int], pools: set[PoolKey], slices: _Slices, nodes: Nodes) -> bool:
        """Forget the verdicts of ``rows`` (their Node changed) and of the nodes ``pools``
        reach; ``False`` when a pool reaches nodes through shared slices (start over)."""
        status, found = self.status, self.found
        stale = list(rows)
        slot_of = nodes.snapshot.slot_of
        for pool in pools:
            if pool in slices.shared_pools:
                return False
            stale += [
                slot for n in slices.pool_nodes.get(pool, ()) if (slot := slot_of(n)) is not None
            ]
        for slot in stale:
            status[slot] = -1
            found.pop(slot, None)
        return True


@dataclass(slots=True)
class _ClaimWriter:
    """The turn of PreBind's writes to one claim, and how many wait for it or hold it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


@dataclass(frozen=True, slots=True)
class _Search:
    """The allocator's answer on one node, kept while what it depends on holds: the node,
    the :attr:`_State.signature`, and the versions of the node's pools' taken devices."""

    node: Node
    signature: Hashable
    taken: tuple[int, ...]
    found: Found | None


@dataclass(frozen=True, slots=True)
class _Reach:
    """The slices reaching one node (their positions), their pools and the pools' keys."""

    node: Node
    local: bool
    slices: tuple[int, ...]
    pools: list[Pool]
    pool_keys: tuple[PoolKey, ...]


@dataclass(frozen=True, slots=True)
class _Slices:
    """The ResourceSlices indexed for Filter, kept while no slice changes."""

    version: int
    all: list[ResourceSlice]
    local: dict[str, list[tuple[int, ResourceSlice]]]
    shared: list[tuple[int, ResourceSlice]]
    #: CEL verdicts on these slices' devices, for every pod (an expression's verdict on a
    #: device does not change while the device does not).
    verdicts: dict[tuple[str, int], bool | str] = field(default_factory=dict)
    #: The pools of each set of slices reaching a node (by their positions).
    pools: dict[tuple[int, ...], list[Pool]] = field(default_factory=dict)
    #: Per node name, what reaches it.
    reaches: dict[str, _Reach] = field(default_factory=dict)
    #: The nodes each pool of node-local slices is on, and the pools of shared slices.
    pool_nodes: dict[PoolKey, set[str]] = field(default_factory=dict)
    shared_pools: set[PoolKey] = field(default_factory=set)

    def reach_of(self, node: Node) -> _Reach:
        """The slices reaching ``node`` in the store's order: its own and the shared ones
        whose selector it passes."""
        name = node.metadata.name
        kept = self.reaches.get(name)
        if kept is not None and kept.node is node:
            return kept
        local = self.local.get(name, [])
        shared = [(i, sl) for i, sl in self.shared if slice_reaches(sl, node)]
        reaching = sorted(local + shared, key=lambda e: e[0]) if local else shared
        pools = self.pools_of(reaching)
        reach = _Reach(
            node,
            bool(local),
            tuple(i for i, _ in reaching),
            pools,
            tuple((p.driver, p.name) for p in pools),
        )
        self.reaches[name] = reach
        return reach

    def pools_of(self, reaching: list[tuple[int, ResourceSlice]]) -> list[Pool]:
        key = tuple(i for i, _ in reaching)
        pools = self.pools.get(key)
        if pools is None:
            pools = self.pools[key] = gather_pools(sl for _, sl in reaching)
        return pools


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    """Allocates the devices a pod's ResourceClaims ask for, as kube-scheduler v1.34."""

    name = NAME
    args_type = DynamicResourcesArgs
    watched_kinds = (RESOURCE_CLAIM_KIND, DEVICE_CLASS_KIND, RESOURCE_SLICE_KIND)

    def __init__(self, handle: Handle, args: Any = None) -> None:
        super().__init__(handle, args)
        a = args if isinstance(args, DynamicResourcesArgs) else DynamicResourcesArgs()
        self.filter_timeout = float(a.filter_timeout) if a.filter_timeout else None
        #: Claims allocated in flight (Reserve done, PreBind not finished), by UID.
        self._in_flight: dict[str, ResourceClaim] = {}
        #: Claims as PreBind wrote them, until the informer reports them (the assume cache).
        self._assumed: dict[str, ResourceClaim] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        #: Per claim UID being written by PreBind: the pods sharing it write in turn.
        self._writers: dict[str, _ClaimWriter] = {}
        self._taken = TakenDevices()
        self._slices: _Slices | None = None
        #: Per node name, the last search there: the answer is the same for the next pod whose
        #: claims ask for the same, while the node and its devices are unchanged (pods from one
        #: template, or sharing a shape, are answered once per node, not once per pod).
        self._searches: dict[str, _Search] = {}
        #: Filter's verdicts per slot for the last signature asked about.
        self._verdicts: _Verdicts | None = None

    def prepare(self) -> None:
        # CEL ready before the first claim, as in kube-scheduler: loading cel-python and building
        # its parser (a third of a second here) inside the first cycle that asks a selector
        # held every other pod that long.
        from kubesched.plugins.dynamic_resources._cel import compile_selector  # noqa: PLC0415

        compile_selector("true")

    # -- claims ------------------------------------------------------------------------------

    def _get_claim(self, namespace: str, name: str) -> ResourceClaim | None:
        claim = self.handle.snapshot.objects.get(ResourceClaim, name, namespace)
        return None if claim is None else self._current(claim)

    def _current(self, claim: ResourceClaim) -> ResourceClaim:
        """The claim as PreBind last wrote it while the informer has not caught up, else as
        the informer has it."""
        assumed = self._assumed.get(claim.metadata.uid)
        if assumed is None:
            return claim
        if _newer(assumed, claim):
            return assumed
        del self._assumed[claim.metadata.uid]
        self._taken.touch(claim.metadata.namespace, claim.metadata.name)
        return claim

    def _pod_claims(self, pod: Pod) -> list[ResourceClaim]:
        """``foreachPodResourceClaim``: the pod's claims; :class:`ClaimNameError` with the
        reason one is missing or not usable."""
        out = []
        for i in range(len(pod.spec.resource_claims)):
            name, must_check_owner = resource_claim_name(pod, i)
            if name is None:
                continue
            claim = self._get_claim(pod.metadata.namespace, name)
            if claim is None:
                raise ClaimNameError(
                    f'could not find ResourceClaim "{pod.metadata.namespace}/{name}"'
                )
            if claim.metadata.deletion_timestamp is not None:
                raise ClaimNameError(f'resourceclaim "{name}" is being deleted')
            if must_check_owner:
                why = claim_is_for_pod(pod, claim)
                if why is not None:
                    raise ClaimNameError(why)
            out.append(claim)
        return out

    def _allocated_devices(self) -> TakenDevices:
        """Devices of every allocated claim, and of those allocated in flight."""
        self._taken.update(self.handle.snapshot.objects, self._current, self._in_flight)
        return self._taken

    def _indexed_slices(self) -> _Slices:
        objects = self.handle.snapshot.objects
        version = objects.version(ResourceSlice)
        if self._slices is not None and self._slices.version == version:
            return self._slices
        slices = list(objects.list(ResourceSlice))
        local: dict[str, list[tuple[int, ResourceSlice]]] = {}
        shared: list[tuple[int, ResourceSlice]] = []
        pool_nodes: dict[PoolKey, set[str]] = {}
        shared_pools: set[PoolKey] = set()
        for i, sl in enumerate(slices):
            pool = (sl.spec.driver, sl.spec.pool.name)
            if sl.spec.node_name and sl.spec.per_device_node_selection is None:
                local.setdefault(sl.spec.node_name, []).append((i, sl))
                pool_nodes.setdefault(pool, set()).add(sl.spec.node_name)
            else:
                shared.append((i, sl))
                shared_pools.add(pool)
        self._slices = _Slices(
            version, slices, local, shared, pool_nodes=pool_nodes, shared_pools=shared_pools
        )
        return self._slices

    # -- PreEnqueue ----------------------------------------------------------------------------

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.spec.resource_claims:
            return None
        try:
            self._pod_claims(pod)
        except ClaimNameError as e:
            return _unschedulable(str(e))
        return None

    def gate_keys(self, pod: Pod) -> Collection[Hashable] | None:
        # The claims a gated pod names (none while one of them cannot be named yet: its claim
        # hint then skips every claim, as _names cannot match); the claim events' object_keys.
        names = _claim_names(pod)
        return () if names is None else [(pod.metadata.namespace, name) for name in names]

    # -- PreFilter / Filter ---------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        s = _State()
        state.write(_STATE_KEY, s)
        if not pod.spec.resource_claims:
            return None, SKIP
        try:
            claims = self._pod_claims(pod)
        except ClaimNameError as e:
            return None, _unschedulable(str(e))
        if not claims:
            return None, SKIP
        s.available_on = [None] * len(claims)
        s.allocations = [None] * len(claims)
        objects = self.handle.snapshot.objects
        for index, claim in enumerate(claims):
            allocation = claim.status.allocation
            if (
                allocation is not None
                and not claim_can_be_reserved(claim)
                and not claim_reserved_for_pod(pod, claim)
            ):
                return None, _unschedulable(ERR_IN_USE)
            if allocation is not None:
                s.available_on[index] = allocation.node_selector
                continue
            s.to_allocate.append(index)
            if claim.metadata.uid in self._in_flight:
                return None, _unschedulable(
                    f"resource claim {claim_ref(claim)} is in the process of being allocated"
                )
            for request in claim.spec.devices.requests:
                if request.exactly is not None:
                    status = self._validate_class(request.exactly.device_class_name, request.name)
                elif request.first_available:
                    status = None
                    for sub in request.first_available:
                        status = self._validate_class(
                            sub.device_class_name, f"{request.name}/{sub.name}"
                        )
                        if status is not None:
                            break
                else:
                    status = _unschedulable(
                        f"resource claim {claim_ref(claim)}, request {request.name}: "
                        "unknown request type"
                    )
                if status is not None:
                    return None, status
        if s.to_allocate:
            indexed = s.slices = self._indexed_slices()
            to_allocate = [claims[i] for i in s.to_allocate]
            s.taken = self._allocated_devices()
            s.signature = (
                msgspec.json.encode([(c.metadata.namespace, c.spec) for c in to_allocate]),
                objects.version(DeviceClass),
                indexed.version,
            )
            s.allocator = Allocator(
                to_allocate,
                s.taken.devices,
                lambda name: objects.get(DeviceClass, name),
                indexed.all,
                timeout=self.filter_timeout,
                verdicts=indexed.verdicts,
            )
        s.claims = claims
        return None, None

    def _validate_class(self, class_name: str, request: str) -> Status | None:
        if not class_name:
            return Status(Code.ERROR, f"request {request}: unsupported request type")
        if self.handle.snapshot.objects.get(DeviceClass, class_name) is None:
            return _unschedulable(f"request {request}: device class {class_name} does not exist")
        return None

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        s = state.read(_STATE_KEY, _State)
        if not s.claims:
            return None
        n = node.node
        assert n is not None
        return self._filter_node(s, n)

    def _filter_node(self, s: _State, n: Node) -> Status | None:
        unavailable = [
            i
            for i, sel in enumerate(s.available_on)
            if sel is not None
            and not node_selector_matches(sel, n.metadata.labels, n.metadata.name)
        ]
        allocations: Found | None = None
        if s.allocator is not None:
            try:
                allocations = self._allocate(s, n)
            except AllocationTimeoutError:
                return _unschedulable(ERR_TIMED_OUT)
            except FailedOnNodeError as e:
                return _unschedulable(str(e))
            except AllocationError as e:
                return Status.as_error(e)
            if allocations is None:
                return _unschedulable(ERR_CANNOT_ALLOCATE)
        if unavailable:
            s.unavailable.update(unavailable)
            return _unschedulable(ERR_NOT_AVAILABLE)
        if allocations is not None:
            s.node_allocations[n.metadata.name] = allocations
        return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        """:meth:`filter` on every node. When every claim is allocated already (a pod joining
        a shared claim), at once: the nodes where all their devices are reachable pass; when
        every claim needs allocating, from the verdicts kept per slot
        (:meth:`_filter_to_allocate`); a mix of both, node by node."""
        s = state.read(_STATE_KEY, _State)
        if not s.claims:
            return super().filter_nodes(state, pod, nodes)
        if s.allocator is not None:
            if any(sel is not None for sel in s.available_on):
                return super().filter_nodes(state, pod, nodes)
            return self._filter_to_allocate(s, nodes)
        passing = np.ones(len(nodes), dtype=np.bool_)
        for index, selector in enumerate(s.available_on):
            if selector is None:
                continue
            reachable = NodeSelectorMatcher.parse(selector).mask(nodes)
            if not reachable.all():
                s.unavailable.add(index)
                passing &= reachable
        ids = (~passing).astype(np.int32)
        return NodeStatuses(ids, [None, _unschedulable(ERR_NOT_AVAILABLE)])

    def _filter_to_allocate(self, s: _State, nodes: Nodes) -> NodeStatuses:
        """:meth:`filter` on every node for claims that all need allocating, from verdicts
        kept per slot for their signature: only the nodes whose Node or whose pools' taken
        devices changed since are asked (:meth:`_allocate`, itself kept per node). Answers
        that depend on more than that (a search that timed out, failed or erred) are not
        kept."""
        assert s.taken is not None
        assert s.slices is not None
        table = nodes.snapshot.table
        v = self._verdicts
        if v is None or v.signature != s.signature or v.layout != table.layout:
            v = None
        else:
            rows = table.changed_rows_since(v.table_version)
            pools = s.taken.changed_since(v.taken_stamp)
            if rows is None or pools is None or not v.forget(rows[0], pools, s.slices, nodes):
                v = None
        if v is None:
            v = self._verdicts = _Verdicts(s.signature, table.layout, table.capacity)
        v.table_version = table.version
        v.taken_stamp = s.taken.stamp
        slots = nodes.slots
        ids = v.status[slots]
        statuses: list[Status | None] = [None, _unschedulable(ERR_CANNOT_ALLOCATE)]
        unknown = np.flatnonzero(ids < 0)
        if len(unknown):
            at = nodes.snapshot.at
            for i in unknown.tolist():
                slot = int(slots[i])
                n = at(slot).node
                assert n is not None
                name = n.metadata.name
                status = self._filter_node(s, n)
                if status is None:
                    ids[i] = v.status[slot] = 0
                    v.found[slot] = s.node_allocations[name]
                elif status.message == ERR_CANNOT_ALLOCATE:
                    ids[i] = v.status[slot] = 1
                else:
                    ids[i] = len(statuses)
                    statuses.append(status)
        s.verdicts = v
        return NodeStatuses(ids, statuses)

    def _allocate(self, s: _State, node: Node) -> Found | None:
        """The allocator on the slices reaching ``node`` (a node without any, for claims that
        need devices, is answered at once). Nodes reached by the same shared slices and none
        of their own get one answer per cycle; a node's answer is kept across cycles while
        the node, the claims' signature and its pools' taken devices are unchanged."""
        assert s.allocator is not None
        assert s.slices is not None
        assert s.taken is not None
        reach = s.slices.reach_of(node)
        if not reach.slices and all(c.spec.devices.requests for c in s.allocator.claims):
            return None
        if not reach.local and reach.slices in s.by_reach:
            return s.by_reach[reach.slices]
        taken = s.taken.versions(reach.pool_keys)
        name = node.metadata.name
        kept = self._searches.get(name)
        if (
            kept is not None
            and kept.node is node
            and kept.taken == taken
            and kept.signature == s.signature
        ):
            found = kept.found
        else:
            found = s.allocator.search(node, reach.pools)
            # Made now: a search holds the whole cycle's state (the taken devices) alive.
            found = None if found is None else Solved(found.results())
            self._searches[name] = _Search(node, s.signature, taken, found)
        if not reach.local:
            s.by_reach[reach.slices] = found
        return found

    # -- PostFilter ----------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        try:
            s = state.read(_STATE_KEY, _State)
        except KeyError:
            # PreFilter did not run: an earlier PreFilter plugin rejected the pod. kube-scheduler's
            # plugin then fails reading its state, and its error ends the FailedScheduling
            # message as it is (recorded from v1.34.4: "... PersistentVolumeClaims. not found").
            return None, Status(Code.ERROR, ERR_STATE_NOT_FOUND)
        if not s.claims:
            return None, Status(Code.UNSCHEDULABLE, MSG_NO_CLAIMS_TO_DEALLOCATE)
        for index in sorted(s.unavailable):
            claim = s.claims[index]
            reserved = claim.status.reserved_for
            if not reserved or (len(reserved) == 1 and reserved[0].uid == pod.metadata.uid):
                self._spawn(self._deallocate(claim))
                return None, Status(Code.UNSCHEDULABLE, "deallocation of ResourceClaim completed")
        return None, Status(Code.UNSCHEDULABLE, MSG_STILL_NOT_SCHEDULABLE)

    async def _deallocate(self, claim: ResourceClaim) -> None:
        client = self.handle.client
        if not isinstance(client, ResourceClaimAPIClient):
            return
        meta = claim.metadata
        patch = {
            "metadata": {"resourceVersion": meta.resource_version},
            "status": {"allocation": None, "reservedFor": None},
        }
        try:
            await client.patch_resource_claim(meta.namespace, meta.name, patch, status=True)
        except Exception as e:
            log.warning("deallocating resource claim %s: %s", claim_ref(claim), e)

    # -- Reserve / Unreserve / PreBind ----------------------------------------------------------

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s = state.read(_STATE_KEY, _State)
        if not s.to_allocate or s.allocator is None:
            return None
        found = s.node_allocations.get(node_name)
        if found is None and s.verdicts is not None:
            # A node Filter did not ask this cycle: its allocation is the kept one.
            slot = self.handle.snapshot.slot_of(node_name)
            found = None if slot is None else s.verdicts.found.get(slot)
        if found is None:
            return Status(Code.ERROR, "claim allocation not found for node")
        allocations = found.results()
        if len(allocations) != len(s.to_allocate):
            return Status(
                Code.ERROR,
                f"internal error, have {len(allocations)} allocations, "
                f"{len(s.to_allocate)} claims to allocate, want {len(s.to_allocate)} claims",
            )
        for index, allocation in zip(s.to_allocate, allocations, strict=True):
            s.allocations[index] = allocation
            claim = s.claims[index]
            meta = claim.metadata
            finalizers = (
                meta.finalizers if FINALIZER in meta.finalizers else [*meta.finalizers, FINALIZER]
            )
            self._taken.touch(meta.namespace, meta.name)
            self._in_flight[meta.uid] = msgspec.structs.replace(
                claim,
                metadata=msgspec.structs.replace(meta, finalizers=finalizers),
                status=msgspec.structs.replace(claim.status, allocation=allocation),
            )
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        s = state.get(_STATE_KEY)
        if not isinstance(s, _State):
            return
        for claim in s.claims:
            uid = claim.metadata.uid
            if self._in_flight.pop(uid, None) is not None:
                self._assumed.pop(uid, None)
                self._taken.touch(claim.metadata.namespace, claim.metadata.name)
            if claim.status.allocation is not None and claim_reserved_for_pod(pod, claim):
                self._spawn(self._unreserve(claim, pod))

    async def _unreserve(self, claim: ResourceClaim, pod: Pod) -> None:
        client = self.handle.client
        if not isinstance(client, ResourceClaimAPIClient):
            return
        meta = claim.metadata
        try:
            await client.unreserve_resource_claim(
                meta.namespace, meta.name, meta.uid, pod.metadata.uid
            )
        except Exception as e:  # the next attempt of the pod tries again
            log.warning("unreserve of resource claim %s: %s", claim_ref(claim), e)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        s = state.read(_STATE_KEY, _State)
        if not s.claims:
            return None
        for index, claim in enumerate(s.claims):
            if claim_reserved_for_pod(pod, claim):
                continue
            try:
                s.claims[index] = await self._bind_claim(s, index, pod)
            except Exception as e:
                log.debug("binding claim %s of pod %s failed: %s", claim_ref(claim), pod.key, e)
                return Status.as_error(e)
        return None

    async def _bind_claim(self, s: _State, index: int, pod: Pod) -> ResourceClaim:
        """``bindClaim``: the finalizer, then the allocation Reserve made and the pod in
        ``reservedFor``, each write conditional on the claim not having changed meanwhile.

        A write refused as a conflict reads the claim again and starts over, as
        ``retry.RetryOnConflict`` with ``retry.DefaultRetry`` does upstream: up to five
        attempts, 10 ms apart. The pods sharing a claim write it one after the other, each from
        the claim as the one before wrote it, so that they do not refuse each other's writes
        (kube-scheduler writes them at once and retries; the claims end the same).
        """
        client = self.handle.client
        if not isinstance(client, ResourceClaimAPIClient):
            raise RuntimeError("the front end cannot write resource claims")
        claim = s.claims[index]
        allocation = s.allocations[index]
        meta = claim.metadata
        uid = meta.uid
        writer = self._writers.setdefault(uid, _ClaimWriter())
        writer.users += 1
        try:
            async with writer.lock:
                # The view only moves forward: it is at least as new as PreFilter's claim.
                latest = self._get_claim(meta.namespace, meta.name)
                if latest is not None and latest.metadata.uid == uid:
                    claim = latest
                return await self._bind_claim_from(client, claim, allocation, pod)
        finally:
            writer.users -= 1
            if not writer.users:
                del self._writers[uid]
            if allocation is not None and self._in_flight.pop(uid, None) is not None:
                self._taken.touch(meta.namespace, meta.name)

    async def _bind_claim_from(
        self, client: ResourceClaimAPIClient, claim: ResourceClaim, allocation: Any, pod: Pod
    ) -> ResourceClaim:
        """:meth:`_bind_claim`'s writes, from ``claim``, retried on conflict."""
        meta = claim.metadata
        for attempt in range(CONFLICT_RETRY_STEPS):
            if attempt:
                await asyncio.sleep(CONFLICT_RETRY_DELAY * (1 + random.random() * 0.1))
                try:
                    claim = await client.get_resource_claim(meta.namespace, meta.name)
                except Exception as e:
                    raise RuntimeError(
                        f"get updated claim {claim_ref(claim)} after conflict: {e}"
                    ) from e
            try:
                claim = await self._write_binding(client, claim, allocation, pod)
            except _WriteError as e:
                if attempt + 1 < CONFLICT_RETRY_STEPS and client.is_conflict(e.cause):
                    log.debug("retrying update of claim %s after conflict", claim_ref(claim))
                    continue
                raise RuntimeError(str(e)) from e.cause
            self._assumed[meta.uid] = claim
            self._taken.touch(meta.namespace, meta.name)
            return claim
        raise AssertionError("unreachable: the last attempt returns or raises")

    @staticmethod
    async def _write_binding(
        client: ResourceClaimAPIClient, claim: ResourceClaim, allocation: Any, pod: Pod
    ) -> ResourceClaim:
        """One attempt of ``bindClaim``'s writes on ``claim`` as last read."""
        meta = claim.metadata
        if meta.deletion_timestamp is not None:
            raise RuntimeError(f"claim {claim_ref(claim)} got deleted in the meantime")
        if allocation is not None:
            if claim.status.allocation is not None:
                raise RuntimeError(
                    f"claim {claim_ref(claim)} got allocated elsewhere in the meantime"
                )
            if FINALIZER not in meta.finalizers:
                patch = {
                    "metadata": {
                        "resourceVersion": meta.resource_version,
                        "finalizers": [*meta.finalizers, FINALIZER],
                    }
                }
                try:
                    claim = await client.patch_resource_claim(meta.namespace, meta.name, patch)
                except Exception as e:
                    raise _WriteError(f"add finalizer to claim {claim_ref(claim)}: {e}", e) from e
        status: dict[str, Any] = {
            "reservedFor": [
                *(msgspec.to_builtins(r) for r in claim.status.reserved_for),
                {"resource": "pods", "name": pod.metadata.name, "uid": pod.metadata.uid},
            ]
        }
        if allocation is not None:
            status["allocation"] = msgspec.to_builtins(allocation)
        patch = {"metadata": {"resourceVersion": claim.metadata.resource_version}, "status": status}
        try:
            return await client.patch_resource_claim(meta.namespace, meta.name, patch, status=True)
        except Exception as e:
            what = "allocation and reservation" if allocation is not None else "reservation"
            raise _WriteError(f"add {what} to claim {claim_ref(claim)}: {e}", e) from e

    def _spawn(self, coro: Any) -> None:
        try:
            task = asyncio.get_running_loop().create_task(coro)
        except RuntimeError:  # no event loop: nothing can be written
            coro.close()
            return
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def aclose(self) -> None:
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Node labels against slices' node selectors (queueing hints on, as in v1.34).
            ClusterEventWithHint(
                ClusterEvent(
                    "Node",
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_ALLOCATABLE,
                )
            ),
            # Allocation is tracked in ResourceClaims.
            ClusterEventWithHint(
                ClusterEvent(RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
                self.is_schedulable_after_claim_change,
                claim_keys,
            ),
            # The resourceclaim controller names the claim it made in the pod's status.
            ClusterEventWithHint(
                ClusterEvent("Pod", ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                self.is_schedulable_after_pod_change,
            ),
            # A missing class created, or a class's selectors changed.
            ClusterEventWithHint(ClusterEvent(DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            # New or changed devices.
            ClusterEventWithHint(ClusterEvent(RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE)),
        ]

    def is_schedulable_after_claim_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """A claim of the pod created or its status changed, or any claim deallocated."""
        try:
            original, modified = as_objects(old, new, ResourceClaim)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None:
            return QueueingHint.QUEUE
        deallocated = _deallocated(original, modified)
        if not deallocated and not _names(pod, modified):
            # Skip, as below, without looking up each of the pod's claims: this runs for every
            # pending pod on every claim change.
            return QueueingHint.SKIP
        try:
            uses = any(c.metadata.uid == modified.metadata.uid for c in self._pod_claims(pod))
        except ClaimNameError:
            return QueueingHint.SKIP
        if deallocated:
            return QueueingHint.QUEUE
        if not uses:
            return QueueingHint.SKIP
        if original is None:
            return QueueingHint.QUEUE
        return QueueingHint.SKIP if original.status == modified.status else QueueingHint.QUEUE

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The pod itself, now that every claim it names exists."""
        try:
            _, modified = as_objects(old, new, Pod)
        except TypeError:
            return QueueingHint.QUEUE
        if modified is None or modified.metadata.uid != pod.metadata.uid:
            return QueueingHint.SKIP
        if not modified.spec.resource_claims:
            return QueueingHint.SKIP
        try:
            self._pod_claims(modified)
        except ClaimNameError:
            return QueueingHint.SKIP
        return QueueingHint.QUEUE


def claim_keys(old: Any, new: Any) -> Collection[Hashable] | None:
    """The claim event's ``object_keys``: the claim, unless it was deallocated (which may let
    any pod fit) or is no claim (both of which ``is_schedulable_after_claim_change`` queues
    every pod for)."""
    try:
        original, modified = as_objects(old, new, ResourceClaim)
    except TypeError:
        return None
    if modified is None or _deallocated(original, modified):
        return None
    return ((modified.metadata.namespace, modified.metadata.name),)


def _deallocated(original: ResourceClaim | None, modified: ResourceClaim) -> bool:
    """Whether a claim change freed the devices it had."""
    return (
        original is not None
        and original.status.allocation is not None
        and modified.status.allocation is None
    )


def _claim_names(pod: Pod) -> list[str | None] | None:
    """The names of the pod's claims (``None`` for one none was made for); ``None`` while one
    of them cannot be named yet."""
    try:
        return [resource_claim_name(pod, i)[0] for i in range(len(pod.spec.resource_claims))]
    except ClaimNameError:
        return None


def _names(pod: Pod, claim: ResourceClaim) -> bool:
    """Whether one of the pod's claims is named as ``claim`` (``False`` when one cannot be
    named yet)."""
    if claim.metadata.namespace != pod.metadata.namespace:
        return False
    names = _claim_names(pod)
    return names is not None and claim.metadata.name in names


def _newer(a: ResourceClaim, b: ResourceClaim) -> bool:
    """Whether ``a`` is a later version of the claim than ``b``. resourceVersions are integers
    on a real API server; ``simulate`` writes ``sim-<n>``: versions that differ only in their
    number are compared by it, anything else as text."""
    ra, rb = a.metadata.resource_version, b.metadata.resource_version
    pa, na = _split_version(ra)
    pb, nb = _split_version(rb)
    if pa == pb and na is not None and nb is not None:
        return na > nb
    return ra != rb and ra > rb


def _split_version(version: str) -> tuple[str, int | None]:
    """``version`` as its text before a trailing number, and that number."""
    head = version.rstrip("0123456789")
    tail = version[len(head) :]
    return head, int(tail) if tail else None
