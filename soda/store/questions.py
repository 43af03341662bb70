"""Questions agents ask a person (`ask_human`): the `questions` table.

A question's life: `open` (asked; its task waits) -> `answered` (`soda answer Q`
or an inbox file) -> `resumed` (the task went on with the answer) or `closed`
(nobody will use the answer any more). Open questions outlive the process: they
are rows, read again after a restart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from soda.store.db import last_pk, now

_COLUMNS = (
    "id, iteration, task_key, task_id, agent, question, status, answer, call_id,"
    " conversation_json, asked_at, answered_at"
)


@dataclass(frozen=True)
class Question:
    id: int
    iteration: int
    task_key: str | None
    task_id: int | None
    agent: str
    question: str
    status: str
    answer: str | None
    call_id: str | None
    conversation_json: str | None
    asked_at: str
    answered_at: str | None


def ask(
    db: Database,
    *,
    iteration_id: int | None,
    iteration: int,
    agent: str,
    question: str,
    task_key: str | None = None,
    task_id: int | None = None,
    call_id: str | None = None,
) -> int:
    """Store a new open question; returns its id."""
    row: dict[str, Any] = {
        "iteration_id": iteration_id,
        "iteration": iteration,
        "task_key": task_key,
        "task_id": task_id,
        "agent": agent,
        "question": question,
        "status": "open",
        "call_id": call_id,
        "asked_at": now(),
    }
    with db.conn:
        return last_pk(db.table("questions").insert(row))


def keep_conversation(db: Database, question_id: int, conversation_json: str) -> None:
    """The asking agent's conversation up to the question, to resume it from."""
    with db.conn:
        db.execute(
            "UPDATE questions SET conversation_json = ? WHERE id = ?",
            [conversation_json, question_id],
        )


def get(db: Database, question_id: int) -> Question | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM questions WHERE id = ?", [question_id]).fetchone()
    return Question(*row) if row else None


def open_questions(db: Database, branch: str | None = None) -> list[Question]:
    """Questions waiting for a person, oldest first (for `soda status`); with
    `branch`, only those asked on that milestone branch."""
    return _where(db, "status = 'open'", branch=branch)


def answered(db: Database, branch: str | None = None) -> list[Question]:
    """Answered questions whose task has not resumed yet, oldest first; with
    `branch`, only those asked on that milestone branch."""
    return _where(db, "status = 'answered'", branch=branch)


def unanswered(db: Database, branch: str) -> list[Question]:
    """The open questions asked on milestone `branch` that no answer waiting to be
    recorded (a pending or claimed `answer` input) targets yet, oldest first: what
    a person's next answer there answers."""
    return _where(
        db,
        "status = 'open' AND NOT EXISTS (SELECT 1 FROM human_inputs h WHERE h.kind = 'answer'"
        " AND h.status IN ('pending', 'claimed')"
        " AND json_extract(h.payload_json, '$.target') = questions.id)",
        branch=branch,
    )


def of_iteration(db: Database, iteration: int) -> list[Question]:
    return _where(db, "iteration = ?", [iteration])


def answer(db: Database, question_id: int, text: str) -> bool:
    """Record the answer to an open question; False when it is not open."""
    with db.conn:
        cursor = db.execute(
            "UPDATE questions SET status = 'answered', answer = ?, answered_at = ?"
            " WHERE id = ? AND status = 'open'",
            [text, now(), question_id],
        )
    return cursor.rowcount == 1


def settle(db: Database, question_id: int, status: str) -> None:
    """An answered question's end: `resumed` (its task went on) or `closed`."""
    with db.conn:
        db.execute(
            "UPDATE questions SET status = ?, resumed_at = ? WHERE id = ?",
            [status, now(), question_id],
        )


def _where(
    db: Database, condition: str, params: list[Any] | None = None, branch: str | None = None
) -> list[Question]:
    values = list(params or [])
    if branch is not None:  # the run of the iteration that asked was on `branch`
        condition += (
            " AND iteration_id IN (SELECT i.id FROM iterations i JOIN runs r ON i.run_id = r.id"
            " WHERE r.milestone_branch = ?)"
        )
        values.append(branch)
    rows = db.execute(f"SELECT {_COLUMNS} FROM questions WHERE {condition} ORDER BY id", values)
    return [Question(*row) for row in rows]
