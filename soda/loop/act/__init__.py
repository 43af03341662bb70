"""ACT: run the plan's tasks, each in a worktree of its own, and land what passes the gate.

    baseline  the milestone tip's tests on a clean checkout (cached by tree id)
    execute   execute.execute_plan: the plan's batches, the tasks of a batch at
              the same time (`act.max_parallel_tasks`), the smart cascade
    task      task.PlanRun: per task, executor runs on a fresh worktree, a commit,
              then the merge (one task at a time), the retries; the executor
              is the built-in agent or a coding CLI (`cli`, `[executor]`)
    merge     merge.merge_task: catch up with the milestone, write the merge
              commit, test *that commit* on a clean checkout, gate against the
              tip, compare-and-swap the ref
    held      held.Held: a merge that needs a person, with `[approval] wait =
              "suspend"`, is held for a later iteration (its work kept); that
              iteration merges it once approved, or records the rejection

Agent commands and test runs execute in the jail (`soda.system.jail`). Work trees come
from the checkout pool (`soda.repo.checkouts`) and go back, their branches deleted,
whatever happened. Trace learns the result: a task closes only when its work
merged.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

from soda.contracts import IterationPlan, PlanTask
from soda.contracts.outcomes import (
    FAILURE_OUTCOMES,
    AttemptStatus,
    IterationOutcome,
    TaskEnd,
    TaskStatus,
)
from soda.errors import InputError, StructuralError
from soda.gate import import_failure, milestone_tests
from soda.gate.rules import GateResult, gate
from soda.gate.runner import TestReport
from soda.human.approval import (
    Verdict,
    await_approval,
    needs_approval,
    suspended_verdict,
    waiting_line,
)
from soda.loop.act.execute import ExecutionReport, TaskOutcome, execute_plan
from soda.loop.act.held import Held, rejected_outcomes
from soda.loop.act.merge import Deferred
from soda.loop.act.records import skipped_recorder
from soda.loop.act.task import PlanRun
from soda.loop.context import Iteration
from soda.loop.session import Session
from soda.repo.workspace import Workspace
from soda.store.approvals import Approval

__all__ = ["ActResult", "TaskOutcome", "act"]


@dataclass
class ActResult:
    outcome: IterationOutcome
    """merged (at least one task landed), no_changes, gate_failed,
    targets_failed, rejected, conflict, nothing_completed, or awaiting_approval
    (the plan suspended)."""
    detail: str
    merged_commit: str | None = None
    """The last merge that landed (the milestone tip after ACT)."""
    merged_commits: list[str] = field(default_factory=list)
    """Every merge that landed, one per task, in landing order."""
    baseline: str = ""
    after: str = ""
    tasks: list[dict[str, object]] = field(default_factory=list)
    failing: dict[str, str] = field(default_factory=dict)
    """Tests failing after a change that the gate held against it, with the
    first lines of each failure."""

    def to_json(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "detail": self.detail,
            "merged_commit": self.merged_commit,
            "merged_commits": self.merged_commits,
            "baseline": self.baseline,
            "after": self.after,
            "tasks": self.tasks,
            "failing": self.failing,
        }


def act(
    session: Session,
    it: Iteration,
    plan: IterationPlan,
    say: Callable[[str], None],
    waiting: Approval | None = None,
) -> ActResult:
    """Run the plan and land what passes the gate; the result says what happened.
    `waiting`: the plan (or the merges, kind merge) an earlier iteration
    suspended for approval."""
    it.events.emit("act.start", {"intent": plan.intent, "tasks": len(plan.tasks)})
    if waiting is not None or needs_approval(plan, session.config.approval.risk_threshold):
        verdict = _approve_plan(session, it, plan, say, waiting)
        if isinstance(verdict, Approval):  # suspended: the next iteration acts on the answer
            return ActResult(IterationOutcome.AWAITING_APPROVAL, waiting_line(verdict))
        if not verdict.approved and waiting is not None and waiting.kind == "merge":
            return _merges_rejected(session, it, waiting, verdict.reason)
        if not verdict.approved:
            return ActResult(IterationOutcome.REJECTED, verdict.reason)
        plan = verdict.plan or plan  # the plan as a person edited it (approve --edit)
    held = Held(session, it, waiting)  # approved merges to restore; merges held now
    session.jail.ensure_available()  # no jail, no agent commands (unless mode = none)
    baseline = milestone_tests(
        session.config, session.jail, session.db, session.checkouts, session.milestone.branch
    )
    it.events.emit("act.baseline", {"summary": baseline.summary()})
    _check_baseline(baseline, session)

    def ask_person(
        verdict: GateResult, ws: Workspace, task: PlanTask, summary: str
    ) -> GateResult | Deferred:
        return _ask_person(session, it, held, verdict, ws, task, summary, say)

    run = PlanRun(session, it, plan, baseline, ask_person, held)
    try:
        report = execute_plan(
            plan,
            run.run_task,
            run.cancelled,
            max_parallel=session.config.act.max_parallel_tasks,
            on_skip=skipped_recorder(session, it),
            stop=run.abort.set,
        )
    except BaseException as exc:
        first = run.first_error
        if first is not None and first is not exc:
            raise first from None  # e.g. the budget, not the other tasks' stop
        raise
    result = _result(report, baseline, run.landed)
    for outcome in report.merged:
        say(f"act: merged {outcome.task.id} ({outcome.task.title}) in {outcome.merged_commit}")
    _record_trace(session, report, it.id, held)
    if held.waiting is not None:  # a merge waits for a person: the next iteration acts
        merged = f"; merged {len(report.merged)} of {len(report.outcomes)} tasks"
        result.outcome = IterationOutcome.AWAITING_APPROVAL
        result.detail = waiting_line(held.waiting) + (merged if report.merged else "")
    return result


def _merges_rejected(session: Session, it: Iteration, waiting: Approval, reason: str) -> ActResult:
    """Merges an earlier iteration held, rejected (by a person or the deadline):
    each task recorded as a rejected merge, its kept work dropped."""
    report = ExecutionReport(rejected_outcomes(session, waiting, reason))
    _record_trace(session, report, it.id)
    return ActResult(IterationOutcome.REJECTED, reason, tasks=report.to_json())


def _result(report: ExecutionReport, baseline: TestReport, landed: list[str]) -> ActResult:
    """One result for the iteration: `merged` when any task landed, else the most
    telling failure; the per-task story is in `tasks`."""
    outcomes = report.outcomes
    merged = report.merged
    failed = [o for o in outcomes if o.status == TaskEnd.FAILED]
    last = next((o for o in reversed(outcomes) if o.after), None)
    failing: dict[str, str] = {}
    for o in failed:
        failing.update(o.failing)
    if merged:
        outcome = IterationOutcome.MERGED
        lines = [f"merged {len(merged)} of {len(outcomes)} tasks"]
    elif failed:
        kinds = {o.failure for o in failed}
        outcome = next(named for kind, named in FAILURE_OUTCOMES.items() if kind in kinds)
        lines = []
    elif report.completed:
        outcome, lines = IterationOutcome.NO_CHANGES, ["tasks finished without changing files"]
    else:
        outcome, lines = IterationOutcome.NOTHING_COMPLETED, ["no task finished"]
    lines += [f"{o.task.id}: {o.failure}: {o.reason}" for o in failed]
    if len(outcomes) > 1 or not (merged or failed):
        lines += [f"{o.task.id}: {o.status}: {o.reason}" for o in outcomes if _noted(o)]
    return ActResult(
        outcome,
        "; ".join(lines) if len(outcomes) != 1 else (outcomes[0].reason or lines[0]),
        merged_commit=landed[-1] if landed else None,
        merged_commits=list(landed),
        baseline=baseline.summary(),
        after=last.after if last else "",
        tasks=report.to_json(),
        failing=dict(sorted(failing.items())[:20]),
    )


def _noted(outcome: TaskOutcome) -> bool:
    return outcome.status in (TaskEnd.GAVE_UP, TaskEnd.SKIPPED, TaskEnd.CANCELLED, TaskEnd.WAITING)


def _check_baseline(baseline: TestReport, session: Session) -> None:
    """A baseline that cannot be judged makes every gate fail: structural, HALT
    with the reason instead of letting the executor work for nothing. When the
    tests could not import the project (or pytest, or a dependency), the reason
    names the module, the command and where it ran, and the fix."""
    failure = import_failure(baseline, session.config, session.jail, "on the milestone tip")
    if failure is not None:
        raise StructuralError(failure)
    if baseline.foreign_imports:
        verdict = gate(baseline, baseline)
        raise StructuralError(verdict.reason)
    if baseline.problem and not baseline.timed_out:
        tail = baseline.output.strip().splitlines()[-3:]
        raise StructuralError(
            f"the tests give no per-test report on the milestone tip ({baseline.problem}); "
            f"last output: {' | '.join(tail) or '(none)'}"
        )


def _approve_plan(
    session: Session,
    it: Iteration,
    plan: IterationPlan,
    say: Callable[[str], None],
    waiting: Approval | None,
) -> Verdict | Approval:
    """The person's verdict on the plan: waited for (`[approval] wait = "block"`),
    or taken if it is in, else the plan suspended (`"suspend"`, and always for a
    plan an earlier iteration suspended)."""
    if waiting is None and session.config.approval.wait == "block":
        return _wait_for_person(session, it, plan, say)
    return suspended_verdict(
        it.human, session.config, it.events, it.ref, plan, say, waiting, session.clock
    )


def _wait_for_person(
    session: Session, it: Iteration, subject: IterationPlan | str, say: Callable[[str], None]
) -> Verdict:
    return await_approval(
        it.human,
        session.config,
        it.events,
        it.number,
        subject,
        say,
        lambda: session.stop_requested,
        clock=session.clock,
    )


def _ask_person(
    session: Session,
    it: Iteration,
    held: Held,
    verdict: GateResult,
    ws: Workspace,
    task: PlanTask,
    summary: str,
    say: Callable[[str], None],
) -> GateResult | Deferred:
    """A change the gate may not merge on its own word waits for a person: in the
    approval queue (`[approval] wait = "block"`), or held for a later iteration
    (`"suspend"`). A held merge the person approved passes when the gate asks
    only about what they saw."""
    approved = held.pre_approved(verdict, ws)
    if approved is not None:
        return approved
    if session.config.approval.wait == "suspend":
        return held.hold(verdict, ws, task, summary, say)
    items = "\n".join(f"  - {item}" for item in verdict.approval[:20])
    answer = _wait_for_person(
        session, it, f"the merge needs a person: {verdict.reason}\n{items}", say
    )
    if answer.approved:
        return GateResult(True, f"{verdict.reason}; {answer.reason}")
    return GateResult(False, f"{verdict.reason}; {answer.reason}")


def _record_trace(
    session: Session, report: ExecutionReport, iteration_id: int, held: Held | None = None
) -> None:
    """Trace learns each task's end (skips were recorded as they happened)."""
    tracker = session.tracker
    for outcome in report.outcomes:
        task_id = outcome.task.task_id
        if task_id is None:
            continue
        if outcome.merged_commit:
            if tracker.show(task_id).status != TaskStatus.CLOSED:
                tracker.close(task_id, f"merged in {outcome.merged_commit[:10]}")
        elif outcome.status == TaskEnd.GAVE_UP:
            tracker.block(task_id, outcome.reason or "executor could not complete it")
        elif outcome.status == TaskEnd.FAILED and outcome.failure == AttemptStatus.CONFLICT:
            tracker.block(task_id, f"conflicts with the milestone: {outcome.reason}")
        elif outcome.status == TaskEnd.WAITING:
            awaited = "approval of its merge" if held and held.holds(outcome.task) else "an answer"
            text = f"waiting for {awaited}: {outcome.reason}"
            tracker.comment(task_id, "soda", text, iteration_id)
        elif outcome.status != TaskEnd.SKIPPED:
            what: str = outcome.failure or outcome.status
            if outcome.status == TaskEnd.COMPLETED:
                what = AttemptStatus.NO_CHANGES
            tracker.comment(
                task_id, "soda", f"work not merged: {what}: {outcome.reason}", iteration_id
            )
            _reopen(session, task_id)
        else:
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
    if session.tracker.show(task_id).status == TaskStatus.IN_PROGRESS:
        session.tracker.reopen(task_id, "back to open after an unmerged attempt")


def _safe(action: object) -> None:
    """Apply one executor suggestion to Trace; a bad task id is skipped, not fatal."""
    with contextlib.suppress(InputError):
        action()  # type: ignore[operator]
