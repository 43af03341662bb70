"""The test-results cache: one row per (tree id, test setup).

`setup` fingerprints everything besides the tree that decides a run's result
(the test command, the report source, the jail's mode and network), so a
change of configuration is never answered from an old run.
"""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database

from soda.store.db import dumps, now


def cached(db: Database, tree: str, setup: str) -> dict[str, Any] | None:
    row = db.execute(
        "SELECT report_json FROM test_results WHERE tree = ? AND setup = ?", [tree, setup]
    ).fetchone()
    return json.loads(row[0]) if row else None


def store(
    db: Database, tree: str, setup: str, commit: str, summary: str, report: dict[str, Any]
) -> None:
    with db.conn:
        db.execute(
            "INSERT OR REPLACE INTO test_results"
            " (tree, setup, commit_sha, summary, report_json, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [tree, setup, commit, summary, dumps(report), now()],
        )


def latest_for_tree(db: Database, tree: str) -> tuple[str, dict[str, Any]] | None:
    """commit_sha and report of the newest run on `tree`, whatever its setup."""
    row = db.execute(
        "SELECT commit_sha, report_json FROM test_results WHERE tree = ? ORDER BY id DESC LIMIT 1",
        [tree],
    ).fetchone()
    return (row[0], json.loads(row[1])) if row else None
