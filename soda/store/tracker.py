"""The tracker's tables: the labelled issues seen (`tracker_items`), the comments
read on their threads (`tracker_comments`) and the comments soda wrote back
(`tracker_writes`). soda.forge.tracker decides; this module only reads and writes
the rows, each change in one transaction.

An issue's life: `queued` (a writer's, with its spec and branch) or `data` (kept
with its author, never run); then `running`, and `done`, `stuck`, `halted` or
`cancelled`. A comment is read once: its id is the key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlite_utils import Database

from soda.store.db import now

STATES = ("queued", "data", "running", "done", "stuck", "halted", "cancelled")


@dataclass(frozen=True)
class TrackerItem:
    """One labelled issue as soda knows it."""

    number: int
    forge_id: int
    title: str
    author: str
    association: str
    state: str
    reason: str | None
    spec: str | None
    branch: str | None
    depends: tuple[int, ...]
    body_sha: str | None
    pr_number: int | None
    last_word: str | None
    labels: tuple[str, ...] = ()


_COLUMNS = (
    "number, forge_id, title, author, association, state, reason, spec, branch,"
    " depends_json, body_sha, pr_number, last_word, labels_json"
)


def _item(row: tuple[object, ...]) -> TrackerItem:
    values = list(row)
    values[9] = tuple(int(n) for n in json.loads(str(values[9])))
    values[13] = tuple(str(name) for name in json.loads(str(values[13])))
    return TrackerItem(*values)  # type: ignore[arg-type]


def item(db: Database, number: int) -> TrackerItem | None:
    row = db.execute(f"SELECT {_COLUMNS} FROM tracker_items WHERE number = ?", [number]).fetchone()
    return _item(row) if row else None


def items(db: Database) -> list[TrackerItem]:
    """Every issue seen, by number."""
    rows = db.execute(f"SELECT {_COLUMNS} FROM tracker_items ORDER BY number").fetchall()
    return [_item(row) for row in rows]


def save_item(db: Database, found: TrackerItem) -> None:
    """Insert or update the issue's row (its state and PR are kept once past
    `queued`/`data`: a re-read issue does not restart a run)."""
    with db.conn:
        db.conn.execute(
            "INSERT INTO tracker_items (number, forge_id, title, author, association, state,"
            " reason, spec, branch, depends_json, body_sha, pr_number, last_word, labels_json,"
            " seen_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (number) DO UPDATE SET title = excluded.title,"
            " depends_json = excluded.depends_json, body_sha = excluded.body_sha,"
            " spec = excluded.spec, labels_json = excluded.labels_json,"
            " branch = coalesce(excluded.branch, branch), reason = excluded.reason,"
            " updated_at = excluded.updated_at",
            [
                found.number,
                found.forge_id,
                found.title,
                found.author,
                found.association,
                found.state,
                found.reason,
                found.spec,
                found.branch,
                json.dumps(list(found.depends)),
                found.body_sha,
                found.pr_number,
                found.last_word,
                json.dumps(list(found.labels)),
                now(),
                now(),
            ],
        )


def set_state(
    db: Database,
    number: int,
    state: str,
    last_word: str | None = None,
    pr_number: int | None = None,
    reason: str | None = None,
) -> None:
    if state not in STATES:
        raise ValueError(f"unknown tracker state {state!r}")
    with db.conn:
        db.conn.execute(
            "UPDATE tracker_items SET state = ?, last_word = coalesce(?, last_word),"
            " pr_number = coalesce(?, pr_number), reason = coalesce(?, reason),"
            " updated_at = ? WHERE number = ?",
            [state, last_word, pr_number, reason, now(), number],
        )


def last_seen(db: Database, number: int) -> str | None:
    """When the forge said the issue last changed, as soda last read it."""
    row = db.execute("SELECT seen FROM tracker_items WHERE number = ?", [number]).fetchone()
    return str(row[0]) if row and row[0] else None


def set_seen(db: Database, number: int, seen: str) -> None:
    with db.conn:
        db.conn.execute("UPDATE tracker_items SET seen = ? WHERE number = ?", [seen, number])


def set_labels(db: Database, number: int, labels: tuple[str, ...]) -> None:
    with db.conn:
        db.conn.execute(
            "UPDATE tracker_items SET labels_json = ? WHERE number = ?",
            [json.dumps(list(labels)), number],
        )


@dataclass(frozen=True)
class Note:
    """Something done to an issue besides a comment (a label added or removed, its
    body edited), by whom, and whether soda acted on it or kept it as data."""

    key: str
    number: int
    kind: str
    author: str
    status: str
    detail: str


def record_note(db: Database, note: Note) -> bool:
    """Record `note` once (by its key); False when it was recorded before."""
    with db.conn:
        cursor = db.conn.execute(
            "INSERT INTO tracker_notes (key, number, kind, author, status, detail, seen_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
            [note.key, note.number, note.kind, note.author, note.status, note.detail, now()],
        )
    return cursor.rowcount == 1


def notes(db: Database, number: int) -> list[Note]:
    rows = db.execute(
        "SELECT key, number, kind, author, status, detail FROM tracker_notes"
        " WHERE number = ? ORDER BY seen_at, key",
        [number],
    ).fetchall()
    return [Note(*row) for row in rows]


@dataclass(frozen=True)
class SeenComment:
    comment_id: int
    number: int
    author: str
    association: str
    status: str
    reason: str | None
    body: str
    input_id: int | None


def comment_seen(db: Database, comment_id: int) -> bool:
    row = db.execute("SELECT 1 FROM tracker_comments WHERE comment_id = ?", [comment_id]).fetchone()
    return row is not None


def record_comment(
    db: Database,
    comment: SeenComment,
    input_payload: str | None = None,
    input_kind: str = "correction",
    source_file: str | None = None,
) -> int | None:
    """Record a comment read for the first time, with the human input it became
    (when `input_payload` is given) in the same transaction. None when it was
    read before (nothing written), else the input's id (0 for no input)."""
    with db.conn:
        if comment_seen(db, comment.comment_id):
            return None
        input_id = 0
        if input_payload is not None:
            cursor = db.conn.execute(
                "INSERT INTO human_inputs (kind, payload_json, source, source_file, status,"
                " received_at) VALUES (?, ?, 'tracker', ?, 'pending', ?)",
                [input_kind, input_payload, source_file, now()],
            )
            input_id = int(cursor.lastrowid or 0)
        db.conn.execute(
            "INSERT INTO tracker_comments (comment_id, number, author, association, status,"
            " reason, body, input_id, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                comment.comment_id,
                comment.number,
                comment.author,
                comment.association,
                comment.status,
                comment.reason,
                comment.body,
                input_id or None,
                now(),
            ],
        )
    return input_id


def comments(db: Database, number: int) -> list[SeenComment]:
    rows = db.execute(
        "SELECT comment_id, number, author, association, status, reason, body, input_id"
        " FROM tracker_comments WHERE number = ? ORDER BY comment_id",
        [number],
    ).fetchall()
    return [SeenComment(*row) for row in rows]


def written(db: Database, number: int, event: str) -> bool:
    row = db.execute(
        "SELECT 1 FROM tracker_writes WHERE number = ? AND event = ?", [number, event]
    ).fetchone()
    return row is not None


def record_write(db: Database, number: int, event: str, comment_id: int | None) -> None:
    with db.conn:
        db.conn.execute(
            "INSERT INTO tracker_writes (number, event, comment_id, written_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (number, event) DO NOTHING",
            [number, event, comment_id, now()],
        )


@dataclass(frozen=True)
class BranchIteration:
    """An iteration of an issue's milestone branch, as the loop recorded it."""

    number: int
    decision: str | None
    reason: str | None
    merged_commit: str | None
    ended: bool


def branch_iterations(db: Database, branch: str) -> list[BranchIteration]:
    """The iterations of runs on `branch` (an issue's milestone), oldest first."""
    rows = db.execute(
        "SELECT i.number, i.decision, i.decision_reason, i.merged_commit, i.ended_at IS NOT NULL"
        " FROM iterations i JOIN runs r ON i.run_id = r.id WHERE r.milestone_branch = ?"
        " ORDER BY i.number",
        [branch],
    ).fetchall()
    return [BranchIteration(n, d, r, m, bool(e)) for n, d, r, m, e in rows]
