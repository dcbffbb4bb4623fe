"""The benchmarks' errors, under one root."""

from __future__ import annotations


class BenchError(Exception):
    """A run could not be set up or carried out."""
