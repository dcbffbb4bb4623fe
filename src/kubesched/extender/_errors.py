"""The extender's errors, under one root."""

from __future__ import annotations


class ExtenderError(Exception):
    """The root of the extender's errors."""
