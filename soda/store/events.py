"""The `events` table: append-only, one row per `soda.events.Events.emit`."""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database


def append(db: Database, row: dict[str, Any]) -> None:
    """Insert one event row (ts, run_id, iteration_id, kind, data_json) in its own
    transaction."""
    with db.conn:
        db["events"].insert(row)
