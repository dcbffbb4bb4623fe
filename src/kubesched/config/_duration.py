"""Go duration strings (``15s``, ``1m30s``, ``100ms``), as Kubernetes configuration uses them.

Kubernetes stores durations in configuration as ``metav1.Duration``: a JSON string parsed by Go's
``time.ParseDuration``. The grammar is an optional sign followed by one or more
``<number><unit>`` groups, where the number may have a fraction and the unit is one of ``ns``,
``us`` (or ``µs``), ``ms``, ``s``, ``m`` and ``h``; a lone ``0`` is also allowed. There is no day
unit. kubesched keeps durations as seconds in a ``float``: :func:`parse_duration` turns the string
into seconds and :func:`format_duration` writes seconds back the way Go prints a duration.
"""

from __future__ import annotations

from fractions import Fraction

from kubesched import KubeschedError

_NANOS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}

_MAX_NANOS = 2**63 - 1  # time.Duration is an int64 count of nanoseconds


class DurationError(KubeschedError, ValueError):
    """A string that is not a Go duration; the message matches Go's ``time.ParseDuration``."""


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_duration(text: str) -> float:
    """Parse a Go duration string into seconds.

    >>> parse_duration("1m30s")
    90.0
    >>> parse_duration("100ms")
    0.1

    Raises :class:`DurationError` (a ``ValueError``) with Go's wording, for example
    ``time: missing unit in duration "15"`` for a bare number other than ``0``.
    """
    if not isinstance(text, str):  # defensive: callers pass decoded YAML
        raise DurationError(f"time: invalid duration {text!r}")
    orig = text
    s = text
    negative = False
    if s and s[0] in "+-":
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0.0
    if not s:
        raise DurationError(f"time: invalid duration {_quote(orig)}")
    total = Fraction(0)
    while s:
        if not (s[0] == "." or (s[0].isascii() and s[0].isdigit())):
            raise DurationError(f"time: invalid duration {_quote(orig)}")
        i = 0
        while i < len(s) and s[i].isascii() and s[i].isdigit():
            i += 1
        whole, s = s[:i], s[i:]
        frac = ""
        if s.startswith("."):
            s = s[1:]
            j = 0
            while j < len(s) and s[j].isascii() and s[j].isdigit():
                j += 1
            frac, s = s[:j], s[j:]
        if not whole and not frac:
            raise DurationError(f"time: invalid duration {_quote(orig)}")
        k = 0
        while k < len(s) and not (s[k] == "." or (s[k].isascii() and s[k].isdigit())):
            k += 1
        if k == 0:
            raise DurationError(f"time: missing unit in duration {_quote(orig)}")
        unit, s = s[:k], s[k:]
        if unit not in _NANOS_PER_UNIT:
            raise DurationError(f"time: unknown unit {_quote(unit)} in duration {_quote(orig)}")
        number = Fraction(int(whole or "0"))
        if frac:
            number += Fraction(int(frac), 10 ** len(frac))
        total += number * _NANOS_PER_UNIT[unit]
        if total > _MAX_NANOS + (1 if negative else 0):
            raise DurationError(f"time: invalid duration {_quote(orig)}")
    nanos = int(total)  # Go truncates sub-nanosecond remainders
    return (-nanos if negative else nanos) / 1e9


def _fraction_digits(value: int, precision: int) -> str:
    """``value`` / 10**precision with the fraction's trailing zeros dropped (Go's ``fmtFrac``)."""
    whole, frac = divmod(value, 10**precision)
    if frac == 0:
        return str(whole)
    return f"{whole}.{str(frac).rjust(precision, '0').rstrip('0')}"


def format_duration(seconds: float) -> str:
    """Write seconds as Go's ``time.Duration.String()`` does.

    >>> format_duration(90)
    '1m30s'
    >>> format_duration(0.1)
    '100ms'
    >>> format_duration(3600)
    '1h0m0s'
    """
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign = "-" if nanos < 0 else ""
    u = abs(nanos)
    if u < 1_000_000_000:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{_fraction_digits(u, 3)}\u00b5s"
        return f"{sign}{_fraction_digits(u, 6)}ms"
    minute = 60 * 1_000_000_000
    out = _fraction_digits(u % minute, 9) + "s"
    minutes = u // minute
    if minutes:
        out = f"{minutes % 60}m{out}"
        hours = minutes // 60
        if hours:
            out = f"{hours}h{out}"
    return sign + out


class Seconds(float):
    """A duration in seconds that prints itself as a Go duration string in error messages."""

    __slots__ = ()

    def __str__(self) -> str:
        return format_duration(self)
