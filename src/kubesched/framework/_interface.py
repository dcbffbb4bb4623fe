"""The extension points: one base class per point, as kube-scheduler's framework interfaces.

A plugin is a class deriving from :class:`Plugin` and from the base of every point it
implements. It is built once per profile as ``cls(handle, args)``, where ``args`` is its decoded
``pluginConfig`` (an instance of ``args_type``) or ``None``.

Filter and Score come in two forms. The per-node form (``filter``/``score`` on one
:class:`NodeInfo`) is the simple one; the vectorized form (``filter_nodes``/``score_nodes`` over
:class:`Nodes`, numpy arrays aligned with ``nodes.slots``) is what hot plugins implement. The
runtime calls the vectorized form over many nodes (its default loops over the per-node one) and,
where it has one, the per-node form over a few.
"""

from __future__ import annotations

import enum
import random
from collections.abc import (
    Callable,
    Collection,
    Container,
    Hashable,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, runtime_checkable

import msgspec
import numpy as np
import numpy.typing as npt

from kubesched.api import Node, PersistentVolume, PersistentVolumeClaim, Pod
from kubesched.framework._cycle_state import CycleState
from kubesched.framework._node_info import NodeInfo, PodInfo
from kubesched.framework._status import Code, Status
from kubesched.framework._table import IdArray, IntArray, NodeTable

if TYPE_CHECKING:
    from kubesched.framework._snapshot import NodeTrial, Snapshot

T = TypeVar("T")
AnyScalar = TypeVar("AnyScalar", bound=np.generic)


# --- what plugins get to see of the world ---------------------------------------------------


class APIClient(Protocol):
    """What a plugin may ask of the API server; the front end provides it (or none, in simulate)."""

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None: ...


@runtime_checkable
class StorageAPIClient(APIClient, Protocol):
    """An :class:`APIClient` that also writes PersistentVolumes and PersistentVolumeClaims, as
    VolumeBinding's PreBind does. A front end whose client is not one cannot bind volumes.

    ``patch`` is a JSON merge patch; a ``metadata.resourceVersion`` in it is a precondition
    (a conflict raises). ``status=True`` patches the ``status`` subresource. The answer is the
    object as stored afterwards.
    """

    async def patch_persistent_volume(
        self, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolume: ...

    async def patch_persistent_volume_claim(
        self, namespace: str, name: str, patch: Mapping[str, Any], *, status: bool = False
    ) -> PersistentVolumeClaim: ...


@runtime_checkable
class SecretsAPIClient(APIClient, Protocol):
    """An :class:`APIClient` that also reads Secrets, as a plugin that pulls from registries
    with a pod's ``imagePullSecrets`` needs. Call it outside the scheduling cycle (a background
    task): it goes to the API server."""

    async def get_secret(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """The Secret as the API server returns it (``data`` base64-encoded), or ``None`` if
        there is no such Secret."""
        ...


class EventRecorder(Protocol):
    """Writes ``events.k8s.io/v1`` events about a pod (``framework.Handle.EventRecorder``).
    Recording never blocks: the front end queues and sends events in the background."""

    def event(self, regarding: Pod, *, type: str, reason: str, action: str, note: str) -> None:
        """``type`` is ``Normal`` or ``Warning``; ``reason`` a CamelCase word; ``note`` the
        message a user reads."""
        ...


class PodNominator(Protocol):
    """Pods nominated to nodes by preemption (the scheduling queue keeps them)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """The pods nominated to ``node_name``, in nomination order."""
        ...

    def nominated_nodes(self) -> Iterable[str]:
        """The nodes with at least one nominated pod."""
        ...

    def nominations_stamp(self, node_name: str) -> Hashable:
        """A value that changes whenever the pods nominated to ``node_name`` (or their
        versions) change: a verdict kept with it stands while it is equal."""
        ...


class PodActivator(Protocol):
    """Moves pods waiting in the scheduling queue to its active queue now."""

    def activate(self, pods: Iterable[Pod]) -> None: ...


class PodEvictor(Protocol):
    """How a front end carries a preemption out on the cluster."""

    async def evict(self, victim: Pod, preemptor: Pod) -> bool:
        """Set the victim's ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``)
        and delete it gracefully; ``False`` when it was already gone, which is not an error
        (and gets no ``Preempted`` event, as in kube-scheduler)."""
        ...

    def preempted(self, victim: Pod, preemptor: Pod, node: str, profile: str) -> None:
        """Record the ``Preempted`` event on the victim."""
        ...

    async def clear_nominated_node_name(self, pod: Pod) -> None:
        """Clear the pod's ``status.nominatedNodeName``, if it has one."""
        ...


class Handle(Protocol):
    """``framework.Handle``: the services a plugin may use, whichever front end runs it."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def client(self) -> APIClient | None: ...

    @property
    def profile_name(self) -> str: ...

    @property
    def rng(self) -> random.Random:
        """The profile's source of random draws (tie breaks, preemption's starting node):
        seeded, it makes decisions reproducible."""
        ...

    @property
    def event_recorder(self) -> EventRecorder | None:
        """Where plugins record events about pods; ``None`` when the front end keeps none."""
        ...

    def waiting_pods(self) -> Iterable[WaitingPod]:
        """Pods held at Permit, for plugins that release groups of pods (gangs)."""
        ...

    def get_waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def list_objects(self, kind: type[T]) -> list[T]:
        """Every object of ``kind`` the front end feeds plugins (``PodDisruptionBudget`` ...):
        from a lister it registered (an informer's store), else from the snapshot's object
        store; empty when it feeds none."""
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """``PodNominator``: the pods preemption nominated to ``node_name``."""
        ...

    def nominations_stamp(self, node_name: str) -> Hashable:
        """``PodNominator.nominations_stamp``: changes whenever the pods nominated to
        ``node_name`` (or their versions) change."""
        ...

    def nominated_nodes(self) -> Iterable[str]:
        """``PodNominator.nominated_nodes``: the nodes with at least one nominated pod."""
        ...

    def activate(self, pods: Iterable[Pod]) -> None:
        """Move these pods to the active queue, if they wait in the scheduling queue."""
        ...

    def trial(self, node_name: str) -> AbstractContextManager[NodeTrial]:
        """Take pods off or put pods on one node until the ``with`` block ends (dry runs)."""
        ...

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None: ...

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, node: NodeInfo
    ) -> Status | None:
        """The profile's Filter plugins on one node as it is now, with the pods nominated there
        of equal or higher priority counted too (and, if that passes, without them)."""
        ...

    def run_filter_plugins_with_nominated_pods_together(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> list[Status | None]:
        """:meth:`run_filter_plugins_with_nominated_pods` on each of ``nodes`` as they are now
        (pods of a trial counted), in order; when :meth:`node_verdict_key` is not ``None``,
        several nodes are judged in one vectorized pass."""
        ...

    def node_verdict_key(self, state: CycleState, pod: Pod) -> Hashable | None:
        """When every active Filter plugin judges a node by that node alone: a key for all else
        their verdicts read (the pod's shape, the active plugins, cluster-wide values). A node
        with the same Node object and pods, the same pods nominated there and an equal key gets
        the same verdicts. ``None`` when a verdict may depend on other nodes."""
        ...

    async def preempt_pod(self, preemptor: Pod, victim: Pod, node: str, plugin: str) -> None:
        """Evict ``victim`` for ``preemptor`` (a victim waiting at Permit is rejected instead)
        and record the ``Preempted`` event."""
        ...

    async def clear_nominated_node_name(self, pod: Pod) -> None: ...


class WaitingPod(Protocol):
    """A pod a Permit plugin told to wait."""

    @property
    def pod(self) -> Pod: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> None: ...


@dataclass(slots=True)
class Nodes:
    """The nodes a vectorized call is about: slots into the snapshot's table.

    Arrays a plugin returns are aligned with ``slots``: element ``i`` is about node
    ``snapshot.at(slots[i])``.
    """

    snapshot: Snapshot
    slots: IntArray

    @property
    def table(self) -> NodeTable:
        return self.snapshot.table

    def __len__(self) -> int:
        return len(self.slots)

    def gather(self, per_slot: npt.NDArray[AnyScalar]) -> npt.NDArray[AnyScalar]:
        """``per_slot[slots]``: a read-only view when the slots are every node in order (the
        first Filter plugins' case), a gather otherwise."""
        slots = self.slots
        if self.snapshot.table.is_leading(slots):
            view = per_slot[: len(slots)]
            view.flags.writeable = False
            return view
        return per_slot.take(slots)

    def infos(self) -> Iterable[NodeInfo]:
        at = self.snapshot.at
        for s in self.slots.tolist():
            yield at(s)

    def names(self) -> list[str]:
        names = self.snapshot.table.names
        return [names[s] for s in self.slots.tolist()]


class NodeStatuses:
    """A Filter verdict for each of :class:`Nodes`: ``ids[i] == 0`` passes, else the node failed
    with ``statuses[ids[i]]``. Distinct statuses are few, so they are stored once."""

    __slots__ = ("ids", "statuses")

    def __init__(self, ids: IdArray, statuses: Sequence[Status | None]) -> None:
        self.ids = ids
        self.statuses: list[Status | None] = list(statuses)

    @classmethod
    def passing(cls, n: int) -> NodeStatuses:
        return cls(np.zeros(n, dtype=np.int32), [None])

    @classmethod
    def from_mask(cls, fails: np.ndarray[Any, np.dtype[np.bool_]], status: Status) -> NodeStatuses:
        """Every node where ``fails`` is true gets ``status``."""
        return cls(fails.astype(np.int32), [None, status])


@dataclass(slots=True)
class PreFilterResult:
    """PreFilter may narrow the nodes worth filtering (``None`` means all nodes)."""

    node_names: set[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


# --- queueing ------------------------------------------------------------------------------


class ActionType(enum.IntFlag):
    """What happened to an object (kube-scheduler's ``ActionType``)."""

    ADD = 1
    DELETE = 2
    UPDATE_NODE_ALLOCATABLE = 4
    UPDATE_NODE_LABEL = 8
    UPDATE_NODE_TAINT = 16
    UPDATE_NODE_CONDITION = 32
    UPDATE_NODE_ANNOTATION = 64
    UPDATE_POD_LABEL = 128
    UPDATE_POD_SCALE_DOWN = 256
    UPDATE_POD_TOLERATIONS = 512
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1024
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 2048
    UPDATE_OTHER = 4096
    UPDATE = (
        UPDATE_NODE_ALLOCATABLE
        | UPDATE_NODE_LABEL
        | UPDATE_NODE_TAINT
        | UPDATE_NODE_CONDITION
        | UPDATE_NODE_ANNOTATION
        | UPDATE_POD_LABEL
        | UPDATE_POD_SCALE_DOWN
        | UPDATE_POD_TOLERATIONS
        | UPDATE_POD_SCHEDULING_GATES_ELIMINATED
        | UPDATE_POD_GENERATED_RESOURCE_CLAIM
        | UPDATE_OTHER
    )
    ALL = ADD | DELETE | UPDATE


class QueueingHint(enum.Enum):
    QUEUE = "Queue"
    SKIP = "QueueSkip"


#: Given the rejected pod and the event's old and new objects, may the pod now fit?
QueueingHintFn = Callable[[Pod, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A kind of change: to a ``Node``, ``Pod``, ``AssignedPod``, ``PersistentVolume``..."""

    resource: str
    action: ActionType
    #: Names a move that is no cluster event (``UnschedulableTimeout``, ``ForceActivate``) in
    #: metrics and logs; matching ignores it.
    label: str = field(default="", compare=False)


#: Given an event's old and new objects, the keys of what it is about (see
#: :attr:`ClusterEventWithHint.object_keys`); ``None`` when it may be about anything.
ObjectKeysFn = Callable[[Any, Any], Collection[Hashable] | None]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None
    #: For a PreEnqueue plugin's registration: the keys of the objects the event is about, in
    #: the terms of :meth:`PreEnqueuePlugin.gate_keys`. A pod the plugin gates whose gate keys
    #: share none of them gets ``Skip`` from ``hint``, so the queue need not ask it: thousands of
    #: pods waiting for their own objects are not each asked about every object created.
    object_keys: ObjectKeysFn | None = None


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue, with its attempt history."""

    pod_info: PodInfo
    #: When the pod was first added to the queue (monotonic seconds).
    initial_attempt_timestamp: float
    #: When the pod last entered the queue; PrioritySort's tiebreak between equal priorities.
    timestamp: float
    attempts: int = 0
    #: Plugins that rejected the pod in its last attempt: only their events can requeue it.
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    #: The PreEnqueue plugin that is keeping the pod out of the active queue, if any, and
    #: what the pod waits for (:meth:`PreEnqueuePlugin.gate_keys`).
    gated_by: str = ""
    gate_keys: frozenset[Hashable] | None = None
    #: The scheduling cycle (pop count) of the pod's latest attempt.
    cycle: int = 0
    #: When the UnschedulableTimeout flush last reached the pod (``FlushTimestamp``): a pod it
    #: leaves gated is reached again a whole period later, its ``timestamp`` kept for the order.
    flushed: float = 0.0

    @property
    def pod(self) -> Pod:
        return self.pod_info.pod


# --- the plugin base classes --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WatchedKind:
    """An API kind a plugin reads from the snapshot's object store (:attr:`Snapshot.objects`).

    kube-scheduler plugins start informers for what they read; here a plugin declares the kinds
    in :attr:`Plugin.watched_kinds` and every front end feeds them: ``run`` and ``extender`` run
    one informer per distinct kind (list ``path``, then watch), ``simulate`` reads manifests of
    ``api_version``/``kind``. A change is the cluster event ``resource`` (EnqueueExtensions).
    A kind the API server does not serve (a CRD not installed) or the scheduler may not list
    is empty, and looked for again in the background.
    """

    #: The ``msgspec.Struct`` objects decode into; it has an ``ObjectMeta`` ``metadata``.
    type: type[Any]
    #: ``group/version`` (``nfd.k8s-sigs.io/v1alpha1``), as manifests spell it.
    api_version: str
    kind: str
    #: The list path, all namespaces (``/apis/nfd.k8s-sigs.io/v1alpha1/nodefeatures``).
    path: str
    #: The resource in cluster events, as kube-scheduler names custom resources
    #: (``nodefeatures.v1alpha1.nfd.k8s-sigs.io``).
    resource: str
    namespaced: bool = True
    #: Only objects with these labels (a label selector, ``key`` or ``key=value``, as
    #: ``kubectl -l`` takes it): a plugin reading a few pods does not hold every pod twice.
    label_selector: str | None = None


class Plugin:
    """Base of every plugin. ``name`` is what configurations refer to."""

    name: ClassVar[str]
    #: The ``msgspec.Struct`` its pluginConfig args decode into, or ``None`` if it takes none.
    args_type: ClassVar[type[msgspec.Struct] | None] = None
    #: API kinds beyond Nodes and Pods the plugin reads from the snapshot's object store.
    watched_kinds: ClassVar[tuple[WatchedKind, ...]] = ()
    #: For Filter and Score plugins: whether the verdict (or the score before NormalizeScore)
    #: on a node depends on nothing but that node (its row in the table and its NodeInfo), the
    #: pod's namespace, labels, annotations and spec (its claims' names only through
    #: :meth:`node_local_claims`), the CycleState its own PreFilter or PreScore derived from
    #: those, and :meth:`node_local_epoch`. The runtime then keeps what the plugin said per pod
    #: shape across cycles and asks again only about changed nodes (see
    #: ``kubesched.framework._equivalence``).
    node_local: ClassVar[bool] = False
    #: For a :attr:`node_local` plugin: ``False`` when it reads the Node object alone, not the
    #: pods counted on the node, so a change of those pods cannot change what it says.
    node_local_reads_pods: ClassVar[bool] = True

    def __init__(self, handle: Handle, args: Any = None) -> None:
        self.handle = handle
        self.args = args

    def node_local_epoch(self) -> Hashable:
        """For a :attr:`node_local` plugin that also reads something cluster-wide: a value that
        changes whenever that does (ImageLocality: the node count and the images' spread)."""
        return None

    def node_local_pod_key(self, pod: Pod) -> Hashable:
        """For a :attr:`node_local` Filter plugin that reads less of the pod than its whole
        shape (its namespace, labels, annotations and spec): all that its verdicts, and its own
        PreFilter, read of the pod, so that pods alike in that (but, say, not in their requests)
        share the verdicts the runtime kept. Only an override counts, and whatever it returns
        (``None`` included) stands for what it read; a subclass that reads more overrides it
        again. Called only after the pod's PreFilter passed."""
        return None

    def node_local_claims(self, pod: Pod) -> Hashable:
        """For a :attr:`node_local` plugin that reads the pod's claims (its
        ``persistentVolumeClaim`` and ``ephemeral`` volumes): all its verdicts and scores read
        of them, in place of their names, so that pods alike but for their claims share what
        the runtime kept; ``None`` when their identity matters (the pod then shares nothing
        with other pods). Called only after the pod's PreFilter passed."""
        return ()

    def prepare(self) -> None:
        """Load what the plugin's first cycle would otherwise load inside it (a parser, a
        library). Front ends serving a cluster call it once before their first cycle, so no pod
        waits on it; what-if commands do not, and pay on first use only if they use it."""

    async def aclose(self) -> None:
        """Release what the plugin started: threads, background tasks, objects it created in the
        cluster. Front ends call it once, on their event loop, when they stop."""


class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: Pod) -> Status | None:
        """Whether ``pod`` may enter the active queue at all (scheduling gates)."""
        raise NotImplementedError

    def gate_keys(self, pod: Pod) -> Collection[Hashable] | None:
        """For a pod this plugin gates: the keys of the objects whose events may lift the gate,
        as the ``object_keys`` of its registrations name them; ``None`` (the default) when any
        event it registered may."""
        return None

    def held_pods(self) -> Container[str] | None:
        """The pods :meth:`pre_enqueue` rejects now, as a container of UIDs the plugin keeps
        up to date (a live view: the queue keeps it for the length of an event). A gated pod
        found there is taken as rejected by this plugin without :meth:`pre_enqueue` being
        called; one not found there is asked. Membership must not raise. Used only with one
        profile, for a plugin whose gate keeps no keys (:meth:`gate_keys`). ``None`` (the
        default): ask each pod."""
        return None


#: A QueueSort order given as a key (see :attr:`QueueSortPlugin.sort_key`).
SortKeyFn = Callable[[QueuedPodInfo], tuple[int | float, ...]]


class QueueSortPlugin(Plugin):
    #: For a plugin whose order is a key's: ``sort_key(a) < sort_key(b)`` exactly when
    #: ``less(a, b)``. The queue then computes each pod's key once, when it is queued, instead
    #: of calling ``less`` for every comparison in its heap. ``None``: only ``less`` says.
    sort_key: SortKeyFn | None = None

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` should be scheduled before ``b``."""
        raise NotImplementedError


class EnqueueExtensions:
    """Mixed in by plugins that can reject pods: the events that might make them fit."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        raise NotImplementedError


class PreFilterPlugin(Plugin):
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[PreFilterResult | None, Status | None]:
        """Compute per-pod state once; may narrow the nodes, Skip, or reject the pod outright."""
        raise NotImplementedError

    def add_pod(
        self, state: CycleState, pod: Pod, to_add: PodInfo, node: NodeInfo
    ) -> Status | None:
        """PreFilterExtensions: ``to_add`` will count on ``node`` (nominated pods, preemption)."""
        return None

    def remove_pod(
        self, state: CycleState, pod: Pod, to_remove: PodInfo, node: NodeInfo
    ) -> Status | None:
        """PreFilterExtensions: ``to_remove`` is taken off ``node`` (preemption victims)."""
        return None


class FilterPlugin(Plugin):
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """Whether ``pod`` can run on ``node`` (per-node form)."""
        raise NotImplementedError

    def filter_nodes(self, state: CycleState, pod: Pod, nodes: Nodes) -> NodeStatuses:
        """Verdicts for all of ``nodes`` (vectorized form); by default, :meth:`filter` per node."""
        interned: dict[Status, int] = {}
        statuses: list[Status | None] = [None]
        ids = np.zeros(len(nodes), dtype=np.int32)
        for i, info in enumerate(nodes.infos()):
            s = self.filter(state, pod, info)
            if s is None or s.code == Code.SUCCESS:
                continue
            k = interned.get(s)
            if k is None:
                k = interned[s] = len(statuses)
                statuses.append(s)
            ids[i] = k
        return NodeStatuses(ids, statuses)

    def filter_one(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status | None:
        """The verdict on one node: through the per-node form where the plugin has one (on one
        node that costs less than numpy's calls), else the vectorized form on that node. Not
        for plugins to override: the runtime's per-node path calls it."""
        if has_per_node_filter(self):
            return self.filter(state, pod, node)
        verdict = self.filter_nodes(
            state, pod, Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        )
        return verdict.statuses[int(verdict.ids[0])]


class PostFilterPlugin(Plugin):
    def post_filter(
        self, state: CycleState, pod: Pod, filtered: dict[str, Status]
    ) -> tuple[str | None, Status | None]:
        """Run when no node fits (preemption): the nominated node, and a status whose message
        ends the FailedScheduling event (``preemption: ...``)."""
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: Pod, nodes: Nodes) -> Status | None:
        """Per-pod work before Score, over the feasible nodes; may Skip."""
        raise NotImplementedError


#: The range of a normalized score (``MinNodeScore``, ``MaxNodeScore``).
MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100


class ScorePlugin(Plugin):
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        """How much ``pod`` likes ``node`` (per-node form), 0..100 after normalization."""
        raise NotImplementedError

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        """Scores for all of ``nodes`` (vectorized form); by default, :meth:`score` per node.

        The array is handed over: the runtime normalizes it in place and keeps it in the
        result, so it must not be one the plugin keeps or reuses.
        """
        out = np.zeros(len(nodes), dtype=np.int64)
        for i, info in enumerate(nodes.infos()):
            v, s = self.score(state, pod, info)
            if s is not None and s.code != Code.SUCCESS:
                return out, s.with_plugin(self.name)
            out[i] = v
        return out, None

    def normalize_score(
        self, state: CycleState, pod: Pod, nodes: Nodes, scores: IntArray
    ) -> Status | None:
        """ScoreExtensions: rescale ``scores`` in place to 0..100. Implement only if needed."""
        raise NotImplementedError


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        """Undo :meth:`reserve`; must be idempotent and must not fail."""
        raise NotImplementedError


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        """Allow (``None``), reject, or ``Wait`` with a timeout in seconds."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Bind the pod, or return Skip to let the next Bind plugin do it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


#: Extension point name (as in the configuration) -> base class.
EXTENSION_POINTS: dict[str, type[Plugin]] = {
    "preEnqueue": PreEnqueuePlugin,
    "queueSort": QueueSortPlugin,
    "preFilter": PreFilterPlugin,
    "filter": FilterPlugin,
    "postFilter": PostFilterPlugin,
    "preScore": PreScorePlugin,
    "score": ScorePlugin,
    "reserve": ReservePlugin,
    "permit": PermitPlugin,
    "preBind": PreBindPlugin,
    "bind": BindPlugin,
    "postBind": PostBindPlugin,
}


def extension_points_of(cls: type[Plugin]) -> list[str]:
    """The extension points a plugin class implements, in pipeline order."""
    return [point for point, base in EXTENSION_POINTS.items() if issubclass(cls, base)]


def watched_kinds(plugins: Iterable[Plugin | type[Plugin]]) -> list[WatchedKind]:
    """The distinct kinds ``plugins`` declare (by Python type), in first-seen order."""
    out: dict[type[Any], WatchedKind] = {}
    for p in plugins:
        for k in p.watched_kinds:
            out.setdefault(k.type, k)
    return list(out.values())


def has_normalize_score(plugin: ScorePlugin) -> bool:
    return type(plugin).normalize_score is not ScorePlugin.normalize_score


def has_per_node_filter(plugin: FilterPlugin) -> bool:
    """Whether the plugin judges one node by its NodeInfo (``filter``), not only all nodes at
    once through the table (``filter_nodes``)."""
    return type(plugin).filter is not FilterPlugin.filter


def node_for(node: NodeInfo) -> Node:
    """The Node object of a candidate NodeInfo (candidates always have one)."""
    assert node.node is not None
    return node.node
