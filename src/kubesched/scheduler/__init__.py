"""The standalone scheduler: queue, cache, the scheduling and binding cycles, and ``run``."""

from kubesched.scheduler._assembly import events_to_register, new_scheduler
from kubesched.scheduler._cache import Cache, CacheError
from kubesched.scheduler._health import HealthServer
from kubesched.scheduler._metrics import SchedulerMetrics
from kubesched.scheduler._scheduler import (
    REASON_SCHEDULER_ERROR,
    REASON_UNSCHEDULABLE,
    ClusterWriter,
    Outcome,
    Scheduler,
)
from kubesched.scheduler._scheduling_queue import SchedulingQueue
from kubesched.scheduler._service import SchedulerService, serve

__all__ = [
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "Cache",
    "CacheError",
    "ClusterWriter",
    "HealthServer",
    "Outcome",
    "Scheduler",
    "SchedulerMetrics",
    "SchedulerService",
    "SchedulingQueue",
    "events_to_register",
    "new_scheduler",
    "serve",
]
