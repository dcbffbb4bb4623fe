"""The simulator's errors, under one root."""

from __future__ import annotations

from kubesched import KubeschedError


class SimulateError(KubeschedError):
    """Nothing could be simulated; the message says why."""


class InputError(SimulateError):
    """A path that cannot be read at all."""
