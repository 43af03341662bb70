from cart import Cart, Line
from tax import tax_cents


def test_standard_tax() -> None:
    assert tax_cents(1000, "standard") == 200


def test_zero_rate() -> None:
    assert tax_cents(999, "zero") == 0


def test_total_of_single_items() -> None:
    cart = Cart()
    cart.add(Line("book", 1000, 1, "reduced"))
    cart.add(Line("lamp", 2500, 1))
    assert cart.subtotal() == 3500
    assert cart.total() == 1000 + 50 + 2500 + 500
