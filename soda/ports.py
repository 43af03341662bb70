"""The seams soda depends on, declared in one place.

Each port has one real implementation and, where tests need one, a fake:

    port        real implementation                 fakes in tests
    Model       soda.llm (anthropic, openai, scripted)  scripted scripts; tests/fakes.FunctionModel;
                                                     local Messages/chat servers (tests/fakeapi.py)
    Tracker     soda.trace.SqliteTracker             (real SQLite in a temp dir)
    HumanQueue  soda.human.HumanQueue                (real files in a temp inbox)
    Store       sqlite_utils.Database + soda.store   (real SQLite in a temp dir)
    Clock       soda.system.clock.SystemClock               tests/fakes.FakeClock
    Workspace   soda.repo.workspace.Workspace         (real git worktrees)

Everything else soda touches (git, the jail, the filesystem) is real in tests
too; the model is the only thing faked at its boundary.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import sqlite3

    from soda.human import QueuedInput
    from soda.llm.base import ModelRequest, ModelResponse
    from soda.trace import Comment, Task


class Model(Protocol):
    """A model provider."""

    provider: str

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request. Raises TransientError once retries are spent,
        CredentialsError on a refused key, StructuralError on anything else."""
        ...


class Tracker(Protocol):
    """Trace: the task tree of one milestone."""

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

    def show(self, task_id: int) -> Task: ...
    def list(self, status: str | None = None, limit: int | None = None) -> list[Task]: ...
    def ready(self) -> list[Task]: ...
    def root(self) -> Task | None: ...
    def start(self, task_id: int) -> Task: ...
    def close(self, task_id: int, reason: str) -> Task: ...
    def block(self, task_id: int, reason: str) -> Task: ...
    def unblock(self, task_id: int) -> Task: ...
    def reopen(self, task_id: int, reason: str) -> Task: ...
    def comment(
        self, task_id: int, author: str, body: str, iteration_id: int | None = None
    ) -> Comment: ...
    def comments(self, task_id: int, limit: int | None = None) -> list[Comment]: ...


class HumanQueue(Protocol):
    """The person's inputs: files in state/inbox/ -> validated rows -> routed -> applied."""

    def ingest(self, settle_seconds: float = ...) -> Any: ...
    def pending(self) -> list[QueuedInput]: ...
    def claim(self, ids: list[int], iteration: int) -> None: ...
    def mark_applied(self, ids: list[int], iteration: int, response: str) -> None: ...
    def release_claims(self) -> int: ...
    def take_cancel(self, iteration: int) -> bool: ...
    def apply_at_sense(
        self,
        tracker: Tracker,
        spec_path: Path,
        store_learnings: Callable[[list[str], str, int | None], None],
        iteration: int,
    ) -> list[str]: ...


class Store(Protocol):
    """What soda needs of the database handle; the queries live in soda.store."""

    conn: sqlite3.Connection

    def execute(self, sql: str, parameters: Iterable[Any] | None = None) -> sqlite3.Cursor: ...
    def __getitem__(self, table_name: str) -> Any: ...


class Clock(Protocol):
    def now(self) -> str:
        """ISO-8601 UTC."""
        ...

    def monotonic(self) -> float: ...
    def sleep(self, seconds: float) -> None: ...


class Workspace(Protocol):
    """A task's worktree on its own branch from the milestone head."""

    path: Path
    branch: str
    fork_point: str

    def head(self) -> str: ...
    def commit_all(self, message: str) -> str | None: ...
    def reset_to(self, commit: str) -> None: ...
    def catch_up(self) -> bool: ...
