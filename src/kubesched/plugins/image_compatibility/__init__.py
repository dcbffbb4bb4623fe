"""ImageCompatibility: Node Feature Discovery image compatibility, evaluated in process.

An image may carry an OCI artifact (artifactType
``application/vnd.nfd.image-compatibility.v1alpha1``) whose spec lists compatibility sets of
NFD rules; a node is compatible with the image when every rule of at least one set matches the
node's NodeFeature objects.

* PreFilter looks up the spec of every image of the pod (init, regular, ephemeral containers)
  in a cache keyed by image digest; a miss starts a background fetch (with the pod's
  imagePullSecrets) and rejects the pod (unresolvable: preemption cannot help) until it ends,
  when the pod is moved back to the active queue. A pod whose images have no spec skips the
  plugin.
* Filter keeps nodes that satisfy a set of every spec; the others are
  UnschedulableAndUnresolvable (``image <image> not compatible: rule "<name>"``).
* Score adds, per image, the highest weight of the sets the node matches; NormalizeScore maps
  the best node to 100 (``score * 100 // max``).

The modules: :mod:`._nfd` (NFD's rule engine and NodeFeature), :mod:`._spec` (the spec),
:mod:`._registry` (finding artifacts in OCI registries, with :mod:`._reference`,
:mod:`._credentials`, :mod:`._challenge`, :mod:`._tokens`), :mod:`._fetch` (the cache by digest
and the background fetches), :mod:`._verdicts` (results per spec and node features),
:mod:`._args`, :mod:`._plugin`. See docs/plugins/image-compatibility.md.
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
