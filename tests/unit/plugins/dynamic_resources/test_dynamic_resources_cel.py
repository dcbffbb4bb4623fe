"""CEL device selectors: the ``device`` variable and the Kubernetes semver and quantity libraries,
as ``k8s.io/dynamic-resource-allocation/cel`` and ``k8s.io/apiserver/pkg/cel/library`` define
them."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from kubesched.api import Device
from kubesched.plugins.dynamic_resources._cel import CELError, compile_selector, device_variable

DEVICE = msgspec.convert(
    {
        "name": "gpu-0",
        "attributes": {
            "model": {"string": "a100"},
            "numa": {"int": 1},
            "healthy": {"bool": True},
            "driverVersion": {"version": "1.10.0-rc.2"},
            "other.example.com/vendor": {"string": "acme"},
        },
        "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "1500m"}},
    },
    Device,
)


def matches(expression: str) -> bool:
    selector = compile_selector(expression)
    assert selector.error is None, selector.error
    return selector.matches(device_variable("gpu.example.com", DEVICE))


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('device.driver == "gpu.example.com"', True),
        ('device.attributes["gpu.example.com"].model == "a100"', True),
        ('device.attributes["gpu.example.com"].numa == 1', True),
        ('device.attributes["gpu.example.com"].healthy', True),
        ('device.attributes["other.example.com"].vendor == "acme"', True),
        # An unknown domain is an empty map, so has() is false rather than an error.
        ('has(device.attributes["nowhere.example.com"].model)', False),
        ('has(device.attributes["gpu.example.com"].missing)', False),
        # Semantic versions: pre-releases rank below the release, numerically per part.
        ('device.attributes["gpu.example.com"].driverVersion.isLessThan(semver("1.10.0"))', True),
        ('device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("1.9.0"))', True),
        (
            'device.attributes["gpu.example.com"].driverVersion.isGreaterThan('
            'semver("1.10.0-rc.10"))',
            False,
        ),
        ('device.attributes["gpu.example.com"].driverVersion.major() == 1', True),
        ('device.attributes["gpu.example.com"].driverVersion.minor() == 10', True),
        ('semver("1.2.3").compareTo(semver("1.2.3")) == 0', True),
        ('semver("v1.2", true) == semver("1.2.0")', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        # Quantities compare by value, whatever their suffix.
        ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40960Mi")) == 0', True),
        ('device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("32Gi"))', True),
        ('device.capacity["gpu.example.com"].cores.isInteger()', False),
        ('device.capacity["gpu.example.com"].cores.asApproximateFloat() == 1.5', True),
        ('quantity("1").add(2).isLessThan(quantity("3500m"))', True),
        ('quantity("1Gi").sub(quantity("1Gi")).sign() == 0', True),
        ('isQuantity("10Gi") && !isQuantity("ten")', True),
        ('"A100".lowerAscii() == "a100"', True),
    ],
)
def test_selector(expression: str, expected: bool) -> None:
    assert matches(expression) is expected


@pytest.mark.parametrize(
    ("expression", "error"),
    [
        ('device.attributes["gpu.example.com"].missing == "x"', "no such key: missing"),
        ('semver("not-a-version") == semver("1.0.0")', "cannot be parsed as a semantic version"),
        ("1 + 1", "could not be converted to bool"),
    ],
)
def test_runtime_errors(expression: str, error: str) -> None:
    with pytest.raises(CELError, match=error):
        matches(expression)


def test_compile_error_is_kept_not_raised() -> None:
    selector = compile_selector("device.driver ==")
    assert selector.error is not None
    assert selector.error.startswith("compilation failed: ")


def test_bad_version_attribute_is_named() -> None:
    bad: Any = msgspec.convert({"name": "d", "attributes": {"v": {"version": "01.0.0"}}}, Device)
    with pytest.raises(CELError, match="attribute v: parse semantic version"):
        device_variable("gpu.example.com", bad)
