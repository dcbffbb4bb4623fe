"""Detached processes that outlive the Python process that started them.

Each process runs in its own session (so its own process group, whose id is its pid), with
stdin closed and stdout/stderr going to a log file. What is needed to find it again from another
process is kept in a :class:`ProcessRecord`: the pid and the kernel's start time of that pid, so
a pid reused by an unrelated process is never mistaken for ours and never signalled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Popen objects of the processes this Python process started: kept so they are reaped (no
# zombies while we live) and never garbage-collected while running.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

DEFAULT_GRACE = 10.0


def _proc_start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may contain spaces: split after it.
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def _proc_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split(" ", 1)[0]


@dataclass
class ProcessRecord:
    """A process started by :func:`spawn`."""

    name: str
    pid: int
    start_time: str | None
    argv: list[str]
    log: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "start_time": self.start_time,
            "argv": self.argv,
            "log": self.log,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessRecord:
        return cls(
            name=str(data["name"]),
            pid=int(data["pid"]),
            start_time=None if data.get("start_time") is None else str(data["start_time"]),
            argv=[str(a) for a in data.get("argv", [])],
            log=str(data.get("log", "")),
            extra=dict(data.get("extra", {})),
        )


def spawn(
    name: str,
    argv: Sequence[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ProcessRecord:
    """Start ``argv`` detached (new session), appending its output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=None if env is None else dict(env),
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[popen.pid] = popen
    return ProcessRecord(
        name=name,
        pid=popen.pid,
        start_time=_proc_start_time(popen.pid),
        argv=list(argv),
        log=str(log),
    )


def is_running(record: ProcessRecord) -> bool:
    """Whether the recorded process is alive (not a zombie, not a reused pid)."""
    popen = _CHILDREN.get(record.pid)
    if popen is not None and popen.poll() is not None:  # reaps it if it exited
        _CHILDREN.pop(record.pid, None)
        return False
    try:
        os.kill(record.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else: the start time below decides
    state = _proc_state(record.pid)
    if state is None:
        return not Path("/proc/self/stat").exists()  # no procfs: trust kill(0)
    if state in ("Z", "X"):
        return False
    return record.start_time is None or _proc_start_time(record.pid) == record.start_time


def _signal(record: ProcessRecord, signum: int) -> None:
    """Signal the process group the record leads (only if the leader is still ours)."""
    if not is_running(record):
        return
    try:
        if os.getpgid(record.pid) == record.pid:
            os.killpg(record.pid, signum)
        else:
            os.kill(record.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_gone(records: Sequence[ProcessRecord], deadline: float) -> list[ProcessRecord]:
    remaining = [r for r in records if is_running(r)]
    while remaining and time.monotonic() < deadline:
        time.sleep(0.05)
        remaining = [r for r in remaining if is_running(r)]
    return remaining


def _wait_reaped(records: Sequence[ProcessRecord], deadline: float) -> None:
    """Give whoever reaps a dead process of ours (init, once we are not its parent) a moment,
    so that no zombie lingers after a stop: cosmetic, a zombie holds nothing."""
    pending = [r for r in records if _proc_state(r.pid) in ("Z", "X")]
    while pending and time.monotonic() < deadline:
        time.sleep(0.05)
        pending = [r for r in pending if _proc_state(r.pid) in ("Z", "X")]


def terminate(records: Sequence[ProcessRecord], grace: float = DEFAULT_GRACE) -> None:
    """Stop each process group in the given order: SIGTERM, then SIGKILL after ``grace``."""
    for record in records:
        _signal(record, signal.SIGTERM)
        for survivor in _wait_gone([record], time.monotonic() + grace):
            _signal(survivor, signal.SIGKILL)
        _wait_gone([record], time.monotonic() + 5.0)
    _wait_reaped(records, time.monotonic() + 2.0)


def log_tail(path: Path | str, lines: int = 30) -> str:
    """The last ``lines`` lines of a log file (empty if it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 64 * 1024))
            data = handle.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])
