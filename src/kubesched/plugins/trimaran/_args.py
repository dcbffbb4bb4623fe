"""Args of the Trimaran plugins: scheduler-plugins' ``TrimaranSpec`` (where the load comes from)
and each plugin's own, with upstream's defaults; plus how kubesched refreshes the load."""

from __future__ import annotations

import math
import re
import urllib.parse

import msgspec

from kubesched.api import QuantityError, quantity_milli_value
from kubesched.config import Duration, FieldError, format_duration

PROMETHEUS = "Prometheus"
KUBERNETES_METRICS_SERVER = "KubernetesMetricsServer"
SIGNALFX = "SignalFx"
#: load-watcher's Prometheus address when none is given.
DEFAULT_PROMETHEUS_ADDRESS = "http://prometheus-k8s:9090"
#: load-watcher's key for a node in Prometheus answers.
DEFAULT_NODE_LABEL = "instance"
#: load-watcher's window: statistics over the last 15 minutes.
DEFAULT_WINDOW = 15 * 60.0
#: The collector's refresh period upstream (``metricsUpdateIntervalSeconds``).
DEFAULT_REFRESH_INTERVAL = 30.0
DEFAULT_MAX_DATA_AGE = 120.0
DEFAULT_REQUEST_TIMEOUT = 10.0

DEFAULT_REQUESTS_MILLI_CORES = 1000
DEFAULT_REQUESTS_MULTIPLIER = "1.5"
DEFAULT_TARGET_UTILIZATION = 40
DEFAULT_SAFE_VARIANCE_MARGIN = 1.0
DEFAULT_SAFE_VARIANCE_SENSITIVITY = 1.0

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


class MetricProviderSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    #: Only ``Prometheus`` here; upstream's default is ``KubernetesMetricsServer``.
    type: str = KUBERNETES_METRICS_SERVER
    #: Prometheus's URL (load-watcher's default when empty).
    address: str = ""
    #: A bearer token sent with every query.
    token: str = ""
    #: Accept any certificate of an HTTPS Prometheus.
    insecure_skip_verify: bool = False


class TrimaranArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """``TrimaranSpec`` and kubesched's refresh settings, common to both plugins."""

    metric_provider: MetricProviderSpec = msgspec.field(default_factory=MetricProviderSpec)
    #: A load-watcher service's address (not supported: the load comes from Prometheus).
    watcher_address: str = ""
    #: The label carrying the node's name on the utilisation series.
    node_label: str = DEFAULT_NODE_LABEL
    #: The window the average and standard deviation are taken over.
    window: Duration = DEFAULT_WINDOW
    refresh_interval: Duration = DEFAULT_REFRESH_INTERVAL
    #: Load older than this is not used: every node then scores the minimum.
    max_data_age: Duration = DEFAULT_MAX_DATA_AGE
    request_timeout: Duration = DEFAULT_REQUEST_TIMEOUT

    def address(self) -> str:
        return self.metric_provider.address or DEFAULT_PROMETHEUS_ADDRESS

    def validate(self, path: str) -> list[FieldError]:
        errors: list[FieldError] = []
        if self.watcher_address:
            errors.append(
                FieldError.forbidden(
                    f"{path}.watcherAddress",
                    "a load-watcher service is not supported; set metricProvider (type "
                    "Prometheus) instead",
                )
            )
        elif self.metric_provider.type != PROMETHEUS:
            errors.append(
                FieldError.not_supported(
                    f"{path}.metricProvider.type", self.metric_provider.type, [PROMETHEUS]
                )
            )
        parts = urllib.parse.urlsplit(self.address())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            errors.append(
                FieldError.invalid(
                    f"{path}.metricProvider.address",
                    self.metric_provider.address,
                    "must be an http:// or https:// URL",
                )
            )
        if not _LABEL_NAME.match(self.node_label):
            errors.append(
                FieldError.invalid(
                    f"{path}.nodeLabel", self.node_label, "must be a Prometheus label name"
                )
            )
        for name, value in (
            ("window", self.window),
            ("refreshInterval", self.refresh_interval),
            ("requestTimeout", self.request_timeout),
        ):
            if value < 1:
                errors.append(
                    FieldError.invalid(
                        f"{path}.{name}", format_duration(value), "must be at least 1s"
                    )
                )
        if self.max_data_age < self.refresh_interval:
            errors.append(
                FieldError.invalid(
                    f"{path}.maxDataAge",
                    format_duration(self.max_data_age),
                    "must be at least refreshInterval",
                )
            )
        return errors


class TargetLoadPackingArgs(TrimaranArgs, kw_only=True, forbid_unknown_fields=True):
    """Args of ``TargetLoadPacking``."""

    #: Assumed requests of containers with neither requests nor limits (only ``cpu`` is used).
    default_requests: dict[str, str | int | float] = msgspec.field(
        default_factory=lambda: {"cpu": f"{DEFAULT_REQUESTS_MILLI_CORES}m"}
    )
    #: Containers with requests but no limits are predicted to use requests times this.
    default_requests_multiplier: str = DEFAULT_REQUESTS_MULTIPLIER
    #: The CPU utilisation (percent) nodes are packed up to.
    target_utilization: int = DEFAULT_TARGET_UTILIZATION

    def requests_milli_cores(self) -> int:
        return quantity_milli_value(self.default_requests.get("cpu", 0))

    def multiplier(self) -> float:
        return float(self.default_requests_multiplier)

    def validate(self, path: str) -> list[FieldError]:
        errors = super().validate(path)
        try:
            self.requests_milli_cores()
        except (QuantityError, ValueError, TypeError):
            errors.append(
                FieldError.invalid(
                    f"{path}.defaultRequests.cpu",
                    self.default_requests.get("cpu"),
                    "must be a quantity",
                )
            )
        try:
            multiplier = self.multiplier()
        except ValueError:
            multiplier = math.nan
        if not (math.isfinite(multiplier) and multiplier >= 0):
            errors.append(
                FieldError.invalid(
                    f"{path}.defaultRequestsMultiplier",
                    self.default_requests_multiplier,
                    "must be a non-negative number",
                )
            )
        if not 1 <= self.target_utilization <= 100:
            errors.append(
                FieldError.invalid(
                    f"{path}.targetUtilization",
                    self.target_utilization,
                    "must be between 1 and 100",
                )
            )
        return errors


class LoadVariationRiskBalancingArgs(TrimaranArgs, kw_only=True, forbid_unknown_fields=True):
    """Args of ``LoadVariationRiskBalancing``: risk = mean + margin * stddev^(1/sensitivity)."""

    safe_variance_margin: float = DEFAULT_SAFE_VARIANCE_MARGIN
    safe_variance_sensitivity: float = DEFAULT_SAFE_VARIANCE_SENSITIVITY

    def validate(self, path: str) -> list[FieldError]:
        errors = super().validate(path)
        for name, value in (
            ("safeVarianceMargin", self.safe_variance_margin),
            ("safeVarianceSensitivity", self.safe_variance_sensitivity),
        ):
            if not (math.isfinite(value) and value >= 0):
                errors.append(FieldError.invalid(f"{path}.{name}", value, "must not be negative"))
        return errors
