"""Trace: the task tracker soda keeps per milestone, in the state database.

Tasks form a tree under the milestone's root task (the spec). Status is a
`TaskStatus` (open, in_progress, blocked, closed); blocking and closing need a
reason, and every change refreshes `updated_at`. Comments carry their author: an
agent's name, `soda`, or `human`. `Tracker` is the seam everyone else is typed
against; `SqliteTracker` its one implementation (the Trace of a future forge,
e.g. a project's issue tracker, would be a second).

May import: config, contracts, errors, store.
"""

from __future__ import annotations

from typing import Protocol

from sqlite_utils import Database

from soda.contracts.outcomes import TaskStatus
from soda.errors import InputError
from soda.store import tasks as task_rows
from soda.store.tasks import Comment, Task

__all__ = [
    "STATUSES",
    "Comment",
    "SqliteTracker",
    "Task",
    "TaskStatus",
    "Tracker",
    "render_tree",
    "same_title",
]

STATUSES: tuple[TaskStatus, ...] = tuple(TaskStatus)


TaskList = list[Task]
CommentList = list[Comment]
"""Aliases for annotations inside the tracker classes, whose `list` method
would otherwise shadow the builtin there."""


class Tracker(Protocol):
    """Trace: the task tree of one milestone, as the loop and the human queue use it."""

    def show(self, task_id: int) -> Task: ...
    def list(self, status: str | None = None, limit: int | None = None) -> TaskList: ...
    def root(self) -> Task | None: ...
    def ready(self) -> TaskList: ...
    def comments(self, task_id: int, limit: int | None = None) -> CommentList: ...
    def recent_comments(self, limit: int) -> CommentList: ...
    def recently_closed(self, limit: int) -> TaskList: ...
    def create(
        self,
        title: str,
        description: str = "",
        parent_id: int | None = None,
        risk: str = "low",
        author: str = "soda",
        iteration_id: int | None = None,
    ) -> Task:
        """A new task, or the open one under the same parent with the same title."""
        ...

    def start(self, task_id: int) -> Task: ...
    def close(self, task_id: int, reason: str) -> Task: ...
    def block(self, task_id: int, reason: str) -> Task: ...
    def unblock(self, task_id: int) -> Task: ...
    def reopen(self, task_id: int, reason: str) -> Task: ...
    def comment(
        self, task_id: int, author: str, body: str, iteration_id: int | None = None
    ) -> Comment: ...


class SqliteTracker:
    """Trace on the `tasks` and `task_comments` tables, scoped to one milestone."""

    def __init__(self, db: Database, milestone: str) -> None:
        self.db = db
        self.milestone = milestone

    # --- reading ---------------------------------------------------------------

    def show(self, task_id: int) -> Task:
        task = task_rows.get(self.db, self.milestone, task_id)
        if task is None:
            raise InputError(f"no task {task_id} in milestone {self.milestone}")
        return task

    def list(self, status: str | None = None, limit: int | None = None) -> TaskList:
        if status is not None and status not in STATUSES:
            raise InputError(f"unknown status {status!r}; use one of {', '.join(STATUSES)}")
        wanted = TaskStatus(status) if status else None
        return task_rows.of_milestone(self.db, self.milestone, wanted, limit)

    def root(self) -> Task | None:
        return task_rows.root(self.db, self.milestone)

    def ready(self) -> TaskList:
        """Open tasks. The root (the whole spec) counts only while it has no unclosed
        children, since it is worked through them."""
        tasks = self.list()
        root = self.root()
        open_children = (
            any(t.parent_id == root.id and t.status != TaskStatus.CLOSED for t in tasks)
            if root
            else False
        )
        return [
            t
            for t in tasks
            if t.status == TaskStatus.OPEN and not (root and t.id == root.id and open_children)
        ]

    def comments(self, task_id: int, limit: int | None = None) -> CommentList:
        self.show(task_id)
        return task_rows.comments(self.db, task_id, limit)

    def recent_comments(self, limit: int) -> CommentList:
        return task_rows.recent_comments(self.db, self.milestone, limit)

    def recently_closed(self, limit: int) -> TaskList:
        return task_rows.recently_closed(self.db, self.milestone, limit)

    # --- writing ---------------------------------------------------------------

    def create(
        self,
        title: str,
        description: str = "",
        parent_id: int | None = None,
        risk: str = "low",
        author: str = "soda",
        iteration_id: int | None = None,
    ) -> Task:
        """A new open task; or, when an open or in-progress task under the same
        parent has the same title (see `same_title`), that task, with the new
        description added as `author`'s comment: a task is never duplicated,
        whichever agent asked for it."""
        if not title.strip():
            raise InputError("a task needs a title")
        if parent_id is not None:
            self.show(parent_id)
        # One block: ACT's task threads share the connection, and the block keeps
        # another thread from creating the same task between the check and the insert.
        with self.db.conn:
            twin = self.twin(title, parent_id)
            if twin is not None:
                body = f"merged a new task with the same title: {description.strip() or title}"
                task_rows.add_comment(self.db, twin.id, author, body, iteration_id)
                return self.show(twin.id)
            task_id = task_rows.insert(
                self.db, self.milestone, title.strip(), description, parent_id, risk
            )
        return self.show(task_id)

    def twin(self, title: str, parent_id: int | None) -> Task | None:
        """The first open or in-progress task under `parent_id` titled like `title`."""
        wanted = same_title(title)
        siblings = task_rows.unfinished_children(self.db, self.milestone, parent_id)
        return next((t for t in siblings if same_title(t.title) == wanted), None)

    def start(self, task_id: int) -> Task:
        return self._move(
            task_id, TaskStatus.IN_PROGRESS, None, allowed=(TaskStatus.OPEN, TaskStatus.IN_PROGRESS)
        )

    def close(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id,
            TaskStatus.CLOSED,
            _reason(reason, "close"),
            allowed=(TaskStatus.OPEN, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED),
        )

    def block(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id,
            TaskStatus.BLOCKED,
            _reason(reason, "block"),
            allowed=(TaskStatus.OPEN, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED),
        )

    def unblock(self, task_id: int) -> Task:
        return self._move(task_id, TaskStatus.OPEN, None, allowed=(TaskStatus.BLOCKED,))

    def reopen(self, task_id: int, reason: str) -> Task:
        return self._move(
            task_id,
            TaskStatus.OPEN,
            _reason(reason, "reopen"),
            allowed=(TaskStatus.CLOSED, TaskStatus.IN_PROGRESS, TaskStatus.BLOCKED),
        )

    def comment(
        self, task_id: int, author: str, body: str, iteration_id: int | None = None
    ) -> Comment:
        self.show(task_id)
        if not body.strip():
            raise InputError(f"an empty comment on task {task_id}")
        return task_rows.add_comment(self.db, task_id, author, body, iteration_id)

    def _move(
        self, task_id: int, status: TaskStatus, reason: str | None, allowed: tuple[TaskStatus, ...]
    ) -> Task:
        task = self.show(task_id)
        if task.status not in allowed:
            raise InputError(f"task {task_id} is {task.status}; cannot make it {status}")
        task_rows.set_status(self.db, task_id, status, reason)
        return self.show(task_id)


def same_title(title: str) -> str:
    """A title reduced to what makes two titles the same task: case folded,
    punctuation dropped, whitespace collapsed ("Add  divide()." ~ "add divide")."""
    kept = "".join(c for c in title.casefold() if c.isalnum() or c.isspace())
    return " ".join(kept.split())


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
    if task.status in (TaskStatus.BLOCKED, TaskStatus.CLOSED) and task.status_reason:
        text += f" — {task.status_reason}"
    return text
