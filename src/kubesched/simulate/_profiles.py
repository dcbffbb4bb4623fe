"""A configuration whose first profile answers to any schedulerName: what ``why`` and ``ui`` use
without ``--config``, so pods of a scheduler named otherwise (the demo's ``kubesched``) are
judged by kube-scheduler's default profile rather than left out."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from kubesched.config import KubeSchedulerConfiguration


def profiles_for(
    config: KubeSchedulerConfiguration, scheduler_names: Iterable[str]
) -> KubeSchedulerConfiguration:
    """``config`` with its first profile copied once per name (in order, without repeats);
    ``config`` itself when there is no name."""
    first = config.profiles[0]
    names = list(dict.fromkeys(scheduler_names))
    if not names:
        return config
    profiles = [msgspec.structs.replace(first, scheduler_name=n) for n in names]
    return msgspec.structs.replace(config, profiles=profiles)
