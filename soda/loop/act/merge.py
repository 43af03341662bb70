"""One task's work onto the milestone: catch up, merge commit, gate, land.

Tasks finish in any order; their merges run one at a time (the caller holds
the merge lock), each against the milestone tip *including earlier merges*:

    catch up   merge the current tip into the task's branch (a conflict ends here)
    commit     the merge commit object, with `Soda-Iteration`, `Soda-Run` and
               `Soda-Task` trailers (recovery reads them after a crash)
    gate       that exact commit tested on the clean view, judged against the
               tip's own test report (the baseline, then each landed merge's),
               and the task's target tests required to pass on it (refused
               as `targets_failed`, naming them with their output)
    land       compare-and-swap of the milestone ref (then `Session.on_landed`,
               if set: the fleet pushes the milestone before the merge counts)

A merge the gate may not make on its own word goes to a person (`ask_person`):
their answer, or, with `[approval] wait = "suspend"`, `Deferred`: the merge is
held for a later iteration (soda.loop.act.held) and the task ends waiting.

`MergeOutcome.tip_moved` says whether the milestone moved since the task forked
(a sibling merged meanwhile): a conflict or a gate failure may then be the
sibling's doing, and the task gets one more try on the new tip.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from soda.contracts import PlanTask
from soda.contracts.outcomes import AttemptStatus
from soda.errors import GitError
from soda.gate import tested
from soda.gate.rules import GateResult, gate, infrastructure_changes
from soda.gate.runner import TestReport, report_kind
from soda.gate.targets import FAILED, TargetResult
from soda.loop.context import Iteration
from soda.loop.session import Session
from soda.repo.refs import branch_head
from soda.repo.workspace import Workspace, land, prepare_merge


@dataclass(frozen=True)
class Deferred:
    """The person answers in a later iteration: the merge is held (its work kept)."""

    reason: str


AskPerson = Callable[[GateResult, Workspace, PlanTask, str], GateResult | Deferred]
"""A gate verdict that needs a person's approval (with the work tree, the task
and the executor's summary), and their answer, or `Deferred`."""


@dataclass
class MergeOutcome:
    status: AttemptStatus
    """merged, conflict, gate_failed, targets_failed, rejected, or waiting (held
    for a person)."""
    reason: str
    tip_moved: bool
    commit: str | None = None
    after: TestReport | None = None
    targets: tuple[TargetResult, ...] = ()
    """For targets_failed: the target tests that did not pass."""

    def failing(self, limit: int = 20) -> dict[str, str]:
        """Tests that fail after the change, with the first lines of each failure;
        for targets_failed, the targets that did not pass first (a target not
        found or skipped says so)."""
        failures = self.after.failures if self.after is not None else {}
        found: dict[str, str] = {}
        for result in self.targets:
            if result.status == FAILED:
                found.update({name: failures.get(name, "") for name in result.tests})
            else:
                found[result.target] = result.output
        if self.after is not None:
            for name in sorted(self.after.failed):
                found.setdefault(name, failures.get(name, ""))
        return dict(list(found.items())[:limit])


def merge_task(
    session: Session,
    ws: Workspace,
    task: PlanTask,
    summary: str,
    tip_report: TestReport,
    it: Iteration,
    ask_person: AskPerson,
) -> MergeOutcome:
    """Gate `ws`'s work against the milestone tip and land it; the caller holds
    the merge lock. `tip_report`: the tests of the tip as it is now."""
    number = it.number
    branch = session.milestone.branch
    tip_moved = branch_head(session.repo, branch) != ws.fork_point
    if not ws.catch_up():
        return MergeOutcome(
            AttemptStatus.CONFLICT,
            f"merging {branch} into {ws.branch} conflicted; merge aborted",
            tip_moved,
        )
    trailers = f"Soda-Iteration: {number}\nSoda-Run: {session.run_id}\n"
    if task.task_id is not None:
        trailers += f"Soda-Task: {task.task_id}\n"
    message = f"soda: {task.title}\n\n{summary.strip() or task.title}\n\n{trailers}"
    candidate, milestone_head = prepare_merge(ws, message)
    # The exact commit that would land, tested on its own clean checkout.
    after, _ = tested(session.config, session.jail, session.db, session.checkouts, candidate)
    infrastructure = infrastructure_changes(
        session.repo, milestone_head, candidate, session.config.gate.protected
    )
    verdict = gate(
        tip_report,
        after,
        mandatory=report_kind(session.config) != "exit-code",
        infrastructure=infrastructure,
        targets=task.target_tests,
    )
    it.events.emit(
        "act.gate",
        {
            "plan": number,
            "key": task.id,
            "ok": verdict.ok,
            "reason": verdict.reason,
            "approval": list(verdict.approval),
            "targets": [result.to_json() for result in verdict.targets],
        },
    )
    if verdict.targets_failed:  # never merged, never a person's call
        return MergeOutcome(
            AttemptStatus.TARGETS_FAILED,
            verdict.reason,
            tip_moved,
            after=after,
            targets=verdict.targets,
        )
    if not verdict.ok and verdict.approval:
        answer = ask_person(verdict, ws, task, summary)
        if isinstance(answer, Deferred):
            return MergeOutcome(AttemptStatus.WAITING, answer.reason, tip_moved, after=after)
        verdict = answer
        if not verdict.ok:
            return MergeOutcome(AttemptStatus.REJECTED, verdict.reason, tip_moved, after=after)
    if not verdict.ok:
        return MergeOutcome(AttemptStatus.GATE_FAILED, verdict.reason, tip_moved, after=after)
    try:
        land(session.repo, branch, candidate, milestone_head, delete=ws)
    except GitError as exc:
        return MergeOutcome(AttemptStatus.CONFLICT, str(exc), tip_moved, after=after)
    if session.on_landed is not None:  # the fleet's push: not merged until the remote has it
        session.on_landed(candidate)
    it.events.emit("act.merged", {"plan": number, "key": task.id, "commit": candidate})
    return MergeOutcome(
        AttemptStatus.MERGED, verdict.reason, tip_moved, commit=candidate, after=after
    )
