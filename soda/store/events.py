"""The `events` table: append-only, one row per `soda.events.Events.emit`."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database


def append(db: Database, row: dict[str, Any]) -> None:
    """Insert one event row (ts, run_id, iteration_id, kind, data_json) in its own
    transaction."""
    with db.conn:
        db["events"].insert(row)


def count(db: Database, iteration_id: int, kind: str) -> int:
    """How many events of `kind` the iteration emitted."""
    row = db.execute(
        "SELECT count(*) FROM events WHERE iteration_id = ? AND kind = ?", [iteration_id, kind]
    ).fetchone()
    return int(row[0])
