import invoice
import receipt


def test_invoice() -> None:
    text = invoice.render("ACME", [("Widgets", 1999), ("Shipping", 500)])
    assert text.splitlines() == [
        "INVOICE for ACME",
        "  Widgets                         $19.99",
        "  Shipping                         $5.00",
        "  TOTAL DUE                       $24.99",
    ]


def test_receipt() -> None:
    assert receipt.render(paid=2000, due=1999).splitlines() == [
        "Amount due: $19.99",
        "Paid:       $20.00",
        "Change:     $0.01",
    ]
