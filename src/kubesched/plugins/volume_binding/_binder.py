"""kube-scheduler's ``volumeBinder``: which PVCs a pod needs bound, which PVs or provisioning
satisfy them on which nodes, assuming the choice, and binding it through the API.

``FindPodVolumes`` runs per node upstream. Here :class:`Finder` does the node-independent part
once per pod (the claims' candidate PVs, smallest first, and their storage classes) and the
node-dependent part (PV node affinity, allowed topologies, which PV each node would take) over
all nodes at once with boolean masks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import msgspec
import numpy as np

from kubesched import KubeschedError
from kubesched.api import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    CLAIM_BOUND,
    NOT_SUPPORTED_PROVISIONER,
    PERSISTENT_VOLUME_FILESYSTEM,
    RESOURCE_STORAGE,
    VOLUME_AVAILABLE,
    VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER,
    VOLUME_BOUND,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    QuantityError,
    StorageClass,
    claim_reference,
    ephemeral_volume_is_for_pod,
    is_volume_bound_to_claim,
    label_selector_matches,
    node_selector_requirement_is_valid,
    parse_quantity,
    persistent_volume_claim_class,
    persistent_volume_class,
    pod_claim_names,
    volume_node_affinity_matches,
)
from kubesched.framework import (
    BoolArray,
    Code,
    IntArray,
    Nodes,
    NodeStatuses,
    Snapshot,
    Status,
    StorageAPIClient,
)
from kubesched.plugins.volume_binding._cache import AssumeCache, AssumeError, resource_version_int
from kubesched.plugins.volume_binding._masks import node_selector_mask, topology_terms_mask

log = logging.getLogger(__name__)

#: No PV to bind and no way to provision one on the node.
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
#: The PV a bound claim uses cannot be reached from the node (its node affinity).
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
#: Storage capacity tracking says the node's storage has no room (not evaluated here).
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
#: A bound claim names a PV that does not exist.
ERR_REASON_PV_NOT_EXIST = (
    "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
)

_NODE_CONFLICT, _BIND_CONFLICT, _PV_NOT_EXIST = 1, 2, 4
_ERROR_ID = 8


class VolumeBindingError(KubeschedError):
    """An inconsistency that makes the attempt an error (retried with backoff)."""


def storage_request(pvc: PersistentVolumeClaim) -> Fraction:
    return _quantity(pvc.spec.resources.requests.get(RESOURCE_STORAGE))


def storage_capacity(pv: PersistentVolume) -> Fraction:
    return _quantity(pv.spec.capacity.get(RESOURCE_STORAGE))


def _quantity(text: str | None) -> Fraction:
    if text is None:
        return Fraction(0)
    try:
        return parse_quantity(text)
    except QuantityError:
        return Fraction(0)


def pvc_key(pvc: PersistentVolumeClaim) -> str:
    return f"{pvc.metadata.namespace}/{pvc.metadata.name}"


def is_pvc_fully_bound(pvc: PersistentVolumeClaim) -> bool:
    """``isPVCFullyBound``: the claim names its volume and the binding is complete."""
    return bool(pvc.spec.volume_name) and ANN_BIND_COMPLETED in pvc.metadata.annotations


# --- the pod's claims ---------------------------------------------------------------------------


@dataclass(slots=True)
class PodVolumeClaims:
    """``PodVolumeClaims``: the pod's PVCs by what binding still needs."""

    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    #: Unbound, with a WaitForFirstConsumer class: the scheduler binds or provisions them.
    delay: list[PersistentVolumeClaim] = field(default_factory=list)
    #: Unbound with Immediate binding (or prebound to a PV): the PV controller's job.
    immediate: list[PersistentVolumeClaim] = field(default_factory=list)
    #: Storage class -> its PVs, for the delayed claims.
    volumes: dict[str, list[PersistentVolume]] = field(default_factory=dict)


def is_delay_binding_mode(pvc: PersistentVolumeClaim, snapshot: Snapshot) -> bool:
    """``IsDelayBindingMode``: the claim's class exists and waits for the first consumer."""
    name = persistent_volume_claim_class(pvc)
    if not name:
        return False
    sc = snapshot.objects.get(StorageClass, name)
    if sc is None:
        return False
    if sc.volume_binding_mode is None:
        raise VolumeBindingError(f'VolumeBindingMode not set for StorageClass "{name}"')
    return sc.volume_binding_mode == VOLUME_BINDING_WAIT_FOR_FIRST_CONSUMER


def _claim(
    pod: Pod, name: str, ephemeral: bool, cache: AssumeCache
) -> tuple[bool, PersistentVolumeClaim]:
    """``isVolumeBound``: whether the claim is fully bound, and the claim."""
    ns = pod.metadata.namespace
    pvc = cache.pvcs.get(name, ns)
    if pvc is None:
        raise VolumeBindingError(
            f'error getting PVC "{ns}/{name}": '
            f'could not find v1.PersistentVolumeClaim "{ns}/{name}"'
        )
    if ephemeral and (err := ephemeral_volume_is_for_pod(pod, pvc)) is not None:
        raise VolumeBindingError(err)
    return is_pvc_fully_bound(pvc), pvc


def get_pod_volume_claims(pod: Pod, cache: AssumeCache, snapshot: Snapshot) -> PodVolumeClaims:
    """``GetPodVolumeClaims``; raises :class:`VolumeBindingError`."""
    out = PodVolumeClaims()
    for name, ephemeral in pod_claim_names(pod):
        bound, pvc = _claim(pod, name, ephemeral, cache)
        if bound:
            out.bound.append(pvc)
        elif is_delay_binding_mode(pvc, snapshot) and not pvc.spec.volume_name:
            out.delay.append(pvc)
        else:
            out.immediate.append(pvc)
    for pvc in out.delay:
        cls = persistent_volume_claim_class(pvc)
        out.volumes[cls] = cache.pvs_of_class(cls)
    return out


def are_pod_volumes_bound(pod: Pod, cache: AssumeCache) -> bool:
    """``arePodVolumesBound``: every PVC of the pod is fully bound."""
    for name, ephemeral in pod_claim_names(pod):
        try:
            bound, _ = _claim(pod, name, ephemeral, cache)
        except VolumeBindingError:
            return False
        if not bound:
            return False
    return True


# --- finding volumes for a pod on many nodes -------------------------------------------------


@dataclass(slots=True)
class PodVolumes:
    """``PodVolumes``: what binding the pod's claims on one node takes."""

    #: (claim, PV to bind it to), in matching order.
    static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = field(default_factory=list)
    #: Claims to provision on the node.
    dynamic: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass(slots=True)
class _Candidates:
    """One delayed claim's PVs, node-independent checks done: PVs prebound to it (first in the
    list decides), then the others by size (the smallest matching one wins)."""

    prebound: list[int]
    others: list[int]


@dataclass(slots=True)
class _Provisioning:
    error: str | None
    #: The class's provisioner can provision at all.
    possible: bool = False
    storage_class: StorageClass | None = None


def _volume_mode(mode: str | None) -> str:
    return mode or PERSISTENT_VOLUME_FILESYSTEM


def _candidates(
    pvc: PersistentVolumeClaim, pvs: list[int], pv_list: list[PersistentVolume]
) -> _Candidates:
    """``FindMatchingVolume`` with everything that does not depend on the node."""
    requested = storage_request(pvc)
    requested_class = persistent_volume_claim_class(pvc)
    claim_vac = pvc.spec.volume_attributes_class_name or ""
    selector = pvc.spec.selector
    prebound: list[int] = []
    others: list[tuple[Fraction, int, int]] = []
    for order, i in enumerate(pvs):
        pv = pv_list[i]
        if pv.spec.claim_ref is not None and not is_volume_bound_to_claim(pv, pvc):
            continue
        capacity = storage_capacity(pv)
        if capacity < requested:
            continue
        if _volume_mode(pvc.spec.volume_mode) != _volume_mode(pv.spec.volume_mode):
            continue
        if claim_vac != (pv.spec.volume_attributes_class_name or ""):
            continue
        if pv.metadata.deletion_timestamp is not None:
            continue
        if is_volume_bound_to_claim(pv, pvc):
            prebound.append(i)
            continue
        if pv.status.phase != VOLUME_AVAILABLE:
            continue
        if selector is not None and not label_selector_matches(selector, pv.metadata.labels):
            continue
        if persistent_volume_class(pv) != requested_class:
            continue
        if not set(pvc.spec.access_modes) <= set(pv.spec.access_modes):
            continue
        others.append((capacity, order, i))
    others.sort()
    return _Candidates(prebound, [i for _, _, i in others])


class Finder:
    """``FindPodVolumes`` for one pod, over any nodes, remembering what each passing node would
    bind (for Reserve) by node slot."""

    def __init__(self, snapshot: Snapshot, cache: AssumeCache, claims: PodVolumeClaims) -> None:
        self.snapshot = snapshot
        self.cache = cache
        self.claims = claims
        self.delay = claims.delay
        self.pv_list: list[PersistentVolume] = []
        self._topology: dict[str, BoolArray] = {}
        index: dict[str, int] = {}
        for pvs in claims.volumes.values():
            for pv in pvs:
                if pv.metadata.name not in index:
                    index[pv.metadata.name] = len(self.pv_list)
                    self.pv_list.append(pv)
        # Claims the scheduler already chose a node for are provisioned there (or nowhere).
        self.selected = [
            k for k, c in enumerate(self.delay) if ANN_SELECTED_NODE in c.metadata.annotations
        ]
        rest = [k for k in range(len(self.delay)) if k not in self.selected]
        # byPVCSize: the smallest request first, so it takes the smallest fitting PV.
        self.match_order = sorted(rest, key=lambda k: storage_request(self.delay[k]))
        self.provision_order = self.selected + self.match_order
        self.candidates: dict[int, _Candidates] = {}
        for k in self.match_order:
            pvc = self.delay[k]
            of_class = claims.volumes[persistent_volume_claim_class(pvc)]
            indexes = [index[p.metadata.name] for p in of_class]
            self.candidates[k] = _candidates(pvc, indexes, self.pv_list)
        self.provisioning = {k: self._provisioning(self.delay[k]) for k in self.provision_order}
        cap = snapshot.table.capacity
        n_claims = len(self.delay)
        self.passed: BoolArray = np.zeros(cap, dtype=np.bool_)
        self.chosen: IntArray = np.full((n_claims, cap), -1, dtype=np.int64)
        self.provision: BoolArray = np.zeros((n_claims, cap), dtype=np.bool_)
        self.has_static_bindings = False

    def _provisioning(self, pvc: PersistentVolumeClaim) -> _Provisioning:
        name = persistent_volume_claim_class(pvc)
        if not name:
            return _Provisioning(error=f'no class for claim "{pvc_key(pvc)}"')
        sc = self.snapshot.objects.get(StorageClass, name)
        if sc is None:
            return _Provisioning(error=f'failed to find storage class "{name}"')
        possible = sc.provisioner not in ("", NOT_SUPPORTED_PROVISIONER)
        return _Provisioning(error=None, possible=possible, storage_class=sc)

    def _full(self) -> Nodes:
        return Nodes(self.snapshot, np.arange(self.snapshot.table.capacity, dtype=np.int64))

    def affinity_rows(self, indexes: Sequence[int], nodes: Nodes) -> BoolArray:
        """``CheckNodeAffinity`` of each PV in ``indexes`` (rows) on each of ``nodes``.

        PVs pinned by one ``In`` requirement on a label (local volumes by hostname, zonal ones
        by zone) are compared with the nodes' value ids in one broadcast per label key; others
        are evaluated one by one.
        """
        out = np.ones((len(indexes), len(nodes)), dtype=np.bool_)
        by_key: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
        for row, i in enumerate(indexes):
            pv = self.pv_list[i]
            simple = _pinned(pv)
            if simple is None:
                out[row] = pv_affinity_mask(pv, nodes)
            elif simple[0]:
                by_key.setdefault(simple[0], []).append((row, simple[1]))
        for key, pinned in by_key.items():
            column = nodes.table.labels.get(key)
            if column is None:
                out[[row for row, _ in pinned]] = False
                continue
            node_ids = column.ids.take(nodes.slots)
            width = max(len(values) for _, values in pinned)
            wanted = np.full((len(pinned), width), -1, dtype=np.int64)
            for j, (_, values) in enumerate(pinned):
                for c, v in enumerate(values):
                    vid = column.id_of(v)
                    if vid is not None:
                        wanted[j, c] = vid
            hit = wanted[:, 0, None] == node_ids[None, :]
            for c in range(1, width):
                hit |= wanted[:, c, None] == node_ids[None, :]
            out[[row for row, _ in pinned]] = hit
        return out

    def _topology_mask(self, sc: StorageClass, nodes: Nodes) -> BoolArray:
        m = self._topology.get(sc.metadata.name)
        if m is None:
            m = self._topology[sc.metadata.name] = topology_terms_mask(
                sc.allowed_topologies, self._full()
            )
        out: BoolArray = m.take(nodes.slots)
        return out

    def find(self, nodes: Nodes) -> NodeStatuses:
        n = len(nodes)
        node_conflict = np.zeros(n, dtype=np.bool_)
        bind_conflict = np.zeros(n, dtype=np.bool_)
        pv_missing = np.zeros(n, dtype=np.bool_)
        errors = np.zeros(n, dtype=np.bool_)
        error_message = ""

        # checkBoundClaims: the first missing PV, or the first PV out of reach, decides.
        undecided = np.ones(n, dtype=np.bool_)
        for pvc in self.claims.bound:
            pv = self.cache.pvs.get(pvc.spec.volume_name)
            if pv is None:
                pv_missing |= undecided
                break
            m = pv_affinity_mask(pv, nodes)
            node_conflict |= undecided & ~m
            undecided &= m

        k_all = len(self.delay)
        chosen = np.full((k_all, n), -1, dtype=np.int64)
        provision = np.zeros((k_all, n), dtype=np.bool_)
        if self.delay:
            # Claims with a selected node fit that node only (the fast path upstream).
            active = np.ones(n, dtype=np.bool_)
            for k in self.selected:
                slot = self.snapshot.slot_of(self.delay[k].metadata.annotations[ANN_SELECTED_NODE])
                active &= nodes.slots == (-1 if slot is None else slot)
            bind_conflict |= ~active

            # findMatchingVolumes: claims in size order, each taking the smallest PV left.
            unmatched = np.zeros((k_all, n), dtype=np.bool_)
            involved = sorted(
                {i for c in self.candidates.values() for i in (*c.prebound, *c.others)}
            )
            row_of = {i: r for r, i in enumerate(involved)}
            reach = self.affinity_rows(involved, nodes)
            # Which node took which PV for an earlier claim (only matters with several claims).
            taken = (
                np.zeros((len(involved), n), dtype=np.bool_) if len(self.match_order) > 1 else None
            )
            for k in self.match_order:
                cands = self.candidates[k]
                left = active.copy()
                for i in cands.prebound:
                    r = row_of[i]
                    here = left if taken is None else left & ~taken[r]
                    if not here.any():
                        continue
                    ok = here & reach[r]
                    chosen[k, ok] = i
                    if taken is not None:
                        taken[r] |= ok
                    # A prebound PV out of reach means no match at all on that node.
                    left &= ~here
                if cands.others and left.any():
                    rows = np.array([row_of[i] for i in cands.others], dtype=np.int64)
                    fit = reach[rows] & left
                    if taken is not None:
                        fit &= ~taken[rows]
                    has = fit.any(axis=0)
                    first = fit.argmax(axis=0)
                    at = np.flatnonzero(has)
                    chosen[k, at] = np.asarray(cands.others, dtype=np.int64)[first[at]]
                    if taken is not None:
                        taken[rows[first[at]], at] = True
                unmatched[k] = active & (chosen[k] < 0)

            # checkVolumeProvisions: the first claim that cannot be provisioned decides.
            fine = active.copy()
            for k in self.provision_order:
                needs = fine & (active if k in self.selected else unmatched[k])
                if not needs.any():
                    continue
                info = self.provisioning[k]
                if info.error is not None:
                    errors |= needs
                    error_message = error_message or info.error
                    fine &= ~needs
                    continue
                good = np.zeros(n, dtype=np.bool_)
                if info.possible and info.storage_class is not None:
                    good = self._topology_mask(info.storage_class, nodes)
                bind_conflict |= needs & ~good
                fine &= ~(needs & ~good)
                provision[k] = needs & good

        ids = (
            node_conflict.astype(np.int32) * _NODE_CONFLICT
            + bind_conflict.astype(np.int32) * _BIND_CONFLICT
            + pv_missing.astype(np.int32) * _PV_NOT_EXIST
        )
        ids[errors] = _ERROR_ID
        passing = ids == 0
        slots = nodes.slots
        self.passed[slots] = passing
        if k_all:
            self.chosen[:, slots] = np.where(passing, chosen, -1)
            self.provision[:, slots] = provision & passing
            if (chosen[:, passing] >= 0).any():
                self.has_static_bindings = True
        statuses: list[Status | None] = [None] * (_ERROR_ID + 1)
        for b in np.unique(ids).tolist():
            if b == _ERROR_ID:
                statuses[b] = Status(Code.ERROR, error_message)
            elif b:
                statuses[b] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *_reasons(b))
        return NodeStatuses(ids, statuses)

    def find_kept(self, nodes: Nodes) -> None:
        """:meth:`find` on those of ``nodes`` not found passing in this cycle: their verdicts
        were kept from an earlier one (Score and Reserve ask only about passing nodes). Only
        claims to bind need it: nothing else is remembered per node."""
        if not self.delay:
            return
        unseen = nodes.slots[~self.passed.take(nodes.slots)]
        if len(unseen):
            self.find(Nodes(self.snapshot, unseen))

    def pod_volumes(self, slot: int) -> PodVolumes | None:
        """What binding takes on the node at ``slot``, if it passed Filter."""
        if slot >= len(self.passed) or not self.passed[slot]:
            return None
        out = PodVolumes()
        for k in self.match_order:
            i = int(self.chosen[k, slot])
            if i >= 0:
                out.static.append((self.delay[k], self.pv_list[i]))
        out.dynamic = [self.delay[k] for k in self.provision_order if self.provision[k, slot]]
        return out


def _reasons(bits: int) -> list[str]:
    out = []
    if bits & _NODE_CONFLICT:
        out.append(ERR_REASON_NODE_CONFLICT)
    if bits & _BIND_CONFLICT:
        out.append(ERR_REASON_BIND_CONFLICT)
    if bits & _PV_NOT_EXIST:
        out.append(ERR_REASON_PV_NOT_EXIST)
    return out


def _pinned(pv: PersistentVolume) -> tuple[str, tuple[str, ...]] | None:
    """``("", ())`` for a PV without node affinity, ``(key, values)`` for one whose affinity is a
    single valid ``key In values`` requirement, ``None`` for any other."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return "", ()
    terms = affinity.required.node_selector_terms
    if len(terms) != 1 or terms[0].match_fields or len(terms[0].match_expressions) != 1:
        return None
    req = terms[0].match_expressions[0]
    if req.operator != "In" or not node_selector_requirement_is_valid(req):
        return None
    return req.key, tuple(req.values)


def pv_affinity_mask(pv: PersistentVolume, nodes: Nodes) -> BoolArray:
    """``CheckNodeAffinity`` of ``pv`` on each of ``nodes``."""
    affinity = pv.spec.node_affinity
    if affinity is None or affinity.required is None:
        return np.ones(len(nodes), dtype=np.bool_)
    return node_selector_mask(affinity.required, nodes)


# --- assuming -------------------------------------------------------------------------------------


def bind_volume_to_claim(
    pv: PersistentVolume, pvc: PersistentVolumeClaim
) -> tuple[PersistentVolume, bool]:
    """``GetBindVolumeToClaim``: ``pv`` with its claimRef on ``pvc``, and whether that changed
    anything."""
    dirty = False
    set_bound_by_controller = not is_volume_bound_to_claim(pv, pvc)
    spec, meta = pv.spec, pv.metadata
    ref = spec.claim_ref
    m = pvc.metadata
    if ref is None or (ref.name, ref.namespace, ref.uid) != (m.name, m.namespace, m.uid):
        spec = msgspec.structs.replace(spec, claim_ref=claim_reference(pvc))
        dirty = True
    if set_bound_by_controller and ANN_BOUND_BY_CONTROLLER not in meta.annotations:
        meta = msgspec.structs.replace(
            meta, annotations={**meta.annotations, ANN_BOUND_BY_CONTROLLER: "yes"}
        )
        dirty = True
    if not dirty:
        return pv, False
    return msgspec.structs.replace(pv, metadata=meta, spec=spec), True


def with_selected_node(pvc: PersistentVolumeClaim, node_name: str) -> PersistentVolumeClaim:
    meta = pvc.metadata
    annotations = {**meta.annotations, ANN_SELECTED_NODE: node_name}
    return msgspec.structs.replace(
        pvc, metadata=msgspec.structs.replace(meta, annotations=annotations)
    )


def assume_pod_volumes(pod: Pod, node_name: str, volumes: PodVolumes, cache: AssumeCache) -> bool:
    """``AssumePodVolumes``: put the chosen bindings into the assume cache (``volumes`` is updated
    to the assumed objects); ``True`` if every claim was already bound and nothing was needed.
    Raises :class:`AssumeError`, with nothing left assumed."""
    if are_pod_volumes_bound(pod, cache):
        return True
    static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = []
    dynamic: list[PersistentVolumeClaim] = []
    try:
        for pvc, pv in volumes.static:
            new_pv, dirty = bind_volume_to_claim(pv, pvc)
            if dirty:
                cache.pvs.assume(new_pv)
            static.append((pvc, new_pv))
        for pvc in volumes.dynamic:
            clone = with_selected_node(pvc, node_name)
            cache.pvcs.assume(clone)
            dynamic.append(clone)
    except AssumeError:
        revert(cache, PodVolumes(static, dynamic))
        raise
    volumes.static, volumes.dynamic = static, dynamic
    return False


def revert(cache: AssumeCache, volumes: PodVolumes) -> None:
    """``RevertAssumedPodVolumes``."""
    for _, pv in volumes.static:
        cache.pvs.restore(pv.metadata.name)
    for pvc in volumes.dynamic:
        cache.pvcs.restore(pvc.metadata.name, pvc.metadata.namespace)


# --- binding through the API ------------------------------------------------------------------


def _reference(pv: PersistentVolume) -> dict[str, Any]:
    ref = pv.spec.claim_ref
    assert ref is not None
    out: dict[str, Any] = msgspec.to_builtins(ref)
    return out


def _meta_patch(rv: str, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if rv:
        meta["resourceVersion"] = rv
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


async def bind_api_update(
    client: StorageAPIClient, cache: AssumeCache, volumes: PodVolumes
) -> None:
    """``bindAPIUpdate``: write each PV's claimRef, then each provisioned claim's selected node,
    with the resourceVersion the decision was made on as a precondition. ``volumes`` ends up with
    the objects the API server returned. On an error the assumptions not yet written are
    reverted and the error raised."""
    static, dynamic = volumes.static, volumes.dynamic
    done_static = done_dynamic = 0
    try:
        for i, (pvc, pv) in enumerate(static):
            annotations = {}
            if ANN_BOUND_BY_CONTROLLER in pv.metadata.annotations:
                annotations[ANN_BOUND_BY_CONTROLLER] = pv.metadata.annotations[
                    ANN_BOUND_BY_CONTROLLER
                ]
            patch = {
                "metadata": _meta_patch(pv.metadata.resource_version, annotations),
                "spec": {"claimRef": _reference(pv)},
            }
            log.debug("binding PV %s to claim %s", pv.metadata.name, pvc_key(pvc))
            static[i] = (pvc, await client.patch_persistent_volume(pv.metadata.name, patch))
            done_static += 1
        for i, pvc in enumerate(dynamic):
            node = pvc.metadata.annotations[ANN_SELECTED_NODE]
            patch = {
                "metadata": _meta_patch(pvc.metadata.resource_version, {ANN_SELECTED_NODE: node})
            }
            dynamic[i] = await client.patch_persistent_volume_claim(
                pvc.metadata.namespace, pvc.metadata.name, patch
            )
            done_dynamic += 1
    finally:
        if done_static < len(static) or done_dynamic < len(dynamic):
            revert(cache, PodVolumes(static[done_static:], dynamic[done_dynamic:]))


async def complete_claim_bindings(
    client: StorageAPIClient, cache: AssumeCache, volumes: PodVolumes
) -> None:
    """What the PV controller does once a PV's claimRef names a claim: the claim's volumeName
    and annotations, then both objects' Bound phase. With a PV controller running the two write
    the same values; whatever fails here is left to it (``check_bindings`` decides)."""
    for pvc, pv in volumes.static:
        current = cache.pvcs.api_object(pvc.metadata.name, pvc.metadata.namespace) or pvc
        ns, name = pvc.metadata.namespace, pvc.metadata.name
        try:
            if not is_pvc_fully_bound(current):
                annotations = {ANN_BIND_COMPLETED: "yes"}
                if not current.spec.volume_name:
                    annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
                await client.patch_persistent_volume_claim(
                    ns,
                    name,
                    {
                        "metadata": {"annotations": annotations},
                        "spec": {"volumeName": pv.metadata.name},
                    },
                )
            if pv.status.phase != VOLUME_BOUND:
                await client.patch_persistent_volume(
                    pv.metadata.name, {"status": {"phase": VOLUME_BOUND}}, status=True
                )
            if current.status.phase != CLAIM_BOUND:
                status = {
                    "phase": CLAIM_BOUND,
                    "accessModes": list(pv.spec.access_modes),
                    "capacity": dict(pv.spec.capacity),
                }
                await client.patch_persistent_volume_claim(
                    ns, name, {"status": status}, status=True
                )
        except Exception as e:  # left to the PV controller, if there is one
            log.debug(
                "completing the binding of claim %s/%s to PV %s: %s", ns, name, pv.metadata.name, e
            )


def _older(a: str, b: str) -> bool:
    """``versioner.CompareResourceVersion(a, b) > 0``: ``b`` is older than ``a``."""
    x, y = resource_version_int(a), resource_version_int(b)
    return x is not None and y is not None and x > y


def check_bindings(
    snapshot: Snapshot, cache: AssumeCache, node_name: str, volumes: PodVolumes
) -> bool:
    """``checkBindings``: ``True`` once every claim the pod needed is fully bound, ``False``
    while waiting; raises :class:`VolumeBindingError` when binding must be retried. Reads the
    objects as the API server reported them, not the assumptions."""
    info = snapshot.get(node_name)
    if info is None or info.node is None:
        raise VolumeBindingError(f'failed to get node "{node_name}": node "{node_name}" not found')
    labels = info.node.metadata.labels
    for pvc, bound_pv in volumes.static:
        pv = cache.pvs.api_object(bound_pv.metadata.name)
        if pv is None:
            raise VolumeBindingError(
                "failed to check binding: could not find v1.PersistentVolume "
                f'"{bound_pv.metadata.name}"'
            )
        claim = cache.pvcs.api_object(pvc.metadata.name, pvc.metadata.namespace)
        if claim is None:
            raise VolumeBindingError(
                f'failed to check binding: could not find v1.PersistentVolumeClaim "{pvc_key(pvc)}"'
            )
        if _older(bound_pv.metadata.resource_version, pv.metadata.resource_version):
            return False
        if not volume_node_affinity_matches(pv, labels):
            raise VolumeBindingError(
                f'pv "{pv.metadata.name}" node affinity doesn\'t match node "{node_name}": '
                "no matching NodeSelectorTerms"
            )
        ref = pv.spec.claim_ref
        if ref is None or not ref.uid:
            raise VolumeBindingError(f'ClaimRef got reset for pv "{pv.metadata.name}"')
        if not is_pvc_fully_bound(claim):
            return False
    for pvc in volumes.dynamic:
        claim = cache.pvcs.api_object(pvc.metadata.name, pvc.metadata.namespace)
        if claim is None:
            raise VolumeBindingError(
                "failed to check provisioning pvc: could not find v1.PersistentVolumeClaim "
                f'"{pvc_key(pvc)}"'
            )
        if _older(pvc.metadata.resource_version, claim.metadata.resource_version):
            return False
        annotations = claim.metadata.annotations
        if not annotations:
            raise VolumeBindingError(
                f'selectedNode annotation reset for PVC "{claim.metadata.name}"'
            )
        if annotations.get(ANN_SELECTED_NODE) != node_name:
            raise VolumeBindingError(f'provisioning failed for PVC "{claim.metadata.name}"')
        if claim.spec.volume_name:
            pv = cache.pvs.api_object(claim.spec.volume_name)
            if pv is None:
                return False
            if not volume_node_affinity_matches(pv, labels):
                raise VolumeBindingError(
                    f'pv "{pv.metadata.name}" node affinity doesn\'t match node "{node_name}": '
                    "no matching NodeSelectorTerms"
                )
        if not is_pvc_fully_bound(claim):
            return False
    return True


async def bind_pod_volumes(
    client: StorageAPIClient,
    snapshot: Snapshot,
    cache: AssumeCache,
    node_name: str,
    volumes: PodVolumes,
    bind_timeout: float,
    *,
    interval: float = 1.0,
) -> None:
    """``BindPodVolumes``: the API updates, then wait (checking at once, then every second) for
    every claim to be fully bound. Raises :class:`VolumeBindingError` or the client's error."""
    await bind_api_update(client, cache, volumes)
    await complete_claim_bindings(client, cache, volumes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bind_timeout
    while True:
        try:
            if check_bindings(snapshot, cache, node_name, volumes):
                return
        except VolumeBindingError as e:
            raise VolumeBindingError(f"binding volumes: {e}") from e
        left = deadline - loop.time()
        if left <= 0:
            raise VolumeBindingError("binding volumes: context deadline exceeded")
        await asyncio.sleep(min(interval, left))
