"""The outcome vocabularies (soda.contracts.outcomes): every member has its place in
every table that translates it, and every value is the text the database, the
events and `--json` have always held."""

from __future__ import annotations

import sqlite3
from enum import StrEnum
from pathlib import Path

import pytest
from sqlite_utils import Database

from soda.contracts.outcomes import (
    ERROR_RUNS,
    FAILURE_OUTCOMES,
    LOOP_OUTCOMES,
    RETRYABLE,
    SETTLED,
    UNFINISHED,
    AttemptStatus,
    IterationDecision,
    IterationOutcome,
    RunStatus,
    TaskEnd,
    TaskStatus,
)
from soda.loop.decide import Decision, Kind
from soda.loop.run import Ending
from soda.store import open_db, runs
from soda.store.db import dumps
from soda.trace import SqliteTracker

# The strings as they were spelled before the enums, and as old databases hold them.
ATTEMPTS = {
    "merged", "no_changes", "gave_up", "gate_failed", "conflict", "rejected", "cancelled",
    "waiting", "targets_failed",
}  # fmt: skip
TASK_ENDS = {"completed", "gave_up", "failed", "cancelled", "skipped", "waiting"}
ITERATION_OUTCOMES = {
    "merged", "no_changes", "gate_failed", "conflict", "rejected", "nothing_completed",
    "awaiting_approval", "done", "stuck", "done_refused", "budget", "transient", "halted",
    "error", "interrupted", "crashed", "aborted", "plan_only", "targets_failed",
}  # fmt: skip
DECISIONS = {"DONE", "STUCK", "CONTINUE", "HALT"}
RUN_STATUSES = {
    "running", "stopped", "done", "stuck", "halt", "transient", "interrupted", "error",
    "crashed", "aborted", "plan_only",
}  # fmt: skip
TASK_STATUSES = {"open", "in_progress", "blocked", "closed"}


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return open_db(tmp_path / "soda.db")


@pytest.mark.parametrize(
    ("vocabulary", "strings"),
    [
        (AttemptStatus, ATTEMPTS),
        (TaskEnd, TASK_ENDS),
        (IterationOutcome, ITERATION_OUTCOMES),
        (IterationDecision, DECISIONS),
        (RunStatus, RUN_STATUSES),
        (TaskStatus, TASK_STATUSES),
    ],
)
def test_values_are_the_strings_always_stored(vocabulary: type[StrEnum], strings: set[str]) -> None:
    assert {member.value for member in vocabulary} == strings
    for member in vocabulary:
        assert member == member.value and f"{member}" == member.value
        assert dumps({"v": member}) == dumps({"v": member.value})


def test_every_attempt_status_ends_its_task_as_before() -> None:
    # the dict ACT used, with `.get(status, status)` for the statuses it left out
    before = {
        "merged": "completed",
        "no_changes": "completed",
        "gate_failed": "failed",
        "conflict": "failed",
        "rejected": "failed",
        "targets_failed": "failed",  # new with target tests: a failure like gate_failed
    }
    for attempt in AttemptStatus:
        assert isinstance(attempt.task_end, TaskEnd)
        assert attempt.task_end == before.get(attempt, attempt.value)


def test_every_task_end_has_its_event_and_its_report_count() -> None:
    for end in TaskEnd:
        # the expression ACT used for the event's kind
        event = {"completed": "act.task.completed", "waiting": "act.task.waiting"}.get(
            end, "act.task.failed" if end != "skipped" else "act.task.skipped"
        )
        assert end.event == event
    counts = {end.value: end.counted_as for end in TaskEnd}
    assert counts == {
        "completed": "done",
        "gave_up": "failed",
        "failed": "failed",
        "cancelled": "skipped",
        "skipped": "skipped",
        "waiting": "waiting",
    }


def test_failures_name_the_iteration_most_telling_first() -> None:
    failing = {a for a in AttemptStatus if a.task_end is TaskEnd.FAILED}
    assert set(FAILURE_OUTCOMES) == failing
    assert [a.value for a in FAILURE_OUTCOMES] == [
        "rejected",
        "gate_failed",
        "targets_failed",
        "conflict",
    ]
    for attempt, outcome in FAILURE_OUTCOMES.items():
        assert isinstance(outcome, IterationOutcome) and outcome.value == attempt.value
    assert RETRYABLE == {"gave_up", "gate_failed", "targets_failed", "conflict"}
    assert RETRYABLE <= set(AttemptStatus)


def test_groupings_are_members_and_unchanged() -> None:
    assert UNFINISHED == {"interrupted", "aborted", "crashed", "error", "transient", "budget"}
    assert all(isinstance(o, IterationOutcome) for o in UNFINISHED)
    assert SETTLED == {"DONE", "STUCK", "HALT"}
    assert all(isinstance(d, IterationDecision) for d in SETTLED)
    assert ERROR_RUNS == (RunStatus.ERROR, RunStatus.ABORTED, RunStatus.CRASHED, "transient")
    assert LOOP_OUTCOMES == {
        "gate_failed": "tests failed",
        "targets_failed": "tests failed",
        "done_refused": "tests failed",
        "no_changes": "no progress",
        "nothing_completed": "no progress",
        "conflict": "conflict",
        "rejected": "rejected",
    }
    assert all(isinstance(o, IterationOutcome) for o in LOOP_OUTCOMES)
    assert not UNFINISHED & set(LOOP_OUTCOMES)
    assert IterationOutcome.MERGED not in LOOP_OUTCOMES


def test_decide_and_the_run_speak_the_recorded_vocabularies() -> None:
    # DECIDE's kinds are recorded by name in `iterations.decision`
    assert {kind.name for kind in Kind} <= {d.value for d in IterationDecision}
    settled = {kind: Decision(kind, "why").settled_outcome() for kind in Kind}
    assert settled == {
        Kind.DONE: IterationOutcome.DONE,
        Kind.STUCK: IterationOutcome.STUCK,
        Kind.CONTINUE: None,
    }
    assert Decision(Kind.CONTINUE, "why", IterationOutcome.DONE_REFUSED).settled_outcome() == (
        "done_refused"
    )
    # every way a run can end is a status its row can hold
    statuses = {ending: ending.run_status for ending in Ending}
    assert all(isinstance(status, RunStatus) for status in statuses.values())
    assert statuses[Ending.CONTINUE] is RunStatus.STOPPED
    assert all(s == e.value for e, s in statuses.items() if e is not Ending.CONTINUE)


def test_trace_statuses_are_exactly_what_the_tasks_table_admits(db: Database) -> None:
    tracker = SqliteTracker(db, "calc")
    task = tracker.create("Parser")
    assert type(task.status) is TaskStatus and task.status is TaskStatus.OPEN
    for status in TaskStatus:
        db.execute("UPDATE tasks SET status = ? WHERE id = ?", [status, task.id])
        assert tracker.show(task.id).status is status
    with pytest.raises(sqlite3.IntegrityError):
        db.execute("UPDATE tasks SET status = 'done' WHERE id = ?", [task.id])


def test_enums_are_stored_as_plain_text(db: Database) -> None:
    row = {"spec_path": "SPEC.md", "milestone": "m", "milestone_branch": "soda/m"}
    run_id = runs.start_run(db, {**row, "base_branch": "main"})
    assert runs.running(db) == [(run_id, None)]
    iteration_id = runs.start_iteration(db, run_id, 1)
    runs.save_iteration(
        db, iteration_id, {"outcome": IterationOutcome.MERGED, "decision": "CONTINUE"}
    )
    runs.finish_run(db, run_id, RunStatus.DONE, "spec met")
    stored = db.execute(
        "SELECT r.status, typeof(r.status), i.outcome, typeof(i.outcome)"
        " FROM runs r JOIN iterations i ON i.run_id = r.id"
    ).fetchone()
    assert stored == ("done", "text", "merged", "text")
    assert runs.iteration_outcome(db, iteration_id) == IterationOutcome.MERGED
