"""A task's executor when it is a coding CLI (`soda.agent.backends`): the same
standing context as the built-in executor (`brief`), as one prompt; the run in
the jail behind the egress proxy; its ending as ACT's `Answer`.

What an ending means here: a spent budget ends the task as the built-in
executor's would (BudgetExhausted, the iteration ends `budget`); a provider that
kept failing is a transient failure; a cancel or stop is Interrupted; a CLI
that failed and left no change gave up (a failed attempt: smart retry); a CLI
that changed files goes to the gate with its final text as the summary, even
when it reported an error (the gate, not the CLI, says whether work lands).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any

from soda.agent.backends.run import run_cli
from soda.agent.definition import closing_line, first_message, load_agent
from soda.agent.turns import Answer
from soda.contracts import ExecuteResult, PlanTask
from soda.errors import TransientError
from soda.loop.context import Iteration
from soda.loop.session import Session
from soda.repo.workspace import Workspace

SUMMARY_CHARS = 2000


def cli_prompt(inputs: dict[str, Any]) -> str:
    """The brief for a CLI, then the built-in executor's first message without its
    closing line (which names tools the CLI does not have)."""
    agent = load_agent("executor", ExecuteResult)
    body = first_message(agent, inputs).text.removesuffix(closing_line(agent))
    brief = resources.files("soda.agent.backends").joinpath("brief.md").read_text("utf-8")
    return brief + body.rstrip() + "\n"


def cli_answer(
    session: Session,
    it: Iteration,
    backend: str,
    task: PlanTask,
    ws: Workspace,
    inputs: dict[str, Any],
    record: Any,
    should_stop: Callable[[], bool],
) -> Answer[ExecuteResult]:
    """Run `backend` on the task's worktree; its answer as the built-in executor's."""

    def emit(kind: str, data: dict[str, Any]) -> None:
        it.events.emit(kind, {"plan": it.number, "key": task.id, "task_id": task.task_id, **data})

    agent = f"executor:{backend}"
    record.event("agent.start", {"agent": agent, "tier": "cli", "model": backend})
    ending, turns = "error", 0
    try:
        outcome = run_cli(
            backend, session.config, session.jail, ws.path, cli_prompt(inputs), record, emit,
            should_stop,
        )  # fmt: skip
        ending, turns = ("gave_up" if outcome.failed else "answered"), outcome.calls
    finally:  # the live view's frame around the CLI's turns, as for any agent
        record.event("agent.end", {"agent": agent, "turns": turns, "outcome": ending})
    if outcome.budget is not None:
        raise outcome.budget
    if outcome.transient:
        raise TransientError(f"{backend} executor: {outcome.transient}")
    steps = len(outcome.transcript.steps)
    if outcome.failed and not _changed(ws):
        return Answer(output=None, gave_up=f"{backend}: {outcome.failed}", turns=steps)
    summary = outcome.summary or f"{task.title} (done by {backend}, which gave no summary)"
    if outcome.failed:
        summary += f"\n\n({backend} reported: {outcome.failed})"
    result = ExecuteResult(
        tasks_blocked=[], task_comments=[], new_subtasks=[], learnings=[],
        summary=summary[:SUMMARY_CHARS],
    )  # fmt: skip
    return Answer(output=result, gave_up=None, turns=steps)


def _changed(ws: Workspace) -> bool:
    """Whether the CLI left anything in the worktree."""
    return ws.head() != ws.fork_point or ws.dirty()
