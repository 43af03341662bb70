"""The `agent_calls` table: one row per model call, with its tokens and cost."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.store.db import dumps, insert, now

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
    price_source: str | None = None,
) -> None:
    """Store one call in its own transaction; the raw response is kept as JSON,
    `price_source` says where its price came from (soda.llm.prices)."""
    usage = response.usage
    with db.conn:
        insert(
            db,
            "agent_calls",
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
                "price_source": price_source,
                "stop_reason": response.stop_reason,
                "response_json": dumps(response.raw),
            },
        )


def run_cost(db: Database, run_id: int | None) -> float:
    """Dollars spent by the calls of run `run_id` (of calls outside any run for None)."""
    return summed_cost(db, ("run", run_id), "run_id IS ?", [run_id], "run_id IS ?", [run_id])


TOKENS = "input_tokens + cache_creation_tokens + cache_read_tokens + output_tokens"
"""A call's tokens, every kind counted (what the token budgets count)."""


def run_tokens(db: Database, run_id: int | None) -> int:
    """Tokens (in, cache reads and writes, out) of the calls of run `run_id`."""
    key = ("run tokens", run_id)
    where = "run_id IS ?"
    return int(summed_cost(db, key, where, [run_id], where, [run_id], TOKENS))


_RUNNING: weakref.WeakKeyDictionary[object, dict[tuple[object, ...], tuple[int, int, float]]] = (
    weakref.WeakKeyDictionary()
)
_RUNNING_LOCK = threading.Lock()


def summed_cost(
    db: Database,
    key: tuple[object, ...],
    where: str,
    params: list[object],
    first_where: str,
    first_params: list[object],
    summed: str = "cost_usd",
) -> float:
    """SUM(`summed`) of the calls matching `where` (cost_usd unless another
    expression of a call's columns is given), kept up to date instead of
    summed again: the budgets ask after every model call, and a run's calls (or
    a day's) would be read again each time, a cost growing with the history.
    Calls are appended, so the sum for `key` is remembered with the last call id
    it covers and only later calls are added. A call changed or removed bumps
    `agent_calls_epoch` (triggers): then the sum starts again. The first time,
    it starts at the first call matching `first_where` (an indexed lookup)."""
    with _RUNNING_LOCK:
        sums = _RUNNING.setdefault(db.conn, {})
        epoch, seen, total = sums.get(key, (-1, -1, 0.0))
    now_epoch, top = db.execute(
        "SELECT (SELECT epoch FROM agent_calls_epoch WHERE id = 1),"
        " (SELECT COALESCE(MAX(id), 0) FROM agent_calls)"
    ).fetchone()
    top = int(top)
    if seen < 0 or top < seen or now_epoch != epoch:  # first time, or calls changed
        first = db.execute(
            f"SELECT MIN(id) FROM agent_calls WHERE {first_where}", first_params
        ).fetchone()[0]
        seen, total = (top, 0.0) if first is None else (int(first) - 1, 0.0)
    if top > seen:
        part = db.execute(
            f"SELECT COALESCE(SUM({summed}), 0) FROM agent_calls WHERE id > ? AND id <= ?"
            f" AND {where}",
            [seen, top, *params],
        ).fetchone()[0]
        total += float(part)
        seen = top
    with _RUNNING_LOCK:
        sums[key] = (now_epoch, seen, total)
    return total


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


def price_sources(db: Database) -> dict[str, list[str]]:
    """Where each model's prices came from, the newest source first ("not
    recorded" for calls stored before soda kept it)."""
    found: dict[str, list[str]] = {}
    for model, source in db.execute(
        "SELECT model, COALESCE(price_source, 'not recorded') FROM agent_calls"
        " GROUP BY model, price_source ORDER BY MAX(id) DESC"
    ).fetchall():
        found.setdefault(str(model), []).append(str(source))
    return found
