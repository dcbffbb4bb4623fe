"""kube-scheduler's configuration validation (``ValidateKubeSchedulerConfiguration``).

Runs on a defaulted configuration and collects every problem, each named by its field path.
Besides the checks of kube-scheduler's config validation, it applies checks kube-scheduler only
makes later, when it starts (they would stop it just the same, but with less precise messages):

- ``NodeResourcesFit`` and ``DynamicResources`` args, which kube-scheduler validates when it
  builds the plugin;
- ``renewDeadline`` greater than ``retryPeriod`` × 1.2, which client-go's leader election
  requires;
- plugin weights not negative.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from kubesched.config._args import decode_args
from kubesched.config._defaults import args_types_for, check_user_plugins
from kubesched.config._duration import Seconds, format_duration
from kubesched.config._errors import ConfigError, FieldError, child, index
from kubesched.config._features import DEFAULT_FEATURE_GATES, FeatureGates
from kubesched.config._names import (
    is_extended_resource_name,
    is_qualified_name,
    is_valid_socket_addr,
)
from kubesched.config._types import Extender, KubeSchedulerConfiguration, KubeSchedulerProfile

JITTER_FACTOR = 1.2
"""client-go's leader election jitter: renewDeadline must exceed retryPeriod × this."""


def _validate_leader_election(cfg: KubeSchedulerConfiguration) -> list[FieldError]:
    le = cfg.leader_election
    path = "leaderElection"
    errs: list[FieldError] = []
    if not le.leader_elect:
        return errs
    for name, value in (
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ):
        if value <= 0:
            errs.append(
                FieldError.invalid(child(path, name), Seconds(value), "must be greater than zero")
            )
    if le.lease_duration <= le.renew_deadline:
        errs.append(
            FieldError.invalid(
                child(path, "leaseDuration"),
                Seconds(le.lease_duration),
                f"must be greater than renewDeadline ({format_duration(le.renew_deadline)})",
            )
        )
    jittered = JITTER_FACTOR * le.retry_period
    if le.retry_period > 0 and le.renew_deadline <= jittered:
        errs.append(
            FieldError.invalid(
                child(path, "renewDeadline"),
                Seconds(le.renew_deadline),
                f"must be greater than retryPeriod*JitterFactor ({JITTER_FACTOR} × "
                f"{format_duration(le.retry_period)} = {format_duration(jittered)})",
            )
        )
    for field_name, text in (
        ("resourceLock", le.resource_lock),
        ("resourceNamespace", le.resource_namespace),
        ("resourceName", le.resource_name),
    ):
        if not text:
            errs.append(FieldError.required(child(path, field_name)))
    if le.resource_lock and le.resource_lock != "leases":
        errs.append(
            FieldError.invalid(
                child(path, "resourceLock"), le.resource_lock, 'resourceLock value must be "leases"'
            )
        )
    return errs


def _validate_percentage(path: str, value: int | None) -> list[FieldError]:
    if value is not None and not 0 <= value <= 100:
        return [FieldError.invalid(path, value, "not in valid range [0-100]")]
    return []


def _validate_profile(
    profile: KubeSchedulerProfile,
    path: str,
    features: FeatureGates,
    args_types: Mapping[str, type[msgspec.Struct]],
) -> list[FieldError]:
    errs: list[FieldError] = []
    if not profile.scheduler_name:
        errs.append(FieldError.required(child(path, "schedulerName")))
    errs.extend(
        _validate_percentage(
            child(path, "percentageOfNodesToScore"), profile.percentage_of_nodes_to_score
        )
    )
    seen: set[str] = set()
    for j, pc in enumerate(profile.plugin_config):
        pc_path = index(child(path, "pluginConfig"), j)
        if pc.name in seen:
            errs.append(FieldError.duplicate(pc_path, pc.name))
        seen.add(pc.name)
        args_type = args_types.get(pc.name)
        if args_type is None:
            continue
        try:
            decode_args(args_type, pc.args, child(pc_path, "args"), features=features)
        except ConfigError as exc:
            errs.extend(exc.errors)
    return errs


def _validate_common_queue_sort(profiles: list[KubeSchedulerProfile]) -> list[FieldError]:
    errs: list[FieldError] = []
    first = profiles[0]
    canon = first.plugins.queue_sort
    if len(canon.enabled) > 1:
        errs.append(
            FieldError.invalid(
                child(child(child(index("profiles", 0), "plugins"), "queueSort"), "enabled"),
                len(canon.enabled),
                "only one queue sort plugin can be enabled",
            )
        )
    queue_sort_name = canon.enabled[0].name if canon.enabled else ""
    canon_args = first.plugin_args(queue_sort_name) if queue_sort_name else None
    for i in range(1, len(profiles)):
        curr = profiles[i].plugins.queue_sort
        if curr != canon:
            errs.append(
                FieldError.invalid(
                    child(child(index("profiles", i), "plugins"), "queueSort"),
                    {
                        "enabled": [p.name for p in curr.enabled],
                        "disabled": [p.name for p in curr.disabled],
                    },
                    "queueSort must be the same for all profiles",
                )
            )
        if not queue_sort_name:
            continue
        for j, pc in enumerate(profiles[i].plugin_config):
            if pc.name == queue_sort_name and pc.args != canon_args:
                errs.append(
                    FieldError(
                        child(index(child(index("profiles", i), "pluginConfig"), j), "args"),
                        "Invalid value: queueSort must be the same for all profiles",
                    )
                )
    return errs


def _validate_extenders(extenders: list[Extender]) -> list[FieldError]:
    errs: list[FieldError] = []
    binders = 0
    managed: set[str] = set()
    for i, ext in enumerate(extenders):
        path = index("extenders", i)
        if ext.prioritize_verb and ext.weight <= 0:
            errs.append(
                FieldError.invalid(
                    child(path, "weight"), ext.weight, "must have a positive weight applied to it"
                )
            )
        if ext.bind_verb:
            binders += 1
        for j, res in enumerate(ext.managed_resources):
            name_path = child(index(child(path, "managedResources"), j), "name")
            name_errs = is_qualified_name(res.name)
            errs.extend(FieldError.invalid(name_path, res.name, m) for m in name_errs)
            if not name_errs and not is_extended_resource_name(res.name):
                errs.append(
                    FieldError.invalid(name_path, res.name, "is an invalid extended resource name")
                )
            if res.name in managed:
                errs.append(
                    FieldError.invalid(
                        name_path, res.name, "duplicate extender managed resource name"
                    )
                )
            managed.add(res.name)
    if binders > 1:
        errs.append(
            FieldError.invalid(
                "extenders",
                f"found {binders} extenders implementing bind",
                "only one extender can implement bind",
            )
        )
    return errs


def collect_errors(
    cfg: KubeSchedulerConfiguration,
    *,
    features: FeatureGates | None = None,
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None = None,
) -> list[FieldError]:
    """Every problem with a defaulted configuration, in kube-scheduler's order."""
    features = features or DEFAULT_FEATURE_GATES
    args_types = args_types_for(plugin_args_types)
    errs: list[FieldError] = []
    if cfg.client_connection.burst < 0:
        errs.append(
            FieldError.invalid(
                "clientConnection.burst", cfg.client_connection.burst, "must be non-negative"
            )
        )
    errs.extend(_validate_leader_election(cfg))
    if cfg.parallelism <= 0:
        errs.append(
            FieldError.invalid(
                "parallelism", cfg.parallelism, "should be an integer value greater than zero"
            )
        )
    if not cfg.profiles:
        errs.append(FieldError.required("profiles"))
    else:
        first_index: dict[str, int] = {}
        for i, profile in enumerate(cfg.profiles):
            path = index("profiles", i)
            errs.extend(_validate_profile(profile, path, features, args_types))
            name = profile.scheduler_name
            if name:
                if name in first_index:
                    errs.append(FieldError.duplicate(child(path, "schedulerName"), name))
                else:
                    first_index[name] = i
        errs.extend(_validate_common_queue_sort(cfg.profiles))
    errs.extend(_validate_percentage("percentageOfNodesToScore", cfg.percentage_of_nodes_to_score))
    if cfg.pod_initial_backoff_seconds <= 0:
        errs.append(
            FieldError.invalid(
                "podInitialBackoffSeconds",
                cfg.pod_initial_backoff_seconds,
                "must be greater than 0",
            )
        )
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds:
        errs.append(
            FieldError.invalid(
                "podMaxBackoffSeconds",
                cfg.pod_max_backoff_seconds,
                "must be greater than or equal to PodInitialBackoffSeconds",
            )
        )
    errs.extend(_validate_extenders(cfg.extenders))
    for name, value in (
        ("healthzBindAddress", cfg.healthz_bind_address),
        ("metricsBindAddress", cfg.metrics_bind_address),
    ):
        if value:
            errs.extend(FieldError.invalid(name, value, m) for m in is_valid_socket_addr(value))
    return errs


def validate_config(
    cfg: KubeSchedulerConfiguration,
    *,
    features: FeatureGates | None = None,
    plugin_args_types: Mapping[str, type[msgspec.Struct]] | None = None,
) -> None:
    """Raise :class:`ConfigError` with every problem in a defaulted configuration, if any.

    Checks, with kube-scheduler's messages: ``parallelism`` > 0; ``percentageOfNodesToScore``
    (global and per profile) in [0, 100]; ``podInitialBackoffSeconds`` > 0 and
    ``podMaxBackoffSeconds`` ≥ it; leader election durations, names and lock kind;
    ``clientConnection.burst`` ≥ 0; each profile named, names unique; the same ``queueSort``
    plugin and args in every profile; no plugin configured twice in a profile; every known
    plugin's args; extenders (positive weight when prioritizing, at most one binder, valid and
    distinct managed resource names). A ``pluginConfig`` entry for a plugin that is not enabled
    is allowed, as in kube-scheduler: it is validated and then unused.
    """
    errs = collect_errors(cfg, features=features, plugin_args_types=plugin_args_types)
    errs.extend(check_user_plugins(cfg))
    if errs:
        raise ConfigError(errs)
