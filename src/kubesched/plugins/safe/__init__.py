"""SafeOverload and SafeBalance: kube-safe-scheduler's ``safe`` agent as framework plugins.

IBM's kube-safe-scheduler places pods by how loaded nodes actually are rather than by what pods
request: ``kubesched annotate-nodes`` writes per-node usage statistics as annotations, and these
plugins read them from the scheduler's node cache (no network call in the scheduling cycle) and
apply the original's formulas, for CPU and memory separately: docs/plugins/safe.md.
"""

from kubesched.plugins.safe._beta import beta_cdf, beta_fit
from kubesched.plugins.safe._common import (
    DEFAULT_FORECAST_WEIGHT,
    DEFAULT_MAX_STATS_AGE,
    DEFAULT_PERCENTILE,
    DEFAULT_UTILIZATION,
    ENV_FORECAST_WEIGHT,
    ENV_PERCENTILE,
    ENV_UTILIZATION,
    UNUSABLE_STATISTICS,
    SafeBalanceArgs,
    SafeOverloadArgs,
)
from kubesched.plugins.safe._plugins import (
    ERR_REASON_CPU,
    ERR_REASON_MEMORY,
    SAFE_BALANCE,
    SAFE_OVERLOAD,
    SafeBalance,
    SafeOverload,
)
from kubesched.plugins.safe._stats import (
    FORECASTED_FREE_CPU,
    FORECASTED_FREE_MEMORY,
    MEAN_FREE_CPU,
    MEAN_FREE_MEMORY,
    STATS_UPDATED_AT,
    STD_FREE_CPU,
    STD_FREE_MEMORY,
    balance_scores,
    combine,
    overload_scores,
    rank,
)

__all__ = [
    "DEFAULT_FORECAST_WEIGHT",
    "DEFAULT_MAX_STATS_AGE",
    "DEFAULT_PERCENTILE",
    "DEFAULT_UTILIZATION",
    "ENV_FORECAST_WEIGHT",
    "ENV_PERCENTILE",
    "ENV_UTILIZATION",
    "ERR_REASON_CPU",
    "ERR_REASON_MEMORY",
    "FORECASTED_FREE_CPU",
    "FORECASTED_FREE_MEMORY",
    "MEAN_FREE_CPU",
    "MEAN_FREE_MEMORY",
    "SAFE_BALANCE",
    "SAFE_OVERLOAD",
    "STATS_UPDATED_AT",
    "STD_FREE_CPU",
    "STD_FREE_MEMORY",
    "UNUSABLE_STATISTICS",
    "SafeBalance",
    "SafeBalanceArgs",
    "SafeOverload",
    "SafeOverloadArgs",
    "balance_scores",
    "beta_cdf",
    "beta_fit",
    "combine",
    "overload_scores",
    "rank",
]
