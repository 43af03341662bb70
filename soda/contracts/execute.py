"""The executor's answer (contract `execute`), given through its `submit` tool."""

from __future__ import annotations

from soda.contracts.base import Contract


class BlockedTask(Contract):
    task_id: int
    """Id of a task of the plan (as the plan shows it, e.g. 4 for "#4") that cannot
    go on until something else happens."""
    reason: str
    """What stands in the way and what would clear it."""


class TaskComment(Contract):
    task_id: int
    """Id of the task the comment belongs to (usually your own task's id)."""
    comment: str
    """What was done or found."""


class NewSubtask(Contract):
    title: str
    """Short imperative title."""
    description: str
    """What to do."""
    parent_id: int
    """Id of the task it splits off from (usually your own task's id)."""


class ExecuteResult(Contract):
    """Executor output, given through the `submit` tool. Whether the work is done is
    not the executor's to say: the gate's test run decides the merge."""

    tasks_blocked: list[BlockedTask]
    """Other tasks of the plan your work shows cannot go on, with reasons (empty as a
    rule; to give up on your own task, call `cannot_complete` instead)."""
    task_comments: list[TaskComment]
    """Notes for Trace."""
    new_subtasks: list[NewSubtask]
    """Follow-up work discovered."""
    learnings: list[str]
    """Short facts worth remembering."""
    summary: str
    """What changed, in two or three sentences (used as the commit message body)."""
