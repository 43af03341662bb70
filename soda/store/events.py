"""The `events` table: append-only, one row per `soda.events.Events.emit`."""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database

from soda.store.db import insert

EventRow = tuple[int, str, int | None, int | None, str, str]
"""id, ts, run_id, iteration number (not id), kind, data_json."""

_SELECT = (
    "SELECT e.id, e.ts, e.run_id, i.number, e.kind, e.data_json FROM events e"
    " LEFT JOIN iterations i ON i.id = e.iteration_id"
)


def as_record(row: EventRow) -> dict[str, Any]:
    """One event as a JSON object: id, ts, run_id, iteration (number), kind, and
    data (decoded; the stored text itself when it is not JSON)."""
    event_id, ts, run_id, iteration, kind, data_json = row
    try:
        data = json.loads(data_json)
    except ValueError:
        data = data_json
    return {
        "id": event_id,
        "ts": ts,
        "run_id": run_id,
        "iteration": iteration,
        "kind": kind,
        "data": data,
    }


def data_text(data: Any) -> str:
    """An event's data on one line, compact ("" when there is none)."""
    return json.dumps(data, separators=(", ", ": "), default=str) if data else ""


def append(db: Database, row: dict[str, Any]) -> None:
    """Insert one event row (ts, run_id, iteration_id, kind, data_json) in its own
    transaction."""
    with db.conn:
        insert(db, "events", row)


def count(db: Database, iteration_id: int, kind: str) -> int:
    """How many events of `kind` the iteration emitted."""
    row = db.execute(
        "SELECT count(*) FROM events WHERE iteration_id = ? AND kind = ?", [iteration_id, kind]
    ).fetchone()
    return int(row[0])


def _kind_filter(prefix: str | None) -> tuple[str, list[Any]]:
    """`kind` starts with `prefix` (`act` matches `act.merged`), case and all."""
    if not prefix:
        return "1", []
    return "substr(e.kind, 1, ?) = ?", [len(prefix), prefix]


def latest(db: Database, kind_prefix: str | None, limit: int) -> list[EventRow]:
    """The last `limit` events (of kinds under `kind_prefix`), oldest first."""
    where, args = _kind_filter(kind_prefix)
    rows = db.execute(
        f"{_SELECT} WHERE {where} ORDER BY e.id DESC LIMIT ?", [*args, limit]
    ).fetchall()
    return rows[::-1]


def after(db: Database, last_id: int, kind_prefix: str | None, limit: int = -1) -> list[EventRow]:
    """Every event newer than id `last_id` (of kinds under `kind_prefix`), in
    order; the first `limit` of them (-1: all)."""
    where, args = _kind_filter(kind_prefix)
    return db.execute(
        f"{_SELECT} WHERE e.id > ? AND {where} ORDER BY e.id LIMIT ?", [last_id, *args, limit]
    ).fetchall()


def last_id(db: Database) -> int:
    """The newest event's id (0 when there is none)."""
    return int(db.execute("SELECT COALESCE(MAX(id), 0) FROM events").fetchone()[0])


def last_of_kinds(db: Database, kinds: list[str]) -> EventRow | None:
    """The newest event whose kind is one of `kinds`."""
    marks = ", ".join("?" for _ in kinds)
    row: EventRow | None = db.execute(
        f"{_SELECT} WHERE e.kind IN ({marks}) ORDER BY e.id DESC LIMIT 1", kinds
    ).fetchone()
    return row


def of_iteration(db: Database, iteration_id: int, prefixes: tuple[str, ...]) -> list[EventRow]:
    """The iteration's events whose kind starts with one of `prefixes`, in order."""
    where = " OR ".join("substr(e.kind, 1, ?) = ?" for _ in prefixes) or "1"
    args: list[Any] = [iteration_id]
    for prefix in prefixes:
        args += [len(prefix), prefix]
    return db.execute(
        f"{_SELECT} WHERE e.iteration_id = ? AND ({where}) ORDER BY e.id", args
    ).fetchall()
