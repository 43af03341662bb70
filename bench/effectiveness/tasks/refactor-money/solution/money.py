"""Money as text: the one formatting every module uses."""


def format_cents(cents: int) -> str:
    """An amount in cents as dollars: `$1,234.56`, `-$2.50`."""
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"
