"""Opening the state database: WAL, foreign keys, and migrations applied on open.

One connection serves the whole process, ACT's task threads included
(`check_same_thread=False`). `SharedConnection` keeps their statements from
interleaving: a thread owns the connection from its first statement until no
transaction is open and it has left every `with conn:` block, so one thread's
transaction (sqlite-utils' savepoints, an insert and its `lastrowid`) is never
split by another thread's statements."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from sqlite_utils import Database
from sqlite_utils.db import NotFoundError, Table

from soda.store.migrations import migrate
from soda.system.clock import utc_now

now = utc_now
"""Current UTC time as an ISO-8601 string, the format of every timestamp column."""


class SharedConnection(sqlite3.Connection):
    """A connection several threads may use: one owner at a time (see the module
    docstring). Reentrant for the owner; released when its work is settled."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()
        self._owner: int | None = None
        self._blocks = 0

    def _take(self) -> None:
        me = threading.get_ident()
        if self._owner != me:
            self._lock.acquire()
            self._owner = me

    def _settle(self) -> None:
        if self._owner == threading.get_ident() and not self._blocks and not self.in_transaction:
            self._owner = None
            self._lock.release()

    def execute(self, *args: Any) -> sqlite3.Cursor:
        self._take()
        try:
            return super().execute(*args)
        finally:
            self._settle()

    def executemany(self, *args: Any) -> sqlite3.Cursor:
        self._take()
        try:
            return super().executemany(*args)
        finally:
            self._settle()

    def executescript(self, *args: Any) -> sqlite3.Cursor:
        self._take()
        try:
            return super().executescript(*args)
        finally:
            self._settle()

    def commit(self) -> None:
        self._take()
        try:
            super().commit()
        finally:
            self._settle()

    def rollback(self) -> None:
        self._take()
        try:
            super().rollback()
        finally:
            self._settle()

    def __enter__(self) -> SharedConnection:
        self._take()
        self._blocks += 1
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        try:
            return super().__exit__(*exc)
        finally:
            self._blocks -= 1
            self._settle()


def open_db(path: Path) -> Database:
    """Open (creating if needed) and migrate the database at `path`.

    Raises DatabaseTooNew when the file was written by a newer soda.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    # A generous busy timeout: the daemon and a person's CLI share the file.
    conn = sqlite3.connect(str(path), timeout=30, check_same_thread=False, factory=SharedConnection)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    db = Database(conn)
    migrate(db)
    return db


def last_pk(table: Table) -> int:
    """The integer primary key of the row `table` last inserted."""
    pk = table.last_pk
    if pk is None:
        raise TypeError(f"no row was inserted into {table.name}")
    return int(pk)


def insert(db: Database, table: str, row: dict[str, Any]) -> int:
    """INSERT one row; its id. Plain SQL for the rows every iteration writes
    (events, iteration records, model calls): sqlite-utils' `db[table].insert`
    asks SQLite for the schema (tables, views, columns) on every call, which was
    150 statements an iteration."""
    columns = ", ".join(f'"{name}"' for name in row)
    marks = ", ".join("?" for _ in row)
    cursor = db.execute(f'INSERT INTO "{table}" ({columns}) VALUES ({marks})', list(row.values()))
    return int(cursor.lastrowid or 0)


def update(db: Database, table: str, row_id: int, row: dict[str, Any]) -> None:
    """UPDATE the columns of one row by id (NotFoundError, as sqlite-utils raises,
    when there is no such row)."""
    if not row:
        return
    columns = ", ".join(f'"{name}" = ?' for name in row)
    cursor = db.execute(f'UPDATE "{table}" SET {columns} WHERE id = ?', [*row.values(), row_id])
    if cursor.rowcount == 0:
        raise NotFoundError(f"no row {row_id} in {table}")


def dumps(value: Any) -> str:
    """JSON for a column: stable key order, non-ASCII kept readable."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def migration_count(db: Database) -> int:
    """How many migrations the database has had applied."""
    return int(db.execute("SELECT count(*) FROM _migrations").fetchone()[0])


def journal_mode(db: Database) -> str:
    """SQLite's journal mode for the file (soda opens it in `wal`)."""
    return str(db.execute("PRAGMA journal_mode").fetchone()[0])
