"""``policy/v1`` PodDisruptionBudget: what preemption reads to prefer victims whose eviction
keeps every budget.

Only the fields DefaultPreemption looks at are declared: the pod selector, how many disruptions
the budget allows now (``status.disruptionsAllowed``, kept by the disruption controller) and the
pods whose eviction the API server already counted (``status.disruptedPods``).
"""

from __future__ import annotations

import msgspec

from kubesched.api._objects import LabelSelector, ObjectMeta, _Obj


class PodDisruptionBudgetSpec(_Obj):
    selector: LabelSelector | None = None
    # IntOrString: a count or a percentage ("50%").
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


class PodDisruptionBudgetStatus(_Obj):
    disruptions_allowed: int = 0
    #: Pod name -> when the API server admitted its eviction (not yet observed deleted).
    disrupted_pods: dict[str, str] = msgspec.field(default_factory=dict)
    current_healthy: int = 0
    desired_healthy: int = 0
    expected_pods: int = 0


class PodDisruptionBudget(_Obj, kw_only=True):
    api_version: str = "policy/v1"
    kind: str = "PodDisruptionBudget"
    metadata: ObjectMeta = msgspec.field(default_factory=ObjectMeta)
    spec: PodDisruptionBudgetSpec = msgspec.field(default_factory=PodDisruptionBudgetSpec)
    status: PodDisruptionBudgetStatus = msgspec.field(default_factory=PodDisruptionBudgetStatus)
