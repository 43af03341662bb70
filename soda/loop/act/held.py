"""Merges held for a person's approval across iterations (`[approval] wait =
"suspend"`, and every fleet run).

A merge the gate may not make on its own word (`GateResult.approval`: test
infrastructure changed, a test that passed is gone) waits for a person. With
`wait = "block"` its iteration waits (`soda.human.approval.await_approval`);
suspended, it goes as a waiting plan goes:

    hold      the task's work (its branch after catching up with the milestone)
              is kept under refs/soda/approvals/N-KEY, and the waiting merge
              (the task, the kept commit, the gate's reason and the items the
              person is asked about) joins iteration N's approvals row (kind
              merge, `soda.store.approvals`); the task ends waiting, and once
              the other tasks end the iteration ends STUCK, outcome
              awaiting_approval
    approved  the next iteration skips ORIENT with a plan of the waiting tasks
              (`soda.loop.asking.approval_orientation`); each task's first
              attempt takes its kept work back (no executor run) and goes the
              normal way through `merge_task`: catch up with the tip, the gate
              again on the exact commit, land. The approval counts for the
              items the person saw and no others: a gate that asks about
              anything else holds the merge again
    rejected  by the person, or by the deadline: each task is recorded as a
              rejected merge (`rejected_outcomes`: a Trace comment, the task
              reopened) and its kept ref deleted

In a fleet run the kept refs travel with the milestone (soda.fleet.approval
pushes and fetches them), so a run moved to another worker still has the work.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import git

from soda.contracts import ExecuteResult, IterationPlan, PlanTask
from soda.contracts.outcomes import AttemptStatus, TaskEnd
from soda.gate.rules import GateResult
from soda.human.approval import epoch, waiting_line
from soda.loop.act.execute import TaskOutcome
from soda.loop.act.merge import Deferred
from soda.repo.workspace import Workspace
from soda.store import approvals
from soda.store.approvals import Approval
from soda.system.clock import moment

if TYPE_CHECKING:
    from soda.loop.context import Iteration
    from soda.loop.session import Session

KEPT_REF = "refs/soda/approvals/{}"
"""Where a held merge's work is kept: by iteration and task key (N-KEY)."""


@dataclass(frozen=True)
class KeptMerge:
    """One task's merge that waits for a person, and what it needs to go on."""

    task: PlanTask
    ref: str
    commit: str
    """The task's work, caught up with the milestone as it was (`base`)."""
    base: str
    """The milestone head the work was caught up with."""
    reason: str
    """The gate's reason."""
    items: tuple[str, ...]
    """What the person is asked to look at (`GateResult.approval`): an approval
    counts for these."""
    summary: str
    """The executor's summary (the merge commit's message)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task.model_dump(mode="json"),
            "ref": self.ref,
            "commit": self.commit,
            "base": self.base,
            "reason": self.reason,
            "items": list(self.items),
            "summary": self.summary,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> KeptMerge:
        return cls(
            PlanTask.model_validate(data["task"]),
            str(data["ref"]),
            str(data["commit"]),
            str(data["base"]),
            str(data["reason"]),
            tuple(str(item) for item in data["items"]),
            str(data.get("summary") or ""),
        )

    def result(self) -> ExecuteResult:
        """The executor's answer as the merge needs it: its summary (what else it
        said, Trace learned when the merge was held)."""
        return ExecuteResult(
            tasks_blocked=[], task_comments=[], new_subtasks=[], learnings=[], summary=self.summary
        )


def kept_merges(waiting: Approval | None) -> list[KeptMerge]:
    """The merges a held-merge row keeps; none for a plan's."""
    if waiting is None or waiting.kind != "merge":
        return []
    return [KeptMerge.from_json(item) for item in approvals.held_merges(waiting)]


def merges_plan(number: int, merges: list[KeptMerge]) -> IterationPlan:
    """The plan the next iteration runs once the person approved: the waiting
    tasks, each on its own (their order was settled when they ran)."""
    titles = ", ".join(merge.task.title for merge in merges)
    return IterationPlan(
        intent=f"Merge what iteration {number} held for approval: {titles}",
        approach="Each task's kept work goes through the gate again on the milestone tip.",
        tasks=[merge.task.model_copy(update={"depends_on": []}) for merge in merges],
    )


class Held:
    """One iteration's merges that need a person: those an earlier iteration
    held and a person approved (their work restored here), and those this
    iteration holds. Used under the merge lock (one merge at a time)."""

    def __init__(self, session: Session, it: Iteration, approved: Approval | None) -> None:
        self.session = session
        self.it = it
        if approved is not None and approved.kind == "merge":
            approved = approvals.get(session.db, approved.id)  # as settled, with the reason
        self.approved = approved if approved is not None and approved.kind == "merge" else None
        self._to_restore = {merge.task.id: merge for merge in kept_merges(self.approved)}
        self._restored: dict[str, KeptMerge] = {}
        """The kept merges restored, by the work branch they were restored into."""
        self.waiting: Approval | None = None
        """This iteration's held merges (its approvals row), once one is held."""
        self._held: set[str] = set()

    # --- an approved merge, going on -------------------------------------------

    def take(self, task: PlanTask) -> KeptMerge | None:
        """The approved merge kept for `task`, taken (its first attempt only)."""
        return self._to_restore.pop(task.id, None)

    def restore(self, kept: KeptMerge, ws: Workspace) -> bool:
        """Put the kept work into `ws` (a fresh work tree on the tip): the merge
        then catches up with the tip from the milestone head the work had. False
        when the kept commit is gone (the task then runs afresh)."""
        try:
            ws.repo.commit(kept.commit)
            ws.repo.commit(kept.base)
        except (ValueError, git.BadName, git.GitCommandError):
            return False
        ws.reset_to(kept.commit)
        ws.fork_point = kept.base
        self._restored[ws.branch] = kept
        data = {"plan": self.it.number, "key": kept.task.id, "commit": kept.commit}
        self.it.events.emit("act.task.restored", data)
        return True

    def pre_approved(self, verdict: GateResult, ws: Workspace) -> GateResult | None:
        """The person's approval of a restored merge, when the gate asks about
        nothing they did not see; None otherwise (the merge needs them again)."""
        kept = self._restored.get(ws.branch)
        if kept is None or not set(verdict.approval) <= set(kept.items):
            return None
        assert self.approved is not None
        reason = self.approved.reason or "approved by a person"
        return GateResult(True, f"{verdict.reason}; {reason} (iteration {self.approved.iteration})")

    def release(self, kept: KeptMerge) -> None:
        """The attempt with the kept work ended (merged, held again, or failed:
        a retry is new work, which the approval does not cover): its ref goes."""
        self._restored = {branch: k for branch, k in self._restored.items() if k is not kept}
        _delete_ref(self.session, kept.ref)

    # --- a merge held now --------------------------------------------------------

    def holds(self, task: PlanTask) -> bool:
        """Whether this iteration held `task`'s merge for a person."""
        return task.id in self._held

    def hold(
        self,
        verdict: GateResult,
        ws: Workspace,
        task: PlanTask,
        summary: str,
        say: Callable[[str], None],
    ) -> Deferred:
        """Keep `task`'s merge for the person's verdict: its work under a ref of
        its own, the waiting merge in this iteration's approvals row."""
        session, number = self.session, self.it.number
        slug = re.sub(r"[^A-Za-z0-9_-]+", "-", task.id).strip("-") or "task"
        ref = KEPT_REF.format(f"{number}-{slug}")
        commit = ws.head()
        ws.repo.git.update_ref(ref, commit)
        base = ws.milestone_head or ws.fork_point
        kept = KeptMerge(task, ref, commit, base, verdict.reason, verdict.approval, summary)
        self._held.add(task.id)
        merges = [*kept_merges(self.waiting), kept]
        plan_json = merges_plan(number, merges).model_dump_json()
        merge_json = json.dumps([merge.to_json() for merge in merges])
        timeout = session.config.approval.timeout
        if self.waiting is None:
            self.waiting = approvals.wait(
                session.db,
                iteration_id=self.it.id,
                iteration=number,
                plan_json=plan_json,
                timeout=timeout,
                deadline=epoch(session.clock) + timeout,
                kind="merge",
                merge_json=merge_json,
            )
        else:
            self.waiting = approvals.add_merge(session.db, self.waiting.id, plan_json, merge_json)
        items = "\n".join(f"  - {item}" for item in verdict.approval[:20])
        say(
            f"approval: the merge of {task.id} ({task.title}) needs a person: {verdict.reason}\n"
            f"{items}\nwaiting for `soda approve {number}` or `soda reject {number}` (up to"
            f" {timeout:.0f}s); the iteration ends when its other tasks do and the next one"
            " acts on the answer"
        )
        data = {
            "iteration": number,
            "subject": f"the merge needs a person: {verdict.reason}",
            "key": task.id,
            "items": list(verdict.approval),
            "deadline": moment(self.waiting.deadline),
            "suspended": True,
        }
        self.it.events.emit("approval.waiting", data)
        return Deferred(waiting_line(self.waiting))


def rejected_outcomes(session: Session, waiting: Approval, reason: str) -> list[TaskOutcome]:
    """A held merge rejected (by the person, or the deadline): its kept work
    dropped, each task's end a rejected merge (Trace records it as it records
    a rejection in the iteration)."""
    outcomes = []
    for kept in kept_merges(waiting):
        _delete_ref(session, kept.ref)
        outcomes.append(
            TaskOutcome(
                kept.task,
                TaskEnd.FAILED,
                reason=reason,
                commit=kept.commit,
                failure=AttemptStatus.REJECTED,
            )
        )
    return outcomes


def _delete_ref(session: Session, ref: str) -> None:
    with contextlib.suppress(git.GitCommandError):  # already gone
        session.repo.git.update_ref("-d", ref)
