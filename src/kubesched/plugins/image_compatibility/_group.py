"""NodeFeatureGroup mode: nfd-master evaluates the compatibility sets, the plugin reads nodes.

:class:`NodeFeatureGroups` keeps one ``NodeFeatureGroup`` per compatibility set in nfd-master's
namespace and reads the matching nodes back from its ``status.nodes``. Why a set is not simply
copied into ``featureGroupRules``, and who owns the groups: docs/plugins/image-compatibility.md,
"NodeFeatureGroup mode".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import msgspec

from kubesched import KubeschedError
from kubesched.framework import APIClient

__all__ = [
    "GROUP_VERSION",
    "MAX_MATCH_ANY",
    "OWNER_LABEL",
    "CustomObjectsAPIClient",
    "NodeFeatureGroups",
    "UnsupportedRules",
    "conjunction",
    "group_name",
]

log = logging.getLogger(__name__)

GROUP_VERSION = "nfd.k8s-sigs.io/v1alpha1"
PLURAL = "nodefeaturegroups"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubesched"
#: Which scheduler (profile) a group belongs to: a hash of its ``owner``.
OWNER_LABEL = "kubesched.io/image-compatibility-owner"
DIGEST_ANNOTATION = "kubesched.io/spec-digest"
SET_ANNOTATION = "kubesched.io/compatibility-set"
#: Alternatives a folded ``matchAny`` may have; more and the set is evaluated in process.
MAX_MATCH_ANY = 64
#: The feature nfd-master feeds earlier rules' variables into (``RuleBackrefDomain``).
_BACKREF_DOMAIN = "rule."
_NAME_PREFIX = "kubesched-ic-"


class UnsupportedRules(KubeschedError, ValueError):  # noqa: N818  (the name says what the caller must handle)
    """A compatibility set that a NodeFeatureGroup cannot express exactly."""


@runtime_checkable
class CustomObjectsAPIClient(APIClient, Protocol):
    """An API client that lists, creates and deletes custom objects as plain JSON.

    Errors other than the two expected answers (``None``: already exists, ``False``: not
    found) raise; the controller logs them and tries again on its next pass.
    """

    async def list_custom_objects(
        self,
        group_version: str,
        plural: str,
        *,
        namespace: str,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]: ...

    async def create_custom_object(
        self, group_version: str, plural: str, body: Mapping[str, Any], *, namespace: str
    ) -> dict[str, Any] | None: ...

    async def delete_custom_object(
        self, group_version: str, plural: str, name: str, *, namespace: str
    ) -> bool: ...


def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def group_name(owner: str, spec_digest: str, set_index: int) -> str:
    """The group's name: DNS-1123 (a label, even), at most 63 characters, deterministic."""
    return f"{_NAME_PREFIX}{_hash(owner, spec_digest)[:32]}-{set_index}"


def owner_label_value(owner: str) -> str:
    """A label value for any owner string (profile names may hold characters labels may not)."""
    return _hash(owner)[:40]


def _features_of(rule: Mapping[str, Any]) -> list[Any]:
    terms = list(rule.get("matchFeatures") or [])
    for alternative in rule.get("matchAny") or []:
        terms.extend(alternative.get("matchFeatures") or [])
    return terms


def conjunction(
    rules: Sequence[Mapping[str, Any]], name: str = "compatibility-set"
) -> dict[str, Any]:
    """One ``GroupRule`` that matches a node exactly when every rule of ``rules`` does.

    ``rules`` are NFD ``GroupRule`` objects as JSON. Variables (``vars``, ``varsTemplate``)
    are dropped: nothing reads them once the rules are folded.
    """
    match_features: list[Any] = []
    alternatives: list[list[list[Any]]] = []
    combinations = 1
    for index, rule in enumerate(rules):
        if not isinstance(rule, Mapping):
            raise UnsupportedRules(f"rule {index} is not an object: {rule!r}")
        label = rule.get("name") or f"#{index}"
        for term in _features_of(rule):
            feature = term.get("feature", "") if isinstance(term, Mapping) else ""
            if feature.startswith(_BACKREF_DOMAIN):
                raise UnsupportedRules(
                    f"rule {label!r} refers back to earlier rules ({feature}), which only a "
                    "group evaluated rule by rule provides"
                )
        match_features.extend(rule.get("matchFeatures") or [])
        any_of = [list(a.get("matchFeatures") or []) for a in rule.get("matchAny") or []]
        if any_of:
            alternatives.append(any_of)
            combinations *= len(any_of)
            if combinations > MAX_MATCH_ANY:
                raise UnsupportedRules(
                    f"the set's matchAny alternatives multiply to more than {MAX_MATCH_ANY}"
                )
    folded: dict[str, Any] = {"name": name}
    if match_features:
        folded["matchFeatures"] = match_features
    if alternatives:
        folded["matchAny"] = [
            {"matchFeatures": [term for part in combo for term in part]}
            for combo in itertools.product(*alternatives)
        ]
    return folded


@dataclass
class _Group:
    name: str
    rule: dict[str, Any]
    last_used: float
    #: When the group was known to exist (created, found, or adopted); None before.
    created: float | None = None
    #: ``status.nodes`` as last read; None while it names none.
    nodes: frozenset[str] | None = None


def _status_nodes(item: Mapping[str, Any]) -> frozenset[str] | None:
    status = item.get("status") or {}
    nodes = status.get("nodes") if isinstance(status, Mapping) else None
    if not nodes:
        return None
    return frozenset(n["name"] for n in nodes if isinstance(n, Mapping) and n.get("name"))


class NodeFeatureGroups:
    """Keeps one NodeFeatureGroup per requested compatibility set.

    All API traffic happens in a background task: the scheduling cycle only calls the two
    synchronous methods, which read and write memory. ``request`` (and ``start``, ``aclose``)
    belong to the event loop the task runs on: from another thread, hand them to it
    (``loop.call_soon_threadsafe``); ``nodes_for`` may be called from any thread.

    Interface for the plugin::

        groups = NodeFeatureGroups(client, namespace=args.nfd_namespace, owner=handle.profile_name)
        groups.start()                       # in the plugin's start-up, on the running event loop
        ...
        # PreFilter, for each compatibility set i of a spec whose digest is d:
        groups.request(d, i, spec_set.rules) # cheap, idempotent (on the task's loop)
        nodes = groups.nodes_for(d, i)       # frozenset of node names, or None: not evaluated yet
        ...
        await groups.aclose()                # on shutdown: stops the task, deletes every group

    - ``client`` is the front end's API client when it is a :class:`CustomObjectsAPIClient`
      (``handle.client``; check with ``isinstance``). Without one (``simulate``) this mode cannot
      run: use the in-process mode.
    - ``request(spec_digest, set_index, rules)``: ``rules`` is the set's ``rules`` list, as NFD
      ``GroupRule`` objects (plain JSON mappings, or ``msgspec`` structs that encode to NFD's JSON).
      It marks the group used now; a group nobody asked for during ``ttl`` seconds is deleted.
      Calling it again for the same key is free (the rules are not looked at again). A set no
      group can express raises :class:`UnsupportedRules` (the first time): evaluate it in process;
      ``conjunction(rules)`` tells beforehand, from any thread.
    - ``nodes_for(spec_digest, set_index)`` also marks the group used. ``None`` means "no answer
      yet" (the group is being created, or nfd-master has not evaluated it): keep the pod pending
      and retry, as for a registry fetch in flight. An empty set means no node is compatible.
    - ``on_change(keys)`` (optional, a constructor argument) is called from the background task
      after a pass in which the answer of some ``(spec_digest, set_index)`` keys appeared or
      changed: the place to move the pods waiting for them back to the active queue
      (``handle.activate``).
    - ``aclose()`` deletes every group of the owner, also those a previous process left. A process
      that ends without it leaves its groups behind: the next one with the same owner adopts them
      and deletes those nobody asks for within ``ttl``.
    - ``await wait_for(spec_digest, set_index)`` is for tests and tools: the answer once there
      is one.
    """

    def __init__(
        self,
        client: CustomObjectsAPIClient,
        namespace: str,
        owner: str,
        *,
        ttl: float = 600.0,
        settle: float = 10.0,
        poll_interval: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[list[tuple[str, int]]], None] | None = None,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self.owner = owner
        self.ttl = ttl
        self.settle = settle
        self.poll_interval = poll_interval
        self._clock = clock
        self._on_change = on_change
        #: What nodes_for answered per key after the last pass, to tell on_change what moved.
        self._answers: dict[tuple[str, int], frozenset[str] | None] = {}
        self._owner_value = owner_label_value(owner)
        self._groups: dict[tuple[str, int], _Group] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_error = ""

    @property
    def selector(self) -> str:
        """The label selector of this owner's groups."""
        return f"{MANAGED_BY_LABEL}={MANAGED_BY},{OWNER_LABEL}={self._owner_value}"

    # --- the scheduling cycle's side: memory only ------------------------------------------

    def request(self, spec_digest: str, set_index: int, rules: Sequence[Any]) -> None:
        """Ask for a group evaluating this set (created in the background); see the module."""
        key = (spec_digest, set_index)
        group = self._groups.get(key)
        now = self._clock()
        if group is not None:
            group.last_used = now
            return
        plain = msgspec.to_builtins(list(rules))
        name = group_name(self.owner, spec_digest, set_index)
        self._groups[key] = _Group(name, conjunction(plain, name=name), now)
        self._wake.set()

    def nodes_for(self, spec_digest: str, set_index: int) -> frozenset[str] | None:
        """The nodes nfd-master found compatible with the set; None if it has not said yet."""
        group = self._groups.get((spec_digest, set_index))
        if group is None:
            return None
        group.last_used = self._clock()
        return self._answer(group, group.last_used)

    def _answer(self, group: _Group, now: float) -> frozenset[str] | None:
        if group.nodes is not None:
            return group.nodes
        if group.created is not None and now - group.created >= self.settle:
            return frozenset()
        return None

    # --- the background side -----------------------------------------------------------------

    def start(self) -> None:
        """Run :meth:`run` in a task on the running event loop."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self.run(), name="image-compatibility-node-feature-groups"
            )

    async def run(self) -> None:
        """Sync every ``poll_interval`` seconds, or at once when a new group is requested."""
        while True:
            self._wake.clear()
            await self.sync()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)

    async def sync(self) -> None:
        """One pass: delete unused groups, create missing ones, read every status."""
        try:
            await self._collect_garbage()
            await self._create_missing()
            await self._read_statuses()
        except asyncio.CancelledError:
            raise
        except Exception as err:  # a pass that fails is repeated; the cycle never waits on it
            message = f"{type(err).__name__}: {err}"
            if message != self._last_error:
                log.warning(
                    "NodeFeatureGroups in namespace %s: %s (retrying every %.0fs)",
                    self.namespace,
                    message,
                    self.poll_interval,
                )
            self._last_error = message
        else:
            self._last_error = ""
        self._report_changes()

    def _report_changes(self) -> None:
        now = self._clock()
        answers = {key: self._answer(g, now) for key, g in self._groups.items()}
        changed = [k for k, a in answers.items() if a is not None and self._answers.get(k) != a]
        self._answers = answers
        if changed and self._on_change is not None:
            try:
                self._on_change(changed)
            except Exception:  # the plugin's callback must not stop the controller
                log.exception("NodeFeatureGroups: on_change failed")

    async def _collect_garbage(self) -> None:
        now = self._clock()
        for key, group in list(self._groups.items()):
            if now - group.last_used > self.ttl:
                if group.created is not None:
                    await self._delete(group.name)
                del self._groups[key]

    def _manifest(self, key: tuple[str, int], group: _Group) -> dict[str, Any]:
        return {
            "apiVersion": GROUP_VERSION,
            "kind": "NodeFeatureGroup",
            "metadata": {
                "name": group.name,
                "namespace": self.namespace,
                "labels": {MANAGED_BY_LABEL: MANAGED_BY, OWNER_LABEL: self._owner_value},
                "annotations": {DIGEST_ANNOTATION: key[0], SET_ANNOTATION: str(key[1])},
            },
            "spec": {"featureGroupRules": [group.rule]},
        }

    async def _create_missing(self) -> None:
        for key, group in list(self._groups.items()):
            if group.created is not None:
                continue
            created = await self._client.create_custom_object(
                GROUP_VERSION, PLURAL, self._manifest(key, group), namespace=self.namespace
            )
            group.created = self._clock()
            if created is not None:
                group.nodes = _status_nodes(created)

    async def _read_statuses(self) -> None:
        items = await self._client.list_custom_objects(
            GROUP_VERSION, PLURAL, namespace=self.namespace, label_selector=self.selector
        )
        now = self._clock()
        seen: set[tuple[str, int]] = set()
        for item in items:
            key = _key_of(item)
            if key is None:
                continue
            seen.add(key)
            group = self._groups.get(key)
            if group is None:  # left by an earlier process of the same owner: adopt it
                name = (item.get("metadata") or {}).get("name", "")
                rules = (item.get("spec") or {}).get("featureGroupRules") or [{}]
                group = _Group(name, rules[0], last_used=now, created=now - self.settle)
                self._groups[key] = group
            elif group.created is None:
                group.created = now
            group.nodes = _status_nodes(item)
        for key, group in self._groups.items():
            if group.created is not None and key not in seen:
                group.created = None  # deleted behind our back: create it again
                group.nodes = None
                self._wake.set()

    async def _delete(self, name: str) -> None:
        await self._client.delete_custom_object(
            GROUP_VERSION, PLURAL, name, namespace=self.namespace
        )

    async def wait_for(self, spec_digest: str, set_index: int) -> frozenset[str]:
        """The answer of :meth:`nodes_for` once there is one (for tests and tools; bound it with
        ``asyncio.timeout``)."""
        while (nodes := self.nodes_for(spec_digest, set_index)) is None:
            self._wake.set()
            await asyncio.sleep(min(0.2, self.poll_interval))
        return nodes

    async def aclose(self) -> None:
        """Stop the background task and delete every group of this owner."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        try:
            items = await self._client.list_custom_objects(
                GROUP_VERSION, PLURAL, namespace=self.namespace, label_selector=self.selector
            )
            names = {(i.get("metadata") or {}).get("name", "") for i in items}
            names |= {g.name for g in self._groups.values() if g.created is not None}
            for name in sorted(n for n in names if n):
                await self._delete(name)
        except Exception as err:  # shutting down: say what is left behind, never raise
            log.warning(
                "could not delete the NodeFeatureGroups of %s in namespace %s: %s",
                self.owner,
                self.namespace,
                err,
            )
        self._groups.clear()


def _key_of(item: Mapping[str, Any]) -> tuple[str, int] | None:
    annotations = (item.get("metadata") or {}).get("annotations") or {}
    digest = annotations.get(DIGEST_ANNOTATION)
    index = annotations.get(SET_ANNOTATION, "")
    if not digest or not index.isdigit():
        return None
    return digest, int(index)
