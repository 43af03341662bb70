"""Acceptance tests for the unit table: hidden from soda, run after it."""

import pytest
from units import FACTORS, convert

METRES = {
    "m": 1.0,
    "km": 1000.0,
    "cm": 0.01,
    "mm": 0.001,
    "um": 1e-06,
    "inch": 0.0254,
    "foot": 0.3048,
    "yard": 0.9144,
    "mile": 1609.344,
    "nautical_mile": 1852.0,
    "furlong": 201.168,
    "chain": 20.1168,
}


@pytest.mark.parametrize("unit", sorted(METRES))
def test_length_factor(unit: str) -> None:
    assert FACTORS[unit] == ("length", pytest.approx(METRES[unit], rel=1e-12))


def test_every_length_is_checked() -> None:
    assert {u for u, (kind, _) in FACTORS.items() if kind == "length"} == set(METRES)


def test_the_reported_cases() -> None:
    assert convert(1, "mile", "km") == pytest.approx(1.609344)
    assert convert(100, "yard", "m") == pytest.approx(91.44)
    assert convert(1760, "yard", "mile") == pytest.approx(1)


def test_other_kinds_unchanged() -> None:
    assert FACTORS["lb"] == ("mass", 0.45359237)
    assert FACTORS["imp_gallon"] == ("volume", 0.00454609)
    assert FACTORS["week"] == ("time", 604800.0)
    assert len(FACTORS) == 34
