"""Small pieces several plugins share, as kube-scheduler's ``plugins/helper`` package.

- :func:`default_normalize_score`: rescale raw scores to 0..100, optionally reversed.
- :data:`DO_NOT_SCHEDULE_TAINT_EFFECTS`: the taint effects that keep a pod off a node.
- :func:`as_objects`: type-check the old and new objects a queueing hint receives.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from kubesched.api import TAINT_EFFECT_NO_EXECUTE, TAINT_EFFECT_NO_SCHEDULE
from kubesched.framework import IntArray

T = TypeVar("T")

#: A pod must tolerate a node's taints with these effects to run there (``PreferNoSchedule``
#: only lowers the node's score). ``DoNotScheduleTaintsFilterFunc`` upstream.
DO_NOT_SCHEDULE_TAINT_EFFECTS = frozenset({TAINT_EFFECT_NO_SCHEDULE, TAINT_EFFECT_NO_EXECUTE})


def default_normalize_score(max_priority: int, reverse: bool, scores: IntArray) -> None:
    """Rescale ``scores`` in place from ``[0, max(scores)]`` to ``[0, max_priority]``.

    ``DefaultNormalizeScore``: each score becomes ``max_priority * score // max(scores)`` in
    integer arithmetic (truncated toward zero, as Go divides). With ``reverse`` the result is
    subtracted from ``max_priority``, so the node with the highest raw score gets 0: plugins
    whose raw score counts something bad (untolerated ``PreferNoSchedule`` taints) use that.
    When every score is 0 (or there are none) the scores stay 0, or all become
    ``max_priority`` if reversed. Scores are expected to be non-negative.
    """
    # scores[argmax] rather than max(): numpy's argmax over integers is a few times faster.
    max_count = max(int(scores[scores.argmax()]), 0) if len(scores) else 0
    if max_count == 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = max_priority * scores
    if scaled.min() >= 0:
        out = scaled // max_count
    else:  # Go's integer division truncates toward zero where numpy's floors
        out = np.sign(scaled) * (np.abs(scaled) // max_count)
    if reverse:
        out = max_priority - out
    scores[:] = out


def as_objects(old: Any, new: Any, kind: type[T]) -> tuple[T | None, T | None]:
    """``util.As``: ``old`` and ``new`` as ``kind`` (either may be ``None``), or ``TypeError``.

    Queueing hints receive the changed object before and after the event; an object of another
    type means the event was misrouted, and the hint then answers Queue to be safe.
    """
    for obj in (old, new):
        if obj is not None and not isinstance(obj, kind):
            raise TypeError(f"expected {kind.__name__}, got {type(obj).__name__}")
    return old, new


__all__ = ["DO_NOT_SCHEDULE_TAINT_EFFECTS", "as_objects", "default_normalize_score"]
