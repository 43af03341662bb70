"""The iteration's short report and the plan's events around ACT.

Every iteration that got as far as DECIDE ends with a report, stored in
`iterations.report_json` and printed by `soda show N`: how many plan tasks were
done, failed, skipped, retried or are waiting for an answer, how many questions
to a person are open, and ORIENT's confidence; when DECIDE asked the tests to
confirm DONE, which tests prove each acceptance criterion the spec ties to tests
(`proof`, from the `done.tests` event). ACT's plan is announced by
`plan.started` and ends in `plan.completed`, `plan.failed`, `plan.cancelled` or
`plan.waiting` (suspended for approval) (the iteration number is the plan id;
the counts are the report's).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from soda.contracts import IterationPlan, Orientation
from soda.contracts.outcomes import IterationOutcome, TaskEnd
from soda.contracts.plan_dag import batches
from soda.errors import StructuralError
from soda.gate.targets import proof_lines
from soda.store import events as event_rows
from soda.store import history, questions

if TYPE_CHECKING:
    from sqlite_utils import Database

    from soda.events import Events

LANDED = frozenset({IterationOutcome.MERGED, IterationOutcome.NO_CHANGES})
"""ACT outcomes after which a plan counts as completed."""


def build(
    db: Database,
    number: int,
    orientation: Orientation | None,
    act: dict[str, Any] | None,
    outcome: IterationOutcome | None,
) -> dict[str, Any]:
    """The report of iteration `number` from its orientation and ACT's result; each
    task's end adds to the count it is `counted_as`."""
    tasks: list[dict[str, Any]] = list((act or {}).get("tasks") or [])
    ends = {end.value: end for end in TaskEnd}
    counted = [ends[s].counted_as for task in tasks if (s := str(task.get("status"))) in ends]
    return {
        "outcome": outcome,
        "planned": len(tasks),
        "done": counted.count("done"),
        "failed": counted.count("failed"),
        "skipped": counted.count("skipped"),
        "retried": sum(int(task.get("attempts") or 1) > 1 for task in tasks),
        "waiting": counted.count("waiting"),
        "open_questions": len(questions.open_questions(db)),
        "confidence": orientation.confidence if orientation else None,
        **done_proof(db, number),
    }


def done_proof(db: Database, number: int) -> dict[str, Any]:
    """`{"proof": [...]}` when iteration `number` confirmed DONE against the tests
    and the spec ties criteria to tests (each criterion, whether it is proven,
    its tests and how each fared); {} otherwise."""
    row = history.iteration(db, number)
    if row is None:
        return {}
    found = event_rows.of_iteration(db, int(row["id"]), ("done.tests",))
    if not found:
        return {}
    data = json.loads(found[-1][5])
    entries = data.get("proof") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not any(
        isinstance(e, dict) and e.get("tests") for e in entries
    ):
        return {}
    return {"proof": entries}


def line(report: dict[str, Any]) -> str:
    """One line for a person: `2 done, 1 failed, 0 skipped, ...`."""
    open_questions = report.get("open_questions", 0)
    return (
        f"{report.get('done', 0)} done, {report.get('failed', 0)} failed, "
        f"{report.get('skipped', 0)} skipped, {report.get('retried', 0)} retried, "
        f"{report.get('waiting', 0)} waiting; {open_questions} open "
        f"question{'' if open_questions == 1 else 's'}; "
        f"confidence {report.get('confidence') or '-'}" + _proven(report)
    )


def _proven(report: dict[str, Any]) -> str:
    """`; 3 of 4 criteria proven by tests` after DONE's confirmation, else ""."""
    proof = [entry for entry in report.get("proof") or [] if entry.get("tests")]
    if not proof:
        return ""
    proven = sum(1 for entry in proof if entry.get("proven"))
    return f"; {proven} of {len(proof)} criteria proven by tests"


@contextlib.contextmanager
def plan_frame(events: Events, number: int, plan: IterationPlan) -> Iterator[None]:
    """`plan.started` now; `plan.failed` with the error if ACT raises (its normal
    ending is `conclude`'s, with the report's counts)."""
    plan_started(events, number, plan)
    try:
        yield
    except BaseException as exc:
        events.emit("plan.failed", {"plan": number, "error": type(exc).__name__})
        raise


def plan_started(events: Events, number: int, plan: IterationPlan) -> None:
    try:
        layers = len(batches(plan))
    except StructuralError:  # ORIENT checked the plan; a count is not worth failing for
        layers = 0
    events.emit(
        "plan.started",
        {"plan": number, "intent": plan.intent, "tasks": len(plan.tasks), "batches": layers},
    )


def plan_ended(events: Events, number: int, report: dict[str, Any], cancelled: bool) -> str:
    """Emit how the plan ended; returns the event's kind."""
    if cancelled:
        kind = "plan.cancelled"
    elif report.get("outcome") == IterationOutcome.AWAITING_APPROVAL:
        kind = "plan.waiting"  # suspended for a person's approval: the next iteration acts
    elif report.get("outcome") in LANDED and not report.get("failed"):
        kind = "plan.completed"
    else:
        kind = "plan.failed"
    counts = {
        name: report.get(name)
        for name in ("done", "failed", "skipped", "retried", "waiting", "planned")
    }
    events.emit(kind, {"plan": number, "outcome": report.get("outcome"), **counts})
    return kind


def conclude(
    db: Database,
    events: Events,
    number: int,
    orientation: Orientation | None,
    act: dict[str, Any] | None,
    outcome: IterationOutcome | None,
    cancelled: bool,
) -> dict[str, Any]:
    """The iteration's report; when a plan ran, its ending event too."""
    report = build(db, number, orientation, act, outcome)
    if act is not None:
        plan_ended(events, number, report, cancelled)
    return report


def report_summary(raw: str | None, db: Database, number: int) -> list[str]:
    """`soda show N`'s REPORT section: the report, and the iteration's questions."""
    asked = questions.of_iteration(db, number)
    if not raw and not asked:
        return []
    lines = ["", "REPORT"]
    if raw:
        report = json.loads(raw)
        lines.append(f"  {line(report)}")
        if report.get("proof"):
            lines.append("  acceptance criteria and the tests that prove them:")
            lines += proof_lines(report["proof"], "    ")
    for q in asked:
        lines.append(f"  question {q.id} ({q.status}, task {q.task_key or '-'}): {q.question}")
        if q.answer:
            lines.append(f"    answer: {q.answer}")
    return lines
