"""Receipts: what was paid, and the change given back."""


def _money(amount: int) -> str:
    text = f"{abs(amount) // 100:,}.{abs(amount) % 100:02d}"
    return ("-$" if amount < 0 else "$") + text


def render(paid: int, due: int) -> str:
    """A receipt for a payment of `paid` cents against `due` cents."""
    return "\n".join(
        [
            f"Amount due: {_money(due)}",
            f"Paid:       {_money(paid)}",
            f"Change:     {_money(paid - due)}",
        ]
    )
