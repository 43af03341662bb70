"""ACT: run the executor over the plan in a worktree, then gate and merge.

    baseline  the milestone tip's tests on a clean checkout (cached by tree id)
    execute   execute.execute_plan, one executor run per task, a commit per task
    finalize  catch up with the milestone, write the merge commit, test *that
              commit* on a clean checkout, gate, compare-and-swap the ref

Agent commands and test runs execute in the jail (`soda.jail`). The work tree
comes from the checkout pool (`soda.checkouts`) and is released, its branch
deleted, whatever happened. Trace learns the result: completed tasks close only
when their work merged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from soda.act.execute import ExecutionReport, TaskOutcome, execute_plan
from soda.agents import load_agent
from soda.context import Iteration, TaskScope
from soda.contracts import ExecuteResult, IterationPlan
from soda.errors import GitError, InputError, StructuralError
from soda.gate import milestone_tests, tested
from soda.gate.rules import GateResult, gate, infrastructure_changes
from soda.gate.runner import TestReport, report_kind
from soda.human.approval import Verdict, await_approval, needs_approval
from soda.session import Session
from soda.store import learnings
from soda.tools import worktree_tools
from soda.tools.sandbox import Sandbox
from soda.workspace import Workspace, land, prepare_merge


@dataclass
class ActResult:
    outcome: str
    """merged, no_changes, gate_failed, rejected, conflict, or nothing_completed."""
    detail: str
    merged_commit: str | None = None
    baseline: str = ""
    after: str = ""
    tasks: list[dict[str, object]] = field(default_factory=list)
    failing: dict[str, str] = field(default_factory=dict)
    """Tests failing after the change that the gate held against it, with the
    first lines of each failure."""

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "merged_commit": self.merged_commit,
            "baseline": self.baseline,
            "after": self.after,
            "tasks": self.tasks,
            "failing": self.failing,
        }


def act(
    session: Session, it: Iteration, plan: IterationPlan, say: Callable[[str], None]
) -> ActResult:
    """Run the plan and land what passes the gate; the result says what happened."""
    session.events.emit("act.start", {"intent": plan.intent, "tasks": len(plan.tasks)})
    if needs_approval(plan, session.config.approval.risk_threshold):
        verdict = _wait_for_person(session, it.number, plan, say)
        if not verdict.approved:
            return ActResult("rejected", verdict.reason)
        plan = verdict.plan or plan  # the plan as a person edited it (approve --edit)
    session.jail.ensure_available()  # no jail, no agent commands (unless mode = none)
    baseline = milestone_tests(session)
    session.events.emit("act.baseline", {"summary": baseline.summary()})
    _check_baseline(baseline)
    branch = f"soda-work/{session.milestone.name}/iter-{it.number}"
    ws = session.checkouts.work(session.milestone.branch, branch)
    session.events.emit("act.workspace", {"path": str(ws.path), "branch": ws.branch})
    try:
        report = execute_plan(
            plan,
            lambda task, missing: _run_task(
                session, plan, TaskScope(it, task, ws, baseline, missing)
            ),
            lambda: _cancelled(session, it),
        )
        result = _finalize(session, ws, plan, report, baseline, it.number, say)
        _record_trace(session, report, result, it.id)
        return result
    finally:
        session.checkouts.release(ws)


def _check_baseline(baseline: TestReport) -> None:
    """A baseline that cannot be judged makes every gate fail: structural, HALT
    with the reason instead of letting the executor work for nothing."""
    if baseline.foreign_imports:
        verdict = gate(baseline, baseline)
        raise StructuralError(verdict.reason)
    if baseline.problem and not baseline.timed_out:
        tail = baseline.output.strip().splitlines()[-3:]
        raise StructuralError(
            f"the tests give no per-test report on the milestone tip ({baseline.problem}); "
            f"last output: {' | '.join(tail) or '(none)'}"
        )


def _wait_for_person(
    session: Session, number: int, subject: IterationPlan | str, say: Callable[[str], None]
) -> Verdict:
    return await_approval(
        session.human,
        session.config,
        session.events,
        number,
        subject,
        say,
        lambda: session.stop_requested,
    )


def _cancelled(session: Session, it: Iteration) -> bool:
    """Checked before each task: a signal, or a `cancel` that arrived meanwhile."""
    if it.cancel_requested or session.stop_requested:
        return True
    if session.human.take_cancel(it.number):
        it.cancel_requested = True
    return it.cancel_requested


def _run_task(session: Session, plan: IterationPlan, scope: TaskScope) -> TaskOutcome:
    task, ws, baseline = scope.task, scope.workspace, scope.baseline
    before = ws.head()
    sandbox = Sandbox(ws.path)  # outside the worktree (state/ included) is out of reach
    tools = worktree_tools(
        sandbox,
        session.config.act.command_timeout,
        session.config.act.output_limit,
        jail=session.jail,
        repo_map_tokens=session.config.context.repo_map_tokens,
    )
    task_input = task.model_dump(mode="json")
    if scope.missing:
        task_input["note"] = f"dependencies {scope.missing} did not finish; work with what exists"
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
            "learnings": learnings.active(session.db) or "(none yet)",
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
    say: Callable[[str], None],
) -> ActResult:
    tasks = report.to_json()

    def ended(outcome: str, detail: str, after: TestReport | None = None) -> ActResult:
        failing = {}
        if after is not None:
            failing = {name: after.failures.get(name, "") for name in sorted(after.failed)[:20]}
        return ActResult(
            outcome,
            detail,
            baseline=baseline.summary(),
            after=after.summary() if after else "",
            tasks=tasks,
            failing=failing,
        )

    if not report.completed:
        return ended("nothing_completed", "no task finished")
    if ws.head() == ws.fork_point:
        return ended("no_changes", "tasks finished without changing files")
    branch = session.milestone.branch
    if not ws.catch_up():
        return ended("conflict", f"merging {branch} into {ws.branch} conflicted; merge aborted")
    summaries = "\n".join(f"- {o.task.title}" for o in report.completed)
    message = (
        f"soda: {plan.intent}\n\n{summaries}\n\n"
        f"Soda-Iteration: {number}\nSoda-Run: {session.run_id}\n"
    )
    candidate, milestone_head = prepare_merge(ws, message)
    # The exact commit that would land, tested on its own clean checkout.
    after, _ = tested(session.config, session.jail, session.db, session.checkouts, candidate)
    infrastructure = infrastructure_changes(
        session.repo, milestone_head, candidate, session.config.gate.protected
    )
    verdict = gate(
        baseline,
        after,
        mandatory=report_kind(session.config) != "exit-code",
        infrastructure=infrastructure,
    )
    session.events.emit(
        "act.gate",
        {"ok": verdict.ok, "reason": verdict.reason, "approval": list(verdict.approval)},
    )
    if not verdict.ok and verdict.approval:
        verdict = _ask_person(session, number, verdict, say)
        if not verdict.ok:
            return ended("rejected", verdict.reason, after)
    if not verdict.ok:
        return ended("gate_failed", verdict.reason, after)
    try:
        land(session.repo, branch, candidate, milestone_head)
    except GitError as exc:
        return ended("conflict", str(exc), after)
    session.events.emit("act.merged", {"commit": candidate, "branch": branch})
    result = ended("merged", verdict.reason, after)
    result.merged_commit = candidate
    return result


def _ask_person(
    session: Session, number: int, verdict: GateResult, say: Callable[[str], None]
) -> GateResult:
    """A change the gate may not merge on its own word waits in the approval queue."""
    items = "\n".join(f"  - {item}" for item in verdict.approval[:20])
    answer = _wait_for_person(
        session, number, f"the merge needs a person: {verdict.reason}\n{items}", say
    )
    if answer.approved:
        return GateResult(True, f"{verdict.reason}; {answer.reason}")
    return GateResult(False, f"{verdict.reason}; {answer.reason}")


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
