"""The tracker's done issues whose pull request waits for its checks: each poll
of the tracker finishes them (`settle_done`), whatever issue is being worked.

An issue's run that ends DONE while its pull request's checks still run leaves
the pull request waiting (`PullRequests.mark_done`, the row's `done_sha`), and
the daemon moves on to the next issue. Every read of the tracker then settles
each such pull request through `PullRequests.settle`, from the rows alone (so a
restart goes on where it was), with no model call and nothing written on the
issue:

    all green   marked ready for review (merged with `forge.merge = "when-green"`);
                the issue's last word says so
    a failure   DONE no longer stands: the issue is queued again with the failing
                checks as its last word, and its next run reads them at SENSE (the
                pull request's checks are claims) and fixes the work; the pull
                request stays a draft, unmerged
    running     it waits for the next poll

A transient failure of the forge puts one pull request off to the next poll.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlite_utils import Database

from soda.config import Config
from soda.errors import TransientError
from soda.events import Events
from soda.forge import connect
from soda.forge.pulls import Settled
from soda.store import forge as pull_rows
from soda.store import tracker as rows


@dataclass(frozen=True)
class Finished:
    """A done issue's waiting pull request, as one poll left it."""

    number: int
    """The issue."""
    pull: int
    outcome: Settled
    word: str
    """What `soda issues` shows as its last word."""


def waiting(db: Database) -> list[tuple[rows.TrackerItem, int]]:
    """Done issues whose pull request waits for its checks, with its number."""
    found = []
    for item in rows.items(db):
        row = pull_rows.pull(db, item.branch) if item.branch else None
        if item.state == "done" and row is not None and row.number and row.done_sha:
            found.append((item, row.number))
    return found


def settle_done(config: Config, db: Database, events: Events) -> list[Finished]:
    """Settle every done issue's waiting pull request (see the module); what
    changed (those still waiting are left out)."""
    finished = []
    for item, number in waiting(db):
        assert item.branch is not None
        pulls = connect(config, db, item.branch)
        if pulls is None:  # `[forge] mode = "off"` since: nothing to finish
            return []
        try:
            poll = pulls.poll(events)
            if poll.failing:  # queued again before the wait ends: a kill -9 loses neither
                names = ", ".join(f"{c.name} ({c.conclusion})" for c in poll.failing)
                word = f"queued again: pull request #{number}'s checks failed after DONE: {names}"
                rows.set_state(db, item.number, "queued", word[:200])
                events.emit(
                    "tracker.requeued", {"issue": item.number, "pull": number, "failing": names}
                )
                finished.append(Finished(item.number, number, Settled.FAILED, word))
            outcome = pulls.settle(events, poll)
        except TransientError as exc:
            events.emit(
                "forge.deferred", {"step": "settle", "issue": item.number, "error": str(exc)}
            )
            continue
        if outcome in (Settled.READY, Settled.MERGED):
            now = "merged" if outcome is Settled.MERGED else "ready for review"
            word = f"done: pull request #{number} {now}"
        elif outcome is Settled.MOVED and not poll.failing:
            word = f"done: pull request #{number} has newer work than DONE's"
        else:
            continue
        rows.set_state(db, item.number, "done", word)
        finished.append(Finished(item.number, number, outcome, word))
    return finished
