"""ACT: set up a worktree, run the executor over the plan, gate and merge.

    setup     workspace.create_workspace + a baseline test run
    execute   execute.execute_plan, one executor run per task, a commit per task
    finalize  catch up with the milestone, re-run tests, gate, merge --no-ff

The worktree is removed in a `finally`, whatever happened. Trace learns the
result: completed tasks close only when their work merged.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from soda import inbox
from soda.act.execute import ExecutionReport, TaskOutcome, execute_plan
from soda.act.tests import TestReport, gate, run_tests
from soda.act.workspace import Workspace, create_workspace, delete_branch, merge_into_milestone
from soda.contracts import ExecuteResult, IterationPlan, PlanTask
from soda.errors import InputError
from soda.runtime import load_agent
from soda.session import Session
from soda.tools import worktree_tools
from soda.tools.sandbox import Sandbox


@dataclass
class ActResult:
    outcome: str
    """merged, no_changes, gate_failed, conflict, or nothing_completed."""
    detail: str
    merged_commit: str | None = None
    baseline: str = ""
    after: str = ""
    tasks: list[dict[str, object]] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "merged_commit": self.merged_commit,
            "baseline": self.baseline,
            "after": self.after,
            "tasks": self.tasks,
        }


def act(session: Session, plan: IterationPlan, number: int, iteration_id: int) -> ActResult:
    worktrees = session.config.state_dir / "worktrees"
    session.cancel_requested = False
    ws = create_workspace(session.repo, worktrees, session.milestone.branch, f"iter-{number}")
    session.events.emit("act.workspace", {"path": str(ws.path), "branch": ws.branch})
    try:
        baseline = run_tests(session.config, ws.path)
        session.events.emit("act.baseline", {"summary": baseline.summary()})
        report = execute_plan(
            plan,
            lambda task, missing: _run_task(session, ws, plan, task, missing, baseline),
            lambda: _cancelled(session, number),
        )
        result = _finalize(session, ws, plan, report, baseline, number)
        _record_trace(session, report, result, iteration_id)
        return result
    finally:
        ws.remove()
        if session.repo.git.branch("--list", ws.branch) and _merged_or_empty(session, ws):
            delete_branch(session.repo, ws.branch)


def _cancelled(session: Session, number: int) -> bool:
    """Checked before each task: a signal, or a `cancel` that arrived meanwhile."""
    if session.cancel_requested or session.stop_requested:
        return True
    inbox.ingest(session.config.state_dir, session.db, session.events)
    for item in inbox.pending(session.db):
        if item.kind == "cancel":
            inbox.mark_applied(session.db, [item.id], number, "cancelled the running plan")
            session.events.emit("act.cancelled", {"input": item.id})
            session.cancel_requested = True
    return session.cancel_requested


def _merged_or_empty(session: Session, ws: Workspace) -> bool:
    milestone = session.repo.git.rev_parse(session.milestone.branch)
    return bool(
        session.repo.git.merge_base("--is-ancestor", ws.branch, milestone, with_exceptions=False)
        == ""
    )


def _run_task(
    session: Session,
    ws: Workspace,
    plan: IterationPlan,
    task: PlanTask,
    missing: list[str],
    baseline: TestReport,
) -> TaskOutcome:
    before = ws.head()
    sandbox = Sandbox(ws.path)  # outside the worktree (state/ included) is out of reach
    tools = worktree_tools(
        sandbox, session.config.act.command_timeout, session.config.act.output_limit
    )
    task_input = task.model_dump(mode="json")
    if missing:
        task_input["note"] = f"dependencies {missing} did not finish; work with what exists"
    learnings = [
        row[0]
        for row in session.db.execute(
            "SELECT text FROM learnings WHERE active = 1 ORDER BY id DESC LIMIT 20"
        )
    ]
    session.events.emit(
        "act.task.start", {"key": task.id, "task_id": task.task_id, "title": task.title}
    )
    if task.task_id is not None:
        session.tracker.start(task.task_id)
    answer = session.runner.run(
        load_agent("executor"),
        {
            "spec": session.spec_text(),
            "task": task_input,
            "plan": plan,
            "learnings": learnings or "(none yet)",
            "baseline": f"{baseline.summary()}\n\n{baseline.output[-3000:]}",
        },
        tools,
    )
    if answer.output is None:
        ws.reset_to(before)
        session.events.emit("act.task.gave_up", {"key": task.id, "reason": answer.gave_up})
        return TaskOutcome(task, "gave_up", reason=answer.gave_up or "")
    result = answer.output
    assert isinstance(result, ExecuteResult)
    commit = ws.commit_all(f"{task.title}\n\n{result.summary}\n\nSoda-Task: {task.task_id}")
    session.events.emit("act.task.done", {"key": task.id, "commit": commit})
    return TaskOutcome(task, "completed", result=result, commit=commit)


def _finalize(
    session: Session,
    ws: Workspace,
    plan: IterationPlan,
    report: ExecutionReport,
    baseline: TestReport,
    number: int,
) -> ActResult:
    tasks = report.to_json()
    if not report.completed:
        return ActResult(
            "nothing_completed", "no task finished", baseline=baseline.summary(), tasks=tasks
        )
    if ws.head() == ws.fork_point:
        return ActResult(
            "no_changes",
            "tasks finished without changing files",
            baseline=baseline.summary(),
            tasks=tasks,
        )
    if not ws.catch_up():
        return ActResult(
            "conflict",
            f"merging {session.milestone.branch} into {ws.branch} conflicted; merge aborted",
            baseline=baseline.summary(),
            tasks=tasks,
        )
    after = run_tests(session.config, ws.path)
    verdict = gate(baseline, after)
    session.events.emit("act.gate", {"ok": verdict.ok, "reason": verdict.reason})
    if not verdict.ok:
        return ActResult(
            "gate_failed",
            verdict.reason,
            baseline=baseline.summary(),
            after=after.summary(),
            tasks=tasks,
        )
    summaries = "\n".join(f"- {o.task.title}" for o in report.completed)
    message = (
        f"soda: {plan.intent}\n\n{summaries}\n\n"
        f"Soda-Iteration: {number}\nSoda-Run: {session.run_id}\n"
    )
    commit = merge_into_milestone(ws, message)
    session.events.emit("act.merged", {"commit": commit, "branch": session.milestone.branch})
    return ActResult(
        "merged",
        verdict.reason,
        merged_commit=commit,
        baseline=baseline.summary(),
        after=after.summary(),
        tasks=tasks,
    )


def _record_trace(
    session: Session, report: ExecutionReport, result: ActResult, iteration_id: int
) -> None:
    tracker = session.tracker
    merged = result.outcome == "merged"
    for outcome in report.outcomes:
        task_id = outcome.task.task_id
        if task_id is None:
            continue
        if outcome.status == "completed" and merged:
            if tracker.show(task_id).status != "closed":
                tracker.close(
                    task_id,
                    f"merged in {result.merged_commit[:10] if result.merged_commit else ''}",
                )
        elif outcome.status == "completed":
            tracker.comment(
                task_id, "soda", f"work not merged: {result.outcome}: {result.detail}", iteration_id
            )
            _reopen(session, task_id)
        elif outcome.status == "gave_up":
            tracker.block(task_id, outcome.reason or "executor could not complete it")
        else:
            tracker.comment(task_id, "soda", f"skipped: {outcome.reason}", iteration_id)
            _reopen(session, task_id)
        if outcome.result is None:
            continue
        for blocked in outcome.result.tasks_blocked:
            if blocked.task_id != task_id:
                _safe(lambda b=blocked: tracker.block(b.task_id, b.reason))
        for comment in outcome.result.task_comments:
            _safe(lambda c=comment: tracker.comment(c.task_id, "executor", c.comment, iteration_id))
        for sub in outcome.result.new_subtasks:
            _safe(lambda s=sub: tracker.create(s.title, s.description, parent_id=s.parent_id))
        session.store_learnings(outcome.result.learnings, "executor", iteration_id)


def _reopen(session: Session, task_id: int) -> None:
    if session.tracker.show(task_id).status == "in_progress":
        session.tracker.reopen(task_id, "back to open after an unmerged attempt")


def _safe(action: object) -> None:
    """Apply one executor suggestion to Trace; a bad task id is skipped, not fatal."""
    with contextlib.suppress(InputError):
        action()  # type: ignore[operator]
