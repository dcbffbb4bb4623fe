"""``WWW-Authenticate`` challenges (RFC 7235), as a registry's 401 answers carry them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_CHALLENGE_PARAM = re.compile(r'\s*([A-Za-z][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,"]*))\s*,?')


@dataclass(frozen=True)
class Challenge:
    """One ``WWW-Authenticate`` challenge: its scheme (lowercase) and parameters."""

    scheme: str
    params: Mapping[str, str]


def parse_www_authenticate(header: str) -> Challenge | None:
    """The first challenge of a ``WWW-Authenticate`` header, or None when there is none.

    ``Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="..."``
    gives scheme ``bearer`` and those three parameters (names lowercased, quotes and
    backslash escapes removed). A second challenge in the same header is ignored.
    """
    match = re.match(r"\s*([A-Za-z][\w!#$%&'*+.^`|~-]*)(?:\s+|$)", header)
    if match is None:
        return None
    params: dict[str, str] = {}
    position = match.end()
    while position < len(header):
        param = _CHALLENGE_PARAM.match(header, position)
        if param is None or param.end() == position:
            break
        quoted, token = param.group(2), param.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else token or ""
        params[param.group(1).lower()] = value
        position = param.end()
    return Challenge(match.group(1).lower(), params)
