"""SafeOverload and SafeBalance: kube-safe-scheduler's ``safe`` agent as framework plugins.

IBM's kube-safe-scheduler places pods by how loaded nodes actually are rather than by what pods
request. A companion (``kubesched annotate-nodes`` here) writes per-node usage statistics as
annotations; these plugins read them from the scheduler's node cache (no network call in the
scheduling cycle) and apply the original's formulas, for CPU and memory separately:

``mean-free-cpu`` / ``std-free-cpu`` (millicores) and ``mean-free-memory`` / ``std-free-memory``
(bytes) give the mean and standard deviation of the free amount; ``forecasted-free-*`` (also read
with the original's spelling ``forcasted-free-*``) optionally moves the mean towards a forecast::

    free   = (1 - w) * mean + w * forecast          (w = forecastWeight / 100)
    used   = max(allocatable - free, 0)
    mu     = clamp((used + request) / allocatable, 0, 1)
    sigma  = clamp(std / allocatable, 0, 1)

Utilization is modelled as a Beta distribution with mean ``mu`` and deviation ``sigma``; ``rank``
is the probability that it stays at or below ``utilization / 100``, and ``risk = 1 - rank``.

- **SafeOverload, Filter**: rejects a node when the risk of either resource exceeds
  ``percentile / 100``.
- **SafeOverload, Score**: per resource ``0`` when ``risk >= p``, else
  ``int((1 - sqrt(risk / p)) * 100)`` (``p = percentile / 100``).
- **SafeBalance, Score**: per resource ``int((1 - (mu + sqrt(sigma)) / 2) * 100 + 0.5)``.

A node's score is the lower of its two resource scores; with statistics for one resource only,
that one's; with none, 0. A node without statistics (or with statistics that are not numbers,
or older than ``maxStatsAge``) passes the filter. See ``docs/plugins/safe.md``.
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
