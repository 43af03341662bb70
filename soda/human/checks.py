"""What a person's input must pass before it is queued, whichever face queues it
(`soda approve`, `answer`, `tell`... and the web dashboard's forms): the input's
contract, the iteration a verdict names, the question an answer names, and an
edited plan. Each refusal is an `InputError`: one line saying what is wrong, and
nothing is written. The daemon checks again when it takes the input."""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import HumanInput, IterationPlan, validate
from soda.errors import InputError, Violation
from soda.human.approval import edit_problems, known_edit_problems
from soda.store import approvals, events, history, questions, runs

KEEP = "the original plan still waits"


def checked_input(fields: dict[str, Any]) -> HumanInput:
    """`fields` (None values dropped) as a `HumanInput`, or an InputError naming
    the field the contract refuses."""
    data = {key: value for key, value in fields.items() if value is not None}
    item = validate("human_input", data, HumanInput)
    if isinstance(item, Violation):
        raise InputError(f"{item.path}: {item.message}")
    return item


def verdict_target_note(db: Database, number: int, verb: str) -> str | None:
    """Raise InputError unless iteration `number` is waiting for a verdict, may
    still ask for one, or is the next iteration; a note for the person, if any.

    An iteration that is running may yet ask (a risky plan, or a merge the gate
    may not make alone); the next one may be answered before it starts."""
    suspended = approvals.waiting(db)
    if suspended is not None and suspended.iteration == number:
        return None  # its iteration ended, its plan waits (`[approval] wait = "suspend"`)
    latest = runs.next_iteration_number(db) - 1
    if number < 1 or number > latest + 1:
        known = f"the latest is {latest}" if latest else "there is none yet"
        raise InputError(
            f"no iteration {number} to {verb}: {known}, and only the next one"
            f" ({latest + 1}) can be answered before it asks (see `soda history`)"
        )
    if number == latest + 1:
        return f"iteration {number} has not started; the answer waits for it"
    row = history.iteration(db, number)
    if row is None:  # numbers continue across runs, but a gap is possible
        raise InputError(f"no iteration {number} to {verb} (see `soda history`)")
    if row["ended_at"] is not None:
        raise InputError(
            f"iteration {number} is not waiting for approval: it ended"
            f" ({row['outcome'] or row['decision'] or 'no outcome'}); see `soda show {number}`"
        )
    asked = events.count(db, row["id"], "approval.waiting")
    return None if asked else f"iteration {number} is running and has not asked yet"


def open_question(db: Database, question_id: int) -> questions.Question:
    """Question `question_id`, if it is open (waits for an answer); else InputError."""
    asked = questions.get(db, question_id)
    if asked is None:
        raise InputError(f"no question {question_id} (see `soda status`)")
    if asked.status != "open":
        raise InputError(f"question {question_id} is {asked.status}, not open: nothing to answer")
    return asked


def waiting_plan(db: Database, number: int) -> IterationPlan:
    """Iteration `number`'s plan as ORIENT left it (bound to Trace tasks)."""
    suspended = approvals.waiting(db)
    if suspended is not None and suspended.iteration == number:
        return IterationPlan.model_validate_json(suspended.plan_json)
    row = history.iteration(db, number)
    plan = (
        json.loads(row["orient_json"]).get("iteration_plan") if row and row["orient_json"] else None
    )
    if plan is None:
        raise InputError(f"iteration {number} has no plan to edit (yet); see `soda show {number}`")
    return IterationPlan.model_validate(plan)


def checked_plan_edit(text: str, db: Database, config: Config) -> IterationPlan:
    """An edited plan's text as a valid plan, or an InputError saying why not
    (not JSON, the plan contract, or `edit_problems`)."""
    plan = _edited_plan(text)
    return _no_problems(plan, edit_problems(plan, db, config))


def checked_known_plan_edit(text: str, known: set[int], max_tasks: int) -> IterationPlan:
    """`checked_plan_edit` with no database: the Trace task ids `known` and the
    limit `max_tasks` as the run's worker reported them (soda fleet)."""
    plan = _edited_plan(text)
    return _no_problems(plan, known_edit_problems(plan, known, max_tasks))


def _edited_plan(text: str) -> IterationPlan:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"edited plan refused: invalid JSON at line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}; {KEEP}"
        ) from None
    plan = validate("plan", data, IterationPlan)
    if isinstance(plan, Violation):
        raise InputError(
            f"edited plan refused: plan contract violated at {plan.path}: {plan.message}; {KEEP}"
        )
    return plan


def _no_problems(plan: IterationPlan, problems: list[str]) -> IterationPlan:
    if problems:
        raise InputError(f"edited plan refused: {'; '.join(problems)}; {KEEP}")
    return plan
