"""Acceptance tests for specs/SPEC.md. They fail until soda has done its work."""

import pytest


def test_subtract() -> None:
    from calc import subtract

    assert subtract(7, 2) == 5


def test_divide() -> None:
    from calc import divide

    assert divide(9, 3) == 3


def test_divide_by_zero_is_a_clear_error() -> None:
    from calc import divide

    with pytest.raises(ValueError, match="cannot divide by zero"):
        divide(1, 0)
