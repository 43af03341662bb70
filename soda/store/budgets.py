"""What the budgets count (spend since a moment, a run's iterations, an
iteration's tokens), their resets, and the iterations' wake fingerprints."""

from __future__ import annotations

from sqlite_utils import Database

from soda.store import agent_calls
from soda.store.db import now


def spent_since(db: Database, since: str, after_call_id: int = 0) -> float:
    """Dollars spent by the model calls made at or after `since` (ISO-8601 UTC)
    and later than call `after_call_id` (a reset)."""
    return agent_calls.summed_cost(
        db,
        ("since", since, after_call_id),
        "started_at >= ? AND id > ?",
        [since, after_call_id],
        "started_at >= ? AND id > ?",
        [since, after_call_id],
    )


def add_reset(db: Database, budget: str) -> None:
    """Record that `budget` counts again from the next model call."""
    with db.conn:
        last = db.execute("SELECT COALESCE(MAX(id), 0) FROM agent_calls").fetchone()[0]
        row = {"budget": budget, "after_call_id": last, "created_at": now()}
        db.table("budget_resets").insert(row)


def last_reset(db: Database, budget: str) -> int:
    """The last model call before `budget`'s newest reset (0: never reset)."""
    row = db.execute(
        "SELECT after_call_id FROM budget_resets WHERE budget = ? ORDER BY id DESC LIMIT 1",
        [budget],
    ).fetchone()
    return int(row[0]) if row else 0


def latest_run(db: Database) -> tuple[int, str] | None:
    """id and status of the newest run."""
    row: tuple[int, str] | None = db.execute(
        "SELECT id, status FROM runs ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return row


def run_spend(db: Database, run_id: int) -> tuple[float, int]:
    """Dollars spent by run `run_id` and the iterations it started."""
    cost = db.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM agent_calls WHERE run_id = ?", [run_id]
    ).fetchone()[0]
    count = db.execute("SELECT count(*) FROM iterations WHERE run_id = ?", [run_id]).fetchone()[0]
    return float(cost), int(count)


def last_iteration_tokens(db: Database) -> tuple[int, int] | None:
    """number and tokens (in + out) of the newest finished iteration."""
    row: tuple[int, int] | None = db.execute(
        "SELECT number, COALESCE(tokens_in, 0) + COALESCE(tokens_out, 0) FROM iterations"
        " WHERE ended_at IS NOT NULL ORDER BY number DESC LIMIT 1"
    ).fetchone()
    return row


def last_fingerprint(db: Database) -> tuple[int, str | None, str | None, str | None] | None:
    """number, fingerprint, decision and outcome of the newest finished iteration."""
    row: tuple[int, str | None, str | None, str | None] | None = db.execute(
        "SELECT number, fingerprint, decision, outcome FROM iterations"
        " WHERE ended_at IS NOT NULL ORDER BY number DESC LIMIT 1"
    ).fetchone()
    return row
