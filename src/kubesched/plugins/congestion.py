"""Congestion: prefer nodes with a low congestion factor, as kube-safe-scheduler's ``congestion``
agent.

Something outside the scheduler (a monitoring job, a network controller) annotates each node with
``congestion-factor``: an integer from 0 (no congestion) to ``congestionFactorMax`` (default 100,
or the ``CONGESTION_FACTOR_MAX`` environment variable as the original reads it). The plugin reads
the annotation from the scheduler's node cache; the score is the original's, on kube-scheduler's
0..100 scale::

    cf    = min(factor, max)   (0 when the annotation is missing, not an integer, or <= 0)
    score = round(100 * (1 - cf / max))       (half up)

A missing value means no congestion, as in the original. A value that is not an integer counts
as 0 too, and is reported (log and ``kubesched_congestion_invalid_factors_total``). See
``docs/plugins/congestion.md``.
"""

from __future__ import annotations

import logging
import math
import os
import re
from typing import Any

import msgspec
import numpy as np
from prometheus_client import Counter

from kubesched.api import Node, Pod
from kubesched.config import FieldError, decode_args
from kubesched.framework import (
    CycleState,
    Handle,
    IntArray,
    NodeInfo,
    Nodes,
    ScorePlugin,
    Status,
)

NAME = "Congestion"

#: The node annotation holding the factor.
CONGESTION_FACTOR_KEY = "congestion-factor"
#: The original's environment variable for the maximum factor, read for the default.
ENV_CONGESTION_FACTOR_MAX = "CONGESTION_FACTOR_MAX"
DEFAULT_CONGESTION_FACTOR_MAX = 100
MAX_NODE_SCORE = 100

_GO_INT = re.compile(r"^[+-]?\d+$")

log = logging.getLogger(__name__)

INVALID_FACTORS = Counter(
    "kubesched_congestion_invalid_factors",
    "Node evaluations by Congestion where the congestion-factor annotation was not an integer "
    "(the node is scored as uncongested).",
    ["profile"],
)


def default_max() -> int:
    """``CONGESTION_FACTOR_MAX`` when it holds an integer above 0, else 100 (as the original)."""
    raw = os.environ.get(ENV_CONGESTION_FACTOR_MAX, "")
    if not raw:
        return DEFAULT_CONGESTION_FACTOR_MAX
    if _GO_INT.match(raw) and int(raw) > 0:
        return int(raw)
    log.warning(
        "ignoring %s=%r: not an integer above 0; using %d",
        ENV_CONGESTION_FACTOR_MAX,
        raw,
        DEFAULT_CONGESTION_FACTOR_MAX,
    )
    return DEFAULT_CONGESTION_FACTOR_MAX


class CongestionArgs(msgspec.Struct, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    """Args of ``Congestion``."""

    #: The factor at which a node scores 0 (``CONGESTION_FACTOR_MAX``, default 100).
    congestion_factor_max: int = msgspec.field(default_factory=default_max)

    def validate(self, path: str) -> list[FieldError]:
        if self.congestion_factor_max > 0:
            return []
        return [
            FieldError.invalid(
                f"{path}.congestionFactorMax", self.congestion_factor_max, "must be greater than 0"
            )
        ]


def parse_factor(value: str | None) -> int | None:
    """The factor an annotation value gives (``strconv.Atoi``): ``0`` when missing, ``None``
    when it is not an integer."""
    if value is None or value == "":
        return 0
    if not _GO_INT.match(value):
        return None
    return int(value)


def congestion_score(factor: int, maximum: int) -> int:
    """``RoundToInt32(100 * (1 - min(factor, max) / max))``, a factor <= 0 counting as 0."""
    cf = float(min(factor, maximum)) if factor > 0 else 0.0
    return math.floor(MAX_NODE_SCORE * (1.0 - cf / float(maximum)) + 0.5)


class Congestion(ScorePlugin):
    """Scores nodes down as their ``congestion-factor`` annotation goes up."""

    name = NAME
    args_type = CongestionArgs

    def __init__(self, handle: Handle, args: Any = None) -> None:
        decoded = decode_args(CongestionArgs, args)
        super().__init__(handle, decoded)
        self.maximum = decoded.congestion_factor_max
        # By slot: the Node object last read, its clamped factor, whether the value was invalid.
        self._refs: list[Node | None] = []
        self._cf = np.zeros(0, dtype=np.float64)
        self._bad = np.zeros(0, dtype=np.bool_)
        #: Node evaluations with an invalid factor (also ``kubesched_congestion_invalid_factors``).
        self.invalid = 0

    def _read(self, nodes: Nodes) -> None:
        """Parse the annotation of nodes whose Node object changed since they were last read."""
        slots = nodes.slots.tolist()
        at = nodes.snapshot.at
        refs = self._refs
        known = len(refs)
        changed = [s for s in slots if s >= known or refs[s] is not at(s).node]
        if not changed:
            return
        size = max(changed) + 1
        if size > known:
            refs.extend([None] * (size - known))
            cf = np.zeros(size, dtype=np.float64)
            cf[:known] = self._cf
            bad = np.zeros(size, dtype=np.bool_)
            bad[:known] = self._bad
            self._cf, self._bad = cf, bad
        for slot in changed:
            node = at(slot).node
            assert node is not None
            refs[slot] = node
            raw = node.metadata.annotations.get(CONGESTION_FACTOR_KEY)
            factor = parse_factor(raw)
            if factor is None:
                log.warning(
                    "%s: node %s has %s=%r, not an integer; scored as uncongested",
                    NAME,
                    node.metadata.name,
                    CONGESTION_FACTOR_KEY,
                    raw,
                )
            self._bad[slot] = factor is None
            self._cf[slot] = min(factor, self.maximum) if factor is not None and factor > 0 else 0

    def score_nodes(
        self, state: CycleState, pod: Pod, nodes: Nodes
    ) -> tuple[IntArray, Status | None]:
        self._read(nodes)
        invalid = int(self._bad[nodes.slots].sum())
        if invalid:
            self.invalid += invalid
            INVALID_FACTORS.labels(self.handle.profile_name).inc(invalid)
        cf = self._cf[nodes.slots]
        scores = np.floor(MAX_NODE_SCORE * (1.0 - cf / float(self.maximum)) + 0.5)
        return scores.astype(np.int64), None

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> tuple[int, Status | None]:
        scores, status = self.score_nodes(
            state, pod, Nodes(self.handle.snapshot, np.array([node.slot], dtype=np.int64))
        )
        return int(scores[0]), status


__all__ = [
    "CONGESTION_FACTOR_KEY",
    "DEFAULT_CONGESTION_FACTOR_MAX",
    "ENV_CONGESTION_FACTOR_MAX",
    "NAME",
    "Congestion",
    "CongestionArgs",
    "congestion_score",
    "parse_factor",
]
