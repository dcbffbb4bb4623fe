"""The benchmarks' errors, under one root."""

from __future__ import annotations

from kubesched import KubeschedError


class BenchError(KubeschedError):
    """A run could not be set up or carried out."""


class RunFailedError(BenchError):
    """A run that failed once its scheduler was running: the error, and what was known of the
    run then (measured pods bound so far, the scheduler's peak RSS), for the report."""

    def __init__(self, message: str, *, pods_bound: int | None, peak_rss_bytes: int | None) -> None:
        super().__init__(message)
        self.pods_bound = pods_bound
        self.peak_rss_bytes = peak_rss_bytes
