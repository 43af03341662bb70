from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from soda.errors import DatabaseTooNew
from soda.store import Database, open_db
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


def _run(db: Database, branch: str = "soda/spec", pid: int | None = 1) -> int:
    from soda.store import runs

    return runs.start_run(
        db,
        {
            "spec_path": "specs/SPEC.md",
            "milestone": "spec",
            "milestone_branch": branch,
            "base_branch": "main",
            "base_commit": "abc",
            "provider": "scripted",
            "pid": pid,
        },
    )


def test_database_reports_its_migrations_and_journal_mode(tmp_path: Path) -> None:
    from soda.store.db import journal_mode, migration_count

    db = open_db(tmp_path / "soda.db")
    assert migration_count(db) == len(MIGRATIONS)
    assert journal_mode(db) == "wal"


def test_task_rows_are_scoped_to_their_milestone(tmp_path: Path) -> None:
    from soda.store import tasks

    db = open_db(tmp_path / "soda.db")
    root = tasks.insert(db, "spec", "the spec", "", None, "low")
    child = tasks.insert(db, "spec", "a step", "why", root, "high")
    other = tasks.insert(db, "other", "elsewhere", "", None, "low")
    assert tasks.get(db, "spec", other) is None
    assert tasks.root(db, "spec").id == root  # type: ignore[union-attr]
    assert [t.id for t in tasks.of_milestone(db, "spec")] == [root, child]
    tasks.set_status(db, child, "in_progress", None)
    assert tasks.in_progress(db) == [(child, "spec")]
    tasks.set_status(db, child, "closed", "done")
    closed = tasks.get(db, "spec", child)
    assert closed is not None and closed.closed_at and closed.status_reason == "done"
    assert [t.id for t in tasks.recently_closed(db, "spec", 5)] == [child]
    assert [t.id for t in tasks.of_milestone(db, "spec", "open")] == [root]
    first = tasks.add_comment(db, child, "soda", "one", None)
    tasks.add_comment(db, child, "human", "two", None)
    tasks.add_comment(db, other, "human", "not here", None)
    assert [c.body for c in tasks.comments(db, child)] == ["one", "two"]
    assert [c.body for c in tasks.comments(db, child, limit=1)] == ["one"]
    assert [c.body for c in tasks.recent_comments(db, "spec", 5)] == ["two", "one"]
    assert first.author == "soda" and first.task_id == child


def test_run_cost_sums_one_run(tmp_path: Path) -> None:
    from soda.llm.base import ModelResponse, Usage
    from soda.store import agent_calls

    db = open_db(tmp_path / "soda.db")
    run_id = _run(db)
    response = ModelResponse(
        model="m", text="", tool_calls=[], stop_reason="end_turn", usage=Usage(), raw={}
    )
    agent_calls.record(db, run_id, None, "orient", "scripted", 1, response, 0.25)
    agent_calls.record(db, run_id, None, "act", "scripted", 2, response, 0.5)
    agent_calls.record(db, None, None, "doctor", "scripted", 1, response, 1.0)
    assert agent_calls.run_cost(db, run_id) == 0.75
    assert agent_calls.run_cost(db, None) == 1.0
    assert agent_calls.run_cost(db, run_id + 1) == 0.0


def test_aborting_runs_ends_their_unfinished_iterations(tmp_path: Path) -> None:
    from soda.store import history, runs

    db = open_db(tmp_path / "soda.db")
    dead, alive = _run(db), _run(db)
    finished = runs.start_iteration(db, dead, 1)
    runs.save_iteration(db, finished, {"ended_at": "t", "decision": "CONTINUE"})
    runs.start_iteration(db, dead, 2)
    runs.start_iteration(db, alive, 3)
    assert runs.running(db) == [(dead, 1), (alive, 1)]
    assert runs.unfinished_iteration(db) == (3, "sense")
    assert runs.last_decision(db) == ("CONTINUE", None)
    assert runs.abort_runs(db, [dead], "process died") == [2]
    assert runs.running(db) == [(alive, 1)]
    second = history.iteration(db, 2)
    assert second is not None
    assert (second["outcome"], second["error"]) == ("aborted", "aborted in phase sense")
    assert history.iteration(db, 9) is None
    assert runs.milestone_branches(db) == ["soda/spec"]
    assert runs.iteration_on_branch(db, 2, "soda/other") is None
    found = runs.iteration_on_branch(db, 3, "soda/spec")
    assert found is not None and found[1] == alive and found[-1] == "spec"
    assert [r[0] for r in runs.recent_iterations(db, dead, 3, 5)] == [2, 1]
    assert [r[0] for r in history.latest_iterations(db, 2)] == [3, 2]


def test_pending_inputs_but_some_kinds(tmp_path: Path) -> None:
    from soda.store import human_inputs

    db = open_db(tmp_path / "soda.db")
    for kind in ("correction", "pause", "override"):
        human_inputs.record(db, kind, "{}", "cli", f"{kind}.json")
    rows = human_inputs.pending_except_kinds(db, ("pause", "resume"), 10)
    assert [r[1] for r in rows] == ["correction", "override"]
    assert len(human_inputs.pending_except_kinds(db, ("pause",), 1)) == 1


def test_learnings_keep_why_and_when_they_were_retired(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    columns = {row[1] for row in db.execute("PRAGMA table_info(learnings)")}
    assert {"active", "retired_reason", "retired_iteration_id", "retired_at"} <= columns
