"""Opening the state database: WAL, foreign keys, and migrations applied on open."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from soda.store.migrations import migrate


def now() -> str:
    """Current UTC time as an ISO-8601 string, the format of every timestamp column."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def open_db(path: Path) -> Database:
    """Open (creating if needed) and migrate the database at `path`.

    Raises DatabaseTooNew when the file was written by a newer soda.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # A generous busy timeout: the daemon and a person's CLI share the file.
    conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    db = Database(conn)
    migrate(db)
    return db


def dumps(value: Any) -> str:
    """JSON for a column: stable key order, non-ASCII kept readable."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def migration_count(db: Database) -> int:
    """How many migrations the database has had applied."""
    return int(db.execute("SELECT count(*) FROM _migrations").fetchone()[0])


def journal_mode(db: Database) -> str:
    """SQLite's journal mode for the file (soda opens it in `wal`)."""
    return str(db.execute("PRAGMA journal_mode").fetchone()[0])
