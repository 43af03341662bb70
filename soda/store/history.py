"""Read-only queries behind `soda history` and `soda show`: iterations with what
happened in them (halts, model calls). The human inputs an iteration applied come
from `soda.store.human_inputs.applied_in`."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from soda.contracts.outcomes import ERROR_RUNS

HistoryRow = tuple[
    int, str | None, str | None, str | None, str | None, float | None, int, float, str
]
"""number, intent, decision, outcome, merged_commit, duration_s, tokens (in + out),
cost_usd, phase."""

CallRow = tuple[str, str, int, int, int, int, int, float, int, str | None]
"""agent, model, turn, input/output/cache-creation/cache-read tokens, cost_usd,
latency_ms, stop_reason."""


def latest_iterations(db: Database, limit: int) -> list[HistoryRow]:
    """The last `limit` iterations, newest first."""
    return db.execute(
        "SELECT number, intent, decision, outcome, merged_commit, duration_s,"
        " tokens_in + tokens_out, cost_usd, phase FROM iterations"
        " ORDER BY number DESC LIMIT ?",
        [limit],
    ).fetchall()


def iteration(db: Database, number: int) -> dict[str, Any] | None:
    """Every column of iteration `number`, by name."""
    cursor = db.execute("SELECT * FROM iterations WHERE number = ?", [number])
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([c[0] for c in cursor.description], row, strict=True))


def halts_in(
    db: Database, iteration_id: int
) -> list[tuple[str | None, str, str, str | None, str | None]]:
    """agent, error_type, message, violation_path and violation_rule of the
    iteration's halts."""
    return db.execute(
        "SELECT agent, error_type, message, violation_path, violation_rule FROM halts"
        " WHERE iteration_id = ?",
        [iteration_id],
    ).fetchall()


def calls_in(db: Database, iteration_id: int) -> list[CallRow]:
    """The iteration's model calls in the order they were made."""
    return db.execute(
        "SELECT agent, model, turn, input_tokens, output_tokens, cache_creation_tokens,"
        " cache_read_tokens, cost_usd, latency_ms, stop_reason FROM agent_calls"
        " WHERE iteration_id = ? ORDER BY id",
        [iteration_id],
    ).fetchall()


def responses_in(db: Database, iteration_id: int) -> list[str | None]:
    """The raw responses (response_json) of the iteration's model calls, in order."""
    rows = db.execute(
        "SELECT response_json FROM agent_calls WHERE iteration_id = ? ORDER BY id",
        [iteration_id],
    )
    return [row[0] for row in rows]


def last_error(db: Database) -> tuple[str, str, str | None, int | None] | None:
    """when, kind (halt, or the run's status: error, aborted, crashed, transient),
    reason and iteration number of the newest HALT or run that ended in error."""
    marks = ", ".join("?" for _ in ERROR_RUNS)
    row: tuple[str, str, str | None, int | None] | None = db.execute(
        "SELECT h.created_at, 'halt', h.error_type || ': ' || h.message, i.number"
        " FROM halts h LEFT JOIN iterations i ON i.id = h.iteration_id"
        " UNION ALL"
        " SELECT COALESCE(r.ended_at, r.started_at), r.status, r.final_reason,"
        " (SELECT MAX(number) FROM iterations WHERE run_id = r.id)"
        f" FROM runs r WHERE r.status IN ({marks})"
        " ORDER BY 1 DESC LIMIT 1",
        list(ERROR_RUNS),
    ).fetchone()
    return row
