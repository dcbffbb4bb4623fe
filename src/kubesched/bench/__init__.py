"""kubesched.bench: workloads and runners, kubesched side by side with kube-scheduler.

* :func:`run_core`: the scheduling loop of ``kubesched run`` in memory (``kubesched bench core``).
* :func:`run_e2e`: kubesched and kube-scheduler each against a fresh local control plane
  (``kubesched bench e2e``).

See docs/benchmarks.md.
"""

from kubesched.bench._compare import Comparison, compare
from kubesched.bench._core import PROFILES, CoreResult, MemoryCluster, run_core
from kubesched.bench._e2e import (
    APISERVER_ARGS,
    ARRIVALS,
    SCHEDULERS,
    E2EFailure,
    E2EResult,
    run_e2e,
    run_one,
    scheduler_config,
)
from kubesched.bench._errors import BenchError
from kubesched.bench._placement import Placement, check_placement, constraint_violation
from kubesched.bench._progress import Progress, Silent, StderrProgress
from kubesched.bench._report import (
    comparison_line,
    core_table,
    e2e_table,
    plot_throughput,
    summary_table,
)
from kubesched.bench._stats import (
    NodeUsage,
    Summary,
    average_throughput,
    cpu_fraction_spread,
    overcommitted_nodes,
    percentile,
    std_dev,
    throughput_series,
)
from kubesched.bench._workloads import ALL, UPSTREAM, WORKLOADS, Workload, workload

__all__ = [
    "ALL",
    "APISERVER_ARGS",
    "ARRIVALS",
    "PROFILES",
    "SCHEDULERS",
    "UPSTREAM",
    "WORKLOADS",
    "BenchError",
    "Comparison",
    "CoreResult",
    "E2EFailure",
    "E2EResult",
    "MemoryCluster",
    "NodeUsage",
    "Placement",
    "Progress",
    "Silent",
    "StderrProgress",
    "Summary",
    "Workload",
    "average_throughput",
    "check_placement",
    "compare",
    "comparison_line",
    "constraint_violation",
    "core_table",
    "cpu_fraction_spread",
    "e2e_table",
    "overcommitted_nodes",
    "percentile",
    "plot_throughput",
    "run_core",
    "run_e2e",
    "run_one",
    "scheduler_config",
    "std_dev",
    "summary_table",
    "throughput_series",
    "workload",
]
