"""The scheduler plugins ``bench core`` runs (``--plugins``).

``core`` is kube-scheduler's default profile without the plugins that place pods relative to
other pods, volumes and devices, and without preemption: InterPodAffinity, PodTopologySpread,
the four volume plugins, DynamicResources and DefaultPreemption. That is the scheduling core
(queue sort, gates, node name, unschedulable, taints, node affinity, host ports, resources
fit, balanced allocation, image locality, the default binder), the set the scheduling loop's
throughput target is stated for. For the benchmark's pods the plugins left out have nothing to
do (no affinity terms, spread constraints, volumes or claims; every pod fits): they cost their
PreFilter and PreScore calls, nothing more. ``default`` is the whole default profile.
"""

from __future__ import annotations

from kubesched.config import KubeSchedulerConfiguration, default_config, load_config_from_dict

#: Plugins of kube-scheduler's default profile that ``core`` leaves out.
NOT_CORE = (
    "InterPodAffinity",
    "PodTopologySpread",
    "VolumeBinding",
    "VolumeRestrictions",
    "VolumeZone",
    "NodeVolumeLimits",
    "DynamicResources",
    "DefaultPreemption",
)
PLUGIN_SETS = ("core", "default")


def plugin_set_config(name: str) -> KubeSchedulerConfiguration:
    """The configuration of one profile, ``default-scheduler``, with plugin set ``name``."""
    if name == "default":
        return default_config()
    if name != "core":
        raise ValueError(f"unknown plugin set {name!r}; one of {', '.join(PLUGIN_SETS)}")
    return load_config_from_dict(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "schedulerName": "default-scheduler",
                    "plugins": {"multiPoint": {"disabled": [{"name": n} for n in NOT_CORE]}},
                }
            ],
        }
    )
