"""One task of the plan, from its first executor run to its merge or its end.

Each attempt takes a work tree of its own from the pool, forked from the
milestone tip as it is when the attempt starts, runs the executor there with
its standing context (`brief`), commits, and then waits for the merge lock to
gate and land its work (`merge`). A task whose merge an earlier iteration held
for a person, who approved it (`held`), takes its kept work back in its first
attempt and goes straight to the merge. The attempts of a task:

- **on a sibling's merge**: an attempt that conflicts with the milestone, or
  fails the gate, after another task of the plan merged since it forked runs
  once more from the new tip (a fresh executor run: a rebase could not know
  what the sibling's change means for this one). A conflict after that is final
  (the task becomes a blocker).
- **smart retry**: an attempt that gave up or failed the gate is tried again,
  up to `act.task_retries` times, with the description the retrier rewrote
  from the failure (`retry`).

Every retry is recorded (event `act.task.retried`, a Trace comment). Cancel
and stop reach a running attempt at its executor's next turn: each task's
runner checks them before every model call.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from soda.agent.backends.run import backend_for
from soda.agent.executors import Job, executor_for
from soda.agent.runtime import AgentRunner
from soda.contracts import ExecuteResult, IterationPlan, PlanTask
from soda.contracts.outcomes import RETRYABLE, AttemptStatus, TaskEnd, TaskStatus
from soda.errors import InputError, Interrupted
from soda.gate.runner import TestReport
from soda.loop.act.brief import executor_inputs, task_history
from soda.loop.act.execute import TaskOutcome
from soda.loop.act.held import Held
from soda.loop.act.merge import AskPerson, merge_task
from soda.loop.act.pristine import Watched
from soda.loop.act.records import LockedRecorder
from soda.loop.act.retry import Failure, advise, refusal_note
from soda.loop.asking import executor_ask_tools, take_resume
from soda.loop.context import Iteration
from soda.loop.session import Session
from soda.repo.workspace import Workspace
from soda.tools import worktree_tools
from soda.tools.sandbox import Sandbox
from soda.tools.toolbox import Suspended

SETTLED_TREE = (
    AttemptStatus.MERGED,
    AttemptStatus.GATE_FAILED,
    AttemptStatus.TARGETS_FAILED,
    AttemptStatus.REJECTED,
)
"""Attempts whose tree ends at a commit of its own (their catch-up merge, if any,
went through), so the pool may reuse it without a clean (see act.pristine)."""
CANCEL_CHECK_S = 1.0
"""Least seconds between two looks into the inbox for a `cancel` while tasks run."""
PREVIEW = 200
"""Characters of a summary or reason shown in an event."""


@dataclass
class Attempt:
    status: AttemptStatus
    reason: str
    result: ExecuteResult | None = None
    commit: str | None = None
    merged: str | None = None
    tip_moved: bool = False
    after: str = ""
    failing: dict[str, str] = field(default_factory=dict)
    diffstat: str = ""
    workspace: Workspace | None = None


class PlanRun:
    """What the tasks of one plan share: the merge lock, the tip's test report,
    the stop flag and the cancel check."""

    def __init__(
        self,
        session: Session,
        it: Iteration,
        plan: IterationPlan,
        baseline: TestReport,
        ask_person: AskPerson,
        held: Held | None = None,
    ) -> None:
        self.session = session
        self.it = it
        self.plan = plan
        self.baseline = baseline
        self.tip_report = baseline
        """The tests of the milestone tip: the baseline, then each landed merge's."""
        self.ask_person = ask_person
        self.held = held
        """Merges a person approved in an earlier iteration: their work is restored."""
        self.merge_lock = threading.Lock()
        self.landed: list[str] = []
        """The merge commits that landed, in landing order."""
        self.abort = threading.Event()
        """Set when a task raised (or this thread was interrupted): the others stop."""
        self.first_error: BaseException | None = None
        """What the first task to raise raised: the others were then stopped, and
        their `Interrupted` is not the story."""
        self._recorder = LockedRecorder(it.runner.record)
        self._cancel_lock = threading.Lock()
        self._cancel_checked = float("-inf")
        self._history: dict[str, str] = {}
        """Each task's Trace history as it was when the task started."""

    # --- stop and cancel ------------------------------------------------------

    def stopping(self) -> bool:
        """A signal, or another task's failure: every running task ends."""
        return self.session.stop_requested or self.abort.is_set()

    def cancelled(self) -> bool:
        """A person's `cancel` (or a stop): pending tasks are skipped, running ones
        end at their next turn. The inbox is read at most once a second."""
        if self.it.cancel_requested or self.stopping():
            return True
        with self._cancel_lock:
            if time.monotonic() - self._cancel_checked >= CANCEL_CHECK_S:
                self._cancel_checked = time.monotonic()
                if self.it.human.take_cancel(self.it.number):
                    self.it.cancel_requested = True
        return self.it.cancel_requested

    def runner(self) -> AgentRunner:
        """A runner of the task's own: the session's, checking cancel and stop."""
        runner = self.it.runner.recording_to(self._recorder)
        runner.should_stop = self.cancelled
        return runner

    # --- a task ---------------------------------------------------------------

    def run_task(self, task: PlanTask, missing: list[str]) -> TaskOutcome:
        try:
            return self._run(task, missing)
        except BaseException as exc:
            with self._cancel_lock:
                if self.first_error is None:
                    self.first_error = exc
            self.abort.set()
            raise

    def _run(self, task: PlanTask, missing: list[str]) -> TaskOutcome:
        session = self.session
        base_notes = []
        if missing:
            base_notes.append(
                f"dependencies {missing} did not finish: their work is not on the milestone; "
                "work with what exists"
            )
        self._emit("act.task.start", task, title=task.title, missing=missing)
        self._history[task.id] = task_history(session, task)  # before it moves
        if task.task_id is not None:
            _start(session, task.task_id)
        current, notes = task, list(base_notes)
        retries: list[str] = []
        sibling_retry, smart_left = True, session.config.act.task_retries
        while True:
            attempt = self._attempt(current, notes, len(retries) + 1)
            final = attempt.status not in RETRYABLE
            if final or self.it.cancel_requested or self.stopping():
                return self._ended(task, attempt, retries)
            if attempt.status != AttemptStatus.GAVE_UP and attempt.tip_moved and sibling_retry:
                sibling_retry = False
                why = (
                    f"{attempt.status} after another task of the plan merged; run again on the "
                    f"new milestone tip ({attempt.reason})"
                )
                notes = [*base_notes, f"A first attempt at this task failed: {why}."]
                self._retried(task, "sibling", why, len(retries) + 1, retries)
                continue
            if attempt.status == AttemptStatus.CONFLICT or smart_left <= 0:
                return self._ended(task, attempt, retries)
            failure = Failure(
                attempt.status,
                attempt.reason,
                attempt.failing,
                attempt.diffstat,
                attempt.result.summary if attempt.result else "",
            )
            advice = advise(self.runner(), current, failure)
            if advice is None:
                return self._ended(task, attempt, retries)
            smart_left -= 1
            current = current.model_copy(update={"description": advice.description})
            notes = [*base_notes, *refusal_note(attempt.status, attempt.reason, attempt.failing)]
            self._retried(task, "rewritten", advice.reason, len(retries) + 1, retries)

    def _attempt(self, task: PlanTask, notes: list[str], number: int) -> Attempt:
        session = self.session
        slug = re.sub(r"[^A-Za-z0-9._-]+", "-", task.id).strip(".-") or "task"
        branch = f"soda-work/{session.milestone.name}/iter-{self.it.number}-{slug}"
        ws = session.checkouts.work(session.milestone.branch, branch)
        self._emit("act.workspace", task, path=str(ws.path), branch=ws.branch, attempt=number)
        kept = clean = False
        held = self.held
        approved = held.take(task) if held is not None and number == 1 else None
        try:
            if held is not None and approved is not None and held.restore(approved, ws):
                # its work back (no executor run): straight to the merge
                return self._merge(ws, task, approved.result(), ws.head())
            resume = (
                take_resume(session, self.it, task) if number == 1 else None
            )  # answered question
            if resume is not None:
                resume.restore(ws)
            sandbox = Sandbox(ws.path)  # outside the worktree (state/ included) is out of reach
            tools = Watched(  # what the run could leave behind in the tree
                worktree_tools(
                    sandbox,
                    session.config.act.command_timeout,
                    session.config.act.output_limit,
                    jail=session.jail,
                    repo_map_tokens=session.config.context.repo_map_tokens,
                    config=session.config,  # run_tests: the project's test command, here
                ).extended(executor_ask_tools(session, self.it, task, ws)),  # ask_human: suspends
                sandbox,
            )
            inputs = executor_inputs(
                session, self.it.number, self.plan, task, self.baseline, notes,
                self._history.get(task.id),
            )  # fmt: skip
            executor = executor_for(backend_for(session.config, task.tool_hints))
            # A program ran commands of its own, an MCP server ran beside it: neither watched.
            mcp = bool(session.config.mcp.for_agent("executor"))
            tools.unsure = tools.unsure or not executor.watched or mcp
            job = Job(
                session.config, session.jail, ws, task.title, inputs, tools,
                resume.messages if resume else None, self.runner(), self._recorder,
                lambda kind, data: self._emit(kind, task, **data), self.cancelled,
            )  # fmt: skip
            try:
                answer = executor.run(job)
            except Interrupted:
                if self.stopping():
                    raise
                return Attempt(AttemptStatus.CANCELLED, "cancelled by a person while it ran")
            except Suspended as waiting:
                session.checkouts.keep(ws)
                kept = True
                return Attempt(AttemptStatus.WAITING, str(waiting), workspace=ws)
            if answer.output is None:
                diffstat = self._stat_and_reset(ws)
                return Attempt(
                    AttemptStatus.GAVE_UP, answer.gave_up or "gave up", diffstat=diffstat
                )
            result = answer.output
            commit = ws.commit_all(
                f"{task.title}\n\n{result.summary}\n\nSoda-Task: {task.task_id}",
                changes=tools.changes() if resume is None else None,
            )
            if ws.head() == ws.fork_point:
                clean = resume is None and tools.clean(session.repo, ws)
                return Attempt(
                    AttemptStatus.NO_CHANGES, "finished without changing files", result=result
                )
            if resume is None and tools.clean(session.repo, ws):
                # Nothing ran there and all it wrote is committed: the gate may
                # test the merge on this very tree (soda.repo.checkouts).
                session.checkouts.vouch(ws)
            attempt = self._merge(ws, task, result, commit)
            # A catch-up merge that conflicted was aborted: not vouched for.
            clean = (
                resume is None and attempt.status in SETTLED_TREE and tools.clean(session.repo, ws)
            )
            return attempt
        finally:
            if not kept:
                session.checkouts.release(ws, clean=clean)
            if held is not None and approved is not None:
                held.release(approved)

    def _merge(
        self, ws: Workspace, task: PlanTask, result: ExecuteResult, commit: str | None
    ) -> Attempt:
        diffstat = ws.diff_stat()
        with self.merge_lock:
            if self.it.cancel_requested or self.stopping():  # while it waited for its turn
                return Attempt(AttemptStatus.CANCELLED, "cancelled before its merge", result=result)
            merged = merge_task(
                self.session, ws, task, result.summary, self.tip_report, self.it,
                self.ask_person,
            )  # fmt: skip
            if merged.status == AttemptStatus.MERGED and merged.commit:
                self.landed.append(merged.commit)
                self.tip_report = merged.after or self.tip_report
                if task.task_id is not None:  # Trace learns at once, whatever comes next
                    with contextlib.suppress(InputError):  # already closed
                        self.session.tracker.close(task.task_id, f"merged in {merged.commit[:10]}")
        return Attempt(
            merged.status,
            merged.reason,
            result=result,
            commit=commit,
            merged=merged.commit,
            tip_moved=merged.tip_moved,
            after=merged.after.summary() if merged.after else "",
            failing=merged.failing(),
            diffstat=diffstat,
        )

    @staticmethod
    def _stat_and_reset(ws: Workspace) -> str:
        """The diff stat of what a task that gave up left, then thrown away."""
        before = ws.head()
        ws.commit_all("attempt that gave up")
        stat = ws.diff_stat()
        ws.reset_to(before)
        return stat

    # --- outcomes and records ---------------------------------------------------

    def _ended(self, task: PlanTask, attempt: Attempt, retries: list[str]) -> TaskOutcome:
        status = attempt.status.task_end
        outcome = TaskOutcome(
            task,
            status,
            result=attempt.result,
            reason=attempt.reason,
            commit=attempt.commit,
            merged_commit=attempt.merged,
            failure=attempt.status if status == TaskEnd.FAILED else "",
            attempts=len(retries) + 1,
            retries=list(retries),
            after=attempt.after,
            failing=attempt.failing,
            diffstat=attempt.diffstat,
            workspace=attempt.workspace,
        )
        preview = (attempt.result.summary if attempt.result else attempt.reason)[:PREVIEW]
        self._emit(
            status.event,
            task,
            status=attempt.status,
            attempts=outcome.attempts,
            commit=attempt.commit,
            merged_commit=attempt.merged,
            failing=len(attempt.failing),
            preview=preview,
        )
        return outcome

    def _retried(
        self, task: PlanTask, kind: str, reason: str, attempt: int, retries: list[str]
    ) -> None:
        retries.append(reason)
        self._emit("act.task.retried", task, kind=kind, attempt=attempt + 1, reason=reason[:500])
        if task.task_id is not None:
            self.session.tracker.comment(
                task.task_id, "soda", f"retry {attempt}: {reason}", self.it.id
            )

    def _emit(self, event: str, task: PlanTask, **data: Any) -> None:
        payload = {"plan": self.it.number, "key": task.id, "task_id": task.task_id, **data}
        self.it.events.emit(event, payload)


def _start(session: Session, task_id: int) -> None:
    """Mark the Trace task in progress; the planner chose it, so a blocked one is
    unblocked first (the plan says it can go on). A closed one stays closed."""
    tracker = session.tracker
    if tracker.show(task_id).status == TaskStatus.BLOCKED:
        tracker.unblock(task_id)
    with contextlib.suppress(InputError):
        tracker.start(task_id)
