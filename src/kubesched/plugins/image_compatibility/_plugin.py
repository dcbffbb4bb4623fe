"""The ImageCompatibility plugin: PreFilter, Filter, Score over the compatibility specs of a pod's
images; see the package docstring and docs/plugins/image-compatibility.md."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec
import numpy as np
from prometheus_client import Counter, Gauge

from kubesched.api import Pod
from kubesched.config import ConfigError, FieldError, decode_args
from kubesched.framework import (
    SKIP,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    NodeStatuses,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    SecretsAPIClient,
    Status,
    WatchedKind,
)
from kubesched.plugins.helper import default_normalize_score
from kubesched.plugins.image_compatibility._args import (
    FAIL,
    IGNORE,
    NODE_FEATURE_GROUP,
    ImageCompatibilityArgs,
)
from kubesched.plugins.image_compatibility._fetch import (
    ArtifactStore,
    Failed,
    Fetch,
    Found,
    ImageSpec,
    Invalid,
    Pending,
    SecretReader,
)
from kubesched.plugins.image_compatibility._group import (
    CustomObjectsAPIClient,
    NodeFeatureGroups,
    UnsupportedRules,
    conjunction,
)
from kubesched.plugins.image_compatibility._nfd import API_VERSION, Features, NodeFeature
from kubesched.plugins.image_compatibility._registry import RegistryClient
from kubesched.plugins.image_compatibility._spec import (
    CompatibilitySpec,
    SpecResult,
    evaluate,
)
from kubesched.plugins.image_compatibility._verdicts import FeatureIndex, SpecVerdicts

NAME = "ImageCompatibility"
MAX_NODE_SCORE = 100
_STATE_KEY = f"PreFilter{NAME}"
#: The cluster event resource of NodeFeature changes, as kube-scheduler names custom resources.
NODE_FEATURE_RESOURCE = "nodefeatures.v1alpha1.nfd.k8s-sigs.io"
NODE_FEATURE_KIND = WatchedKind(
    type=NodeFeature,
    api_version=API_VERSION,
    kind="NodeFeature",
    path=f"/apis/{API_VERSION}/nodefeatures",
    resource=NODE_FEATURE_RESOURCE,
)
#: The reason of the Warning event on a pod whose image's artifact could not be fetched.
EVENT_REASON = "ImageCompatibilityUnavailable"
#: Verdict tables kept at most (one per spec; each an int32 per node features id).
_MAX_VERDICT_TABLES = 256

log = logging.getLogger(__name__)

FETCHES = Counter(
    "kubesched_image_compatibility_fetches",
    "Registry lookups ImageCompatibility finished, by result: artifact, no_artifact, invalid "
    "(a spec that does not decode), cached (the digest's spec was known), error.",
    ["profile", "result"],
)
UNAVAILABLE = Counter(
    "kubesched_image_compatibility_unavailable",
    "Images of pods whose compatibility artifact could not be fetched, by what failurePolicy "
    "made of them: Fail (the pod waits) or Ignore (the image counts as compatible).",
    ["profile", "policy"],
)
IN_FLIGHT = Gauge(
    "kubesched_image_compatibility_fetches_in_flight",
    "Registry lookups of ImageCompatibility running now.",
    ["profile"],
)
CACHED_SPECS = Gauge(
    "kubesched_image_compatibility_cached_digests",
    "Image digests whose compatibility spec (or its absence) ImageCompatibility keeps.",
    ["profile"],
)


@dataclass(frozen=True, slots=True)
class _State:
    """What PreFilter found: the specs of the pod's images, in container order."""

    specs: tuple[ImageSpec, ...]


def pod_images(pod: Pod) -> list[str]:
    """Every image the pod runs (init, regular and ephemeral containers), once each, in order."""
    spec = pod.spec
    seen: dict[str, None] = {}
    for containers in (spec.init_containers, spec.containers, spec.ephemeral_containers):
        for c in containers:
            if c.image:
                seen.setdefault(c.image, None)
    return list(seen)


class ImageCompatibility(
    PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions
):
    """Only nodes whose NFD features satisfy a compatibility set of every image's spec; nodes
    matching heavier sets score higher."""

    name = NAME
    args_type = ImageCompatibilityArgs
    watched_kinds = (NODE_FEATURE_KIND,)

    #: Plugin instances per profile in this process: each owns its groups (the extender runs
    #: two frameworks per profile), numbered alike on every start so a restart adopts them.
    _owners: ClassVar[dict[str, int]] = {}

    def __init__(
        self,
        handle: Handle,
        args: Any = None,
        *,
        registry: Callable[[], RegistryClient] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        decoded = decode_args(ImageCompatibilityArgs, args)
        super().__init__(handle, decoded)
        self.config = decoded
        self._profile = handle.profile_name
        if registry is None:

            def registry() -> RegistryClient:
                return RegistryClient(
                    timeout=decoded.registry_timeout,
                    max_artifact_bytes=decoded.max_artifact_bytes,
                    plain_http=decoded.plain_http_registries,
                    ca_file=decoded.ca_file or None,
                    insecure_skip_verify=decoded.insecure_skip_verify,
                )

        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.store = ArtifactStore(
            registry,
            tag_ttl=decoded.tag_cache_ttl,
            size=decoded.spec_cache_size,
            read_secret=self._secret_reader(handle),
            on_done=self._fetched,
            on_result=self._counted,
            loop=loop,
            clock=clock,
        )
        self.features = FeatureIndex(handle.snapshot.objects)
        self._verdicts: OrderedDict[str, SpecVerdicts] = OrderedDict()
        #: NodeFeatureGroup mode: the controller, the sets it cannot express (evaluated in
        #: process), the pods waiting for nfd-master's answers, the specs whose answers moved.
        self.groups: NodeFeatureGroups | None = None
        self._own_sets: dict[tuple[str, int], CompatibilitySpec] = {}
        self._requested: set[tuple[str, int]] = set()
        self._group_waiting: dict[tuple[str, int], dict[str, Pod]] = {}
        self._moved: set[str] = set()
        if decoded.mode == NODE_FEATURE_GROUP:
            self.groups = self._group_controller(handle, decoded)
        IN_FLIGHT.labels(self._profile).set_function(self.store.in_flight)
        CACHED_SPECS.labels(self._profile).set_function(self.store.cached)

    @staticmethod
    def _secret_reader(handle: Handle) -> SecretReader | None:
        client = handle.client
        return client.get_secret if isinstance(client, SecretsAPIClient) else None

    def _group_controller(self, handle: Handle, args: ImageCompatibilityArgs) -> NodeFeatureGroups:
        client = handle.client
        if not isinstance(client, CustomObjectsAPIClient):
            raise ConfigError(
                [
                    FieldError.invalid(
                        "args.mode",
                        NODE_FEATURE_GROUP,
                        "needs an API server (kubesched run or extender); simulate runs InProcess",
                    )
                ]
            )
        n = self._owners[handle.profile_name] = self._owners.get(handle.profile_name, 0) + 1
        owner = handle.profile_name if n == 1 else f"{handle.profile_name}/{n}"
        groups = NodeFeatureGroups(
            client, args.nfd_namespace, owner, on_change=self._groups_changed
        )
        self.store.home().call_soon_threadsafe(groups.start)
        return groups

    def _groups_changed(self, keys: list[tuple[str, int]]) -> None:
        """nfd-master's answers for some sets appeared or moved (on the fetch loop)."""
        pods: dict[str, Pod] = {}
        for key in keys:
            self._moved.add(key[0])
            pods.update(self._group_waiting.pop(key, {}))
        if pods:
            self.handle.activate(list(pods.values()))

    def _request_groups(self, spec: ImageSpec, pod: Pod) -> bool:
        """Ask for the groups of ``spec``'s sets; whether nfd-master answered for all of them.
        Sets a group cannot express are evaluated in process instead."""
        assert self.groups is not None
        answered = True
        for i, compatibility in enumerate(spec.spec.compatibilities):
            key = (spec.spec_digest, i)
            if key in self._own_sets:
                continue
            if key not in self._requested:
                try:
                    conjunction(msgspec.to_builtins(compatibility.rules))
                except UnsupportedRules as err:
                    log.info("%s: %s set %d evaluated in process: %s", NAME, spec.image, i, err)
                    self._own_sets[key] = CompatibilitySpec(
                        version=spec.spec.version, compatibilities=[compatibility]
                    )
                    continue
                self._requested.add(key)
                self.store.home().call_soon_threadsafe(
                    self.groups.request, key[0], key[1], compatibility.rules
                )
            if self.groups.nodes_for(*key) is None:
                self._group_waiting.setdefault(key, {})[pod.metadata.uid] = pod
                answered = False
        return answered

    def _evaluate(self, spec: ImageSpec, fid: int) -> SpecResult:
        """The spec on the node with features id ``fid``: in process, or from nfd-master's
        NodeFeatureGroups (and in process for the sets they cannot express)."""
        features = self.features.features(fid)
        if self.groups is None:
            return evaluate(spec.spec, features)
        return self._evaluate_by_groups(spec, self.features.node_of(fid), features)

    def _evaluate_by_groups(self, spec: ImageSpec, node: str, features: Features) -> SpecResult:
        assert self.groups is not None
        matched: list[int] = []
        failed: list[str] = []
        listed_by_nfd: list[str] = []
        for i, compatibility in enumerate(spec.spec.compatibilities):
            own = self._own_sets.get((spec.spec_digest, i))
            if own is not None:
                result = evaluate(own, features)
                if result.compatible:
                    matched.append(i)
                else:
                    failed.append(result.reason)
            elif node in (self.groups.nodes_for(spec.spec_digest, i) or ()):
                matched.append(i)
            else:
                tag = f' "{compatibility.tag}"' if compatibility.tag else ""
                listed_by_nfd.append(f"set {i}{tag}")
        if matched:
            weights = spec.spec.compatibilities
            return SpecResult(True, max(weights[i].weight for i in matched), tuple(matched), "")
        if listed_by_nfd:
            failed.append(f"not in the NodeFeatureGroup of {', '.join(listed_by_nfd)}")
        return SpecResult(False, 0, (), "; ".join(failed))

    # -- fetch results (on the fetch loop) -------------------------------------------------------

    def _counted(self, result: str) -> None:
        FETCHES.labels(self._profile, result).inc()

    def _fetched(self, fetch: Fetch, pods: Sequence[Pod]) -> None:
        if fetch.error and self.config.failure_policy == FAIL:
            for pod in pods:
                if self.store.warn_once(fetch.image, pod):
                    self._warn(pod, fetch.image, fetch.error)
        if pods:
            self.handle.activate(pods)

    def _warn(self, pod: Pod, image: str, error: str) -> None:
        policy = self.config.failure_policy
        outcome = (
            "the pod waits and is retried"
            if policy == FAIL
            else "the image counts as compatible with every node"
        )
        note = (
            f"cannot fetch the image compatibility artifact of {image}: {error}; "
            f"failurePolicy {policy}: {outcome}"
        )
        recorder = self.handle.event_recorder
        if recorder is not None:
            recorder.event(pod, type="Warning", reason=EVENT_REASON, action="Scheduling", note=note)
        else:
            log.warning("%s: pod %s: %s", NAME, pod.key, note)

    # -- PreFilter -------------------------------------------------------------------------------

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        specs: list[ImageSpec] = []
        waiting: list[str] = []
        for image in pod_images(pod):
            found = self.store.lookup(image, pod)
            if isinstance(found, Found):
                if found.spec is not None:
                    specs.append(found.spec)
                elif self.config.require_artifact:
                    return None, Status(
                        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        f"image {image} has no image compatibility artifact",
                    )
            elif isinstance(found, Invalid):
                return None, Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"image {image}: {found.error}"
                )
            elif isinstance(found, Pending):
                waiting.append(f"waiting for the image compatibility artifact of {image}")
            elif isinstance(found, Failed):
                UNAVAILABLE.labels(self._profile, self.config.failure_policy).inc()
                if self.config.failure_policy == IGNORE:
                    if self.store.warn_once(image, pod):
                        self._warn(pod, image, found.error)
                    continue
                waiting.append(
                    f"cannot fetch the image compatibility artifact of {image} "
                    f"(retrying in {found.retry_in:.0f}s): {found.error}"
                )
        if self.groups is not None and not waiting:
            waiting = [
                f"waiting for nfd-master to evaluate the compatibility sets of {spec.image}"
                for spec in specs
                if not self._request_groups(spec, pod)
            ]
        if waiting:
            # Retried when the fetch ends (activate), and on the events registered below.
            # Unresolvable: evicting pods cannot help a pod that waits for a registry, and an
            # Unschedulable rejection would have DefaultPreemption try every node in vain
            # (0.6 s at 5,000 nodes running lower-priority pods).
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *waiting)
        if not specs:
            return None, SKIP
        state.write(_STATE_KEY, _State(tuple(specs)))
        return None, None

    # -- Filter ----------------------------------------------------------------------------------

    def _table(self, spec: ImageSpec) -> SpecVerdicts:
        table = self._verdicts.get(spec.spec_digest)
        if table is None:
            table = self._verdicts[spec.spec_digest] = SpecVerdicts()
            while len(self._verdicts) > _MAX_VERDICT_TABLES:
                self._verdicts.popitem(last=False)
        else:
            self._verdicts.move_to_end(spec.spec_digest)
        return table

    def verdicts(self, spec: ImageSpec, nodes: Nodes) -> tuple[SpecVerdicts, Any]:
        """The spec's result table and the result id of every node of ``nodes``."""
        index = self.features
        fids = index.slot_fids(nodes.table)[nodes.slots]
        table = self._table(spec)
        if spec.spec_digest in self._moved:  # nfd-master's answers moved: evaluate again
            self._moved.discard(spec.spec_digest)
            table.reset()
        ids = table.ids(fids, index.size(), index.epoch, lambda fid: self._evaluate(spec, fid))
        return table, ids

    @staticmethod
    def _state(state: CycleState) -> _State | None:
        try:
            return state.read(_STATE_KEY, _State)
        except KeyError:  # PreFilter did not run (an extender's prioritize or preempt verb)
            return None

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        found = self._state(state)
        if found is None:
            return NodeStatuses.passing(len(nodes))
        out = np.zeros(len(nodes), dtype=np.int32)
        statuses: list[Status | None] = [None]
        for spec in found.specs:
            table, ids = self.verdicts(spec, nodes)
            for rid in np.flatnonzero(np.bincount(ids)).tolist():
                result = table.results[rid]
                if result.compatible:
                    continue
                fails = (ids == rid) & (out == 0)
                if fails.any():
                    out[fails] = len(statuses)
                    statuses.append(
                        Status(
                            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                            f"image {spec.image} not compatible: {result.failed}",
                        )
                    )
        return NodeStatuses(out, statuses)

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        one = Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        verdict = self.filter_nodes(state, pod, one)
        return verdict.statuses[int(verdict.ids[0])]

    # -- Score -----------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        found = self._state(state)
        return SKIP if found is None or not found.specs else None

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        scores = np.zeros(len(nodes), dtype=np.int64)
        found = self._state(state)
        for spec in found.specs if found is not None else ():
            table, ids = self.verdicts(spec, nodes)
            scores += table.weights[ids]
        return scores, None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        one = Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        scores, status = self.score_nodes(state, pod, one)
        return int(scores[0]), status

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        # ``score * 100 // max``; all 0 when the maximum is 0.
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # -- queueing --------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(NODE_FEATURE_RESOURCE, ActionType.ADD | ActionType.UPDATE)
            ),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.ADD)),
        ]

    async def settle(self) -> None:
        """Wait until the registry lookups started so far have ended (``simulate`` does before
        it gives up on a pod waiting for one)."""
        await self.store.settle()

    def close(self) -> None:
        """Stop fetching and start deleting this plugin's NodeFeatureGroups (tests, from outside
        an event loop)."""
        if self.groups is not None:
            asyncio.run_coroutine_threadsafe(self.groups.aclose(), self.store.home())
        self.store.close()

    async def aclose(self) -> None:
        """Delete this plugin's NodeFeatureGroups, waiting for it, and stop fetching."""
        if self.groups is not None:
            home = self.store.home()
            if home is asyncio.get_running_loop():
                await self.groups.aclose()
            else:
                await asyncio.wrap_future(
                    asyncio.run_coroutine_threadsafe(self.groups.aclose(), home)
                )
        self.store.close()


__all__ = [
    "EVENT_REASON",
    "NAME",
    "NODE_FEATURE_KIND",
    "NODE_FEATURE_RESOURCE",
    "ImageCompatibility",
    "pod_images",
]
