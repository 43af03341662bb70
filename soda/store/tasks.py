"""The `tasks` and `task_comments` tables (Trace): every query about them, by name.

The rules (which status may follow which, reasons, scoping to a milestone's
tree) live in `soda.trace.SqliteTracker`; this module only reads and writes
rows. Reads are scoped to one milestone where a task id alone could name another
milestone's task.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from sqlite_utils import Database

from soda.contracts.outcomes import TaskStatus
from soda.store.db import last_pk, now


@dataclass(frozen=True)
class Task:
    id: int
    milestone: str
    parent_id: int | None
    title: str
    description: str
    status: TaskStatus
    status_reason: str | None
    risk: str
    created_at: str
    updated_at: str
    closed_at: str | None


@dataclass(frozen=True)
class Comment:
    id: int
    task_id: int
    author: str
    body: str
    iteration_id: int | None
    created_at: str


_TASK_COLUMNS = ", ".join(Task.__dataclass_fields__)
_COMMENT_COLUMNS = ", ".join(Comment.__dataclass_fields__)


def _task(row: tuple[Any, ...]) -> Task:
    """A `tasks` row (`_TASK_COLUMNS`, in order) with its status as the enum."""
    task = Task(*row)
    return replace(task, status=TaskStatus(task.status))


# --- tasks ---------------------------------------------------------------------


def get(db: Database, milestone: str, task_id: int) -> Task | None:
    """Task `task_id` if it belongs to `milestone`."""
    row = db.execute(
        f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ? AND milestone = ?",
        [task_id, milestone],
    ).fetchone()
    return _task(row) if row else None


def of_milestone(
    db: Database, milestone: str, status: TaskStatus | None = None, limit: int | None = None
) -> list[Task]:
    """The milestone's tasks in id order, optionally of one status, at most `limit`."""
    sql = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ?"
    params: list[Any] = [milestone]
    if status:
        sql += " AND status = ?"
        params.append(status)
    sql += " ORDER BY id"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    return [_task(row) for row in db.execute(sql, params)]


def root(db: Database, milestone: str) -> Task | None:
    """The milestone's first task without a parent: the spec itself."""
    row = db.execute(
        f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ? AND parent_id IS NULL"
        " ORDER BY id LIMIT 1",
        [milestone],
    ).fetchone()
    return _task(row) if row else None


def recently_closed(db: Database, milestone: str, limit: int) -> list[Task]:
    """The milestone's closed tasks, last closed first."""
    rows = db.execute(
        f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ? AND status = ?"
        " ORDER BY closed_at DESC, id DESC LIMIT ?",
        [milestone, TaskStatus.CLOSED, limit],
    )
    return [_task(row) for row in rows]


def unfinished_children(db: Database, milestone: str, parent_id: int | None) -> list[Task]:
    """The milestone's open and in-progress tasks under `parent_id` (top-level ones
    for None), in id order."""
    # By status, named: without statistics SQLite would rather walk every child
    # of the parent, closed ones included (the root's grow with every iteration).
    rows = db.execute(
        f"SELECT {_TASK_COLUMNS} FROM tasks INDEXED BY tasks_milestone_status"
        " WHERE milestone = ? AND parent_id IS ? AND status IN (?, ?) ORDER BY id",
        [milestone, parent_id, TaskStatus.OPEN, TaskStatus.IN_PROGRESS],
    )
    return [_task(row) for row in rows]


def in_progress(db: Database) -> list[tuple[int, str]]:
    """(id, milestone) of every in_progress task, whatever its milestone."""
    return db.execute(
        "SELECT id, milestone FROM tasks WHERE status = ?", [TaskStatus.IN_PROGRESS]
    ).fetchall()


def insert(
    db: Database,
    milestone: str,
    title: str,
    description: str,
    parent_id: int | None,
    risk: str,
    task_id: int | None = None,
) -> int:
    """Add an open task in its own transaction; returns its id. `task_id`: the
    id it must have (sqlite3.IntegrityError when another task has it)."""
    stamp = now()
    with db.conn:
        task_id = last_pk(
            db.table("tasks").insert(
                {
                    **({"id": task_id} if task_id is not None else {}),
                    "milestone": milestone,
                    "parent_id": parent_id,
                    "title": title,
                    "description": description,
                    "status": TaskStatus.OPEN,
                    "risk": risk,
                    "created_at": stamp,
                    "updated_at": stamp,
                }
            )
        )
    return task_id


def restore(db: Database, rows: list[Task]) -> None:
    """Recreate tasks with their own ids (a fleet run moved to another worker),
    in id order and one transaction; a parent that is not among them is dropped."""
    ids = {task.id for task in rows}
    with db.conn:
        for task in sorted(rows, key=lambda t: t.id):
            parent = task.parent_id if task.parent_id in ids else None
            db.table("tasks").insert(
                {
                    **{name: getattr(task, name) for name in Task.__dataclass_fields__},
                    "parent_id": parent,
                    "status": TaskStatus(task.status),
                }
            )


def set_status(db: Database, task_id: int, status: TaskStatus, reason: str | None) -> None:
    """Give a task a status and its reason; `closed_at` is set when closing and
    cleared otherwise."""
    stamp = now()
    with db.conn:
        db.table("tasks").update(
            task_id,
            {
                "status": status,
                "status_reason": reason,
                "updated_at": stamp,
                "closed_at": stamp if status == TaskStatus.CLOSED else None,
            },
        )


# --- comments ------------------------------------------------------------------


def comments(db: Database, task_id: int, limit: int | None = None) -> list[Comment]:
    """A task's comments, oldest first; all of them when `limit` is None or 0."""
    rows = db.execute(
        f"SELECT {_COMMENT_COLUMNS} FROM task_comments WHERE task_id = ? ORDER BY id"
        + (" LIMIT ?" if limit else ""),
        [task_id, limit] if limit else [task_id],
    )
    return [Comment(*row) for row in rows]


def recent_comments(db: Database, milestone: str, limit: int) -> list[Comment]:
    """Comments on any of the milestone's tasks, newest first. CROSS JOIN keeps
    the comments the outer loop: they are read newest first until `limit` match,
    not gathered from every task of the milestone and sorted."""
    rows = db.execute(
        f"SELECT {', '.join('c.' + c for c in Comment.__dataclass_fields__)}"
        " FROM task_comments c CROSS JOIN tasks t ON t.id = c.task_id"
        " WHERE t.milestone = ? ORDER BY c.id DESC LIMIT ?",
        [milestone, limit],
    )
    return [Comment(*row) for row in rows]


def add_comment(
    db: Database, task_id: int, author: str, body: str, iteration_id: int | None
) -> Comment:
    """Add a comment and refresh the task's `updated_at`, in one transaction."""
    with db.conn:
        comment_id = (
            db.table("task_comments")
            .insert(
                {
                    "task_id": task_id,
                    "author": author,
                    "body": body,
                    "iteration_id": iteration_id,
                    "created_at": now(),
                }
            )
            .last_pk
        )
        db.execute("UPDATE tasks SET updated_at = ? WHERE id = ?", [now(), task_id])
    row = db.execute(
        f"SELECT {_COMMENT_COLUMNS} FROM task_comments WHERE id = ?", [comment_id]
    ).fetchone()
    return Comment(*row)


def version(db: Database, milestone: str) -> int:
    """A number that changes whenever one of the milestone's tasks is added,
    removed or changes status (triggers keep it): one row read instead of every
    task, for the wake fingerprint."""
    row = db.execute(
        "SELECT version FROM task_versions WHERE milestone = ?", [milestone]
    ).fetchone()
    return int(row[0]) if row else 0


def exists(db: Database, milestone: str, task_id: int) -> bool:
    """Whether the milestone has a task `task_id`."""
    row = db.execute(
        "SELECT 1 FROM tasks WHERE id = ? AND milestone = ?", [task_id, milestone]
    ).fetchone()
    return row is not None


class TaskIds:
    """The milestone's task ids as a container: `id in ids` is one indexed lookup,
    so checking a plan's few task ids does not read every task ever made."""

    def __init__(self, db: Database, milestone: str) -> None:
        self.db = db
        self.milestone = milestone

    def __contains__(self, task_id: object) -> bool:
        return isinstance(task_id, int) and exists(self.db, self.milestone, task_id)
