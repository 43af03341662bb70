"""Runs and iterations: the rows that make every phase durable."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from sqlite_utils import Database

from soda.contracts.outcomes import IterationOutcome, RunStatus
from soda.store.db import dumps, insert, last_pk, now, update


def start_run(db: Database, row: dict[str, Any]) -> int:
    with db.conn:
        columns = {"started_at": now(), "status": RunStatus.RUNNING, **row}
        return last_pk(db.table("runs").insert(columns))


def finish_run(db: Database, run_id: int, status: RunStatus, reason: str) -> None:
    with db.conn:
        row = {"status": status, "final_reason": reason, "ended_at": now()}
        db.table("runs").update(run_id, row)


def next_iteration_number(db: Database) -> int:
    """Iteration numbers continue across runs."""
    row = db.execute("SELECT COALESCE(MAX(number), 0) FROM iterations").fetchone()
    return int(row[0]) + 1


@dataclass(frozen=True)
class IterationRef:
    """One iteration's identity, passed down explicitly: its number (what people
    see: `soda show N`) and its row id (what other tables point at)."""

    number: int
    id: int


def start_iteration(db: Database, run_id: int, number: int) -> int:
    with db.conn:
        row = {"run_id": run_id, "number": number, "started_at": now(), "phase": "sense"}
        return insert(db, "iterations", row)


def save_iteration(db: Database, iteration_id: int, columns: dict[str, Any]) -> None:
    """Write columns of one iteration row in one transaction; pydantic models and
    other structures are stored as JSON."""
    row = {
        key: (
            dumps(value.model_dump(mode="json"))
            if isinstance(value, BaseModel)
            else dumps(value)
            if isinstance(value, dict | list)
            else value
        )
        for key, value in columns.items()
    }
    with db.conn:
        update(db, "iterations", iteration_id, row)


def record_halt(db: Database, row: dict[str, Any]) -> None:
    with db.conn:
        db.table("halts").insert({**row, "created_at": now()})


# --- reading -------------------------------------------------------------------


def recent_iterations(
    db: Database, run_id: int, before: int, limit: int
) -> list[tuple[int, str | None, str | None, str | None, str | None]]:
    """number, intent, decision, outcome and decision_reason of run `run_id`'s
    iterations numbered below `before`, newest first."""
    return db.execute(
        "SELECT number, intent, decision, outcome, decision_reason FROM iterations"
        " WHERE run_id = ? AND number < ? ORDER BY number DESC LIMIT ?",
        [run_id, before, limit],
    ).fetchall()


def unfinished_iteration(db: Database) -> tuple[int, str] | None:
    """number and phase of the newest iteration without an end."""
    row: tuple[int, str] | None = db.execute(
        "SELECT number, phase FROM iterations WHERE ended_at IS NULL ORDER BY number DESC LIMIT 1"
    ).fetchone()
    return row


def last_decision(db: Database) -> tuple[str, str | None] | None:
    """decision and decision_reason of the newest iteration that decided."""
    row: tuple[str, str | None] | None = db.execute(
        "SELECT decision, decision_reason FROM iterations WHERE decision IS NOT NULL"
        " ORDER BY number DESC LIMIT 1"
    ).fetchone()
    return row


# --- crash recovery ------------------------------------------------------------


def running(db: Database) -> list[tuple[int, int | None]]:
    """id and pid of every run still marked running."""
    return db.execute("SELECT id, pid FROM runs WHERE status = ?", [RunStatus.RUNNING]).fetchall()


def abort_runs(db: Database, run_ids: list[int], reason: str) -> list[int]:
    """Mark the runs aborted with `reason`, and their unfinished iterations aborted
    in the phase they reached, in one transaction; returns those iterations' numbers."""
    aborted = []
    stamp = now()
    with db.conn:
        for run_id in run_ids:
            rows = db.execute(
                "SELECT id, number, phase FROM iterations WHERE run_id = ? AND ended_at IS NULL",
                [run_id],
            ).fetchall()
            for iteration_id, number, phase in rows:
                db.table("iterations").update(
                    iteration_id,
                    {
                        "outcome": IterationOutcome.ABORTED,
                        "error": f"aborted in phase {phase}",
                        "ended_at": stamp,
                    },
                )
                aborted.append(number)
            db.table("runs").update(
                run_id, {"status": RunStatus.ABORTED, "ended_at": stamp, "final_reason": reason}
            )
    return aborted


def milestone_branches(db: Database) -> list[str]:
    """Every milestone branch a run has worked on."""
    return [row[0] for row in db.execute("SELECT DISTINCT milestone_branch FROM runs")]


def iteration_on_branch(
    db: Database, number: int, branch: str
) -> tuple[int, int, str | None, str | None, str, str | None, str, str] | None:
    """Iteration `number` if a run on milestone branch `branch` ran it: its id,
    run_id, outcome, merged_commit, started_at, ended_at, phase and the run's
    milestone."""
    row: tuple[int, int, str | None, str | None, str, str | None, str, str] | None = db.execute(
        "SELECT i.id, i.run_id, i.outcome, i.merged_commit, i.started_at, i.ended_at,"
        " i.phase, r.milestone FROM iterations i JOIN runs r ON r.id = i.run_id"
        " WHERE i.number = ? AND r.milestone_branch = ?",
        [number, branch],
    ).fetchone()
    return row


def window_records(
    db: Database, run_id: int, before: int, window: int, outcomes: Iterable[str]
) -> list[tuple[int, str | None, str | None, str | None, str | None]]:
    """number, intent, outcome, act_json and orient_json of run `run_id`'s last
    `window` iterations numbered below `before`, newest first. The JSON records
    are read only for `outcomes`; the window is picked walking the run's
    (run_id, number) index backwards (numbers grow with ids), so the cost does
    not grow with the run's age."""
    wanted = list(outcomes)
    marks = ", ".join("?" for _ in wanted) or "NULL"
    return db.execute(
        "SELECT number, intent, outcome,"
        f" CASE WHEN outcome IN ({marks}) THEN act_json END,"
        f" CASE WHEN outcome IN ({marks}) THEN orient_json END"
        " FROM iterations WHERE id IN (SELECT id FROM iterations"
        "  WHERE run_id = ? AND number < ? ORDER BY number DESC LIMIT ?)"
        " ORDER BY number DESC",
        [*wanted, *wanted, run_id, before, window],
    ).fetchall()


def last_act_record(db: Database, before: int, window: int) -> tuple[int, str | None, str] | None:
    """number, intent and act_json of the newest iteration numbered below `before`
    that acted, looking only at the last `window` iterations of any run (walking
    the primary key backwards: the cost does not grow with the history)."""
    row: tuple[int, str | None, str] | None = db.execute(
        "SELECT number, intent, act_json FROM iterations WHERE id IN"
        " (SELECT id FROM iterations WHERE number < ? ORDER BY id DESC LIMIT ?)"
        " AND act_json IS NOT NULL ORDER BY number DESC LIMIT 1",
        [before, window],
    ).fetchone()
    return row


def iteration_outcome(db: Database, iteration_id: int) -> str | None:
    """The outcome recorded so far for one iteration."""
    row = db.execute("SELECT outcome FROM iterations WHERE id = ?", [iteration_id]).fetchone()
    return row[0] if row else None


def progress_records(
    db: Database, before: int, window: int
) -> list[tuple[int, str | None, str | None, str | None, str | None]]:
    """number, outcome, progress, decision_reason and act_json of the last `window`
    iterations numbered below `before`, of any run, newest first (the primary key
    walked backwards: the cost does not grow with the history)."""
    return db.execute(
        "SELECT number, outcome, progress, decision_reason, act_json FROM iterations"
        " WHERE id IN (SELECT id FROM iterations WHERE number < ? ORDER BY id DESC LIMIT ?)"
        " ORDER BY number DESC",
        [before, window],
    ).fetchall()


def last_spec_sha(db: Database, before: int) -> str | None:
    """The spec hash the newest iteration numbered below `before` read (any run;
    the last 50 iterations looked at, walking the primary key backwards)."""
    row = db.execute(
        "SELECT spec_sha FROM iterations WHERE id IN"
        " (SELECT id FROM iterations WHERE number < ? ORDER BY id DESC LIMIT 50)"
        " AND spec_sha IS NOT NULL ORDER BY number DESC LIMIT 1",
        [before],
    ).fetchone()
    return row[0] if row else None
