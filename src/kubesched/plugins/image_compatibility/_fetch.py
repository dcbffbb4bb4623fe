"""Compatibility specs by image digest, fetched in the background, never in the scheduling cycle.

:class:`ArtifactStore` answers :meth:`~ArtifactStore.lookup` at once from what it knows:

* a **tag** (``registry/repo:tag``) is resolved to a digest, and that answer is trusted for
  ``tagCacheTTL``; after that the old digest is still used while a background fetch resolves
  the tag again (a tag that moved gets its new digest's spec then);
* a **digest** (``registry/repo@sha256:...``) maps to its decoded spec, to "no artifact", or to
  "invalid spec"; at most ``specCacheSize`` of them, the least recently used dropped first;
* anything else starts a fetch (the pod's imagePullSecrets are read then, through the
  framework's client) and answers :class:`Pending`. A failed fetch answers :class:`Failed` and is
  retried after a backoff (1 s doubling to 5 min) while pods wait for it.

When a fetch ends, successfully or not, the pods that asked meanwhile are handed to ``on_done``
(the plugin activates them, so they are retried at once).

Fetches run as tasks on one event loop: the front end's (``run``, the extender and ``simulate``
build plugins on their loop) or, without one, a private loop on a daemon thread. ``lookup`` may be
called from another thread (the extender's worker): the state is guarded by a lock.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kubesched.api import Pod
from kubesched.plugins.image_compatibility._credentials import (
    Credential,
    credentials_from_secrets,
)
from kubesched.plugins.image_compatibility._reference import ImageReference, parse_image_reference
from kubesched.plugins.image_compatibility._registry import RegistryClient, RegistryError
from kubesched.plugins.image_compatibility._spec import CompatibilitySpec, SpecError, decode_spec

log = logging.getLogger(__name__)

#: First retry of a failed fetch, doubling on each failure up to :data:`MAX_RETRY_DELAY`.
INITIAL_RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 300.0

#: Reads a Secret (``namespace``, ``name``) as the API server returns it, or ``None``.
SecretReader = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """The compatibility spec of one image of a pod."""

    #: The image as the pod names it.
    image: str
    #: ``registry/repository@digest``: what the spec is cached by.
    key: str
    #: The artifact's digest: pods of images sharing it share Filter results.
    spec_digest: str
    spec: CompatibilitySpec


@dataclass(frozen=True, slots=True)
class Found:
    """What the registry says: the image's spec, or ``None`` when it has no artifact."""

    spec: ImageSpec | None


@dataclass(frozen=True, slots=True)
class Invalid:
    """The image's artifact exists but its spec cannot be used."""

    error: str


@dataclass(frozen=True, slots=True)
class Pending:
    """A fetch is in flight; the pod is handed to ``on_done`` when it ends."""


@dataclass(frozen=True, slots=True)
class Failed:
    """The last fetch failed; another is tried after :attr:`retry_in` seconds."""

    error: str
    retry_in: float


Lookup = Found | Invalid | Pending | Failed


@dataclass(slots=True, eq=False)
class Fetch:
    """The fetch of one image with one set of credentials, and the pods waiting for it."""

    image: str
    ref: ImageReference
    namespace: str
    secrets: tuple[str, ...]
    waiting: dict[str, Pod] = field(default_factory=dict)
    running: bool = False
    attempts: int = 0
    #: The last failure; empty when the last attempt succeeded or none ended yet.
    error: str = ""
    retry_at: float = 0.0
    #: Pods told about the current failure (one event each, not one per retry).
    warned: set[str] = field(default_factory=set)


def retry_delay(attempts: int) -> float:
    """Seconds before retrying a fetch that failed ``attempts`` times in a row."""
    return float(min(INITIAL_RETRY_DELAY * 2 ** max(attempts - 1, 0), MAX_RETRY_DELAY))


def _cache_key(ref: ImageReference, digest: str) -> str:
    return f"{ref.registry}/{ref.repository}@{digest}"


class ArtifactStore:
    """Specs by digest, tags' digests for a while, and the background fetches filling both."""

    def __init__(
        self,
        registry: Callable[[], RegistryClient],
        *,
        tag_ttl: float,
        size: int,
        read_secret: SecretReader | None,
        on_done: Callable[[Fetch, Sequence[Pod]], None],
        on_result: Callable[[str], None] | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_registry = registry
        self._registry: RegistryClient | None = None
        self.tag_ttl = tag_ttl
        self.size = size
        self._read_secret = read_secret
        self._on_done = on_done
        self._on_result = on_result
        self._loop = loop
        self._own_loop: threading.Thread | None = None
        self._clock = clock
        self._lock = threading.RLock()
        #: ``registry/repository@digest`` -> what the registry had for it.
        self._specs: OrderedDict[str, Found | Invalid] = OrderedDict()
        #: The image as the pod names it -> (digest, monotonic time it stops being trusted);
        #: as many as specs, the least recently resolved dropped first.
        self._tags: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._fetches: dict[tuple[str, str, tuple[str, ...]], Fetch] = {}
        self._tasks: set[concurrent.futures.Future[None]] = set()
        #: Fetches finished, by result (``artifact``, ``no_artifact``, ``invalid``, ``error``).
        self.results: dict[str, int] = {}

    # -- the scheduling cycle's side -------------------------------------------------------------

    def lookup(self, image: str, pod: Pod) -> Lookup:
        """What is known of ``image`` now; starts a fetch if that is not enough."""
        with self._lock:
            try:
                ref = parse_image_reference(image)
            except ValueError as err:
                return Invalid(f"not an image reference: {err}")
            now = self._clock()
            digest = ref.digest
            stale = False
            if not digest:
                tag = self._tags.get(image)
                if tag is not None:
                    digest, expires = tag
                    stale = now >= expires
            if digest:
                known = self._specs.get(_cache_key(ref, digest))
                if known is not None:
                    self._specs.move_to_end(_cache_key(ref, digest))
                    if stale:
                        self._refresh(image, ref, pod)
                    return known
            job = self._job(image, ref, pod)
            job.waiting[pod.metadata.uid] = pod
            if job.running:
                return Pending()
            if job.error and now < job.retry_at:
                return Failed(job.error, job.retry_at - now)
            self._start(job)
            return Failed(job.error, 0.0) if job.error else Pending()

    def warn_once(self, image: str, pod: Pod) -> bool:
        """Whether ``pod`` has not been told yet about the current failure of ``image``'s
        fetch (and now counts as told)."""
        with self._lock:
            job = self._fetches.get(self._job_key(image, pod))
            if job is None or pod.metadata.uid in job.warned:
                return False
            job.warned.add(pod.metadata.uid)
            return True

    @staticmethod
    def _job_key(image: str, pod: Pod) -> tuple[str, str, tuple[str, ...]]:
        secrets = tuple(s.name for s in pod.spec.image_pull_secrets)
        return image, pod.metadata.namespace, secrets

    def _job(self, image: str, ref: ImageReference, pod: Pod) -> Fetch:
        key = self._job_key(image, pod)
        job = self._fetches.get(key)
        if job is None:
            job = self._fetches[key] = Fetch(image, ref, key[1], key[2])
        return job

    def _refresh(self, image: str, ref: ImageReference, pod: Pod) -> None:
        """Resolve an expired tag again, in the background, without holding the pod."""
        job = self._job(image, ref, pod)
        if not job.running and (not job.error or self._clock() >= job.retry_at):
            self._start(job)

    def _start(self, job: Fetch) -> None:
        job.running = True
        loop = self.home()
        future = asyncio.run_coroutine_threadsafe(self._run(job), loop)
        self._tasks.add(future)
        future.add_done_callback(self._tasks.discard)

    def home(self) -> asyncio.AbstractEventLoop:
        """The loop fetches run on: the front end's, else a private one on a daemon thread."""
        if self._loop is None or self._loop.is_closed():
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = asyncio.new_event_loop()
                self._own_loop = threading.Thread(
                    target=loop.run_forever, name="image-compatibility-fetch", daemon=True
                )
                self._own_loop.start()
                self._loop = loop
        return self._loop

    # -- the background side ---------------------------------------------------------------------

    async def _run(self, job: Fetch) -> None:
        try:
            result = await self._fetch(job)
        except RegistryError as err:
            self._failed(job, f"{err}", retryable=err.retryable)
            return
        except Exception as err:  # a bug must not leave the pods waiting forever
            log.exception("fetching the compatibility artifact of %s failed", job.image)
            self._failed(job, f"{type(err).__name__}: {err}", retryable=True)
            return
        self._count(result)
        with self._lock:
            job.running = False
            job.error = ""
            job.attempts = 0
            job.warned.clear()
            pods = list(job.waiting.values())
            job.waiting.clear()
            self._fetches.pop(self._key_of(job), None)
        self._on_done(job, pods)

    def _count(self, result: str) -> None:
        with self._lock:
            self.results[result] = self.results.get(result, 0) + 1
        if self._on_result is not None:
            self._on_result(result)

    def _key_of(self, job: Fetch) -> tuple[str, str, tuple[str, ...]]:
        return job.image, job.namespace, job.secrets

    async def _credentials(self, job: Fetch) -> list[Credential]:
        if not job.secrets or self._read_secret is None:
            return []
        secrets = []
        for name in job.secrets:
            secret = await self._read_secret(job.namespace, name)
            if secret is None:
                # As the kubelet: a missing pull secret is skipped, the pull tried without it.
                log.info("imagePullSecret %s/%s does not exist", job.namespace, name)
                continue
            secrets.append(secret)
        return credentials_from_secrets(secrets)

    async def _fetch(self, job: Fetch) -> str:
        """Fill the caches for ``job``'s image; the result's name, for the metrics."""
        if self._registry is None:
            self._registry = self._make_registry()
        registry = self._registry
        creds = await self._credentials(job)
        ref = job.ref
        digest = ref.digest
        if not digest:
            digest = await registry.resolve(ref, creds)
            with self._lock:
                self._tags[job.image] = (digest, self._clock() + self.tag_ttl)
                self._tags.move_to_end(job.image)
                while len(self._tags) > self.size:
                    self._tags.popitem(last=False)
        key = _cache_key(ref, digest)
        with self._lock:
            known = self._specs.get(key)
        if known is not None:
            return "cached"
        artifact = await registry.find_artifact(replace(ref, digest=digest), creds)
        entry: Found | Invalid
        if artifact is None:
            entry, result = Found(None), "no_artifact"
        else:
            try:
                spec = decode_spec(artifact.spec)
            except SpecError as err:
                entry, result = Invalid(f"invalid compatibility spec: {err}"), "invalid"
            else:
                entry = Found(ImageSpec(job.image, key, artifact.artifact_digest, spec))
                result = "artifact"
        with self._lock:
            self._specs[key] = entry
            while len(self._specs) > self.size:
                self._specs.popitem(last=False)
        return result

    def _failed(self, job: Fetch, error: str, *, retryable: bool) -> None:
        self._count("error")
        with self._lock:
            job.running = False
            job.attempts += 1
            job.error = error
            delay = retry_delay(job.attempts)
            job.retry_at = self._clock() + delay
            pods = list(job.waiting.values())
            job.waiting.clear()
        log.warning(
            "cannot fetch the compatibility artifact of %s (attempt %d, %s): %s; retrying in %.0fs",
            job.image,
            job.attempts,
            "retryable" if retryable else "not retryable",
            error,
            delay,
        )
        if pods and self._loop is not None:
            # Retried while pods wait; a pod that asks again after the delay starts it too.
            self._loop.call_later(delay, self._retry, job)
        self._on_done(job, pods)

    def _retry(self, job: Fetch) -> None:
        with self._lock:
            if job.running or not job.waiting or self._fetches.get(self._key_of(job)) is not job:
                return
            self._start(job)

    # -- reading state (metrics, tests) ----------------------------------------------------------

    def in_flight(self) -> int:
        with self._lock:
            return sum(1 for j in self._fetches.values() if j.running)

    def cached(self) -> int:
        with self._lock:
            return len(self._specs)

    async def settle(self) -> None:
        """Wait until no fetch runs (tests bound it with ``asyncio.timeout``)."""
        while running := [asyncio.wrap_future(f) for f in list(self._tasks) if not f.done()]:
            await asyncio.wait(running)

    def close(self) -> None:
        """Cancel running fetches and close the registry client."""
        for task in list(self._tasks):
            task.cancel()
        registry, self._registry = self._registry, None
        loop = self._loop
        if registry is not None and loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                asyncio.run_coroutine_threadsafe(registry.aclose(), loop)
        if self._own_loop is not None and loop is not None:
            loop.call_soon_threadsafe(loop.stop)
