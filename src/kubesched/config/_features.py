"""The kube-scheduler feature gates that change how a configuration is defaulted or validated.

Kubernetes switches unfinished or newly finished features on and off with *feature gates*
(``--feature-gates=Name=true``). A few of them change the scheduler configuration itself: which
plugins are in the default set, which plugin args fields are allowed, and what their defaults are.
:class:`FeatureGates` holds those few, with kube-scheduler v1.34's defaults, so kubesched can load
a configuration the way a kube-scheduler started with the same gates would.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kubesched.config._errors import ConfigError, FieldError


class FeatureGates(msgspec.Struct, frozen=True, kw_only=True):
    """Feature gates that affect the scheduler configuration, defaulting as in kube-scheduler v1.34.

    - ``dynamic_resource_allocation`` (``DynamicResourceAllocation``, GA and on in v1.34): the
      ``DynamicResources`` plugin is part of the default plugin set, placed just before
      ``DefaultPreemption``.
    - ``dra_scheduler_filter_timeout`` (``DRASchedulerFilterTimeout``, beta and on in v1.34):
      ``DynamicResourcesArgs.filterTimeout`` may be set and defaults to 10 seconds; with the gate
      off, setting it is an error.
    - ``storage_capacity_scoring`` (``StorageCapacityScoring``, alpha and off in v1.34):
      ``VolumeBindingArgs.shape`` may be set and defaults to a shape that prefers nodes with
      more free storage capacity; with the gate off, setting it is an error.
    """

    dynamic_resource_allocation: bool = True
    dra_scheduler_filter_timeout: bool = True
    storage_capacity_scoring: bool = False

    @classmethod
    def from_mapping(cls, gates: Mapping[str, bool]) -> FeatureGates:
        """Build from kube-scheduler gate names, as given to ``--feature-gates``.

        ``{"StorageCapacityScoring": True}`` turns that gate on and leaves the others at their
        v1.34 defaults. A name this class does not know raises :class:`ConfigError`, since it
        could not have any effect here.
        """
        known = {
            "DynamicResourceAllocation": "dynamic_resource_allocation",
            "DRASchedulerFilterTimeout": "dra_scheduler_filter_timeout",
            "StorageCapacityScoring": "storage_capacity_scoring",
        }
        values: dict[str, bool] = {}
        errors: list[FieldError] = []
        for name, enabled in gates.items():
            path = f"featureGates.{name}"
            if name not in known:
                errors.append(FieldError.not_supported(path, name, sorted(known)))
            elif not isinstance(enabled, bool):
                errors.append(FieldError.invalid(path, enabled, "must be true or false"))
            else:
                values[known[name]] = enabled
        if errors:
            raise ConfigError(errors)
        return cls(**values)


DEFAULT_FEATURE_GATES = FeatureGates()
"""kube-scheduler v1.34's defaults for the gates in :class:`FeatureGates`."""
