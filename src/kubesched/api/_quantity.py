"""Kubernetes resource quantities (``100m``, ``1.5Gi``, ``2e3``) as exact numbers.

kube-scheduler compares CPU in millicores (``Quantity.MilliValue``) and every other resource in
whole units (``Quantity.Value``); both round up, so ``0.1m`` of CPU is 1 millicore and ``1.5`` bytes
is 2. Parsing is exact (``Fraction``), so no float rounding can make a pod fit that should not.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from math import ceil

from kubesched import KubeschedError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|[eE](?P<exp>[+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)


#: The usual form, a whole number and a suffix: parsed without fractions (a third of the time).
_WHOLE = re.compile(r"(\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[kMGTPE]?)\Z")
_WHOLE_FACTOR = {
    **_BINARY,
    **{k: int(v) for k, v in _DECIMAL.items() if v.denominator == 1},
}


class QuantityError(KubeschedError, ValueError):
    """A string that is not a Kubernetes quantity."""


@lru_cache(maxsize=4096)
def parse_quantity(text: str | int | float) -> Fraction:
    """The exact value of a quantity string; raises :class:`QuantityError` on bad input."""
    if isinstance(text, bool):
        raise QuantityError(f"quantities must match the regular expression: {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        return Fraction(str(text))
    whole = _whole(text)
    if whole is not None:
        return Fraction(whole)
    m = _QUANTITY.match(text.strip())
    if m is None:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    value = Fraction(m["num"])
    if m["bin"]:
        return value * _BINARY[m["bin"]]
    if m["exp"] is not None:
        return value * Fraction(10) ** int(m["exp"])
    return value * _DECIMAL[m["dec"] or ""]


def nano_value(text: str | int | float) -> int:
    """The quantity in billionths, rounded up (the API server's own precision)."""
    whole = _whole(text) if isinstance(text, str) else None
    if whole is not None:
        return whole * 10**9
    return ceil(parse_quantity(text) * 10**9)


def _whole(text: str) -> int | None:
    """The value of ``text`` in the whole-number form (digits, a suffix of no fraction), or
    ``None`` when it is in another."""
    m = _WHOLE.match(text)
    return None if m is None else int(m[1]) * _WHOLE_FACTOR[m[2]]


def quantity_value(text: str | int | float) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    return ceil(parse_quantity(text))


def quantity_milli_value(text: str | int | float) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (how CPU is counted)."""
    return ceil(parse_quantity(text) * 1000)
