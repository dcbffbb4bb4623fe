"""Progress bars on stderr while a benchmark runs.

On a terminal the bar is redrawn in place; elsewhere (CI logs) a line is printed every 10% and
at the end, so logs stay short.
"""

from __future__ import annotations

import sys
import time
from typing import Protocol, TextIO


class Progress(Protocol):
    """Where a runner reports what it is doing."""

    def note(self, message: str) -> None:
        """A line of its own (a phase starting, a cluster coming up)."""

    def bar(self, label: str, total: int) -> Bar:
        """A new bar counting up to ``total``."""


class Bar(Protocol):
    def update(self, done: int) -> None: ...

    def close(self) -> None: ...


class _NullBar:
    def update(self, done: int) -> None:
        pass

    def close(self) -> None:
        pass


class Silent:
    """No output."""

    def note(self, message: str) -> None:
        pass

    def bar(self, label: str, total: int) -> Bar:
        return _NullBar()


class _StderrBar:
    _WIDTH = 30

    def __init__(self, stream: TextIO, label: str, total: int, tty: bool) -> None:
        self._stream = stream
        self._label = label
        self._total = max(total, 0)
        self._tty = tty
        self._start = time.monotonic()
        self._done = 0
        self._last_draw = 0.0
        self._last_decile = -1
        self._closed = False
        self._draw(force=True)

    def _line(self) -> str:
        elapsed = time.monotonic() - self._start
        share = self._done / self._total if self._total else 1.0
        filled = int(share * self._WIDTH)
        rate = self._done / elapsed if elapsed > 0 else 0.0
        return (
            f"{self._label} [{'#' * filled}{'.' * (self._WIDTH - filled)}] "
            f"{self._done}/{self._total} {elapsed:6.1f}s {rate:8.1f}/s"
        )

    def _draw(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self._tty:
            if force or now - self._last_draw >= 0.1:
                self._stream.write("\r" + self._line())
                self._stream.flush()
                self._last_draw = now
            return
        decile = int(10 * self._done / self._total) if self._total else 10
        if force or decile > self._last_decile:
            self._last_decile = decile
            self._stream.write(self._line() + "\n")
            self._stream.flush()

    def update(self, done: int) -> None:
        if self._closed or done == self._done:
            return
        self._done = min(done, self._total) if self._total else done
        self._draw()

    def close(self) -> None:
        if self._closed:
            return
        self._draw(force=True)
        if self._tty:
            self._stream.write("\n")
            self._stream.flush()
        self._closed = True


class StderrProgress:
    """Bars and notes on stderr."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._tty = self._stream.isatty()

    def note(self, message: str) -> None:
        self._stream.write(message + "\n")
        self._stream.flush()

    def bar(self, label: str, total: int) -> Bar:
        return _StderrBar(self._stream, label, total, self._tty)


__all__ = ["Bar", "Progress", "Silent", "StderrProgress"]
