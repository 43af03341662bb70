"""Trace: the task tracker soda keeps per milestone, in the state database.

Tasks form a tree under the milestone's root task (the spec). Status is one of
open, in_progress, blocked, closed; blocking and closing need a reason, and every
change refreshes `updated_at`. Comments carry their author: an agent's name,
`soda`, or `human`. The `Tracker` protocol (soda.ports) is the seam;
`SqliteTracker` the one implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sqlite_utils import Database

from soda.errors import InputError
from soda.store.db import now

Status = Literal["open", "in_progress", "blocked", "closed"]
STATUSES: tuple[str, ...] = ("open", "in_progress", "blocked", "closed")


@dataclass(frozen=True)
class Task:
    id: int
    milestone: str
    parent_id: int | None
    title: str
    description: str
    status: Status
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


class SqliteTracker:
    """Trace on the `tasks` and `task_comments` tables, scoped to one milestone."""

    def __init__(self, db: Database, milestone: str) -> None:
        self.db = db
        self.milestone = milestone

    # --- reading ---------------------------------------------------------------

    def show(self, task_id: int) -> Task:
        row = self.db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ? AND milestone = ?",
            [task_id, self.milestone],
        ).fetchone()
        if row is None:
            raise InputError(f"no task {task_id} in milestone {self.milestone}")
        return Task(*row)

    def list(self, status: str | None = None, limit: int | None = None) -> list[Task]:
        if status is not None and status not in STATUSES:
            raise InputError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        sql = f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ?"
        params: list[Any] = [self.milestone]
        if status:
            sql += " AND status = ?"
            params.append(status)
        sql += " ORDER BY id"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [Task(*row) for row in self.db.execute(sql, params)]

    def root(self) -> Task | None:
        row = self.db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ? AND parent_id IS NULL"
            " ORDER BY id LIMIT 1",
            [self.milestone],
        ).fetchone()
        return Task(*row) if row else None

    def ready(self) -> list[Task]:
        """Open tasks. The root (the whole spec) counts only while it has no unclosed
        children, since it is worked through them."""
        tasks = self.list()
        root = self.root()
        open_children = (
            any(t.parent_id == root.id and t.status != "closed" for t in tasks) if root else False
        )
        return [
            t
            for t in tasks
            if t.status == "open" and not (root and t.id == root.id and open_children)
        ]

    def comments(self, task_id: int, limit: int | None = None) -> list[Comment]:
        self.show(task_id)
        rows = self.db.execute(
            f"SELECT {_COMMENT_COLUMNS} FROM task_comments WHERE task_id = ? ORDER BY id"
            + (" LIMIT ?" if limit else ""),
            [task_id, limit] if limit else [task_id],
        )
        return [Comment(*row) for row in rows]

    def recent_comments(self, limit: int) -> list[Comment]:
        rows = self.db.execute(
            f"SELECT {', '.join('c.' + c for c in Comment.__dataclass_fields__)}"
            " FROM task_comments c JOIN tasks t ON t.id = c.task_id"
            " WHERE t.milestone = ? ORDER BY c.id DESC LIMIT ?",
            [self.milestone, limit],
        )
        return [Comment(*row) for row in rows]

    def recently_closed(self, limit: int) -> list[Task]:
        rows = self.db.execute(
            f"SELECT {_TASK_COLUMNS} FROM tasks WHERE milestone = ? AND status = 'closed'"
            " ORDER BY closed_at DESC, id DESC LIMIT ?",
            [self.milestone, limit],
        )
        return [Task(*row) for row in rows]

    # --- writing ---------------------------------------------------------------

    def create(
        self, title: str, description: str = "", parent_id: int | None = None, risk: str = "low"
    ) -> Task:
        if not title.strip():
            raise InputError("a task needs a title")
        if parent_id is not None:
            self.show(parent_id)
        stamp = now()
        with self.db.conn:
            task_id = (
                self.db["tasks"]
                .insert(
                    {
                        "milestone": self.milestone,
                        "parent_id": parent_id,
                        "title": title.strip(),
                        "description": description,
                        "status": "open",
                        "risk": risk,
                        "created_at": stamp,
                        "updated_at": stamp,
                    }
                )
                .last_pk
            )
        return self.show(int(task_id))

    def start(self, task_id: int) -> Task:
        return self._move(task_id, "in_progress", None, allowed=("open", "in_progress"))

    def close(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id, "closed", _reason(reason, "close"), allowed=("open", "in_progress", "blocked")
        )

    def block(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id, "blocked", _reason(reason, "block"), allowed=("open", "in_progress", "blocked")
        )

    def unblock(self, task_id: int) -> Task:
        return self._move(task_id, "open", None, allowed=("blocked",))

    def reopen(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id, "open", _reason(reason, "reopen"), allowed=("closed", "in_progress", "blocked")
        )

    def comment(
        self, task_id: int, author: str, body: str, iteration_id: int | None = None
    ) -> Comment:
        self.show(task_id)
        if not body.strip():
            raise InputError(f"an empty comment on task {task_id}")
        with self.db.conn:
            comment_id = (
                self.db["task_comments"]
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
            self.db.execute("UPDATE tasks SET updated_at = ? WHERE id = ?", [now(), task_id])
        row = self.db.execute(
            f"SELECT {_COMMENT_COLUMNS} FROM task_comments WHERE id = ?", [comment_id]
        ).fetchone()
        return Comment(*row)

    def _move(
        self, task_id: int, status: str, reason: str | None, allowed: tuple[str, ...]
    ) -> Task:
        task = self.show(task_id)
        if task.status not in allowed:
            raise InputError(f"task {task_id} is {task.status}; cannot make it {status}")
        stamp = now()
        with self.db.conn:
            self.db["tasks"].update(
                task_id,
                {
                    "status": status,
                    "status_reason": reason,
                    "updated_at": stamp,
                    "closed_at": stamp if status == "closed" else None,
                },
            )
        return self.show(task_id)


def _reason(reason: str, action: str) -> str:
    if not reason or not reason.strip():
        raise InputError(f"a reason is required to {action} a task")
    return reason.strip()


def render_tree(tasks: list[Task]) -> str:
    """Tasks as a plain-text tree; orphans (parent not listed) start at the top."""
    ids = {task.id for task in tasks}
    children: dict[int | None, list[Task]] = {}
    for task in tasks:
        parent = task.parent_id if task.parent_id in ids else None
        children.setdefault(parent, []).append(task)
    lines: list[str] = []

    def walk(parent: int | None, prefix: str) -> None:
        kids = children.get(parent, [])
        for index, task in enumerate(kids):
            last = index == len(kids) - 1
            branch = "" if parent is None else ("└── " if last else "├── ")
            lines.append(f"{prefix}{branch}{_line(task)}")
            extension = "" if parent is None else ("    " if last else "│   ")
            walk(task.id, prefix + extension)

    walk(None, "")
    return "\n".join(lines)


def _line(task: Task) -> str:
    text = f"#{task.id} [{task.status}] {task.title}"
    if task.status in ("blocked", "closed") and task.status_reason:
        text += f" — {task.status_reason}"
    return text
