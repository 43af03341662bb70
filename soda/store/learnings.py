"""Learnings: facts agents asked soda to remember, shown to later agents."""

from __future__ import annotations

from collections.abc import Iterable

from sqlite_utils import Database

from soda.store.db import now

DEFAULT_LIMIT = 20


def active(db: Database, limit: int | None = DEFAULT_LIMIT) -> list[str]:
    """Active learnings, newest first (all of them with `limit` None)."""
    sql = "SELECT text FROM learnings WHERE active = 1 ORDER BY id DESC"
    rows = db.execute(sql + " LIMIT ?", [limit]) if limit is not None else db.execute(sql)
    return [row[0] for row in rows]


def add(db: Database, texts: Iterable[str], agent: str, iteration_id: int | None) -> int:
    """Keep new learnings; one already active is not stored twice. Returns how many."""
    existing = set(active(db, limit=None))
    fresh = list(dict.fromkeys(t.strip() for t in texts if t.strip() and t.strip() not in existing))
    if fresh:
        with db.conn:
            db["learnings"].insert_all(
                {
                    "text": text,
                    "source_agent": agent,
                    "iteration_id": iteration_id,
                    "active": 1,
                    "created_at": now(),
                }
                for text in fresh
            )
    return len(fresh)
