"""Log levels as kube-safe-scheduler's agents read ``LOG_LEVEL``: TRACE, DEBUG, INFO, WARNING,
ERROR, ALERT (any case); anything else falls back to INFO with a warning.

ALERT is the agents' most severe level (colog's, above ERROR): only critical messages.

TRACE logs request and answer bodies (their first 4 KiB); DEBUG one line per request. Both apply
to kubesched's own loggers; the libraries it uses log at INFO and above.
"""

from __future__ import annotations

import logging
from typing import Final

from kubesched.extender._engine import TRACE

__all__ = ["LOG_LEVELS", "TRACE", "configure_logging"]

LOG_LEVELS: Final = {
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "ALERT": logging.CRITICAL,
}


def configure_logging(value: str | None) -> int:
    """Set up the root logger for ``value`` (a LOG_LEVEL); returns the level used."""
    logging.addLevelName(TRACE, "TRACE")
    name = (value or "INFO").strip().upper()
    level = LOG_LEVELS.get(name)
    used = level if level is not None else logging.INFO
    # TRACE and DEBUG are about kubesched; other libraries stay at INFO.
    logging.basicConfig(
        level=max(used, logging.INFO), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("kubesched").setLevel(used)
    if level is None:
        logging.getLogger("kubesched.extender").warning(
            'LOG_LEVEL="%s" is invalid, falling back to "INFO"', value
        )
        return logging.INFO
    return level
