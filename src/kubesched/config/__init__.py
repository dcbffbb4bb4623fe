"""kube-scheduler's configuration file, ``KubeSchedulerConfiguration`` v1, as kube-scheduler v1.34
reads it.

A scheduler configuration names one or more *profiles*; each profile is a scheduler that pods pick
with ``spec.schedulerName`` and says which plugins run at which extension point, with which
arguments. This package reads such a file and gives back exactly what kube-scheduler would run
with: the same strict decoding (a misspelt field is an error), the same defaults (the v1.34
default plugins, weights and plugin arguments), and the same validation, with every problem
reported at once and named by its field path::

    from kubesched.config import ConfigError, load_config

    try:
        cfg = load_config("/etc/kubesched/config.yaml")
    except ConfigError as err:
        print(err)  # profiles[1].schedulerName: Duplicate value: "batch" ...

Entry points:

- :func:`load_config`, :func:`load_config_from_dict`, :func:`default_config`: get a ready
  configuration; :func:`set_defaults` and :func:`validate_config` are the two steps on their own;
  :func:`config_to_dict` writes one back out.
- :func:`decode_args`: decode a plugin's ``pluginConfig`` args into its args type, with defaults
  and validation, for in-tree plugins (:data:`PLUGIN_ARGS_TYPES`) and plugins defined elsewhere.
- :data:`DEFAULT_PLUGINS`, :func:`default_plugins`, :func:`merge_plugins`: the default plugin set
  and kube-scheduler's merge rules; :func:`enabled_plugins` and :func:`expand_plugins`: a
  profile's plugins per extension point, before and after ``multiPoint`` expansion.
- :func:`convert_config`: a ``v1beta1``/``v1beta2``/``v1beta3`` document as ``v1``, with a
  warning per converted field (loading does this by itself); :func:`policy_to_config`: the
  ``extenders`` of a legacy scheduler Policy file as a ``v1`` document.
- :class:`ConfigError` carries :class:`FieldError` ``(path, message)`` pairs; warnings are
  :class:`FieldError` values too.
"""

from kubesched.config._args import (
    DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT,
    LEAST_ALLOCATED,
    LIST_DEFAULTING,
    MOST_ALLOCATED,
    PLUGIN_ARGS_TYPES,
    REQUESTED_TO_CAPACITY_RATIO,
    SCORING_STRATEGY_TYPES,
    SYSTEM_DEFAULTING,
    DefaultPreemptionArgs,
    DynamicResourcesArgs,
    InterPodAffinityArgs,
    LabelSelector,
    LabelSelectorRequirement,
    NodeAffinity,
    NodeAffinityArgs,
    NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodTopologySpreadArgs,
    PreferredSchedulingTerm,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    TopologySpreadConstraint,
    UtilizationShapePoint,
    ValidatingArgs,
    VolumeBindingArgs,
    decode_args,
    default_args,
    validate_args,
)
from kubesched.config._convert import Converted, convert_config
from kubesched.config._decode import Duration
from kubesched.config._defaults import set_defaults
from kubesched.config._duration import DurationError, format_duration, parse_duration
from kubesched.config._errors import ConfigError, FieldError
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._load import (
    Warn,
    config_to_dict,
    default_config,
    load_config,
    load_config_from_dict,
    parse_yaml,
)
from kubesched.config._plugins import (
    DEFAULT_PLUGINS,
    EnabledPlugins,
    ExpandedPlugins,
    PluginRef,
    default_plugin_refs,
    default_plugins,
    enabled_plugins,
    expand_plugins,
    merge_plugin_set,
    merge_plugins,
)
from kubesched.config._policy import policy_to_config
from kubesched.config._types import (
    API_VERSION,
    DEFAULT_SCHEDULER_NAME,
    EXTENSION_POINTS,
    KIND,
    ClientConnectionConfiguration,
    ConfigStruct,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    KubeSchedulerConfiguration,
    KubeSchedulerProfile,
    LeaderElectionConfiguration,
    Plugin,
    PluginConfig,
    Plugins,
    PluginSet,
)
from kubesched.config._validation import validate_config

__all__ = [
    "API_VERSION",
    "DEFAULT_FEATURE_GATES",
    "DEFAULT_PLUGINS",
    "DEFAULT_SCHEDULER_NAME",
    "DYNAMIC_RESOURCES_FILTER_TIMEOUT_DEFAULT",
    "EXTENSION_POINTS",
    "KIND",
    "LEAST_ALLOCATED",
    "LIST_DEFAULTING",
    "MOST_ALLOCATED",
    "PLUGIN_ARGS_TYPES",
    "REQUESTED_TO_CAPACITY_RATIO",
    "SCORING_STRATEGY_TYPES",
    "SYSTEM_DEFAULTING",
    "ClientConnectionConfiguration",
    "ConfigError",
    "ConfigStruct",
    "Converted",
    "DefaultPreemptionArgs",
    "Duration",
    "DurationError",
    "DynamicResourcesArgs",
    "EnabledPlugins",
    "ExpandedPlugins",
    "Extender",
    "ExtenderManagedResource",
    "ExtenderTLSConfig",
    "FeatureGates",
    "FieldError",
    "InterPodAffinityArgs",
    "KubeSchedulerConfiguration",
    "KubeSchedulerProfile",
    "LabelSelector",
    "LabelSelectorRequirement",
    "LeaderElectionConfiguration",
    "NodeAffinity",
    "NodeAffinityArgs",
    "NodeResourcesBalancedAllocationArgs",
    "NodeResourcesFitArgs",
    "NodeSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Plugin",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "PodTopologySpreadArgs",
    "PreferredSchedulingTerm",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "TopologySpreadConstraint",
    "UtilizationShapePoint",
    "ValidatingArgs",
    "VolumeBindingArgs",
    "Warn",
    "config_to_dict",
    "convert_config",
    "decode_args",
    "default_args",
    "default_config",
    "default_plugin_refs",
    "default_plugins",
    "enabled_plugins",
    "expand_plugins",
    "format_duration",
    "load_config",
    "load_config_from_dict",
    "merge_plugin_set",
    "merge_plugins",
    "parse_duration",
    "parse_yaml",
    "policy_to_config",
    "set_defaults",
    "validate_args",
    "validate_config",
]
