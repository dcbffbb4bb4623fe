"""ImageCompatibility: Node Feature Discovery image compatibility, evaluated in process.

An image may carry an OCI artifact whose spec lists compatibility sets of NFD rules; a node is
compatible with the image when every rule of at least one set matches the node's NodeFeature
objects. PreFilter reads the specs from a cache by image digest (a miss starts a background fetch
and holds the pod until it ends), Filter keeps the compatible nodes, Score prefers the nodes of
the best-weighted sets. See docs/plugins/image-compatibility.md.

The modules: :mod:`._nfd` (NFD's rule engine and NodeFeature), :mod:`._spec` (the spec),
:mod:`._registry` (finding artifacts in OCI registries, with :mod:`._reference`,
:mod:`._credentials`, :mod:`._challenge`, :mod:`._tokens`), :mod:`._fetch` (the cache by digest
and the background fetches), :mod:`._verdicts` (results per spec and node features),
:mod:`._args`, :mod:`._plugin`.
"""

from kubesched.plugins.image_compatibility._args import (
    FAIL,
    IGNORE,
    IN_PROCESS,
    NODE_FEATURE_GROUP,
    ImageCompatibilityArgs,
)
from kubesched.plugins.image_compatibility._plugin import (
    EVENT_REASON,
    NAME,
    NODE_FEATURE_KIND,
    NODE_FEATURE_RESOURCE,
    ImageCompatibility,
    pod_images,
)

__all__ = [
    "EVENT_REASON",
    "FAIL",
    "IGNORE",
    "IN_PROCESS",
    "NAME",
    "NODE_FEATURE_GROUP",
    "NODE_FEATURE_KIND",
    "NODE_FEATURE_RESOURCE",
    "ImageCompatibility",
    "ImageCompatibilityArgs",
    "pod_images",
]
