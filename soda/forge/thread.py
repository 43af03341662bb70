"""An issue's thread: each new comment read once (a writer's is an input, anyone
else's is kept as data), and the comments soda writes back, one per event, never
twice (a hidden marker names each event, so a comment a crash left unrecorded is
found on the thread before anything is posted again). soda.forge.tracker uses it.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import HumanInput
from soda.errors import InputError
from soda.forge.body import MARKER, defuse
from soda.forge.port import Comment, Tracker
from soda.store import tracker as rows

Reader = Callable[[int, str, str], HumanInput]
"""(the issue's number, who, a writer's comment) -> the input it is (a
correction, an answer to the issue's open question, a control: soda.human.commands
builds it, this room may not), or InputError saying why it is none."""


SOURCE = "tracker:issue-"
"""How an input read from (or sent for) an issue names its source:
`tracker:issue-N:WHAT` (WHAT: `comment-ID`, or `cancel`)."""


def source_of(number: int, what: str) -> str:
    return f"{SOURCE}{number}:{what}"


def issue_of(source: str | None) -> int | None:
    """The issue a source names, or None when it names none."""
    if not source or not source.startswith(SOURCE):
        return None
    number = source.removeprefix(SOURCE).split(":", 1)[0]
    return int(number) if number.isdigit() else None


def is_writer(config: Config, login: str, forge_says: bool) -> bool:
    allowed = {name.lower() for name in (*config.tracker.writers, *config.forge.writers)}
    return forge_says or login.lower() in allowed


def is_soda(config: Config, comment: Comment) -> bool:
    """One of soda's own comments (written back with its marker, by a writer's token)."""
    return MARKER in comment.body and is_writer(config, comment.author, comment.writer)


def read_thread(tracker: Tracker, config: Config, db: Database, number: int, reader: Reader) -> int:
    """Read issue `number`'s new comments once each; the count that became inputs."""
    taken = 0
    for comment in tracker.issue_comments(number):
        if not rows.comment_seen(db, comment.item_id):
            taken += _read(config, db, number, comment, reader)
    return taken


def _read(config: Config, db: Database, number: int, comment: Comment, reader: Reader) -> int:
    def seen(status: str, reason: str | None) -> rows.SeenComment:
        return rows.SeenComment(
            comment.item_id, number, comment.author, comment.role, status, reason,
            comment.body, None,
        )  # fmt: skip

    writer = is_writer(config, comment.author, comment.writer)
    if is_soda(config, comment):
        rows.record_comment(db, seen("own", "written by soda"))
        return 0
    if not writer:
        rows.record_comment(db, seen("ignored", f"{comment.role} is not a writer"))
        return 0
    try:
        said = reader(
            number, f"{comment.author} on issue {number}, comment {comment.item_id}", comment.body
        )
    except InputError as exc:
        rows.record_comment(db, seen("ignored", str(exc)))
        return 0
    source = source_of(number, f"comment-{comment.item_id}")
    done = rows.record_comment(db, seen("input", None), _payload(said), said.kind, source)
    return 1 if done else 0


def _payload(item: HumanInput) -> str:
    return item.model_dump_json(exclude_none=True)


def write_back(tracker: Tracker, db: Database, number: int, event: str, text: str) -> bool:
    """Comment `text` on issue `number` once for `event` ("start", "merged-3",
    "done", ...); False when it was written before (now or before a crash)."""
    if rows.written(db, number, event):
        return False
    for comment in tracker.issue_comments(number):  # posted, then cut short?
        if f"<!-- soda:event {event} -->" in comment.body:
            rows.record_write(db, number, event, comment.item_id)
            return False
    body = f"{defuse(text.strip())}\n\n<!-- soda:event {event} -->\n{MARKER}"
    rows.record_write(db, number, event, tracker.comment_issue(number, body))
    return True


def writer_waiting(tracker: Tracker, config: Config, db: Database, number: int) -> bool:
    """A writer wrote on issue `number` since soda last read its thread (nothing
    is read now: the comment becomes an input when the issue runs again)."""
    return any(
        not rows.comment_seen(db, comment.item_id)
        and not is_soda(config, comment)
        and is_writer(config, comment.author, comment.writer)
        for comment in tracker.issue_comments(number)
    )
