"""Learnings: facts agents asked soda to remember, shown to later agents.

A learning is active until it is retired, by the verifier's verdict or by the
cap on how many stay active (`[context] max_learnings`: past it the oldest go).
A retired one keeps its row with the reason and the iteration, is never shown
again, and is not learned a second time. Agents see each active learning with
its id (`L12: ...`) so the verifier can name the ones it retires.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sqlite_utils import Database

from soda.store.db import now

PREFIX = "L"
"""Learnings are shown as `L<id>: <text>`."""


@dataclass(frozen=True)
class Learning:
    id: int
    text: str
    source_agent: str
    iteration_id: int | None
    created_at: str

    def label(self) -> str:
        """How agents see it: its id, then the fact."""
        return f"{PREFIX}{self.id}: {self.text}"


_COLUMNS = ", ".join(Learning.__dataclass_fields__)


def active_rows(db: Database, limit: int | None = None) -> list[Learning]:
    """Active learnings, newest first (all of them with `limit` None; the cap
    bounds how many there are)."""
    sql = f"SELECT {_COLUMNS} FROM learnings WHERE active = 1 ORDER BY id DESC"
    rows = db.execute(sql + " LIMIT ?", [limit]) if limit is not None else db.execute(sql)
    return [Learning(*row) for row in rows]


def active(db: Database, limit: int | None = None) -> list[str]:
    """Active learnings as agents see them (`L12: text`), newest first."""
    return [learning.label() for learning in active_rows(db, limit)]


def add(
    db: Database,
    texts: Iterable[str],
    agent: str,
    iteration_id: int | None,
    cap: int | None = None,
) -> int:
    """Keep new learnings: a text already known (active, or retired: it was judged
    once) is not stored again. With `cap`, the oldest active learnings past it
    are retired. Returns how many were added."""
    wanted = list(dict.fromkeys(t.strip() for t in texts if t.strip()))
    known = _known(db, wanted)
    fresh = [text for text in wanted if text not in known]
    if fresh:
        with db.conn:
            db.table("learnings").insert_all(
                {
                    "text": text,
                    "source_agent": agent,
                    "iteration_id": iteration_id,
                    "active": 1,
                    "created_at": now(),
                }
                for text in fresh
            )
    if cap is not None:
        retire_past(db, cap, iteration_id)
    return len(fresh)


def _known(db: Database, texts: list[str]) -> set[str]:
    """Which of `texts` are stored already (looked up by the text index, not read
    from every learning ever kept)."""
    found: set[str] = set()
    for start in range(0, len(texts), 500):
        chunk = texts[start : start + 500]
        marks = ", ".join("?" for _ in chunk)
        rows = db.execute(f"SELECT text FROM learnings WHERE text IN ({marks})", chunk)
        found.update(row[0] for row in rows)
    return found


def retire(db: Database, learning_id: int, reason: str, iteration_id: int | None) -> bool:
    """Retire one active learning with its reason; False when there is no active
    learning with that id."""
    with db.conn:
        cursor = db.execute(
            "UPDATE learnings SET active = 0, retired_reason = ?, retired_iteration_id = ?,"
            " retired_at = ? WHERE id = ? AND active = 1",
            [reason, iteration_id, now(), learning_id],
        )
    return cursor.rowcount > 0


def retire_past(db: Database, cap: int, iteration_id: int | None) -> list[int]:
    """Retire the oldest active learnings beyond the newest `cap`; their ids."""
    stale = [
        row[0]
        for row in db.execute(
            "SELECT id FROM learnings WHERE active = 1 ORDER BY id DESC LIMIT -1 OFFSET ?", [cap]
        )
    ]
    reason = f"over the cap of {cap} active learnings ([context] max_learnings); oldest first"
    for learning_id in stale:
        retire(db, learning_id, reason, iteration_id)
    return stale


@dataclass(frozen=True)
class Retired:
    id: int
    text: str
    reason: str
    iteration_id: int | None


def retired(db: Database) -> list[Retired]:
    """Retired learnings with their reasons, last retired first."""
    rows = db.execute(
        "SELECT id, text, retired_reason, retired_iteration_id FROM learnings"
        " WHERE active = 0 ORDER BY retired_at DESC, id DESC"
    )
    return [Retired(row[0], row[1], row[2] or "", row[3]) for row in rows]
