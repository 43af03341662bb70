"""Approval gates: a plan whose riskiest task reaches `[approval] risk_threshold`
(or a merge the gate may not make on its own) waits for a person
(`soda approve N` / `soda reject N`, where N is the iteration) and is rejected
when `[approval] timeout` passes without an answer, or when soda is asked to stop.

A waiting plan may also be approved as the person edited it (`soda approve N
--edit`, or a `plan_edit` inbox file): the edit is checked against the plan
contract and `soda.contracts.plan_dag`'s checks (`edit_problems`); a bad one is refused with
its reason and the original plan goes on waiting, a good one is the plan that runs
(`Verdict.plan`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlite_utils import Database

from soda.config import RISK_LEVELS, Config
from soda.contracts import IterationPlan
from soda.contracts.plan_dag import plan_problems
from soda.events import Events
from soda.human import routing
from soda.human.routing import Route
from soda.repo.milestone import milestone_name
from soda.store import tasks
from soda.system.clock import SYSTEM_CLOCK, Clock
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
    problems = plan_problems(plan, known, config.plan.max_tasks)
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
    noun = "merge" if isinstance(subject, str) else "plan"
    while True:
        answer = queue.take_verdict(number, noun)
        if answer is not None:
            return _verdict(events, number, *answer)
        edited = None if isinstance(subject, str) else _take_edit(queue, config, events, number)
        if edited is not None:
            return edited
        if should_stop():
            return _verdict(events, number, False, "soda was asked to stop while waiting")
        if clock.monotonic() >= deadline:
            return _verdict(events, number, False, f"no approval within {timeout:.0f}s")
        clock.sleep(poll_seconds)


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
