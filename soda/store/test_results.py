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


def for_commit(db: Database, commit: str) -> tuple[str, dict[str, Any]] | None:
    """summary and report of the newest test run on commit `commit`."""
    row = db.execute(
        "SELECT summary, report_json FROM test_results WHERE commit_sha = ?"
        " ORDER BY id DESC LIMIT 1",
        [commit],
    ).fetchone()
    return (row[0], json.loads(row[1])) if row else None


GateRow = tuple[int, str, int, int]
"""iteration number, the test summary, tests passed, tests failed."""


def gate_by_iteration(db: Database, limit: int) -> list[GateRow]:
    """For each of the last `limit` iterations, oldest first, the newest test run
    on the commit it ended at (its merge, else the milestone head it started
    from); iterations with no run on that commit are left out."""
    rows: list[GateRow] = db.execute(
        "SELECT i.number, t.summary, json_array_length(t.report_json, '$.passed'),"
        " json_array_length(t.report_json, '$.failed') FROM iterations i"
        " JOIN test_results t ON t.id = (SELECT id FROM test_results WHERE commit_sha ="
        "  COALESCE(i.merged_commit, json_extract(i.claims_json, '$.code.head'))"
        "  ORDER BY id DESC LIMIT 1)"
        " WHERE i.number > (SELECT COALESCE(MAX(number), 0) FROM iterations) - ?"
        " ORDER BY i.number",
        [limit],
    ).fetchall()
    return rows
