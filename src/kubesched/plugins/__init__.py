"""The plugins: kube-scheduler's in-tree ones, ported, and kubesched's own.

:func:`default_registry` is what every front end uses: the in-tree plugins plus whatever installed
packages register under the ``kubesched.plugins`` entry-point group.
"""

from __future__ import annotations

import importlib

from kubesched.framework import Plugin, Registry

#: Plugin name -> ``module:Class`` within this package. One plugin per module, as upstream.
IN_TREE: dict[str, str] = {
    "PrioritySort": "priority_sort:PrioritySort",
    "SchedulingGates": "scheduling_gates:SchedulingGates",
    "NodeUnschedulable": "node_unschedulable:NodeUnschedulable",
    "NodeName": "node_name:NodeName",
    "TaintToleration": "taint_toleration:TaintToleration",
    "NodeAffinity": "node_affinity:NodeAffinity",
    "NodePorts": "node_ports:NodePorts",
    "NodeResourcesFit": "node_resources.fit:NodeResourcesFit",
    "VolumeRestrictions": "volume_restrictions:VolumeRestrictions",
    "NodeVolumeLimits": "node_volume_limits:NodeVolumeLimits",
    "VolumeBinding": "volume_binding:VolumeBinding",
    "VolumeZone": "volume_zone:VolumeZone",
    "NodeResourcesBalancedAllocation": "node_resources.balanced_allocation:BalancedAllocation",
    "ImageLocality": "image_locality:ImageLocality",
    "PodTopologySpread": "pod_topology_spread:PodTopologySpread",
    "InterPodAffinity": "inter_pod_affinity:InterPodAffinity",
    "DynamicResources": "dynamic_resources:DynamicResources",
    "DefaultPreemption": "default_preemption:DefaultPreemption",
    "DefaultBinder": "default_binder:DefaultBinder",
}


def _load(target: str) -> type[Plugin]:
    module, _, cls = target.partition(":")
    loaded: type[Plugin] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)
    return loaded


def in_tree_registry() -> Registry:
    """The plugins that ship with kubesched."""
    return Registry({name: _load(target) for name, target in IN_TREE.items()})


def default_registry() -> Registry:
    """In-tree plugins plus every ``kubesched.plugins`` entry point installed."""
    registry = in_tree_registry()
    registry.load_entry_points()
    return registry


__all__ = ["IN_TREE", "default_registry", "in_tree_registry"]
