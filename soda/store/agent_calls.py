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
        db["agent_calls"].insert(
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
