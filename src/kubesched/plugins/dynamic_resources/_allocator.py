"""The structured-parameters allocator: devices for a pod's unallocated claims on one node.

kube-scheduler v1.34's ``k8s.io/dynamic-resource-allocation/structured`` (its ``stable``
implementation, with the default features: admin access and prioritized lists on, partitionable
devices, device taints, binding conditions and consumable capacity off). Claims are allocated
one after the other, each request's devices one after the other, trying every eligible device
(not in use, matching the class's and the request's CEL selectors, keeping the claim's
constraints) in pool, slice and device order, backtracking when a later device cannot be found:
an exhaustive search that stops at the first complete solution. A ``firstAvailable`` request
takes the first of its subrequests that leads to a solution.

Devices allocated to any claim (except with admin access), or allocated in flight (Reserve done,
PreBind not yet), are in use. Errors in the claims or classes themselves (a CEL selector that
fails, an ``All`` request on a pool being updated) are :class:`AllocationError`: kube-scheduler
aborts the pod's attempt with them. :class:`FailedOnNodeError` concerns one node only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kubesched import KubeschedError
from kubesched.api import (
    ALLOCATION_MODE_ALL,
    ALLOCATION_MODE_EXACT_COUNT,
    ALLOCATION_RESULTS_MAX_SIZE,
    CONFIG_SOURCE_CLAIM,
    CONFIG_SOURCE_CLASS,
    AllocationResult,
    Device,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceAttribute,
    DeviceClass,
    DeviceRequest,
    DeviceRequestAllocationResult,
    DeviceSelector,
    DeviceSubRequest,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.plugins.dynamic_resources._pools import Pool, gather_pools, slice_reaches

#: ``(driver, pool, device)``.
DeviceID = tuple[str, str, str]


class AllocationError(KubeschedError):
    """Something wrong with a claim or class: the pod's attempt ends with this error."""


class FailedOnNodeError(KubeschedError):
    """``ErrFailedAllocationOnNode``: no allocation on this node, for a reason worth telling."""


class AllocationTimeoutError(KubeschedError):
    """The search on one node took longer than the plugin's ``filterTimeout``."""


def device_id_str(d: DeviceID) -> str:
    return "/".join(d)


def claim_ref(claim: ResourceClaim) -> str:
    """``klog.KObj``: ``namespace/name``, or the name of an object without namespace."""
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """A request or one of its subrequests (``requestAccessor``)."""

    name: str
    #: The request a subrequest belongs to, ``""`` for a request.
    parent: str
    class_name: str
    mode: str
    count: int
    admin_access: bool
    selectors: tuple[DeviceSelector, ...]

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.name}" if self.parent else self.name

    @classmethod
    def of(cls, request: DeviceRequest | DeviceSubRequest, parent: str = "") -> RequestSpec:
        if isinstance(request, DeviceRequest):
            assert request.exactly is not None
            r = request.exactly
            admin = bool(r.admin_access)
            class_name, mode, count, sel = (
                r.device_class_name,
                r.allocation_mode,
                r.count,
                r.selectors,
            )
        else:
            admin = False
            class_name, mode, count, sel = (
                request.device_class_name,
                request.allocation_mode,
                request.count,
                request.selectors,
            )
        mode = mode or ALLOCATION_MODE_EXACT_COUNT  # the API server's default
        if count is None:
            count = 1 if mode == ALLOCATION_MODE_EXACT_COUNT else 0
        return cls(request.name, parent, class_name, mode, count, admin, tuple(sel))


@dataclass(slots=True)
class _Candidate:
    id: DeviceID
    device: Device
    slice: ResourceSlice


@dataclass(slots=True)
class _RequestData:
    spec: RequestSpec
    cls: DeviceClass
    num_devices: int
    #: For ``All``: the devices, known in advance.
    all_devices: list[_Candidate] = field(default_factory=list)


@dataclass(slots=True)
class _Result:
    id: DeviceID
    request: RequestSpec
    device: Device
    slice: ResourceSlice


class _MatchAttribute:
    """``matchAttributeConstraint``: the devices of the named requests (all, if none named)
    share one value of the attribute, which each must have."""

    def __init__(self, requests: list[str], attribute: str) -> None:
        self.requests = set(requests)
        self.attribute = attribute
        self.value: DeviceAttribute | None = None
        self.count = 0

    def _applies(self, spec: RequestSpec) -> bool:
        if not self.requests:
            return True
        if spec.parent:
            return spec.parent in self.requests or spec.full_name in self.requests
        return spec.name in self.requests

    def add(self, spec: RequestSpec, device: Device, did: DeviceID) -> bool:
        if not self._applies(spec):
            return True
        value = lookup_attribute(device, did, self.attribute)
        if value is None:
            return False
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        if not _same_attribute(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, spec: RequestSpec) -> None:
        if self._applies(spec):
            self.count -= 1


def _same_attribute(a: DeviceAttribute, b: DeviceAttribute | None) -> bool:
    if b is None:
        return False
    if a.string is not None:
        return b.string is not None and a.string == b.string
    if a.int_ is not None:
        return b.int_ is not None and a.int_ == b.int_
    if a.bool_ is not None:
        return b.bool_ is not None and a.bool_ == b.bool_
    if a.version is not None:
        # Semantic versions are minimal by definition: equal strings are equal versions.
        return b.version is not None and a.version == b.version
    return False


def lookup_attribute(device: Device, did: DeviceID, name: str) -> DeviceAttribute | None:
    """A fully qualified attribute of the device; the driver's own domain may be left out."""
    attr = device.attributes.get(name)
    if attr is not None:
        return attr
    domain, sep, ident = name.partition("/")
    if not sep or domain != did[0]:
        return None
    return device.attributes.get(ident)


class Allocator:
    """Allocation of one pod's unallocated claims, set up once per scheduling cycle and asked
    about each node. Selector verdicts are kept across nodes (a network-attached device is the
    same on every node)."""

    def __init__(
        self,
        claims: list[ResourceClaim],
        allocated: set[DeviceID],
        classes: Callable[[str], DeviceClass | None],
        slices: Iterable[ResourceSlice],
        *,
        timeout: float | None = None,
        verdicts: dict[tuple[str, int], bool | str] | None = None,
    ) -> None:
        self.claims = claims
        self.allocated = allocated
        self.classes = classes
        self.slices = list(slices)
        self.timeout = timeout
        self._matches: dict[tuple[int, int, str, str], bool] = {}
        #: One selector's verdict on one device (by the device object's identity: the caller
        #: keeps the slices alive as long as this), or its CEL error; shared across pods.
        self._verdicts = verdicts if verdicts is not None else {}

    def allocate(self, node: Node) -> list[AllocationResult] | None:
        """One allocation per claim, or ``None`` if the claims do not fit on ``node``; see
        :meth:`search`."""
        found = self.search(node, gather_pools(s for s in self.slices if slice_reaches(s, node)))
        return None if found is None else found.results()

    def search(self, node: Node, pools: list[Pool]) -> Found | None:
        """The devices for the claims from ``pools`` (those reaching ``node``), or ``None`` if
        they do not fit. Raises :class:`AllocationError`, :class:`FailedOnNodeError` or
        :class:`AllocationTimeoutError`."""
        run = _Run(self, node, pools)
        return run if run.run() else None

    def selectable(self, claim_index: int, data: _RequestData, candidate: _Candidate) -> bool:
        """``isSelectable``: the class's selectors, then the request's, on the device."""
        device = candidate.device
        if device.binding_conditions:
            return False  # binding conditions are off in v1.34
        key = (id(device), claim_index, data.spec.parent, data.spec.name)
        hit = self._matches.get(key)
        if hit is not None:
            return hit
        # CEL (celpy and its parser, a third of a second) loads with the first selector asked
        # about, not with every command that imports the plugin (a scheduler serving a cluster
        # loads it as it starts: DynamicResources.prepare).
        from kubesched.plugins.dynamic_resources._cel import (  # noqa: PLC0415
            CELError,
            compile_selector,
            device_variable,
        )

        claim = self.claims[claim_index]
        variable = None
        ok = True
        for owner, selectors in (
            (f"class {data.cls.metadata.name}", data.cls.spec.selectors),
            (f"claim {claim_ref(claim)}", data.spec.selectors),
        ):
            for i, sel in enumerate(selectors):
                assert sel.cel is not None  # checked when the request was validated
                compiled = compile_selector(sel.cel.expression)
                if compiled.error is not None:
                    raise AllocationError(
                        f"{owner}: selector #{i}: CEL compile error: {compiled.error}"
                    )
                vkey = (sel.cel.expression, id(device))
                verdict = self._verdicts.get(vkey)
                if verdict is None:
                    try:
                        if variable is None:
                            variable = device_variable(candidate.id[0], device)
                        verdict = compiled.matches(variable)
                    except CELError as e:
                        verdict = str(e)
                    self._verdicts[vkey] = verdict
                if isinstance(verdict, str):
                    raise AllocationError(f"{owner}: selector #{i}: CEL runtime error: {verdict}")
                ok = verdict
                if not ok:
                    break
            if not ok:
                break
        self._matches[key] = ok
        return ok


class Found(Protocol):
    """A solution on one node; the allocation results are made when asked for (Reserve)."""

    def results(self) -> list[AllocationResult]: ...


@dataclass(frozen=True, slots=True)
class Solved:
    """A solution's allocation results, made once."""

    allocations: list[AllocationResult]

    def results(self) -> list[AllocationResult]:
        return self.allocations


class _Run:
    """One ``Allocate`` call: the search state on one node."""

    def __init__(self, alloc: Allocator, node: Node, pools: list[Pool]) -> None:
        self.a = alloc
        self.node = node
        self.pools = pools
        self.deadline = None if not alloc.timeout else time.monotonic() + alloc.timeout
        self.calls = 0
        #: Per claim, per request: the request's data, or for firstAvailable its subrequests'.
        self.requests: list[list[list[_RequestData]]] = []
        self.constraints: list[list[_MatchAttribute]] = []
        #: Device -> claims (indices) it is being allocated to in this search.
        self.allocating: dict[DeviceID, set[int]] = {}
        self.picked: list[list[_Result]] = [[] for _ in alloc.claims]
        #: (claim, request) -> the subrequest chosen.
        self.chosen: dict[tuple[int, int], int] = {}

    # -- setup -------------------------------------------------------------------------------

    def _validate(self, claim_index: int, spec: RequestSpec) -> _RequestData:
        claim = self.a.claims[claim_index]
        where = f"claim {claim_ref(claim)}, request {spec.name}"
        for i, sel in enumerate(spec.selectors):
            if sel.cel is None:
                raise AllocationError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if not spec.class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        cls = self.a.classes(spec.class_name)
        if cls is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {spec.class_name}: "
                f'deviceclass.resource.k8s.io "{spec.class_name}" not found'
            )
        for i, sel in enumerate(cls.spec.selectors):
            if sel.cel is None:
                raise AllocationError(
                    f"{where}, selector #{i}: CEL expression empty (unsupported selector type?)"
                )
        if spec.mode == ALLOCATION_MODE_EXACT_COUNT:
            return _RequestData(spec, cls, spec.count)
        if spec.mode != ALLOCATION_MODE_ALL:
            raise AllocationError(f"{where}: unsupported count mode {spec.mode}")
        data = _RequestData(spec, cls, 0)
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.id} "
                    "is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.id} "
                    "is currently invalid"
                )
            for s in pool.slices:
                for d in s.spec.devices:
                    c = _Candidate((pool.driver, pool.name, d.name), d, s)
                    if self.a.selectable(claim_index, data, c):
                        data.all_devices.append(c)
        data.num_devices = len(data.all_devices)
        return data

    def run(self) -> bool:
        for ci, claim in enumerate(self.a.claims):
            per_claim: list[list[_RequestData]] = []
            minimum = 0
            for request in claim.spec.devices.requests:
                if request.first_available:
                    subs = [
                        self._validate(ci, RequestSpec.of(sub, request.name))
                        for sub in request.first_available
                    ]
                    per_claim.append(subs)
                    minimum += min(s.num_devices for s in subs)
                else:
                    per_claim.append([self._validate(ci, RequestSpec.of(request))])
                    minimum += per_claim[-1][0].num_devices
            if minimum > ALLOCATION_RESULTS_MAX_SIZE:
                raise AllocationError(
                    f"claim {claim_ref(claim)}: number of requested devices {minimum} exceeds "
                    f"the claim limit of {ALLOCATION_RESULTS_MAX_SIZE}"
                )
            self.requests.append(per_claim)
            constraints = []
            for i, c in enumerate(claim.spec.devices.constraints):
                if c.match_attribute is None:
                    raise AllocationError(
                        f"claim {claim_ref(claim)}, constraint #{i}: empty constraint "
                        "(unsupported constraint type?)"
                    )
                constraints.append(_MatchAttribute(c.requests, c.match_attribute))
            self.constraints.append(constraints)
        try:
            done = self._claim(0)
        except _TooManyError:
            done = False
        if not done and any(p.invalid for p in self.pools):
            raise FailedOnNodeError("invalid resource pools were encountered")
        return done

    def results(self) -> list[AllocationResult]:
        return [self._result(ci) for ci in range(len(self.a.claims))]

    # -- the search ----------------------------------------------------------------------------

    def _tick(self) -> None:
        self.calls += 1
        if self.deadline is not None and self.calls % 16 == 0 and time.monotonic() > self.deadline:
            raise AllocationTimeoutError

    def _claim(self, ci: int) -> bool:
        if ci >= len(self.a.claims):
            return True
        try:
            return self._request(ci, 0)
        except _TooManyError:
            # A later claim that asks for fewer devices through another subrequest may still
            # work out with a different allocation of this one.
            return False

    def _request(self, ci: int, ri: int) -> bool:
        """Allocate request ``ri`` of claim ``ci`` and everything after it."""
        self._tick()
        if ri >= len(self.requests[ci]):
            return self._claim(ci + 1)
        options = self.requests[ci][ri]
        if len(options) == 1 and not options[0].spec.parent:
            return self._device(ci, ri, options[0], 0)
        all_too_many = True
        for si, data in enumerate(options):
            try:
                ok = self._device(ci, ri, data, 0)
            except _TooManyError:
                continue
            all_too_many = False
            if ok:
                self.chosen[(ci, ri)] = si
                return True
        if all_too_many:
            raise _TooManyError
        return False

    def _device(self, ci: int, ri: int, data: _RequestData, di: int) -> bool:
        """Allocate device ``di`` of ``data`` and everything after it."""
        self._tick()
        spec = data.spec
        if spec.mode == ALLOCATION_MODE_ALL and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._request(ci, ri + 1)
        if len(self.picked[ci]) + data.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE:
            raise _TooManyError
        if spec.mode == ALLOCATION_MODE_ALL:
            c = data.all_devices[di]
            undo = self._take(ci, data, c, must=True)
            if undo is None:
                return False
            try:
                if self._device(ci, ri, data, di + 1):
                    return True
            except BaseException:
                undo()
                raise
            undo()
            return False
        for pool in self.pools:
            if pool.incomplete or pool.invalid:
                continue
            for s in pool.slices:
                for d in s.spec.devices:
                    did = (pool.driver, pool.name, d.name)
                    if not self._free(did, ci, spec):
                        continue
                    c = _Candidate(did, d, s)
                    if not self.a.selectable(ci, data, c):
                        continue
                    undo = self._take(ci, data, c, must=False)
                    if undo is None:
                        continue
                    try:
                        if self._device(ci, ri, data, di + 1):
                            return True
                    except BaseException:
                        undo()
                        raise
                    undo()
        return False

    def _free(self, did: DeviceID, ci: int, spec: RequestSpec) -> bool:
        if spec.admin_access:
            # Admin access may use a device in use elsewhere, but not twice in one claim.
            return ci not in self.allocating.get(did, ())
        return did not in self.a.allocated and not self.allocating.get(did)

    def _take(
        self, ci: int, data: _RequestData, c: _Candidate, *, must: bool
    ) -> Callable[[], None] | None:
        """``allocateDevice``: record ``c`` as allocated for the request, or ``None`` if it is
        in use or breaks a constraint; the function undoing it."""
        spec = data.spec
        if not self._free(c.id, ci, spec):
            return None
        if c.device.consumes_counters:
            return None  # partitionable devices are off in v1.34
        constraints = self.constraints[ci]
        for i, con in enumerate(constraints):
            if not con.add(spec, c.device, c.id):
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(self.a.claims[ci])}, request {spec.name}: cannot add "
                        f"device {device_id_str(c.id)} because a claim constraint would not be "
                        "satisfied"
                    )
                for prev in constraints[:i]:
                    prev.remove(spec)
                return None
        self.allocating.setdefault(c.id, set()).add(ci)
        self.picked[ci].append(_Result(c.id, spec, c.device, c.slice))
        n = len(self.picked[ci]) - 1

        def undo() -> None:
            for con in constraints:
                con.remove(spec)
            self.allocating[c.id].discard(ci)
            del self.picked[ci][n:]

        return undo

    # -- results -------------------------------------------------------------------------------

    def _result(self, ci: int) -> AllocationResult:
        claim = self.a.claims[ci]
        results = [
            DeviceRequestAllocationResult(
                request=r.request.full_name,
                driver=r.id[0],
                pool=r.id[1],
                device=r.id[2],
                admin_access=True if r.request.admin_access else None,
            )
            for r in self.picked[ci]
        ]
        requests = claim.spec.devices.requests
        config: list[DeviceAllocationConfiguration] = []
        # Each class's configuration once, naming every request that used the class.
        by_class: dict[str, tuple[int, int]] = {}
        for ri in range(len(requests)):
            options = self.requests[ci][ri]
            data = options[self.chosen.get((ci, ri), 0)]
            name = data.spec.full_name
            cls = data.cls
            span = by_class.get(cls.metadata.name)
            if span is not None:
                for i in range(*span):
                    config[i].requests.append(name)
                continue
            start = len(config)
            for class_config in cls.spec.config:
                config.append(
                    DeviceAllocationConfiguration(
                        source=CONFIG_SOURCE_CLASS, requests=[name], opaque=class_config.opaque
                    )
                )
            by_class[cls.metadata.name] = (start, len(config))
        for cc in claim.spec.devices.config:
            if not cc.requests:
                config.append(
                    DeviceAllocationConfiguration(source=CONFIG_SOURCE_CLAIM, opaque=cc.opaque)
                )
                continue
            for ri, request in enumerate(requests):
                if request.name in cc.requests:
                    applies = True
                elif request.first_available:
                    sub = request.first_available[self.chosen.get((ci, ri), 0)]
                    applies = f"{request.name}/{sub.name}" in cc.requests
                else:
                    applies = False
                if applies:
                    config.append(
                        DeviceAllocationConfiguration(
                            source=CONFIG_SOURCE_CLAIM, requests=list(cc.requests), opaque=cc.opaque
                        )
                    )
        for c in config:
            if len(c.requests) == len(requests):
                c.requests = []  # empty means all
        return AllocationResult(
            devices=DeviceAllocationResult(results=results, config=config),
            node_selector=_node_selector(self.picked[ci]),
        )


class _TooManyError(Exception):
    """``errAllocationResultMaxSizeExceeded``: more devices than a claim may hold."""


def _node_selector(results: list[_Result]) -> NodeSelector | None:
    """``createNodeSelector``: where the claim's devices are reachable."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for r in results:
        spec = r.slice.spec
        if spec.node_name:
            return NodeSelector(
                node_selector_terms=[
                    NodeSelectorTerm(
                        match_fields=[
                            NodeSelectorRequirement(
                                key="metadata.name", operator="In", values=[spec.node_name]
                            )
                        ]
                    )
                ]
            )
        if spec.node_selector is not None and spec.node_selector.node_selector_terms:
            term = spec.node_selector.node_selector_terms[0]
            _add_new(term.match_fields, fields)
            _add_new(term.match_expressions, expressions)
    if fields or expressions:
        return NodeSelector(
            node_selector_terms=[
                NodeSelectorTerm(match_expressions=expressions, match_fields=fields)
            ]
        )
    return None


def _add_new(src: list[NodeSelectorRequirement], dst: list[NodeSelectorRequirement]) -> None:
    for r in src:
        if not any(
            e.key == r.key and e.operator == r.operator and set(e.values) == set(r.values)
            for e in dst
        ):
            dst.append(r)
