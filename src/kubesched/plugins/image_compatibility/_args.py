"""ImageCompatibility's args: defaults and validation with field paths."""

from __future__ import annotations

import os

import msgspec

from kubesched.config import Duration, FieldError, format_duration

#: ``mode``: evaluate compatibility sets in the scheduler against NodeFeature objects.
IN_PROCESS = "InProcess"
#: ``mode``: let nfd-master evaluate them, one NodeFeatureGroup per set.
NODE_FEATURE_GROUP = "NodeFeatureGroup"
MODES = (IN_PROCESS, NODE_FEATURE_GROUP)

#: ``failurePolicy``: an image whose artifact cannot be fetched keeps its pod out.
FAIL = "Fail"
#: ``failurePolicy``: such an image counts as compatible with every node.
IGNORE = "Ignore"
FAILURE_POLICIES = (FAIL, IGNORE)

DEFAULT_MAX_ARTIFACT_BYTES = 1 << 20
DEFAULT_REGISTRY_TIMEOUT = 10.0
DEFAULT_TAG_CACHE_TTL = 300.0
DEFAULT_SPEC_CACHE_SIZE = 1024
#: Where NFD's Helm chart and kustomize bases install nfd-master.
DEFAULT_NFD_NAMESPACE = "node-feature-discovery"


class ImageCompatibilityArgs(
    msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"
):
    """Args of ``ImageCompatibility``; see docs/plugins/image-compatibility.md."""

    #: ``InProcess`` (evaluate against NodeFeature objects) or ``NodeFeatureGroup``.
    mode: str = IN_PROCESS
    #: ``Fail`` (an unreachable registry keeps the pod Pending) or ``Ignore`` (compatible).
    failure_policy: str = FAIL
    #: Whether an image without a compatibility artifact is incompatible with every node.
    require_artifact: bool = False
    #: Artifact manifests and spec layers larger than this are refused.
    max_artifact_bytes: int = DEFAULT_MAX_ARTIFACT_BYTES
    #: Timeout of one registry request.
    registry_timeout: Duration = DEFAULT_REGISTRY_TIMEOUT
    #: Registries (``host[:port]``) spoken to over plain HTTP instead of HTTPS.
    plain_http_registries: list[str] = msgspec.field(
        default_factory=list, name="plainHTTPRegistries"
    )
    #: A CA bundle for registries' certificates, besides the system's.
    ca_file: str = ""
    #: Do not verify registries' certificates (tests only).
    insecure_skip_verify: bool = False
    #: How long a tag's digest is trusted before it is resolved again.
    tag_cache_ttl: Duration = msgspec.field(default=DEFAULT_TAG_CACHE_TTL, name="tagCacheTTL")
    #: Image digests whose spec (or lack of one) is kept, least recently used first out.
    spec_cache_size: int = DEFAULT_SPEC_CACHE_SIZE
    #: nfd-master's namespace, where ``NodeFeatureGroup`` mode creates its groups.
    nfd_namespace: str = DEFAULT_NFD_NAMESPACE

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.mode not in MODES:
            errors.append(FieldError.not_supported(f"{path}.mode", self.mode, MODES))
        if self.failure_policy not in FAILURE_POLICIES:
            errors.append(
                FieldError.not_supported(
                    f"{path}.failurePolicy", self.failure_policy, FAILURE_POLICIES
                )
            )
        if self.max_artifact_bytes < 1:
            errors.append(
                FieldError.invalid(
                    f"{path}.maxArtifactBytes", self.max_artifact_bytes, "must be positive"
                )
            )
        if self.spec_cache_size < 1:
            errors.append(
                FieldError.invalid(
                    f"{path}.specCacheSize", self.spec_cache_size, "must be positive"
                )
            )
        if self.registry_timeout <= 0:
            errors.append(
                FieldError.invalid(
                    f"{path}.registryTimeout",
                    format_duration(self.registry_timeout),
                    "must be positive",
                )
            )
        if self.tag_cache_ttl < 0:
            errors.append(
                FieldError.invalid(
                    f"{path}.tagCacheTTL",
                    format_duration(self.tag_cache_ttl),
                    "must not be negative",
                )
            )
        for i, host in enumerate(self.plain_http_registries):
            if not host or "/" in host or host.strip() != host:
                errors.append(
                    FieldError.invalid(
                        f"{path}.plainHTTPRegistries[{i}]", host, "must be a host[:port]"
                    )
                )
        if self.ca_file and not os.path.isfile(self.ca_file):
            errors.append(FieldError.invalid(f"{path}.caFile", self.ca_file, "no such file"))
        if self.mode == NODE_FEATURE_GROUP and not self.nfd_namespace:
            errors.append(FieldError.required(f"{path}.nfdNamespace"))
        return errors
