"""The milestone's digest between iterations (see soda.repo.digest): one row per
(branch, base) with the digest's state, the generation of each of its commits,
and its changed files. Every write is one transaction: a crash leaves the
digest of the tip before, never half of one."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlite_utils import Database

from soda.store.db import dumps, now

FileRow = tuple[str, str, int, int, bool, str, str | None]
"""(path, shown, added, removed, binary, status, source): see soda.repo.digest.Row."""

_COLUMNS = "path, shown, added, removed, binary, status, source"
_BY_SOURCE = " INDEXED BY milestone_files_source"
_BATCH = 500
"""Host parameters per statement (SQLite allows at least 999)."""


class DigestRows:
    """The stored digest of `branch` since `base` (soda.repo.digest.DigestStore)."""

    def __init__(self, db: Database, branch: str, base: str) -> None:
        self.db = db
        self.branch = branch
        self.base = base

    def _id(self) -> int | None:
        row = self.db.execute(
            "SELECT id FROM milestone_digests WHERE branch = ? AND base = ?",
            [self.branch, self.base],
        ).fetchone()
        return int(row[0]) if row else None

    def load(self) -> dict[str, Any] | None:
        row = self.db.execute(
            "SELECT state_json FROM milestone_digests WHERE branch = ? AND base = ?",
            [self.branch, self.base],
        ).fetchone()
        if row is None:
            return None
        try:
            state = json.loads(row[0])
        except ValueError:
            return None
        return state if isinstance(state, dict) else None

    def gens(self, shas: Iterable[str]) -> dict[str, int]:
        wanted = list(shas)
        digest = self._id()
        if digest is None or not wanted:
            return {}
        found: dict[str, int] = {}
        for chunk in _chunks(wanted):
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.execute(
                f"SELECT sha, gen FROM milestone_commits WHERE digest_id = ? AND sha IN ({marks})",
                [digest, *chunk],
            )
            found.update((sha, int(gen)) for sha, gen in rows)
        return found

    def rows_touching(self, paths: list[str]) -> list[FileRow]:
        """The file rows named by `paths`, or renamed or copied from one of them."""
        digest = self._id()
        if digest is None:
            return []
        rows: dict[str, FileRow] = {}
        for chunk in _chunks(paths):
            marks = ", ".join("?" for _ in chunk)
            # The partial index on sources, named: without statistics SQLite
            # would rather walk every file of the digest.
            for indexed, column in (("", "path"), (_BY_SOURCE, "source IS NOT NULL AND source")):
                found = self.db.execute(
                    f"SELECT {_COLUMNS} FROM milestone_files{indexed}"
                    f" WHERE digest_id = ? AND {column} IN ({marks})",
                    [digest, *chunk],
                )
                rows.update((row[0], _row(row)) for row in found)
        return list(rows.values())

    def top(self, limit: int) -> list[FileRow]:
        """The most changed files first (then by name), as the diffstat lists them."""
        digest = self._id()
        if digest is None:
            return []
        found = self.db.execute(
            f"SELECT {_COLUMNS} FROM milestone_files WHERE digest_id = ?"
            " ORDER BY churn DESC, shown LIMIT ?",
            [digest, limit],
        )
        return [_row(row) for row in found]

    def replace(self, state: dict[str, Any], gens: dict[str, int], rows: list[FileRow]) -> None:
        """A rebuilt digest in place of the branch's stored ones (any base)."""
        with self.db.conn:
            stale = "SELECT id FROM milestone_digests WHERE branch = ?"
            for table in ("milestone_commits", "milestone_files"):
                self.db.execute(f"DELETE FROM {table} WHERE digest_id IN ({stale})", [self.branch])
            self.db.execute("DELETE FROM milestone_digests WHERE branch = ?", [self.branch])
            digest = self.db.execute(
                "INSERT INTO milestone_digests (branch, base, head, state_json, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                [self.branch, self.base, state["head"], dumps(state), now()],
            ).lastrowid
            self._insert(int(digest), gens, rows)  # type: ignore[arg-type]

    def advance(
        self, state: dict[str, Any], gens: dict[str, int], drop: list[str], rows: list[FileRow]
    ) -> None:
        """The digest moved to a new tip: its state, its new commits, and the file
        rows of the paths that changed (`drop` the old ones first)."""
        with self.db.conn:
            digest = self._id()
            if digest is None:
                raise LookupError(f"no digest of {self.branch} since {self.base[:10]}")
            self.db.execute(
                "UPDATE milestone_digests SET head = ?, state_json = ?, updated_at = ?"
                " WHERE id = ?",
                [state["head"], dumps(state), now(), digest],
            )
            for chunk in _chunks(drop):
                marks = ", ".join("?" for _ in chunk)
                self.db.execute(
                    f"DELETE FROM milestone_files WHERE digest_id = ? AND path IN ({marks})",
                    [digest, *chunk],
                )
            self._insert(digest, gens, rows)

    def _insert(self, digest: int, gens: dict[str, int], rows: list[FileRow]) -> None:
        self.db.conn.executemany(
            "INSERT OR REPLACE INTO milestone_commits (digest_id, sha, gen) VALUES (?, ?, ?)",
            [(digest, sha, gen) for sha, gen in gens.items()],
        )
        self.db.conn.executemany(
            f"INSERT OR REPLACE INTO milestone_files (digest_id, {_COLUMNS}, churn)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(digest, *row, 0 if row[4] else row[2] + row[3]) for row in rows],
        )


def _row(row: tuple[Any, ...]) -> FileRow:
    path, shown, added, removed, binary, status, source = row
    return (path, shown, int(added), int(removed), bool(binary), status, source)


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + _BATCH] for i in range(0, len(items), _BATCH)]
