"""Trace on a real SQLite file: every operation, its errors, and the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from soda.errors import InputError
from soda.store import open_db
from soda.trace import SqliteTracker, render_tree


@pytest.fixture
def tracker(tmp_path: Path) -> SqliteTracker:
    return SqliteTracker(open_db(tmp_path / "soda.db"), "calc")


def test_create_show_and_list(tracker: SqliteTracker) -> None:
    root = tracker.create("Spec", "the whole spec")
    child = tracker.create("Parser", parent_id=root.id, risk="medium")
    assert tracker.show(child.id).parent_id == root.id
    assert tracker.show(child.id).risk == "medium"
    assert [t.id for t in tracker.list()] == [root.id, child.id]
    assert tracker.root() == tracker.show(root.id)
    assert tracker.list("open") == tracker.list()
    assert tracker.list("closed") == []


def test_lifecycle_and_reasons(tracker: SqliteTracker) -> None:
    task = tracker.create("Parser")
    assert tracker.start(task.id).status == "in_progress"
    blocked = tracker.block(task.id, "needs the grammar")
    assert (blocked.status, blocked.status_reason) == ("blocked", "needs the grammar")
    assert tracker.unblock(task.id).status == "open"
    closed = tracker.close(task.id, "merged in abc")
    assert closed.closed_at is not None and closed.status_reason == "merged in abc"
    reopened = tracker.reopen(task.id, "regressed")
    assert reopened.status == "open" and reopened.closed_at is None


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda t, i: t.close(i, ""), "a reason is required to close"),
        (lambda t, i: t.block(i, "  "), "a reason is required to block"),
        (lambda t, i: t.unblock(i), "is open; cannot make it open"),
        (lambda t, i: t.show(999), "no task 999 in milestone calc"),
        (lambda t, i: t.create("x", parent_id=999), "no task 999"),
        (lambda t, i: t.create("  "), "needs a title"),
        (lambda t, i: t.comment(i, "human", ""), "empty comment"),
        (lambda t, i: t.list("done"), "unknown status 'done'"),
    ],
)
def test_invalid_operations_say_why(tracker: SqliteTracker, action, message: str) -> None:
    task = tracker.create("Parser")
    with pytest.raises(InputError, match=message):
        action(tracker, task.id)


def test_closing_twice_is_refused(tracker: SqliteTracker) -> None:
    task = tracker.create("Parser")
    tracker.close(task.id, "done")
    with pytest.raises(InputError, match="is closed"):
        tracker.close(task.id, "again")


def test_milestones_are_isolated(tmp_path: Path) -> None:
    db = open_db(tmp_path / "soda.db")
    a, b = SqliteTracker(db, "a"), SqliteTracker(db, "b")
    task = a.create("only in a")
    assert b.list() == [] and b.root() is None
    with pytest.raises(InputError, match="no task 1 in milestone b"):
        b.show(task.id)
    with pytest.raises(InputError):
        b.create("child", parent_id=task.id)


def test_ready_skips_a_root_with_open_children(tracker: SqliteTracker) -> None:
    root = tracker.create("Spec")
    assert [t.id for t in tracker.ready()] == [root.id]
    one = tracker.create("one", parent_id=root.id)
    two = tracker.create("two", parent_id=root.id)
    tracker.block(two.id, "waiting")
    assert [t.id for t in tracker.ready()] == [one.id]
    tracker.close(one.id, "done")
    tracker.close(two.id, "done")
    assert [t.id for t in tracker.ready()] == [root.id]


def test_comments_keep_author_and_order(tracker: SqliteTracker) -> None:
    task = tracker.create("Parser")
    other = tracker.create("Lexer")
    tracker.comment(task.id, "verifier", "first", iteration_id=None)
    tracker.comment(other.id, "human", "elsewhere")
    tracker.comment(task.id, "human", "second")
    assert [(c.author, c.body) for c in tracker.comments(task.id)] == [
        ("verifier", "first"),
        ("human", "second"),
    ]
    assert [c.body for c in tracker.recent_comments(2)] == ["second", "elsewhere"]


def test_recently_closed_is_newest_first(tracker: SqliteTracker) -> None:
    ids = [tracker.create(f"t{n}").id for n in range(3)]
    for task_id in ids:
        tracker.close(task_id, "done")
    assert [t.id for t in tracker.recently_closed(2)] == [ids[2], ids[1]]


def test_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "soda.db"
    first = SqliteTracker(open_db(path), "calc")
    task = first.create("Parser")
    first.comment(task.id, "human", "use a table")
    second = SqliteTracker(open_db(path), "calc")
    assert second.show(task.id).title == "Parser"
    assert second.comments(task.id)[0].body == "use a table"


def test_render_tree(tracker: SqliteTracker) -> None:
    root = tracker.create("Spec")
    a = tracker.create("Parser", parent_id=root.id)
    tracker.create("Tokens", parent_id=a.id)
    b = tracker.create("Printer", parent_id=root.id)
    tracker.block(b.id, "needs a format")
    c = tracker.create("Docs", parent_id=a.id)
    tracker.close(c.id, "written")
    assert render_tree(tracker.list()) == "\n".join(
        [
            "#1 [open] Spec",
            "├── #2 [open] Parser",
            "│   ├── #3 [open] Tokens",
            "│   └── #5 [closed] Docs — written",
            "└── #4 [blocked] Printer — needs a format",
        ]
    )
    assert render_tree(tracker.list("blocked")) == "#4 [blocked] Printer — needs a format"
