"""A plan waiting for approval, between a worker's record and the workflow.

A fleet run's loop always suspends a plan that needs a person
(`[approval] wait = "suspend"`, soda.human.approval): the iteration keeps the
plan in the worker's record (`soda.store.approvals`) and ends STUCK. Its report
carries the plan (`ApprovalWait`) to the workflow, which holds the wait as a
durable timer with no worker. Before the next iteration, wherever it runs, the
worker's record is made to agree: a fresh record gets the waiting plan again
(with the Trace tasks it names), and a wait whose timer fired is expired there,
so the loop rejects the plan whatever the worker's clock says.
"""

from __future__ import annotations

import json
import sqlite3

from soda.config import Config
from soda.contracts import IterationPlan
from soda.fleet.state import ApprovalWait
from soda.loop.session import Session
from soda.repo.milestone import milestone_name
from soda.store import approvals, tasks


def suspending(config: Config) -> Config:
    """The run's config, its plans suspended for approval instead of waiting in
    the iteration (the workflow counts the timeout)."""
    if config.approval.wait == "suspend":
        return config
    approval = config.approval.model_copy(update={"wait": "suspend"})
    changed = config.model_copy(update={"approval": approval})
    changed.root = config.root
    return changed


def reported(session: Session) -> ApprovalWait | None:
    """The plan that waits for approval in the worker's record, for the workflow."""
    waiting = approvals.waiting(session.db)
    if waiting is None:
        return None
    known = [task.id for task in tasks.of_milestone(session.db, milestone_name(session.config))]
    return ApprovalWait(
        waiting.iteration,
        json.loads(waiting.plan_json),
        waiting.timeout,
        waiting.deadline,
        known,
        session.config.plan.max_tasks,
    )


def agree(session: Session, approval: ApprovalWait | None) -> None:
    """Before an iteration: the worker's record holds the plan the workflow says
    waits (a fresh record has none yet), expired when its timer fired."""
    if approval is None:
        return
    waiting = approvals.waiting(session.db)
    if waiting is None or waiting.iteration != approval.iteration:
        plan = _with_tasks(session, IterationPlan.model_validate(approval.plan))
        waiting = approvals.wait(
            session.db,
            iteration_id=None,
            iteration=approval.iteration,
            plan_json=plan.model_dump_json(),
            timeout=approval.timeout,
            deadline=approval.deadline,
        )
    if approval.expired:
        approvals.expire(session.db, waiting.id)


def _with_tasks(session: Session, plan: IterationPlan) -> IterationPlan:
    """The plan with a Trace task in this record for each of its tasks: one the
    record lacks (a fresh worker's) is made again with the same id, so a
    person's edit naming it still fits; another id only if that one is taken."""
    milestone = milestone_name(session.config)
    root = session.milestone.root_task_id
    bound = []
    for task in plan.tasks:
        if task.task_id is None or tasks.exists(session.db, milestone, task.task_id):
            bound.append(task)
            continue
        fields = (session.db, milestone, task.title, task.description, root, task.risk)
        try:
            tasks.insert(*fields, task_id=task.task_id)
        except sqlite3.IntegrityError:  # the id is another task's here
            task = task.model_copy(update={"task_id": tasks.insert(*fields)})
        bound.append(task)
    return plan.model_copy(update={"tasks": bound})
