"""The `agent_calls` table: one row per model call, with its tokens and cost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.store.db import dumps, now

if TYPE_CHECKING:
    from soda.llm.base import ModelResponse


def record(
    db: Database,
    run_id: int | None,
    iteration_id: int | None,
    agent: str,
    provider: str,
    turn: int,
    response: ModelResponse,
    cost_usd: float,
) -> None:
    """Store one call in its own transaction; the raw response is kept as JSON."""
    usage = response.usage
    with db.conn:
        db.table("agent_calls").insert(
            {
                "run_id": run_id,
                "iteration_id": iteration_id,
                "agent": agent,
                "provider": provider,
                "model": response.model,
                "turn": turn,
                "started_at": now(),
                "latency_ms": response.latency_ms,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "cache_creation_tokens": usage.cache_creation_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cost_usd": cost_usd,
                "stop_reason": response.stop_reason,
                "response_json": dumps(response.raw),
            }
        )


def run_cost(db: Database, run_id: int | None) -> float:
    """Dollars spent by the calls of run `run_id` (of calls outside any run for None)."""
    row = db.execute(
        "SELECT COALESCE(SUM(cost_usd), 0) FROM agent_calls WHERE run_id IS ?", [run_id]
    ).fetchone()
    return float(row[0])


CostRow = tuple[object, int, int, int, float]
"""key (iteration number, agent or model; None for calls outside an iteration),
calls, tokens in (with cache writes and reads), tokens out, cost_usd."""

_SUMS = (
    "COUNT(*), COALESCE(SUM(c.input_tokens + c.cache_creation_tokens + c.cache_read_tokens), 0),"
    " COALESCE(SUM(c.output_tokens), 0), COALESCE(SUM(c.cost_usd), 0)"
)


def cost_by_iteration(db: Database) -> list[CostRow]:
    """Calls, tokens and cost per iteration number, in order (calls made outside
    any iteration, e.g. by `soda doctor --ping`, under None first)."""
    return db.execute(
        f"SELECT i.number, {_SUMS} FROM agent_calls c LEFT JOIN iterations i"
        " ON i.id = c.iteration_id GROUP BY i.number ORDER BY i.number"
    ).fetchall()


def cost_by(db: Database, column: str) -> list[CostRow]:
    """Calls, tokens and cost per `agent` or per `model`, the most expensive first."""
    if column not in ("agent", "model"):
        raise ValueError(f"cost_by: no grouping by {column!r}")
    return db.execute(
        f"SELECT c.{column}, {_SUMS} FROM agent_calls c GROUP BY c.{column}"
        f" ORDER BY SUM(c.cost_usd) DESC, c.{column}"
    ).fetchall()


def cost_total(db: Database) -> CostRow:
    """Calls, tokens and cost of every call ever recorded (key None)."""
    row: CostRow = db.execute(f"SELECT NULL, {_SUMS} FROM agent_calls c").fetchone()
    return row
