"""The `human_inputs` table: every query about a person's inputs, by name.

A row's life: `pending` (recorded from an inbox file) -> `claimed` by the
iteration that showed it to ORIENT (released to pending after a crash) ->
`applied`, with the iteration and a `response` saying what soda did. Rows are
never deleted. `soda.human` decides what happens to an input; this module only
reads and writes the rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlite_utils import Database

from soda.store.db import now

Row = tuple[int, str, str, str, str | None]
"""id, kind, payload_json, received_at, source_file."""

_COLUMNS = "id, kind, payload_json, received_at, source_file"


def record(db: Database, kind: str, payload_json: str, source: str, source_file: str) -> int:
    """Insert a pending row in its own transaction; returns its id."""
    with db.conn:
        cursor = db.conn.execute(
            "INSERT INTO human_inputs (kind, payload_json, source, source_file, status,"
            " received_at) VALUES (?, ?, ?, ?, 'pending', ?)",
            [kind, payload_json, source, source_file, now()],
        )
    assert cursor.lastrowid is not None
    return cursor.lastrowid


def is_recorded(db: Database, source_file: str, payload_json: str) -> bool:
    """Whether a row came from a file of this name holding this payload."""
    row = db.execute(
        "SELECT 1 FROM human_inputs WHERE source_file = ? AND payload_json = ? LIMIT 1",
        [source_file, payload_json],
    ).fetchone()
    return row is not None


def pending(db: Database) -> list[Row]:
    """Pending rows, oldest first."""
    return db.execute(
        f"SELECT {_COLUMNS} FROM human_inputs WHERE status = 'pending' ORDER BY received_at, id"
    ).fetchall()


def pending_of_kinds(db: Database, kinds: Iterable[str], limit: int) -> list[Row]:
    """At most `limit` pending rows of the given kinds, in id order."""
    chosen = sorted(set(kinds))
    if not chosen:
        return []
    marks = ", ".join("?" for _ in chosen)
    return db.execute(
        f"SELECT {_COLUMNS} FROM human_inputs WHERE status = 'pending'"
        f" AND kind IN ({marks}) ORDER BY id LIMIT ?",
        [*chosen, limit],
    ).fetchall()


def pending_except_kinds(db: Database, kinds: Iterable[str], limit: int) -> list[Row]:
    """At most `limit` pending rows of any kind but `kinds`, in id order."""
    chosen = sorted(set(kinds))
    marks = ", ".join("?" for _ in chosen)
    return db.execute(
        f"SELECT {_COLUMNS} FROM human_inputs WHERE status = 'pending'"
        f" AND kind NOT IN ({marks}) ORDER BY id LIMIT ?",
        [*chosen, limit],
    ).fetchall()


def pending_count(db: Database) -> int:
    return int(
        db.execute("SELECT count(*) FROM human_inputs WHERE status = 'pending'").fetchone()[0]
    )


def latest_kind(db: Database, kinds: Iterable[str]) -> str | None:
    """The kind of the newest row (whatever its status) among `kinds`."""
    chosen = sorted(set(kinds))
    if not chosen:
        return None
    marks = ", ".join("?" for _ in chosen)
    row = db.execute(
        f"SELECT kind FROM human_inputs WHERE kind IN ({marks}) ORDER BY id DESC LIMIT 1",
        chosen,
    ).fetchone()
    return row[0] if row else None


def applied_in(db: Database, iteration: int) -> list[tuple[int, str, str, str | None]]:
    """id, kind, payload_json and response of the rows applied in `iteration`."""
    return db.execute(
        "SELECT id, kind, payload_json, response FROM human_inputs"
        " WHERE applied_iteration = ? ORDER BY id",
        [iteration],
    ).fetchall()


def claim(db: Database, ids: Sequence[int], iteration: int) -> int:
    """Mark pending rows as taken up by `iteration`; returns how many changed."""
    return _update(
        db,
        ids,
        "status = 'claimed', claimed_iteration = ?",
        [iteration],
        "status = 'pending'",
    )


def mark_applied(db: Database, ids: Sequence[int], iteration: int, response: str) -> int:
    """Record what soda did about pending or claimed rows; returns how many changed."""
    return _update(
        db,
        ids,
        "status = 'applied', applied_iteration = ?, applied_at = ?, response = ?",
        [iteration, now(), response],
        "status IN ('pending', 'claimed')",
    )


def release_claims(db: Database) -> int:
    """Return every claimed row to pending; returns how many."""
    with db.conn:
        cursor = db.conn.execute(
            "UPDATE human_inputs SET status = 'pending', claimed_iteration = NULL"
            " WHERE status = 'claimed'"
        )
    return cursor.rowcount


def _update(db: Database, ids: Sequence[int], assign: str, values: list[Any], when: str) -> int:
    if not ids:
        return 0
    marks = ", ".join("?" for _ in ids)
    with db.conn:
        cursor = db.conn.execute(
            f"UPDATE human_inputs SET {assign} WHERE id IN ({marks}) AND {when}",
            [*values, *ids],
        )
    return cursor.rowcount
