"""The milestone's pull request: push, open, update, read back, reply, ready.

Every step is idempotent against the state in SQLite (`soda.store.forge`), so a
kill -9 anywhere and a restart neither opens a second pull request nor takes a
comment twice:

    publish   push the tip if the forge has not got it; find or open the pull
              request (found first: one opened by a cut-short try is adopted);
              write the body when it changed
    poll      the pull request, its head commit's checks and every comment, with
              ETags; each comment seen once: a writer's becomes a `correction`
              input (with the row that says so, in one transaction), anyone
              else's is recorded as ignored, soda's own (the marker) as own
    reply     on each applied correction's thread, naming the commit that
              addressed it (after a poll: soda's own reply, read back, counts)
    done      (`mark_done`, `check_done`, `settle`) failing checks refuse DONE;
              pending ones keep it waiting; all green (or none at all) marks the
              pull request ready and, with `forge.merge = "when-green"`, merges it
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from sqlite_utils import Database

from soda.config import ForgeConfig
from soda.contracts import HumanInput
from soda.events import Events
from soda.forge import body as text
from soda.forge.port import (
    Check,
    Comment,
    CommentKind,
    Forge,
    PullRequest,
)
from soda.store import forge as rows
from soda.store.db import now


@dataclass(frozen=True)
class Poll:
    """What one read of the pull request found."""

    number: int | None = None
    checks: list[Check] = field(default_factory=list)
    new_inputs: int = 0
    newly_failed: list[Check] = field(default_factory=list)

    @property
    def failing(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    @property
    def pending(self) -> list[Check]:
        return [c for c in self.checks if c.pending]


class Settled(enum.StrEnum):
    """What `PullRequests.settle` made of a DONE waiting for its checks."""

    NOTHING = "nothing"
    """No DONE waits (none was declared, or it is finished)."""
    WAITING = "waiting"
    """Checks still run (or have not started): it waits on."""
    READY = "ready"
    """Every check passed: marked ready for review."""
    MERGED = "merged"
    """Every check passed, and `forge.merge = "when-green"` merged it."""
    FAILED = "failed"
    """A check failed: DONE no longer stands (the work needs a fix)."""
    MOVED = "moved"
    """The branch moved on since DONE: its new work has its own ending."""


@dataclass
class PullRequests:
    """One milestone branch's pull request on one forge."""

    forge: Forge
    config: ForgeConfig
    repository: str
    db: Database
    repo_path: Path
    branch: str
    base: str
    token: str = field(repr=False)
    last_poll: float = float("-inf")
    """When the idle daemon last read the pull request (monotonic seconds)."""

    def row(self) -> rows.PullRow | None:
        return rows.pull(self.db, self.branch)

    def _save(self, **fields: object) -> None:
        rows.save_pull(self.db, self.branch, self.repository, **fields)

    # --- publish ----------------------------------------------------------------

    def publish(self, tip: str, title: str, body: str, events: Events) -> PullRequest | None:
        """Push `tip`, make sure the pull request exists, and write `body` if it
        changed. Returns the pull request (None once it is closed or merged)."""
        body = text.closing(self.branch, body)
        row = self.row()
        if row is not None and (row.merged or row.state == "closed"):
            return None
        if row is None or row.pushed_sha != tip:
            from soda.forge.push import push  # git's client, only when there is a push

            push(self.repo_path, self.config.remote, self.branch, self.token, self.config.token_env)
            self._save(pushed_sha=tip)
            events.emit("forge.pushed", {"branch": self.branch, "commit": tip})
        row = self.row()
        assert row is not None
        if row.number is None:
            found = self.forge.find_pull(self.branch, self.base)
            if found is None:
                draft = self.config.mode == "draft"
                found = self.forge.open_pull(self.branch, self.base, title, body, draft)
            self._save(
                number=found.number,
                node_id=found.forge_id,
                url=found.url,
                draft=int(found.draft),
                state=found.state,
                body_sha=_digest(body),
            )
            events.emit(
                "forge.pr_opened", {"number": found.number, "draft": found.draft, "url": found.url}
            )
            return found
        if row.body_sha != _digest(body):
            self.forge.update_body(row.number, body)
            self._save(body_sha=_digest(body))
            events.emit("forge.pr_updated", {"number": row.number})
        return self._known(row)

    # --- read back --------------------------------------------------------------

    def poll(self, events: Events) -> Poll:
        """Read the pull request, its checks and its comments (ETags: an unchanged
        pull request costs no rate limit)."""
        row = self.row()
        if row is None or row.number is None:
            return Poll()
        pull = self.forge.get_pull(row.number)
        if row.head_sha and row.head_sha != pull.head_sha:  # its checks are read no more
            self.forge.forget_checks(row.head_sha)
        checks = self.forge.checks(pull.head_sha)
        before = {(c["name"], c["source"]): c["conclusion"] for c in _loads(row.checks_json)}
        newly_failed = []
        for check in checks:
            if before.get((check.name, check.source), "?") != check.conclusion:
                events.emit(
                    "forge.check",
                    {
                        "name": check.name,
                        "conclusion": check.conclusion,
                        "commit": pull.head_sha,
                    },
                )
                if check.failed:
                    newly_failed.append(check)
        self._save(
            head_sha=pull.head_sha,
            draft=int(pull.draft),
            state=pull.state,
            merged=int(pull.merged),
            checks_json=json.dumps([_check_json(c) for c in checks]),
            has_checks=int(row.has_checks or bool(checks)),
            polled_at=now(),
        )
        comments = self.forge.comments(pull.number)
        new_inputs = sum(self._take(pull.number, c, events) for c in comments)
        return Poll(pull.number, checks, new_inputs, newly_failed)

    def _take(self, number: int, comment: Comment, events: Events) -> int:
        """Record a comment seen for the first time; 1 if it became an input."""
        if rows.seen(self.db, comment.kind, comment.item_id):
            return 0
        item = rows.Item(
            comment.kind,
            comment.item_id,
            number,
            comment.author,
            comment.role,
            comment.path,
            comment.line,
        )
        writer = self._is_writer(comment)
        if writer and text.is_soda(comment.body):
            rows.record_other(self.db, item, "own", "written by soda")
            answered = text.replied_to(comment.body)
            if answered is not None:  # a reply whose record a crash cut short
                rows.mark_replied(self.db, answered[0], answered[1], answered[2])
            return 0
        words = _correction(comment)
        if not writer or words is None:
            reason = f"{comment.role} is not a writer" if not writer else "says nothing to do"
            if rows.record_other(self.db, item, "ignored", reason):
                events.emit(
                    "forge.comment_ignored",
                    {
                        "kind": comment.kind,
                        "comment": comment.item_id,
                        "author": comment.author,
                        "association": comment.role,
                        "reason": reason,
                    },
                )
            return 0
        payload = HumanInput(kind="correction", text=words).model_dump_json()
        source = f"forge:{self.repository}#{number}:{comment.kind}:{comment.item_id}"
        input_id = rows.record_input(self.db, item, payload, source)
        if input_id is None:
            return 0
        events.emit(
            "forge.comment_received",
            {"kind": comment.kind, "comment": comment.item_id, "input": input_id},
        )
        return 1

    def _is_writer(self, comment: Comment) -> bool:
        allowed = {login.lower() for login in self.config.writers}  # logins ignore case
        return comment.writer or comment.author.lower() in allowed

    # --- replies ----------------------------------------------------------------

    def reply_applied(self, commit: str, events: Events) -> int:
        """Answer every applied, unanswered correction: addressed in `commit`."""
        row = self.row()
        if row is None or row.number is None:
            return 0
        answered = 0
        for done in rows.corrections(self.db, row.number, unreplied_only=True):
            if done.input_status != "applied":
                continue
            item = done.item
            kind = cast(CommentKind, item.kind)
            comment = Comment(kind, item.item_id, item.author, item.association, "")
            answer = text.reply(commit, kind, item.item_id, item.author)
            self.forge.reply(row.number, comment, answer)
            rows.mark_replied(self.db, item.kind, item.item_id, commit)
            events.emit(
                "forge.comment_applied",
                {
                    "kind": item.kind,
                    "comment": item.item_id,
                    "input": done.input_id,
                    "iteration": done.applied_iteration,
                    "commit": commit,
                },
            )
            answered += 1
        return answered

    # --- DONE -------------------------------------------------------------------

    def mark_done(self, tip: str) -> None:
        """DONE was declared on `tip`: the pull request is ready once its checks pass."""
        self._save(done_sha=tip)

    def check_done(self, events: Events) -> str | None:
        """Why DONE is refused (a failing check on the pull request), or None: then
        it is finished now (all green, or no checks) or by a later `settle`."""
        poll = self.poll(events)
        if poll.failing:
            self._save(done_sha=None)
            names = ", ".join(f"{c.name} ({c.conclusion})" for c in poll.failing)
            return f"the pull request's checks fail: {names}"
        self.settle(events, poll)
        return None

    def settle(self, events: Events, poll: Poll | None = None) -> Settled:
        """A DONE that waited: once every check on its tip passed, mark the pull
        request ready (and merge it with `forge.merge = "when-green"`). What
        became of it; a failing check or new work ends the wait (FAILED, MOVED)."""
        row = self.row()
        if row is None or row.number is None or row.done_sha is None or row.merged:
            return Settled.NOTHING
        poll = poll or self.poll(events)
        row = self.row()
        assert row is not None and row.number is not None
        done = row.done_sha
        if done is None or row.pushed_sha != done or poll.failing:
            self._save(done_sha=None)  # new work or a failure: no longer DONE's to finish
            return Settled.FAILED if done is not None and poll.failing else Settled.MOVED
        # The forge may show the pushed head a little later; CI may not have started.
        if row.head_sha != done or poll.pending or (row.has_checks and not poll.checks):
            events.emit("forge.waiting", {"number": row.number, "pending": len(poll.pending)})
            return Settled.WAITING
        pull = self.forge.get_pull(row.number)
        if pull.draft:
            self.forge.mark_ready(pull)
            events.emit("forge.ready", {"number": row.number})
        self._save(draft=0)
        outcome = Settled.READY
        if self.config.merge == "when-green" and not row.merged:
            merged = self.forge.merge(row.number, done)
            events.emit("forge.merged", {"number": row.number, "merged": merged})
            self._save(merged=int(merged))
            outcome = Settled.MERGED if merged else outcome
        self._save(done_sha=None)
        return outcome

    def _known(self, row: rows.PullRow) -> PullRequest:
        assert row.number is not None
        return PullRequest(
            row.number,
            row.node_id or "",
            row.url or "",
            row.head_sha or "",
            row.draft,
            row.state,
            row.merged,
        )


MAX_COMMENT_CHARS = 4000
"""Characters of one comment kept in its correction (ORIENT reads every one)."""


def _correction(comment: Comment) -> str | None:
    """The correction a writer's comment makes, with where it came from; None for
    one that asks nothing (an approval, an empty review)."""
    words = comment.body.strip()
    if len(words) > MAX_COMMENT_CHARS:
        words = words[:MAX_COMMENT_CHARS] + " [...] (cut: read the whole comment on the forge)"
    if comment.kind == "review":
        if comment.review_state == "CHANGES_REQUESTED":
            words = words or "(no text)"
            return f"Changes requested in a review by {comment.author}: {words}"
        if not words:
            return None
        return f"Review by {comment.author} ({comment.review_state}): {words}"
    if not words:
        return None
    if comment.kind == "review_comment":
        where = comment.path or "the diff"
        if comment.line is not None:
            where += f" line {comment.line}"
        return f"Review comment by {comment.author} on {where}: {words}"
    return f"Pull request comment by {comment.author}: {words}"


def _check_json(check: Check) -> dict[str, object]:
    return {
        "name": check.name,
        "source": check.source,
        "id": check.item_id,
        "conclusion": check.conclusion,
        "excerpt": check.excerpt,
    }


def stored_checks(row: rows.PullRow) -> list[Check]:
    """The checks as the last poll read them."""
    return [
        Check(c["name"], c["source"], c["id"], c["conclusion"], c.get("excerpt", ""))
        for c in _loads(row.checks_json)
    ]


def _loads(value: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(value)
    except ValueError:
        return []
    return data if isinstance(data, list) else []


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
