"""CPU time and memory of a process, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """CPU seconds (user + system) so far, resident set size now, and its peak so far."""

    cpu_s: float
    rss_bytes: int
    peak_rss_bytes: int


def _status_kib(text: str, field: str) -> int:
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def sample(pid: int | None = None) -> ProcessSample | None:
    """The process's CPU and memory now; ``None`` if it is gone.

    CPU is ``utime + stime`` of ``/proc/<pid>/stat`` (all threads), memory ``VmRSS`` and
    ``VmHWM`` (the kernel's peak RSS) of ``/proc/<pid>/status``.
    """
    where = Path("/proc") / ("self" if pid is None else str(pid))
    try:
        stat = (where / "stat").read_text()
        status = (where / "status").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    # Fields 14 and 15 of stat (utime, stime) are at 11 and 12 after the command name.
    cpu = (int(fields[11]) + int(fields[12])) / _TICKS
    return ProcessSample(
        cpu_s=cpu,
        rss_bytes=_status_kib(status, "VmRSS"),
        peak_rss_bytes=_status_kib(status, "VmHWM"),
    )


def reset_peak_rss(pid: int | None = None) -> bool:
    """Reset the kernel's peak RSS (``VmHWM``) to the current RSS; False if not allowed."""
    where = Path("/proc") / ("self" if pid is None else str(pid))
    try:
        (where / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def own_peak_rss_bytes() -> int:
    """This process's peak RSS, from ``/proc`` or else ``getrusage``."""
    s = sample()
    if s is not None and s.peak_rss_bytes:
        return s.peak_rss_bytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


__all__ = ["ProcessSample", "own_peak_rss_bytes", "reset_peak_rss", "sample"]
