"""``CoschedulingArgs``: scheduler-plugins' args, their defaults, plus whether kubesched keeps
the PodGroup status."""

from __future__ import annotations

import msgspec

from kubesched.config import FieldError

DEFAULT_PERMIT_WAITING_TIME_SECONDS = 60
DEFAULT_POD_GROUP_BACKOFF_SECONDS = 0
DEFAULT_POD_GROUP_REJECT_PERCENTAGE = 10


class CoschedulingArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``Coscheduling``.

    ``permitWaitingTimeSeconds``: how long placed members wait at Permit for the rest of their
    group, unless the PodGroup sets ``scheduleTimeoutSeconds`` (0: 60 s).
    ``podGroupBackoffSeconds``: after a group is rejected in PostFilter, its pods are turned away
    at PreFilter for this long (0: not at all).
    ``podGroupRejectPercentage``: PostFilter leaves the group alone while the share of
    ``minMember`` still unplaced is at most this percentage.
    ``updatePodGroupStatus``: write the PodGroup status as scheduler-plugins' controller does;
    turn off where that controller runs.
    """

    permit_waiting_time_seconds: int = DEFAULT_PERMIT_WAITING_TIME_SECONDS
    pod_group_backoff_seconds: int = DEFAULT_POD_GROUP_BACKOFF_SECONDS
    pod_group_reject_percentage: int = DEFAULT_POD_GROUP_REJECT_PERCENTAGE
    update_pod_group_status: bool = True

    def validate(self, path: str) -> list[FieldError]:
        errors = []
        if self.permit_waiting_time_seconds < 0:
            errors.append(
                FieldError.invalid(
                    f"{path}.permitWaitingTimeSeconds",
                    self.permit_waiting_time_seconds,
                    "must not be negative",
                )
            )
        if self.pod_group_backoff_seconds < 0:
            errors.append(
                FieldError.invalid(
                    f"{path}.podGroupBackoffSeconds",
                    self.pod_group_backoff_seconds,
                    "must not be negative",
                )
            )
        if not 0 <= self.pod_group_reject_percentage <= 100:
            errors.append(
                FieldError.invalid(
                    f"{path}.podGroupRejectPercentage",
                    self.pod_group_reject_percentage,
                    "must be between 0 and 100",
                )
            )
        return errors
