"""The tracker's issues run in the fleet (`[tracker] fleet`): each issue's fleet
run id (`tracker_runs`, written before the run is started), and the writers'
inputs read from an issue's thread that wait to be sent to its run (rows of
`human_inputs` whose source names the issue: `tracker:issue-N:comment-ID`).
soda.daemon.issue_fleet decides; this module only reads and writes the rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlite_utils import Database

from soda.store.db import now


def run_of(db: Database, number: int) -> str | None:
    """The fleet run of issue `number`, once one was (or is being) started."""
    row = db.execute("SELECT run_id FROM tracker_runs WHERE number = ?", [number]).fetchone()
    return str(row[0]) if row else None


def runs(db: Database) -> dict[int, str]:
    """Every issue's fleet run, by issue number."""
    rows = db.execute("SELECT number, run_id FROM tracker_runs ORDER BY number").fetchall()
    return {int(number): str(run) for number, run in rows}


def save_run(db: Database, number: int, run_id: str) -> None:
    """Issue `number` runs as `run_id` (written before the run is started)."""
    with db.conn:
        db.conn.execute(
            "INSERT INTO tracker_runs (number, run_id, started_at) VALUES (?, ?, ?)"
            " ON CONFLICT (number) DO UPDATE SET run_id = excluded.run_id",
            [number, run_id, now()],
        )


@dataclass(frozen=True)
class Unsent:
    """A writer's input read from an issue's thread, not yet sent to its run."""

    id: int
    kind: str
    payload_json: str
    source: str
    """`tracker:issue-N:comment-ID`: the run drops a second signal of this key."""


def unsent(db: Database, number: int) -> list[Unsent]:
    """Issue `number`'s inputs still pending, oldest first."""
    rows = db.execute(
        "SELECT id, kind, payload_json, source_file FROM human_inputs"
        " WHERE status = 'pending' AND source = 'tracker' AND source_file LIKE ?"
        " ORDER BY id",
        [f"tracker:issue-{number}:%"],
    ).fetchall()
    return [Unsent(int(i), str(k), str(p), str(s)) for i, k, p, s in rows]


def mark_sent(db: Database, input_id: int, response: str) -> None:
    """The input went to the issue's run (or was acted on here): applied, with
    what was done."""
    with db.conn:
        db.conn.execute(
            "UPDATE human_inputs SET status = 'applied', applied_at = ?, response = ?"
            " WHERE id = ? AND status = 'pending'",
            [now(), response, input_id],
        )
