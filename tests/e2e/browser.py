"""Browser tests' parts: Debian's chromium driven by Playwright, ``kubesched ui`` as a process,
and where screenshots go (``$KUBESCHED_TEST_ARTIFACTS``, else ``test-artifacts/`` at the root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

ROOT = Path(__file__).resolve().parents[2]


def artifacts_dir() -> Path:
    where = Path(os.environ.get("KUBESCHED_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "ui"
    where.mkdir(parents=True, exist_ok=True)
    return where


def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium is not installed: `make chromium` installs Debian's")
    return found


@contextmanager
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        # --no-sandbox: tests run as root, where chromium refuses its sandbox.
        b = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def open_page(b: Browser, url: str) -> tuple[Page, list[str]]:
    """The page at ``url``, loaded (its script says so), and the script errors it logs."""
    page = b.new_page(viewport={"width": 1600, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("body[data-ready=true]", timeout=30_000)
    return page, errors


@contextmanager
def ui_process(argv: Sequence[str], port: int, log: Path) -> Iterator[str]:
    """``kubesched ui`` started with ``argv``, until its page answers; its URL."""
    with open(log, "wb") as out:
        popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
        )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            if popen.poll() is not None:
                pytest.fail(f"kubesched ui exited with {popen.returncode}:\n{log.read_text()}")
            try:
                with urllib.request.urlopen(url, timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    pytest.fail(f"kubesched ui did not answer:\n{log.read_text()}")
                time.sleep(0.2)
        yield url
    finally:
        popen.terminate()
        try:
            popen.wait(10)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()
