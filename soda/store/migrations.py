"""Append-only schema migrations, in the manner of simonw/llm.

Each migration is a named function, applied once and recorded in `_migrations`.
Never edit or reorder a migration that has shipped: add a new one. A database
that has a migration this code does not know was written by a newer soda and is
refused rather than risk writing to a schema we do not understand.

The migrations themselves live in `schema_first` (m001-m005) and `schema_later`
(m006 on); a new one goes at the end of `schema_later`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlite_utils import Database

from soda.errors import DatabaseTooNew
from soda.store import schema_first, schema_later

Migration = Callable[[Database], None]
MIGRATIONS: list[Migration] = [*schema_first.MIGRATIONS, *schema_later.MIGRATIONS]
"""Every migration, in the order it applies."""


def migrate(db: Database) -> list[str]:
    """Apply pending migrations in order; return the names applied."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    done = {row[0] for row in db.execute("SELECT name FROM _migrations").fetchall()}
    known = {fn.__name__ for fn in MIGRATIONS}
    unknown = sorted(done - known)
    if unknown:
        raise DatabaseTooNew(
            f"{db.conn.execute('PRAGMA database_list').fetchone()[2]} was written by a newer "
            f"soda (unknown migrations: {', '.join(unknown)}); upgrade soda to open it"
        )
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        with db.conn:
            fn(db)
            db.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                [fn.__name__, datetime.now(UTC).isoformat(timespec="milliseconds")],
            )
        applied.append(fn.__name__)
    return applied
