"""Invoices as plain text: one line per item, then the total due."""


def _fmt(cents: int) -> str:
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"


def render(customer: str, items: list[tuple[str, int]]) -> str:
    """The invoice for `customer`; each item is (description, amount in cents)."""
    lines = [f"INVOICE for {customer}"]
    for description, cents in items:
        lines.append(f"  {description:<24}{_fmt(cents):>14}")
    lines.append(f"  {'TOTAL DUE':<24}{_fmt(sum(c for _, c in items)):>14}")
    return "\n".join(lines)
