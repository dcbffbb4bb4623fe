"""What changed between kube-scheduler's beta configuration versions and v1, as facts.

kube-scheduler served ``v1beta1`` (v1.19 to v1.22), ``v1beta2`` (v1.22 to v1.27) and ``v1beta3``
(v1.23 to v1.28). Each dropped or renamed plugins and changed default score weights; the tables
here say what, and the reason each conversion warning gives. ``_convert`` applies them.
"""

from __future__ import annotations

from typing import Final

API_GROUP: Final = "kubescheduler.config.k8s.io"
V1BETA1: Final = f"{API_GROUP}/v1beta1"
V1BETA2: Final = f"{API_GROUP}/v1beta2"
V1BETA3: Final = f"{API_GROUP}/v1beta3"

CONVERTED_VERSIONS: Final = (V1BETA1, V1BETA2, V1BETA3)
"""The versions converted to v1 when loaded."""

RETIRED_VERSIONS: Final = frozenset((f"{API_GROUP}/v1alpha1", f"{API_GROUP}/v1alpha2"))
"""Versions too far from v1 to convert (a policy section, a single scheduler name)."""

_CSI: Final = (
    "removed from kube-scheduler; NodeVolumeLimits counts these volumes through their CSI driver"
)

REMOVED_PLUGINS: Final[dict[str, str]] = {
    "NodeLabel": "removed in v1beta3; NodeAffinity matches node labels (its addedAffinity "
    "applies to every pod of the profile)",
    "ServiceAffinity": "removed in v1beta3; pod affinity in the pods' specs (InterPodAffinity) "
    "does its work",
    "NodePreferAvoidPods": "removed in v1beta3; the scheduler.alpha.kubernetes.io/"
    "preferAvoidPods annotation is no longer read",
    "SelectorSpread": "removed in v1; PodTopologySpread's system default constraints spread "
    "the pods of a Service or workload",
    "EBSLimits": _CSI,
    "GCEPDLimits": _CSI,
    "AzureDiskLimits": _CSI,
    "CinderLimits": _CSI,
}
"""Plugins kube-scheduler v1.34 no longer has, and the reason given when one is dropped."""

CONSTRAINING_ARGS: Final[dict[str, tuple[str, ...]]] = {
    "NodeLabel": (
        "presentLabels",
        "absentLabels",
        "presentLabelsPreference",
        "absentLabelsPreference",
    ),
    "ServiceAffinity": ("affinityLabels", "antiAffinityLabelsPreference"),
}
"""Args of removed plugins that changed placement: an enabled plugin with any of them set has
no v1 equivalent written for it, so converting it would silently change where pods go."""

RESOURCE_SCORERS: Final[dict[str, str]] = {
    "NodeResourcesLeastAllocated": "LeastAllocated",
    "NodeResourcesMostAllocated": "MostAllocated",
    "RequestedToCapacityRatio": "RequestedToCapacityRatio",
}
"""v1beta1's resource Score plugins → the NodeResourcesFit scoring strategy that replaced them
in v1beta2."""

V1BETA1_DEFAULT_RESOURCE_SCORER: Final = "NodeResourcesLeastAllocated"
"""In v1beta1 NodeResourcesFit did not score; this default Score plugin did (weight 1)."""

OLD_DEFAULT_WEIGHTS: Final[dict[str, tuple[int, int]]] = {
    "TaintToleration": (1, 3),
    "NodeAffinity": (1, 2),
    "InterPodAffinity": (1, 2),
}
"""Default Score weights that v1beta3 raised: plugin → (v1beta1/v1beta2 weight, v1 weight)."""

LEGACY_LOCKS: Final = frozenset(("endpoints", "configmaps", "endpointsleases", "configmapsleases"))
"""Leader election locks of older releases; kube-scheduler v1.34 takes only ``leases``."""

NETWORK_TRAFFIC: Final = "NetworkTraffic"
"""The tutorial plugin whose Go args (``ip``, ``deviceName``, ``timeRange``) are renamed."""

REASON_VERSION: Final = "converted to kubescheduler.config.k8s.io/v1"
REASON_LOCK: Final = (
    'read as "leases": kube-scheduler v1.34 elects its leader on a Lease only, and '
    "the endpoints and configmaps locks no longer exist"
)
REASON_WEIGHTS: Final = "kept {version}'s default score weights {old} (v1's defaults are {new})"
REASON_SCORER: Final = 'converted to NodeResourcesFit with scoringStrategy type "{strategy}"'
REASON_SCORER_ARGS: Final = "moved to NodeResourcesFit's args.scoringStrategy"
REASON_FIT_NO_SCORE: Final = (
    "NodeResourcesFit disabled at score: in v1beta1 it only filtered, and "
    "NodeResourcesLeastAllocated, which scored, is disabled"
)
REASON_UNUSED_ARGS: Final = "removed: the plugin is not enabled, so these args were unused"
REASON_NT_IP: Final = "renamed to prometheusAddress"
REASON_NT_DEVICE: Final = "renamed to networkInterface (the device name, matched exactly)"
REASON_NT_RANGE: Final = (
    "{seconds} seconds, read as timeRangeInMinutes: {minutes} (the tutorial's plugin "
    "counts timeRange in seconds)"
)
