"""Approval gates: a plan whose riskiest task reaches `[approval] risk_threshold`
(or a merge the gate may not make on its own) waits for a person
(`soda approve N` / `soda reject N`, where N is the iteration) and is rejected
when `[approval] timeout` passes without an answer, or when soda is asked to stop.

A waiting plan may also be approved as the person edited it (`soda approve N
--edit`, or a `plan_edit` inbox file): the edit is checked against the plan
contract and `soda.contracts.plan_dag`'s checks (`edit_problems`); a bad one is refused with
its reason and the original plan goes on waiting, a good one is the plan that runs
(`Verdict.plan`).

How a plan waits is `[approval] wait`: "block" (`await_approval`: its
iteration waits, counting the timeout) or "suspend" (`suspended_verdict`: the
plan is kept in `soda.store.approvals` with its deadline and the iteration ends;
the next iteration takes the verdict, the same verdicts and edits, or rejects
the plan once the deadline passed). soda fleet suspends, so the wait is a
durable timer in its workflow and holds no worker. A merge the gate may not
make alone always blocks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.config import RISK_LEVELS, Config
from soda.contracts import IterationPlan
from soda.contracts.plan_dag import plan_problems
from soda.events import Events
from soda.human import routing
from soda.human.routing import Route
from soda.repo.milestone import milestone_name
from soda.store import approvals, tasks
from soda.store.approvals import Approval
from soda.store.runs import IterationRef
from soda.system.clock import SYSTEM_CLOCK, Clock, moment
from soda.trace import SqliteTracker

if TYPE_CHECKING:
    from soda.human import HumanQueue


EDIT_TAKEN = "plan approved as edited"
"""The response recorded for a person's plan edit that became the plan."""


@dataclass(frozen=True)
class Verdict:
    approved: bool
    reason: str
    plan: IterationPlan | None = None
    """The plan as a person edited it, to run instead of the waiting one."""


def edit_problems(plan: IterationPlan, db: Database, config: Config) -> list[str]:
    """What is wrong with an edited plan: `soda.contracts.plan_dag`'s checks against this
    milestone's Trace tasks and `[plan] max_tasks`, and at least one task."""
    known = {task.id for task in tasks.of_milestone(db, milestone_name(config))}
    return known_edit_problems(plan, known, config.plan.max_tasks)


def known_edit_problems(plan: IterationPlan, known: set[int], max_tasks: int) -> list[str]:
    """`edit_problems` against the Trace task ids `known` (soda fleet's client,
    which has no database, checks against the ids the run's worker reported)."""
    problems = plan_problems(plan, known, max_tasks)
    if not plan.tasks:
        problems.append("it has no tasks (to run nothing, reject the plan)")
    return problems


def plan_risk(plan: IterationPlan) -> str:
    return max((task.risk for task in plan.tasks), key=RISK_LEVELS.index, default="none")


def needs_approval(plan: IterationPlan, threshold: str) -> bool:
    return RISK_LEVELS.index(plan_risk(plan)) >= RISK_LEVELS.index(threshold)


def await_approval(
    queue: HumanQueue,
    config: Config,
    events: Events,
    number: int,
    subject: IterationPlan | str,
    say: Callable[[str], None],
    should_stop: Callable[[], bool],
    poll_seconds: float = 0.5,
    clock: Clock = SYSTEM_CLOCK,
) -> Verdict:
    """Block until a person approves or rejects iteration `number`'s plan (or, with
    a string `subject`, whatever it describes: a merge the gate may not make on its
    own), the timeout passes, or `should_stop` says so. Reads the same queue as SENSE."""
    timeout = config.approval.timeout
    deadline = clock.monotonic() + timeout
    if isinstance(subject, str):
        what, data = subject, {"iteration": number, "subject": subject}
    else:
        risk = plan_risk(subject)
        what, data = f"the plan is {risk} risk", {"iteration": number, "risk": risk}
    say(
        f"approval: {what}; waiting for `soda approve {number}` or "
        f"`soda reject {number}` (up to {timeout:.0f}s)"
    )
    events.emit("approval.waiting", data)
    while True:
        answer = take_answer(queue, config, events, number, subject)
        if answer is not None:
            return answer
        if should_stop():
            return _verdict(events, number, False, "soda was asked to stop while waiting")
        if clock.monotonic() >= deadline:
            return _verdict(events, number, False, f"no approval within {timeout:.0f}s")
        clock.sleep(poll_seconds)


def take_answer(
    queue: HumanQueue,
    config: Config,
    events: Events,
    number: int,
    subject: IterationPlan | str,
) -> Verdict | None:
    """One look at the queue for a person's answer on what iteration `number`
    waits for: an approve or reject, else (for a plan) an edit; None if none came."""
    answer = queue.take_verdict(number, "merge" if isinstance(subject, str) else "plan")
    if answer is not None:
        return _verdict(events, number, *answer)
    if isinstance(subject, str):
        return None
    return _take_edit(queue, config, events, number)


def suspended_verdict(
    queue: HumanQueue,
    config: Config,
    events: Events,
    it: IterationRef,
    plan: IterationPlan,
    say: Callable[[str], None],
    waiting: Approval | None,
    clock: Clock = SYSTEM_CLOCK,
) -> Verdict | Approval:
    """`[approval] wait = "suspend"`: the verdict on a plan that needs a person,
    without waiting for it. A person's answer if it is in (on `waiting`, the plan
    an earlier iteration suspended, or else on iteration `it`'s plan), the
    timeout's rejection once `waiting`'s deadline passed; else the plan kept as
    waiting (`soda.store.approvals`), and the caller ends the iteration."""
    number = waiting.iteration if waiting is not None else it.number
    verdict = take_answer(queue, config, events, number, plan)
    if verdict is None and waiting is not None and epoch(clock) >= waiting.deadline:
        verdict = _verdict(events, number, False, f"no approval within {waiting.timeout:.0f}s")
    if verdict is not None:
        if waiting is not None:
            approvals.settle(queue.db, waiting.id, verdict.approved, verdict.reason)
        return verdict
    if waiting is not None:
        say(f"approval: {waiting_line(waiting)}")
        return waiting
    timeout = config.approval.timeout
    kept = approvals.wait(
        queue.db,
        iteration_id=it.id,
        iteration=number,
        plan_json=plan.model_dump_json(),
        timeout=timeout,
        deadline=epoch(clock) + timeout,
    )
    risk = plan_risk(plan)
    say(
        f"approval: the plan is {risk} risk; waiting for `soda approve {number}` or "
        f"`soda reject {number}` (up to {timeout:.0f}s); the iteration ends here and "
        "the next one acts on the answer"
    )
    data = {"iteration": number, "risk": risk, "deadline": moment(kept.deadline)}
    events.emit("approval.waiting", {**data, "suspended": True})
    return kept


def waiting_line(waiting: Approval) -> str:
    """What a suspended plan waits for, in one line."""
    return f"waiting for approval of iteration {waiting.iteration}'s plan until " + moment(
        waiting.deadline
    )


def overdue(db: Database, clock: Clock = SYSTEM_CLOCK) -> Approval | None:
    """The suspended plan whose deadline has passed, if one waits (the next
    iteration rejects it)."""
    waiting = approvals.waiting(db)
    return waiting if waiting is not None and epoch(clock) >= waiting.deadline else None


def epoch(clock: Clock) -> float:
    """The clock's wall time in seconds since the epoch (deadlines outlive processes)."""
    return datetime.fromisoformat(clock.now()).timestamp()


def _take_edit(queue: HumanQueue, config: Config, events: Events, number: int) -> Verdict | None:
    """Take the person's edits of iteration `number`'s plan, oldest first: the first
    good one approves the plan as edited; a bad one is answered with its problems."""
    for item in queue.pending():
        if routing.route(item.payload) is not Route.EDIT or item.payload.target != number:
            continue
        plan = item.payload.plan
        assert plan is not None  # by the contract
        problems = edit_problems(plan, queue.db, config)
        if problems:
            reason = f"edited plan refused: {'; '.join(problems)}; the original plan still waits"
            queue.mark_applied([item.id], number, reason)
            events.emit("approval.edit_refused", {"iteration": number, "problems": problems})
            continue
        plan = _bound(plan, queue.db, config)
        queue.mark_applied([item.id], number, EDIT_TAKEN)
        events.emit(
            "approval.edited",
            {"iteration": number, "intent": plan.intent, "tasks": [t.id for t in plan.tasks]},
        )
        verdict = _verdict(events, number, True, "approved by a person with edits")
        return Verdict(True, verdict.reason, plan)
    return None


def _bound(plan: IterationPlan, db: Database, config: Config) -> IterationPlan:
    """The edited plan with a Trace task for each task the person added (task_id
    null), as ORIENT binds its plans, so their work is tracked like any other."""
    tracker = SqliteTracker(db, milestone_name(config))
    root = tracker.root()
    bound = []
    for task in plan.tasks:
        if task.task_id is None:
            created = tracker.create(
                task.title, task.description, parent_id=root.id if root else None, risk=task.risk
            )
            task = task.model_copy(update={"task_id": created.id})
        bound.append(task)
    return plan.model_copy(update={"tasks": bound})


def _verdict(events: Events, number: int, approved: bool, reason: str) -> Verdict:
    events.emit("approval.verdict", {"iteration": number, "approved": approved, "reason": reason})
    return Verdict(approved, reason)
