"""Money as text: the one formatting every module uses."""


def format_cents(cents: int) -> str:
    """An amount in cents as dollars: `$1,234.56`."""
    return f"${cents / 100:,.2f}"
