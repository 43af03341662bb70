"""The executor's standing context: what it knows besides its task.

A task is one step of a larger piece of work, so the executor gets what a
person joining it would be told: the spec; the person's corrections and
overrides in force (what they said in this and the last few iterations, and
what they said since that nobody has read yet); the task's own history in Trace
(its state, why it is blocked, its comments); the active learnings (all of
them, newest first, capped: deciding which concern the task would cost a model
call); the test command, the changes the gate holds for a person and the
approval threshold (`rules_text`); and the milestone's tests before the change.
The repository's own guidance (AGENTS.md and the like, `repo_guidance`) comes
right after the spec, quoted as data. The order is stable first (spec, the
repository's guidance, tests and merges, guidance, learnings, plan),
then what is this task's own, so the prompt prefix stays cacheable across the
tasks of an iteration. The task's target tests (the tests its merge needs
passing) are part of the task.

Each task is shown with one id, its Trace task id (the id the executor's answer
uses for comments and subtasks; the plan's own keys are ORIENT's business). The
plan lists the tasks by id and title only, and the task's description is in its
own section alone: a retry's rewritten description is the only one the executor
sees.
"""

from __future__ import annotations

import json
from typing import Any

from soda.contracts import HumanInput, IterationPlan, PlanTask
from soda.contracts.outcomes import TaskStatus
from soda.errors import InputError
from soda.gate.runner import TestReport
from soda.human.routing import GUIDANCE_KINDS
from soda.human.write import describe
from soda.loop.repo_guidance import guidance_inputs
from soda.loop.rules_text import tests_and_merges
from soda.loop.session import Session
from soda.store import human_inputs, learnings

GUIDANCE_ITERATIONS = 5
"""Inputs read in this many iterations (this one included) are still in force."""
MAX_GUIDANCE = 20
MAX_COMMENTS = 10
BASELINE_TAIL = 3000
"""Characters of the baseline test output shown (its end: the summary)."""


def executor_inputs(
    session: Session,
    number: int,
    plan: IterationPlan,
    task: PlanTask,
    baseline: TestReport,
    notes: list[str],
    history: str | None = None,
) -> dict[str, Any]:
    """The executor's first message, by input name (see agents/executor.md).
    `notes`: what this attempt must know (dependencies that did not finish, why
    the task runs again); `history`: the task's Trace history as read when it
    started (default: read now)."""
    task_input: dict[str, Any] = {
        "id": task_ref(task),
        "title": task.title,
        "description": task.description,
        "risk": task.risk,
        "tool_hints": task.tool_hints,
        **target_input(task),
    }
    if notes:
        task_input["notes"] = notes
    return {
        "spec": session.spec_text(),
        **guidance_inputs(session.config),
        "tests_and_merges": tests_and_merges(session.config, "executor"),
        "guidance": guidance(session, number),
        "learnings": learnings.active(session.db, session.config.context.max_learnings)
        or "(none yet)",
        "plan": plan_text(plan),
        "task": task_input,
        "task_history": task_history(session, task) if history is None else history,
        "baseline": f"{baseline.summary()}\n\n{baseline.output[-BASELINE_TAIL:]}",
    }


def target_input(task: PlanTask) -> dict[str, Any]:
    """The task's target tests as the executor is told them: the tests its merge
    needs passing, or why it has none (nothing for a plan that says neither)."""
    if task.target_tests:
        return {"target_tests": list(task.target_tests)}
    if task.no_target_tests_reason:
        return {"no_target_tests_reason": task.no_target_tests_reason}
    return {}


def task_ref(task: PlanTask) -> int | str:
    """The one id the executor sees for a task: its Trace task id (its plan key
    only for a task not yet bound to Trace, which ACT does not normally run)."""
    return task.task_id if task.task_id is not None else task.id


def plan_text(plan: IterationPlan) -> str:
    """The iteration plan as the executor reads it: intent, approach, and each task
    by id and title with its dependencies (the same text for every task and every
    attempt of the iteration: the cacheable part)."""
    refs = {task.id: task_ref(task) for task in plan.tasks}
    lines = [f"intent: {plan.intent}", f"approach: {plan.approach}", "tasks:"]
    for task in plan.tasks:
        after = ", ".join(f"#{refs.get(dep, dep)}" for dep in task.depends_on)
        lines.append(
            f"- #{refs[task.id]} {task.title} [risk {task.risk}]"
            + (f" (after {after})" if after else "")
        )
    return "\n".join(lines)


def guidance(session: Session, number: int) -> str:
    """The person's corrections and overrides in force, newest first, one a line."""
    lines: list[str] = []
    pending = human_inputs.pending_of_kinds(session.db, GUIDANCE_KINDS, MAX_GUIDANCE)
    for _id, _kind, payload, _received, _source in reversed(pending):
        lines.append(f"- (not yet read) {_describe(payload)}")
    for past in range(number, max(number - GUIDANCE_ITERATIONS, 0), -1):
        for _id, kind, payload, _response in reversed(human_inputs.applied_in(session.db, past)):
            if kind in GUIDANCE_KINDS:
                lines.append(f"- (iteration {past}) {_describe(payload)}")
    if not lines:
        return "(none)"
    return "\n".join(lines[:MAX_GUIDANCE])


def task_history(session: Session, task: PlanTask) -> str:
    """The Trace task's state, blocker and latest comments ("(new task)" when the
    plan made it up)."""
    if task.task_id is None:
        return "(a new task: no history)"
    try:
        row = session.tracker.show(task.task_id)
        comments = session.tracker.comments(task.task_id)
    except InputError:
        return f"(Trace task {task.task_id} not found)"
    lines = [f"task #{row.id} {row.title} [{row.status}]"]
    if row.status_reason:
        label = "blocked" if row.status == TaskStatus.BLOCKED else "status reason"
        lines.append(f"{label}: {row.status_reason}")
    for comment in comments[-MAX_COMMENTS:]:
        when = f" (iteration id {comment.iteration_id})" if comment.iteration_id else ""
        lines.append(f"- {comment.author}{when}: {comment.body}")
    return "\n".join(lines)


def _describe(payload: str) -> str:
    try:
        return describe(HumanInput.model_validate(json.loads(payload)))
    except ValueError:  # a row that no longer parses: shown as stored
        return payload[:300]
