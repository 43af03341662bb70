"""A shopping cart: lines of goods, and what the customer pays."""

from dataclasses import dataclass, field

from tax import tax_cents


@dataclass(frozen=True)
class Line:
    name: str
    unit_cents: int
    quantity: int
    category: str = "standard"

    @property
    def amount(self) -> int:
        return self.unit_cents * self.quantity


@dataclass
class Cart:
    lines: list[Line] = field(default_factory=list)

    def add(self, line: Line) -> None:
        self.lines.append(line)

    def subtotal(self) -> int:
        """Before tax."""
        return sum(line.amount for line in self.lines)

    def tax(self) -> int:
        return sum(tax_cents(line.unit_cents, line.category) for line in self.lines)

    def total(self) -> int:
        """What the customer pays: every line with its tax."""
        return self.subtotal() + self.tax()
