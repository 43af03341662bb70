"""The executor's answer (contract `execute`), given through its `submit` tool."""

from __future__ import annotations

from soda.contracts.base import Contract


class BlockedTask(Contract):
    task_id: int
    """Trace task that could not be finished."""
    reason: str
    """What stands in the way and what would clear it."""


class TaskComment(Contract):
    task_id: int
    """Trace task the comment belongs to."""
    comment: str
    """What was done or found."""


class NewSubtask(Contract):
    title: str
    """Short imperative title."""
    description: str
    """What to do."""
    parent_id: int
    """The Trace task it splits off from."""


class ExecuteResult(Contract):
    """Executor output, given through the `submit` tool."""

    tasks_completed: list[int]
    """Trace task ids finished, with tests passing."""
    tasks_blocked: list[BlockedTask]
    """Tasks that could not be finished, with reasons."""
    task_comments: list[TaskComment]
    """Notes for Trace."""
    new_subtasks: list[NewSubtask]
    """Follow-up work discovered."""
    learnings: list[str]
    """Short facts worth remembering."""
    summary: str
    """What changed, in two or three sentences (used as the commit message body)."""
