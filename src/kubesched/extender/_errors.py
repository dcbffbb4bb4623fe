"""The extender's errors, under one root."""

from __future__ import annotations

from kubesched import KubeschedError


class ExtenderError(KubeschedError):
    """The root of the extender's errors."""
