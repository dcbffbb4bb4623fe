"""Reading what to simulate: manifests in files and directories, as the API server would admit them.

Multi-document YAML or JSON, ``List`` kinds, directories (not recursive) and ``-``. Nodes and Pods
are simulated and the kinds the scheduler and its plugins read are kept; other kinds are skipped
with a warning, and an object the API server would refuse with an error naming the file and the
document. Pending pods get what the API server and its admission plugins would add (and the
ResourceClaims the resourceclaim controller would make from templates). The rules:
docs/simulate.md.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import yaml

try:
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # PyYAML built without libyaml: the same, slower
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

from kubesched.api import (
    ANN_POD_CLAIM_NAME,
    Node,
    ObjectMeta,
    OwnerReference,
    Pod,
    PodResourceClaimStatus,
    QuantityError,
    ResourceClaim,
    ResourceClaimTemplate,
    node_allocatable,
    parse_quantity,
    pod_requests,
)
from kubesched.framework import WatchedKind
from kubesched.plugins.inter_pod_affinity import apply_match_label_keys
from kubesched.simulate._errors import InputError
from kubesched.simulate._objects import KINDS, ClusterObjects

#: Directory entries read by ``-f DIR``.
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: Maps of resource quantities, where YAML numbers (``cpu: 2``) are quantities, not numbers.
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "allocatable"})
#: Pods the scheduler ignores (kube-scheduler's informer filter).
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_UID_NAMESPACE = uuid.UUID("6f0c5a8e-3c2b-4d55-9d6e-2f1c0a7b9e41")


def _selects(selector: str | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match a label selector of ``key`` and ``key=value`` terms."""
    for term in (selector or "").split(","):
        key, eq, value = term.partition("=")
        key = key.strip()
        if key and (key not in labels or (eq and labels[key] != value.strip())):
            return False
    return True


@dataclass(frozen=True)
class Issue:
    """A problem with one input object: ``error`` (skipped) or ``warning``."""

    severity: str
    #: Where the object came from: a file path, ``<stdin>``, ``cluster``.
    source: str
    #: 1-based document in the file (``None`` for the file as a whole).
    document: int | None
    message: str
    #: 1-based item of a ``List`` document.
    item: int | None = None

    @property
    def location(self) -> str:
        where = self.source
        if self.document is not None:
            where += f", document {self.document}"
        if self.item is not None:
            where += f", item {self.item}"
        return where

    def __str__(self) -> str:
        return f"{self.severity}: {self.location}: {self.message}"


@dataclass
class Inputs:
    """What a simulation starts from."""

    nodes: list[Node] = field(default_factory=list)
    #: Pods in input order: with ``spec.nodeName`` they run there, without they are scheduled.
    pods: list[Pod] = field(default_factory=list)
    objects: ClusterObjects = field(default_factory=ClusterObjects)
    issues: list[Issue] = field(default_factory=list)

    @property
    def errors(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "error"]

    @property
    def warnings(self) -> list[Issue]:
        return [i for i in self.issues if i.severity == "warning"]

    @property
    def running(self) -> list[Pod]:
        return [p for p in self.pods if p.spec.node_name]

    @property
    def pending(self) -> list[Pod]:
        return [p for p in self.pods if not p.spec.node_name]


class _Loader(_BaseLoader):
    """Safe YAML without timestamp resolution: Kubernetes keeps timestamps as strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


@dataclass
class _Where:
    source: str
    document: int | None
    item: int | None = None

    @property
    def location(self) -> str:
        return Issue("", self.source, self.document, "", self.item).location

    def issue(self, severity: str, message: str) -> Issue:
        return Issue(severity, self.source, self.document, message, self.item)


class InputBuilder:
    """Collects objects from several sources into one :class:`Inputs`."""

    def __init__(self, watched: Sequence[WatchedKind] = ()) -> None:
        self.inputs = Inputs()
        #: The kinds plugins read, by ``(apiVersion, kind)``: kept besides :data:`KINDS`.
        self.watched = {(k.api_version, k.kind): k for k in watched}
        self._pods: dict[str, str] = {}
        self._nodes: dict[str, str] = {}
        self._pod_where: dict[str, _Where] = {}
        self._finished = False

    # -- sources ---------------------------------------------------------------------------

    def add_paths(self, paths: Iterable[str | Path]) -> None:
        """Files, directories (their manifest files, by name) and ``-`` (stdin)."""
        for path in paths:
            if str(path) == "-":
                self.add_text(sys.stdin.read(), "<stdin>")
                continue
            p = Path(path)
            if p.is_dir():
                files = sorted(
                    f for f in p.iterdir() if f.is_file() and f.suffix in MANIFEST_SUFFIXES
                )
                if not files:
                    self._issue(_Where(str(p), None), "warning", "no manifest files in directory")
                for f in files:
                    self.add_file(f)
            else:
                self.add_file(p)

    def add_file(self, path: Path) -> None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read {path}: {e}") from e
        self.add_text(text, str(path))

    def add_text(self, text: str, source: str) -> None:
        """Every document of a YAML or JSON text."""
        for index, doc in self._documents(text, source):
            self.add_document(doc, source, index)

    def add_document(self, doc: Any, source: str, index: int | None) -> None:
        where = _Where(source, index)
        if doc is None:
            return
        if not isinstance(doc, dict):
            self._issue(where, "error", f"not a Kubernetes object but a {type(doc).__name__}")
            return
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                self._issue(where, "error", f"{kind}: items is not a list")
                return
            for j, item in enumerate(items, 1):
                self._add_object(item, _Where(source, index, j))
            return
        self._add_object(doc, where)

    def add_object(self, obj: Any, source: str) -> None:
        """One object (from a live cluster, for instance)."""
        self._add_object(obj, _Where(source, None))

    def add_node(self, node: Node, source: str) -> None:
        """A Node already decoded (a live cluster's)."""
        self._keep_node(node, _Where(source, None))

    def add_pod(self, pod: Pod, source: str) -> None:
        """A Pod already decoded and admitted (a live cluster's)."""
        self._keep_pod(pod, _Where(source, None))

    # -- finishing -----------------------------------------------------------------------

    def finish(self) -> Inputs:
        """Resolve pod priorities now that every PriorityClass is known; the inputs."""
        if not self._finished:
            self._finished = True
            self.inputs.pods = [p for p in map(self._with_priority, self.inputs.pods) if p]
            for pod in self.inputs.pending:
                self._claims_from_templates(pod)
            for pod in self.inputs.pods:
                node = pod.spec.node_name
                if node and node not in self._nodes:
                    where = self._pod_where.get(pod.metadata.uid, _Where("input", None))
                    self._issue(
                        where,
                        "warning",
                        f"Pod {pod.key} runs on node {node}, which is not in the input: "
                        "it counts there, but the node is no candidate",
                    )
        return self.inputs

    # -- internals -----------------------------------------------------------------------

    def _issue(self, where: _Where, severity: str, message: str) -> None:
        self.inputs.issues.append(where.issue(severity, message))

    def _documents(self, text: str, source: str) -> Iterator[tuple[int, Any]]:
        stripped = text.lstrip()
        if stripped.startswith(("{", "[")):
            try:
                yield 1, msgspec.json.decode(stripped)
                return
            except msgspec.DecodeError:
                pass  # maybe YAML flow style after all
        index = 0
        try:
            for index, doc in enumerate(yaml.load_all(text, Loader=_Loader), 1):
                yield index, doc
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = f" (line {mark.line + 1})" if mark is not None else ""
            problem = getattr(e, "problem", None) or str(e)
            self._issue(
                _Where(source, index + 1),
                "error",
                f"invalid YAML{line}: {problem}; the rest of the file is skipped",
            )

    def _add_object(self, obj: Any, where: _Where) -> None:
        if not isinstance(obj, dict):
            self._issue(where, "error", f"not a Kubernetes object but a {type(obj).__name__}")
            return
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            self._issue(where, "error", "kind is missing")
            return
        if kind == "Node":
            node = self._convert(obj, Node, where, kind)
            if node is not None:
                self._keep_node(_with_allocatable(node), where)
        elif kind == "Pod":
            pod = self._convert(obj, Pod, where, kind)
            if pod is not None:
                self._keep_pod(pod, where)
        elif kind in KINDS:
            group, cls, namespaced, _ = KINDS[kind]
            api_version = obj.get("apiVersion", "")
            if isinstance(api_version, str) and api_version.rpartition("/")[0] != group:
                self._issue(
                    where, "warning", f"{kind} of apiVersion {api_version!r} is not read; skipped"
                )
                return
            other = self._convert(obj, cls, where, kind)
            if other is None:
                return
            if not other.metadata.name:
                self._issue(where, "error", f"{kind}: metadata.name is required")
                return
            meta = other.metadata
            if namespaced and not meta.namespace:
                meta.namespace = "default"
            if not meta.uid:
                # The API server gives every object one; a PV's claimRef names its claim's.
                meta.uid = str(uuid.uuid5(_UID_NAMESPACE, f"{kind}/{meta.namespace}/{meta.name}"))
            self.inputs.objects.add(other)
        elif (watched := self.watched.get((str(obj.get("apiVersion", "")), kind))) is not None:
            self._add_watched(obj, watched, where)
        else:
            self._issue(where, "warning", f"kind {kind} is not simulated; skipped")

    def _add_watched(self, obj: dict[str, Any], watched: WatchedKind, where: _Where) -> None:
        """An object of a kind a plugin reads (a NodeFeature ...), into the object store."""
        kind = watched.kind
        converted = self._convert(obj, watched.type, where, kind)
        if converted is None:
            return
        meta = converted.metadata
        if not meta.name:
            self._issue(where, "error", f"{kind}: metadata.name is required")
            return
        if watched.namespaced and not meta.namespace:
            meta.namespace = "default"
        self.inputs.objects.add_watched(kind, converted)

    def _convert(self, obj: dict[str, Any], cls: type[Any], where: _Where, kind: str) -> Any:
        try:
            return msgspec.convert(obj, cls)
        except msgspec.ValidationError:
            # Most inputs write quantities as strings: numbers are looked for only when the
            # object did not convert as it is (every quantity map is typed to hold strings).
            if kind != "CSINode":  # its drivers' ``allocatable`` is a count, not a quantity map
                _stringify_quantities(obj)
        try:
            return msgspec.convert(obj, cls)
        except msgspec.ValidationError as e:
            self._issue(where, "error", f"{kind} {_display_name(obj)}: {e}")
            return None

    def _keep_node(self, node: Node, where: _Where) -> None:
        name = node.metadata.name
        if not name:
            self._issue(where, "error", "Node: metadata.name is required")
            return
        try:
            node_allocatable(node)
        except QuantityError as e:
            self._issue(where, "error", f"Node {name}: status.allocatable: {e}")
            return
        previous = self._nodes.get(name)
        if previous is not None:
            self._issue(where, "error", f"Node {name} already defined ({previous}); skipped")
            return
        self._nodes[name] = where.location
        self.inputs.nodes.append(node)

    def _keep_pod(self, pod: Pod, where: _Where) -> None:
        meta = pod.metadata
        if not meta.name and meta.generate_name:
            meta.name = meta.generate_name + _suffix(where, meta.generate_name)
        if not meta.name:
            self._issue(where, "error", "Pod: metadata.name is required")
            return
        if not meta.namespace:
            meta.namespace = "default"
        if pod.status.phase in _TERMINAL_PHASES:
            return
        try:
            _check_quantities(pod)
        except QuantityError as e:
            self._issue(where, "error", f"Pod {pod.key}: {e}")
            return
        _default_requests_from_limits(pod)
        previous = self._pods.get(pod.key)
        if previous is not None:
            self._issue(where, "error", f"Pod {pod.key} already defined ({previous}); skipped")
            return
        if not meta.uid:
            meta.uid = str(uuid.uuid5(_UID_NAMESPACE, pod.key))
        self._pods[pod.key] = where.location
        self._pod_where[meta.uid] = where
        self.inputs.pods.append(apply_match_label_keys(pod))
        # A plugin watching pods of its own (Coscheduling's group members) sees them too.
        watched = self.watched.get(("v1", "Pod"))
        if watched is not None and _selects(watched.label_selector, meta.labels):
            self.inputs.objects.add_watched(
                "Pod", msgspec.convert(msgspec.to_builtins(pod), watched.type)
            )

    def _claims_from_templates(self, pod: Pod) -> None:
        """What the resourceclaim controller does for a pending pod whose claim comes from a
        ResourceClaimTemplate: a ResourceClaim of the template's spec, owned by the pod and
        named in its ``status.resourceClaimStatuses``. Without the template the pod waits, as
        it would in a cluster."""
        meta = pod.metadata
        made = {s.name for s in pod.status.resource_claim_statuses}
        added = []
        for pc in pod.spec.resource_claims:
            if pc.resource_claim_template_name is None or pc.name in made:
                continue
            key = f"ResourceClaimTemplate/{meta.namespace}/{pc.resource_claim_template_name}"
            template = self.inputs.objects.watched.get(key)
            if not isinstance(template, ResourceClaimTemplate):
                continue
            # The controller's generateName: pod and claim name, cut to 57 characters.
            base = f"{meta.name}-{pc.name}"[:57] + "-"
            name = base + _suffix(_Where("resourceclaim", None), f"{meta.uid}/{pc.name}")
            tm = template.spec.metadata
            claim = ResourceClaim(
                metadata=ObjectMeta(
                    name=name,
                    namespace=meta.namespace,
                    uid=str(uuid.uuid5(_UID_NAMESPACE, f"ResourceClaim/{meta.namespace}/{name}")),
                    labels=dict(tm.labels),
                    annotations={**tm.annotations, ANN_POD_CLAIM_NAME: pc.name},
                    owner_references=[
                        OwnerReference(
                            api_version="v1",
                            kind="Pod",
                            name=meta.name,
                            uid=meta.uid,
                            controller=True,
                        )
                    ],
                ),
                spec=template.spec.spec,
            )
            self.inputs.objects.add(claim)
            added.append(PodResourceClaimStatus(name=pc.name, resource_claim_name=name))
        if added:
            pod.status.resource_claim_statuses = [*pod.status.resource_claim_statuses, *added]

    def _with_priority(self, pod: Pod) -> Pod | None:
        """``spec.priority`` and ``preemptionPolicy`` as the Priority admission plugin sets them
        when the pod is created, or ``None`` if it would refuse the pod.

        A pod that already runs was admitted long ago and is kept as it is. A pending pod naming
        a PriorityClass the input does not have but carrying a priority (a pod read back from a
        cluster) keeps it.
        """
        spec = pod.spec
        objects = self.inputs.objects
        if spec.priority_class_name:
            pc = objects.priority_class(spec.priority_class_name)
        else:
            pc = objects.global_default_priority_class()
        if spec.node_name or (
            pc is None and spec.priority_class_name and spec.priority is not None
        ):
            if spec.priority is None:
                spec.priority = pc.value if pc is not None else 0
            return pod
        where = self._pod_where.get(pod.metadata.uid, _Where("input", None))
        if pc is None and spec.priority_class_name:
            self._issue(
                where,
                "error",
                f"Pod {pod.key}: no PriorityClass with name {spec.priority_class_name} was found",
            )
            return None
        priority = pc.value if pc is not None else 0
        policy = (pc.preemption_policy if pc is not None else None) or "PreemptLowerPriority"
        if spec.priority is not None and spec.priority != priority:
            self._issue(
                where,
                "error",
                f"Pod {pod.key}: the integer value of priority ({spec.priority}) must not be "
                f"provided in pod spec; priority admission controller computed {priority} from "
                "the given PriorityClass name",
            )
            return None
        if spec.preemption_policy is not None and spec.preemption_policy != policy:
            self._issue(
                where,
                "error",
                f"Pod {pod.key}: the string value of PreemptionPolicy ({spec.preemption_policy}) "
                f"must not be provided in pod spec; priority admission controller computed "
                f"{policy} from the given PriorityClass name",
            )
            return None
        spec.priority = priority
        spec.preemption_policy = policy
        if pc is not None:
            spec.priority_class_name = pc.metadata.name
        return pod


def load_inputs(paths: Sequence[str | Path]) -> Inputs:
    """Everything in ``paths`` (files, directories, ``-``), ready to simulate."""
    builder = InputBuilder()
    builder.add_paths(paths)
    return builder.finish()


def load_text(text: str, source: str = "<text>") -> Inputs:
    """Everything in one YAML or JSON text."""
    builder = InputBuilder()
    builder.add_text(text, source)
    return builder.finish()


# -- helpers ---------------------------------------------------------------------------------


def _display_name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return "(no metadata)"
    name = meta.get("name") or meta.get("generateName") or "(no name)"
    ns = meta.get("namespace")
    return f"{ns}/{name}" if isinstance(ns, str) and ns else str(name)


def _stringify_quantities(obj: Any, key: str = "") -> None:
    """``cpu: 2`` in YAML is the quantity ``"2"``: turn numbers in quantity maps into strings."""
    if isinstance(obj, dict):
        if key in _QUANTITY_MAPS:
            for k, v in obj.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    obj[k] = str(v)
        for k, v in obj.items():
            if isinstance(v, (dict, list)):
                _stringify_quantities(v, k)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                _stringify_quantities(v, key)


def _check_quantities(pod: Pod) -> None:
    """Every quantity of the pod parses (the API server validates them all)."""
    spec = pod.spec
    for kind, containers in (
        ("initContainers", spec.init_containers),
        ("containers", spec.containers),
    ):
        for i, c in enumerate(containers):
            for field_name, values in (
                ("requests", c.resources.requests),
                ("limits", c.resources.limits),
            ):
                for name, q in values.items():
                    _parse_at(q, f"spec.{kind}[{i}].resources.{field_name}[{name}]")
    if spec.resources is not None:
        for field_name, values in (
            ("requests", spec.resources.requests),
            ("limits", spec.resources.limits),
        ):
            for name, q in values.items():
                _parse_at(q, f"spec.resources.{field_name}[{name}]")
    for name, q in spec.overhead.items():
        _parse_at(q, f"spec.overhead[{name}]")
    pod_requests(pod)


def _parse_at(q: str, path: str) -> None:
    try:
        parse_quantity(q)
    except QuantityError as e:
        raise QuantityError(f"{path}: {e}") from e


def _default_requests_from_limits(pod: Pod) -> None:
    """The API server's defaulting: a limit without a request is also the request."""
    for c in (*pod.spec.init_containers, *pod.spec.containers):
        r = c.resources
        for name, q in r.limits.items():
            if name not in r.requests:
                r.requests = {**r.requests, name: q}
    pl = pod.spec.resources
    if pl is not None:
        for name, q in pl.limits.items():
            if name not in pl.requests:
                pl.requests = {**pl.requests, name: q}


def _with_allocatable(node: Node) -> Node:
    """The API server's defaulting: allocatable is the capacity when not given."""
    if not node.status.allocatable and node.status.capacity:
        node.status.allocatable = dict(node.status.capacity)
    return node


def _suffix(where: _Where, prefix: str) -> str:
    """A stable 5-character suffix for ``generateName`` (same input, same name)."""
    seed = f"{where.source}:{where.document}:{where.item}:{prefix}"
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = uuid.uuid5(_UID_NAMESPACE, seed).int
    out = []
    for _ in range(5):
        n, r = divmod(n, len(alphabet))
        out.append(alphabet[r])
    return "".join(out)
