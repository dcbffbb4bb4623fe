"""Trimaran: load-aware scoring from scheduler-plugins, over the nodes' measured utilisation.

- **TargetLoadPacking** packs nodes up to ``targetUtilization`` percent of CPU, then spreads.
- **LoadVariationRiskBalancing** prefers nodes whose CPU and memory load, mean plus variation,
  is least at risk.

Both read node-exporter's CPU and memory utilisation from Prometheus as load-watcher does
(averaged and standard deviation over 15 minutes), refreshed on a background thread like
NetworkTraffic's: the scheduling cycle never waits for Prometheus, and when the load is missing
or older than ``maxDataAge`` every node scores the minimum, which is logged and counted. See
docs/plugins/trimaran.md.
"""

from kubesched.plugins.trimaran._args import (
    LoadVariationRiskBalancingArgs,
    MetricProviderSpec,
    TargetLoadPackingArgs,
    TrimaranArgs,
)
from kubesched.plugins.trimaran._load import NodeLoad, go_round, load_by_node, load_queries
from kubesched.plugins.trimaran._load_variation_risk_balancing import (
    LoadVariationRiskBalancing,
    requested,
    risk_score,
)
from kubesched.plugins.trimaran._target_load_packing import TargetLoadPacking

__all__ = [
    "LoadVariationRiskBalancing",
    "LoadVariationRiskBalancingArgs",
    "MetricProviderSpec",
    "NodeLoad",
    "TargetLoadPacking",
    "TargetLoadPackingArgs",
    "TrimaranArgs",
    "go_round",
    "load_by_node",
    "load_queries",
    "requested",
    "risk_score",
]
