"""Read-only views of the state database for people: history and iteration detail."""

from __future__ import annotations

from rich.table import Table
from sqlite_utils import Database


def history_table(db: Database, limit: int = 50) -> Table:
    """The last `limit` iterations, oldest first, as a table."""
    table = Table(title="soda history", title_justify="left")
    for column in ("#", "intent", "decision", "outcome", "merged", "time", "tokens", "cost"):
        table.add_column(column, overflow="fold")
    rows = db.execute(
        "SELECT number, intent, decision, outcome, merged_commit, duration_s,"
        " tokens_in + tokens_out, cost_usd, phase FROM iterations"
        " ORDER BY number DESC LIMIT ?",
        [limit],
    ).fetchall()
    for number, intent, decision, outcome, merged, duration, tokens, cost, phase in reversed(rows):
        table.add_row(
            str(number),
            _clip(intent or "-", 60),
            decision or f"({phase})",
            outcome or "-",
            (merged or "-")[:10],
            f"{duration:.1f}s" if duration is not None else "-",
            f"{tokens:,}",
            f"${cost:.4f}",
        )
    if not rows:
        table.caption = "no iterations yet: start one with `soda run --once`"
    return table


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
