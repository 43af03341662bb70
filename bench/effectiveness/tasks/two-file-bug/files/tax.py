"""Sales tax by product category. Rates are in basis points (1/100 of a percent)."""

RATES = {"standard": 2000, "reduced": 500, "zero": 0}


def tax_cents(amount_cents: int, category: str) -> int:
    """The tax on `amount_cents` of goods in `category`, in whole cents."""
    return round(amount_cents * RATES[category] / 10_000)
