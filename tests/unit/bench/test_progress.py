"""Progress on stderr: a line per tenth outside a terminal."""

from __future__ import annotations

import io

from kubesched.bench import Silent, StderrProgress


def test_bar_prints_a_line_per_tenth_when_not_a_terminal() -> None:
    out = io.StringIO()
    progress = StderrProgress(out)
    progress.note("starting")
    bar = progress.bar("pods", 100)
    for i in range(1, 101):
        bar.update(i)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "starting"
    # 0/100 at the start, one line per tenth, and the final line again at close.
    assert len(lines) == 1 + 1 + 10 + 1
    assert lines[-1].startswith("pods [" + "#" * 30 + "] 100/100")


def test_silent() -> None:
    bar = Silent().bar("x", 3)
    bar.update(1)
    bar.close()
