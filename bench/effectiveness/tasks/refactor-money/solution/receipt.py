"""Receipts: what was paid, and the change given back."""

from money import format_cents


def render(paid: int, due: int) -> str:
    """A receipt for a payment of `paid` cents against `due` cents."""
    return "\n".join(
        [
            f"Amount due: {format_cents(due)}",
            f"Paid:       {format_cents(paid)}",
            f"Change:     {format_cents(paid - due)}",
        ]
    )
