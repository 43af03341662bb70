"""Plans suspended until a person's verdict: the `approvals` table.

With `[approval] wait = "suspend"` (and in every fleet run) a plan that needs a
person's approval does not hold its iteration: it is kept here, `waiting`, with
its deadline (seconds since the epoch), and the iteration ends. The next
iteration acts on the verdict (`approved` or `rejected`, with its reason): a
person's, or the timeout's once the deadline passed. A waiting plan outlives
the process: it is a row.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlite_utils import Database

from soda.store.db import last_pk, now

_COLUMNS = "id, iteration, plan_json, timeout, deadline, status, reason, asked_at, settled_at"


@dataclass(frozen=True)
class Approval:
    id: int
    iteration: int
    """The iteration whose plan waits: verdicts name it."""
    plan_json: str
    timeout: float
    deadline: float
    """Seconds since the epoch; at or past it, the plan is rejected."""
    status: str
    """waiting, approved or rejected."""
    reason: str | None
    asked_at: str
    settled_at: str | None


def wait(
    db: Database,
    *,
    iteration_id: int | None,
    iteration: int,
    plan_json: str,
    timeout: float,
    deadline: float,
) -> Approval:
    """Keep iteration `iteration`'s plan as waiting for a verdict."""
    row = {
        "iteration_id": iteration_id,
        "iteration": iteration,
        "plan_json": plan_json,
        "timeout": timeout,
        "deadline": deadline,
        "status": "waiting",
        "asked_at": now(),
    }
    with db.conn:
        approval_id = last_pk(db.table("approvals").insert(row))
    found = get(db, approval_id)
    assert found is not None
    return found


def get(db: Database, approval_id: int) -> Approval | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM approvals WHERE id = ?", [approval_id]).fetchone()
    return Approval(*row) if row else None


def waiting(db: Database) -> Approval | None:
    """The plan that waits for a verdict, if one does (the newest)."""
    row = db.execute(
        f"SELECT {_COLUMNS} FROM approvals WHERE status = 'waiting' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    return Approval(*row) if row else None


def settle(db: Database, approval_id: int, approved: bool, reason: str) -> None:
    with db.conn:
        db.execute(
            "UPDATE approvals SET status = ?, reason = ?, settled_at = ? WHERE id = ?",
            ["approved" if approved else "rejected", reason, now(), approval_id],
        )


def expire(db: Database, approval_id: int) -> None:
    """The timeout was counted elsewhere (soda fleet's durable timer) and passed:
    the next look rejects the plan whatever this machine's clock says."""
    with db.conn:
        db.execute("UPDATE approvals SET deadline = 0 WHERE id = ?", [approval_id])
