"""The API server's warnings (``Warning: 299 - "text"`` header fields), logged as client-go's
default ``WarningLogger`` does: each code-299 warning with text at info level, as
``Warning: <text>``."""

from __future__ import annotations

import logging
import re
from typing import Final

from kubesched.kube._http1 import Headers

__all__ = ["handle_warnings", "parse_warnings"]

log = logging.getLogger(__name__)

#: Deprecation and other API warnings (``k8s.io/apiserver/pkg/warning``).
WARNING_CODE: Final = 299
#: ``warn-code warn-agent "warn-text" ["warn-date"]`` (RFC 7234, 5.5), several per field
#: separated by commas, as apimachinery's ``ParseWarningHeader`` reads them.
_WARNING = re.compile(r'\s*([0-9]{3}) ([^ ]+) "((?:[^"\\]|\\.)*)"(?: "[^"]*")?\s*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_warnings(values: list[str]) -> list[tuple[int, str]]:
    """Code and text of each warning in the ``Warning`` field ``values``; a field stops at its
    first malformed warning, as in client-go."""
    warnings = []
    for value in values:
        position = 0
        while position < len(value):
            match = _WARNING.match(value, position)
            if match is None:
                break
            text = _ESCAPE.sub(r"\1", match[3])
            if _CONTROL.search(match[2]) or _CONTROL.search(text):
                break
            warnings.append((int(match[1]), text))
            position = match.end()
    return warnings


def handle_warnings(headers: Headers) -> None:
    """Log the warnings of an answer with header fields ``headers``."""
    values = headers.get_all("warning")
    if not values:
        return
    for code, text in parse_warnings(values):
        if code == WARNING_CODE and text:
            log.info("Warning: %s", text)
