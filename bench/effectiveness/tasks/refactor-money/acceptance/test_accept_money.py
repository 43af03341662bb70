"""Acceptance tests for the money refactor: hidden from soda, run after it."""

import invoice
import receipt


def test_format_cents() -> None:
    from money import format_cents

    assert format_cents(123456) == "$1,234.56"
    assert format_cents(5) == "$0.05"
    assert format_cents(-250) == "-$2.50"
    assert format_cents(0) == "$0.00"
    assert format_cents(-123456789) == "-$1,234,567.89"


def test_both_modules_use_it() -> None:
    from money import format_cents

    assert invoice.format_cents is format_cents
    assert receipt.format_cents is format_cents
    assert not hasattr(invoice, "_fmt")
    assert not hasattr(receipt, "_money")


def test_invoice_output_unchanged_with_refunds_and_large_amounts() -> None:
    text = invoice.render("Initech", [("Servers", 1234567), ("Refund", -2550), ("Pens", 7)])
    assert text.splitlines() == [
        "INVOICE for Initech",
        "  Servers                     $12,345.67",
        "  Refund                         -$25.50",
        "  Pens                             $0.07",
        "  TOTAL DUE                   $12,320.24",
    ]


def test_receipt_output_unchanged_when_short_paid() -> None:
    assert receipt.render(paid=100000, due=123456).splitlines() == [
        "Amount due: $1,234.56",
        "Paid:       $1,000.00",
        "Change:     -$234.56",
    ]
