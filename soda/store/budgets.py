"""What the budgets count (spend since a moment, a run's iterations, an
iteration's tokens), their resets, and the iterations' wake fingerprints."""

from __future__ import annotations

from sqlite_utils import Database

from soda.store.db import now


def spent_since(db: Database, since: str, after_reset: bool = False) -> float:
    """Dollars spent by every model call made at or after `since` (ISO-8601 UTC);
    strictly after it when `since` is a reset (a call in the same millisecond as
    the reset was made before it)."""
    op = ">" if after_reset else ">="
    row = db.execute(
        f"SELECT COALESCE(SUM(cost_usd), 0) FROM agent_calls WHERE started_at {op} ?", [since]
    ).fetchone()
    return float(row[0])


def add_reset(db: Database, budget: str) -> str:
    """Record that `budget` counts again from now; the moment, ISO-8601 UTC."""
    stamp = now()
    with db.conn:
        db["budget_resets"].insert({"budget": budget, "created_at": stamp})
    return stamp


def last_reset(db: Database, budget: str) -> str | None:
    row = db.execute(
        "SELECT MAX(created_at) FROM budget_resets WHERE budget = ?", [budget]
    ).fetchone()
    return row[0] if row else None


def latest_run(db: Database) -> tuple[int, str] | None:
    """id and status of the newest run."""
    return db.execute("SELECT id, status FROM runs ORDER BY id DESC LIMIT 1").fetchone()


def run_spend(db: Database, run_id: int) -> tuple[float, int]:
    """Dollars spent by run `run_id` and the iterations it started."""
    cost = db.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM agent_calls WHERE run_id = ?", [run_id]
    ).fetchone()[0]
    count = db.execute("SELECT count(*) FROM iterations WHERE run_id = ?", [run_id]).fetchone()[0]
    return float(cost), int(count)


def last_iteration_tokens(db: Database) -> tuple[int, int] | None:
    """number and tokens (in + out) of the newest finished iteration."""
    return db.execute(
        "SELECT number, COALESCE(tokens_in, 0) + COALESCE(tokens_out, 0) FROM iterations"
        " WHERE ended_at IS NOT NULL ORDER BY number DESC LIMIT 1"
    ).fetchone()


def last_fingerprint(db: Database) -> tuple[int, str | None, str | None] | None:
    """number, fingerprint and decision of the newest finished iteration."""
    return db.execute(
        "SELECT number, fingerprint, decision FROM iterations WHERE ended_at IS NOT NULL"
        " ORDER BY number DESC LIMIT 1"
    ).fetchone()
