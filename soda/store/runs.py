"""Runs and iterations: the rows that make every phase durable."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlite_utils import Database

from soda.store.db import dumps, now


def start_run(db: Database, row: dict[str, Any]) -> int:
    with db.conn:
        return int(db["runs"].insert({"started_at": now(), "status": "running", **row}).last_pk)


def finish_run(db: Database, run_id: int, status: str, reason: str) -> None:
    with db.conn:
        db["runs"].update(run_id, {"status": status, "final_reason": reason, "ended_at": now()})


def next_iteration_number(db: Database) -> int:
    """Iteration numbers continue across runs."""
    row = db.execute("SELECT COALESCE(MAX(number), 0) FROM iterations").fetchone()
    return int(row[0]) + 1


def start_iteration(db: Database, run_id: int, number: int) -> int:
    with db.conn:
        row = {"run_id": run_id, "number": number, "started_at": now(), "phase": "sense"}
        return int(db["iterations"].insert(row).last_pk)


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
        db["iterations"].update(iteration_id, row)


def record_halt(db: Database, row: dict[str, Any]) -> None:
    with db.conn:
        db["halts"].insert({**row, "created_at": now()})
