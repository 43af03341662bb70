"""Acceptance tests for the cart totals: hidden from soda, run after it."""

import pytest
from cart import Cart, Line
from tax import tax_cents


@pytest.mark.parametrize(
    ("amount", "category", "tax"),
    [
        (250, "reduced", 13),
        (850, "reduced", 43),
        (10, "reduced", 1),
        (1000, "standard", 200),
        (2, "standard", 0),
        (3, "standard", 1),
        (999, "zero", 0),
    ],
)
def test_tax_rounds_half_up(amount: int, category: str, tax: int) -> None:
    assert tax_cents(amount, category) == tax


def test_one_notebook() -> None:
    assert Cart([Line("notebook", 250, 1, "reduced")]).total() == 263


def test_two_notebooks() -> None:
    assert Cart([Line("notebook", 425, 2, "reduced")]).total() == 893


def test_quantity_is_taxed() -> None:
    cart = Cart([Line("lamp", 2500, 3), Line("bread", 300, 2, "zero")])
    assert cart.tax() == 1500
    assert cart.total() == 7500 + 1500 + 600


def test_tax_is_per_line() -> None:
    lines = [Line("pen", 250, 1, "reduced"), Line("pad", 250, 1, "reduced")]
    assert Cart(lines).total() == 2 * 263
