"""The forge's tables: the milestone's pull request, the comments seen on it, and
the ETags of the responses read (soda.forge decides; this module only reads and
writes the rows).

A comment's life: seen once (its `(kind, item_id)` is the key, so a restart never
takes it twice) as `input` (a correction input recorded in the same transaction),
`ignored` (with the reason) or `own` (soda's reply); an input's row later gets the
commit soda named in its reply (`reply_commit`, `replied_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from soda.store.db import now


@dataclass(frozen=True)
class PullRow:
    """The milestone branch's pull request as soda last knew it."""

    branch: str
    repository: str
    number: int | None
    node_id: str | None
    url: str | None
    draft: bool
    state: str
    pushed_sha: str | None
    body_sha: str | None
    head_sha: str | None
    checks_json: str
    has_checks: bool
    done_sha: str | None
    """The tip DONE was declared on, while the pull request waits for its checks."""
    merged: bool
    polled_at: str | None


_PULL_COLUMNS = (
    "branch, repository, number, node_id, url, draft, state, pushed_sha, body_sha,"
    " head_sha, checks_json, has_checks, done_sha, merged, polled_at"
)


def pull(db: Database, branch: str) -> PullRow | None:
    row = db.execute(
        f"SELECT {_PULL_COLUMNS} FROM forge_pulls WHERE branch = ?", [branch]
    ).fetchone()
    if row is None:
        return None
    values = list(row)
    for index in (5, 11, 13):
        values[index] = bool(values[index])
    return PullRow(*values)


def save_pull(db: Database, branch: str, repository: str, **fields: Any) -> None:
    """Create the branch's row if missing, then set `fields` (one transaction)."""
    names = sorted(fields)
    sets = "".join(f", {name} = ?" for name in names)
    with db.conn:
        db.conn.execute(
            "INSERT INTO forge_pulls (branch, repository, updated_at) VALUES (?, ?, ?)"
            " ON CONFLICT (branch) DO NOTHING",
            [branch, repository, now()],
        )
        db.conn.execute(
            f"UPDATE forge_pulls SET repository = ?, updated_at = ?{sets} WHERE branch = ?",
            [repository, now(), *(fields[name] for name in names), branch],
        )


def etag(db: Database, url: str) -> tuple[str, str] | None:
    """The ETag and body of the last 200 answer to a GET of `url`."""
    row = db.execute("SELECT etag, body FROM forge_etags WHERE url = ?", [url]).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def keep_etag(db: Database, url: str, tag: str, body: str) -> None:
    with db.conn:
        db.conn.execute(
            "INSERT INTO forge_etags (url, etag, body) VALUES (?, ?, ?)"
            " ON CONFLICT (url) DO UPDATE SET etag = excluded.etag, body = excluded.body",
            [url, tag, body],
        )


def forget_etags(db: Database, fragment: str) -> int:
    """Drop the kept answers of URLs containing `fragment` (a commit no longer the
    head): the table stays the size of what is still read."""
    with db.conn:
        cursor = db.conn.execute("DELETE FROM forge_etags WHERE instr(url, ?) > 0", [fragment])
    return cursor.rowcount


def seen(db: Database, kind: str, item_id: int) -> bool:
    row = db.execute(
        "SELECT 1 FROM forge_items WHERE kind = ? AND item_id = ?", [kind, item_id]
    ).fetchone()
    return row is not None


@dataclass(frozen=True)
class Item:
    """A comment as seen on the pull request, and what became of it."""

    kind: str
    item_id: int
    pr_number: int
    author: str
    association: str
    path: str | None = None
    line: int | None = None


def record_input(db: Database, item: Item, payload_json: str, source_file: str) -> int | None:
    """A writer's comment as a pending `correction` input and its forge row, in
    one transaction; None (nothing written) when the comment was seen before."""
    with db.conn:
        if seen(db, item.kind, item.item_id):
            return None
        cursor = db.conn.execute(
            "INSERT INTO human_inputs (kind, payload_json, source, source_file, status,"
            " received_at) VALUES ('correction', ?, 'forge', ?, 'pending', ?)",
            [payload_json, source_file, now()],
        )
        input_id = cursor.lastrowid
        _insert(db, item, "input", None, input_id)
    return input_id


def record_other(db: Database, item: Item, status: str, reason: str) -> bool:
    """A comment that is not an input (`ignored` or `own`); False if seen before."""
    with db.conn:
        if seen(db, item.kind, item.item_id):
            return False
        _insert(db, item, status, reason, None)
    return True


def _insert(db: Database, item: Item, status: str, reason: str | None, input_id: Any) -> None:
    db.conn.execute(
        "INSERT INTO forge_items (kind, item_id, pr_number, author, association, status,"
        " reason, input_id, path, line, seen_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            item.kind,
            item.item_id,
            item.pr_number,
            item.author,
            item.association,
            status,
            reason,
            input_id,
            item.path,
            item.line,
            now(),
        ],
    )


@dataclass(frozen=True)
class Correction:
    """A writer's comment that became an input, with where that input stands."""

    item: Item
    input_id: int
    input_status: str
    applied_iteration: int | None
    reply_commit: str | None


def corrections(db: Database, pr_number: int, unreplied_only: bool = False) -> list[Correction]:
    """The pull request's comments that became inputs, oldest first."""
    where = " AND f.replied_at IS NULL" if unreplied_only else ""
    rows = db.execute(
        "SELECT f.kind, f.item_id, f.pr_number, f.author, f.association, f.path, f.line,"
        " f.input_id, h.status, h.applied_iteration, f.reply_commit"
        " FROM forge_items f JOIN human_inputs h ON h.id = f.input_id"
        f" WHERE f.pr_number = ? AND f.status = 'input'{where} ORDER BY f.input_id",
        [pr_number],
    ).fetchall()
    return [Correction(Item(*row[:7]), int(row[7]), str(row[8]), row[9], row[10]) for row in rows]


def mark_replied(db: Database, kind: str, item_id: int, commit: str) -> None:
    with db.conn:
        db.conn.execute(
            "UPDATE forge_items SET reply_commit = ?, replied_at = ?"
            " WHERE kind = ? AND item_id = ? AND replied_at IS NULL",
            [commit, now(), kind, item_id],
        )


def ignored_count(db: Database, pr_number: int) -> int:
    row = db.execute(
        "SELECT count(*) FROM forge_items WHERE pr_number = ? AND status = 'ignored'",
        [pr_number],
    ).fetchone()
    return int(row[0])
