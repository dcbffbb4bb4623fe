"""Quantities: the whole-number form is read without fractions, to the same values."""

from __future__ import annotations

import random
from math import ceil

import pytest

from kubesched.api._quantity import QuantityError, nano_value, parse_quantity

SUFFIXES = ("", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "m", "u", "n")


def test_whole_numbers_read_as_the_general_form_reads_them() -> None:
    rng = random.Random(4)
    for _ in range(2000):
        number = str(rng.choice((0, 1, 7, rng.randrange(10**6), rng.randrange(10**15))))
        suffix = rng.choice(SUFFIXES)
        text = number + suffix
        # A leading "+" is valid and never takes the whole-number path.
        general = parse_quantity("+" + text)
        assert parse_quantity(text) == general, text
        assert nano_value(text) == ceil(general * 10**9), text


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("100m", 10**8),
        ("1.5", 1_500_000_000),
        ("0.1n", 1),
        ("2Gi", 2 * 2**30 * 10**9),
        ("1e3", 10**12),
        ("007", 7 * 10**9),
        (3, 3 * 10**9),
    ],
)
def test_nano_value(text: str | int, nanos: int) -> None:
    assert nano_value(text) == nanos


@pytest.mark.parametrize("text", ["", "Gi", "1Gb", "1 Gi", "1.2.3", "--1"])
def test_not_a_quantity(text: str) -> None:
    with pytest.raises(QuantityError):
        nano_value(text)
