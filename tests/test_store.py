from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from soda.errors import DatabaseTooNew
from soda.store import open_db
from soda.store.migrations import MIGRATIONS

TABLES = {
    "_migrations",
    "runs",
    "iterations",
    "agent_calls",
    "tasks",
    "task_comments",
    "human_inputs",
    "learnings",
    "events",
    "halts",
}


def test_new_database_has_every_table_in_wal_mode(tmp_path: Path) -> None:
    db = open_db(tmp_path / "state" / "soda.db")
    assert TABLES <= set(db.table_names())
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    applied = [row[0] for row in db.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert applied == [fn.__name__ for fn in MIGRATIONS]


def test_foreign_keys_are_enforced(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    with pytest.raises(sqlite3.IntegrityError):
        db.execute(
            "INSERT INTO task_comments (task_id, author, body, created_at)"
            " VALUES (99, 'x', 'y', 'z')"
        )


def test_reopening_applies_nothing_twice(tmp_path: Path) -> None:
    open_db(tmp_path / "soda.db").close()
    db = open_db(tmp_path / "soda.db")
    count = db.execute("SELECT count(*) FROM _migrations").fetchone()[0]
    assert count == len(MIGRATIONS)


def test_older_database_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "soda.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    conn.commit()
    conn.close()
    db = open_db(path)
    assert TABLES <= set(db.table_names())


def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "soda.db"
    open_db(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO _migrations VALUES ('m999_from_the_future', 'later')")
    conn.commit()
    conn.close()
    with pytest.raises(DatabaseTooNew, match="m999_from_the_future.*upgrade soda"):
        open_db(path)
