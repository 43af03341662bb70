"""Invoices as plain text: one line per item, then the total due."""

from money import format_cents


def render(customer: str, items: list[tuple[str, int]]) -> str:
    """The invoice for `customer`; each item is (description, amount in cents)."""
    lines = [f"INVOICE for {customer}"]
    for description, cents in items:
        lines.append(f"  {description:<24}{format_cents(cents):>14}")
    lines.append(f"  {'TOTAL DUE':<24}{format_cents(sum(c for _, c in items)):>14}")
    return "\n".join(lines)
