"""The loop's side of pull requests (soda.forge), one function per moment:

    sense_forge      SENSE: read the pull request back (new writers' comments become
                     pending corrections, seen by ORIENT with the other human
                     inputs); its failing checks become claims
    after_iteration  the iteration's end: push the tip, open or update the pull
                     request with the report; after a merge, reply on the threads
                     of the corrections that merge addressed
    at_done          DONE (tests passed locally): a failing check refuses it, a
                     running one keeps the pull request waiting for `settle`
    poll_idle        the idle daemon's tick: every `forge.poll_seconds`, publish
                     what a transient failure or a kill put off, read the pull
                     request, finish a waiting DONE; True when a person's comment
                     or a failing check means work

A transient forge failure (rate limit, 5xx, the network) never fails an
iteration: it is an event (`forge.deferred`) and the next look repeats the step,
which is idempotent. A refused token is a user error and ends the run.
"""

from __future__ import annotations

from collections.abc import Callable

from soda.contracts import CheckBrief, ForgeClaims
from soda.errors import TransientError
from soda.events import Events
from soda.forge import body, stored_checks
from soda.loop.context import Iteration
from soda.loop.session import Session
from soda.repo.refs import branch_head

MAX_FAILING = 10
"""Failing checks shown to ORIENT at most."""


def sense_forge(session: Session, it: Iteration) -> ForgeClaims | None:
    pulls = session.pulls
    if pulls is None:
        return None
    try:
        pulls.poll(it.events)
    except TransientError as exc:  # the last read stands
        it.events.emit("forge.deferred", {"step": "poll", "error": str(exc)})
    row = pulls.row()
    if row is None or row.number is None:
        return None
    checks = stored_checks(row)
    failing = [c for c in checks if c.failed]
    return ForgeClaims(
        pull_request=row.number,
        draft=row.draft,
        head=(row.head_sha or "")[:10],
        failing=[
            CheckBrief(name=c.name, conclusion=c.conclusion or "", excerpt=c.excerpt)
            for c in failing[:MAX_FAILING]
        ],
        pending=[c.name for c in checks if c.pending],
        passed=sum(1 for c in checks if c.passed),
    )


def after_iteration(
    session: Session, it: Iteration, report: str, merged_commit: str | None, state: str
) -> None:
    """Publish the milestone as it stands, and answer what the merge addressed."""
    if session.pulls is None:
        return
    try:
        if _publish(session, it.events, report, state) and merged_commit:
            session.pulls.poll(it.events)  # soda's replies a crash cut short count first
            session.pulls.reply_applied(merged_commit, it.events)
    except TransientError as exc:
        it.events.emit("forge.deferred", {"step": "publish", "error": str(exc)})


def at_done(session: Session, it: Iteration, reason: str) -> str | None:
    """DONE with passing local tests: why the pull request refuses it, or None."""
    pulls = session.pulls
    if pulls is None:
        return None
    tip = branch_head(session.repo, session.milestone.branch)
    pulls.mark_done(tip)
    try:
        _publish(session, it.events, f"DONE: {reason}", "done: waiting for its checks")
        return pulls.check_done(it.events)
    except TransientError as exc:  # the idle daemon finishes it
        it.events.emit("forge.deferred", {"step": "done", "error": str(exc)})
        return None


def done_line(session: Session) -> str | None:
    """Where the pull request stands after DONE, for the person watching."""
    row = session.pulls.row() if session.pulls is not None else None
    if row is None or row.number is None:
        return None
    if row.done_sha is not None:
        return f"pull request #{row.number} waits for its checks, then is marked ready"
    if row.merged:
        return f"pull request #{row.number} merged"
    return f"pull request #{row.number} is {'a draft' if row.draft else 'ready for review'}"


def poll_idle(session: Session, say: Callable[[str], None]) -> bool:
    """The idle daemon's look at the pull request, every `forge.poll_seconds`."""
    pulls = session.pulls
    if pulls is None:
        return False
    now = session.clock.monotonic()
    if now - pulls.last_poll < session.config.forge.poll_seconds:
        return False
    pulls.last_poll = now
    events = session.events
    try:
        row = pulls.row()
        tip = branch_head(session.repo, session.milestone.branch)
        if row is None or row.number is None or row.pushed_sha != tip:  # put off, or cut short
            waiting = row is not None and row.done_sha is not None
            state = "done: waiting for its checks" if waiting else "working"
            _publish(session, events, "(the newest iteration's report: `soda history`)", state)
        poll = pulls.poll(events)
        pulls.settle(events, poll)
    except TransientError as exc:
        events.emit("forge.deferred", {"step": "idle poll", "error": str(exc)})
        say(f"forge: {exc}; trying again at the next poll")
        return False
    news = poll.new_inputs > 0 or bool(poll.newly_failed)
    if news:
        say(f"forge: {poll.new_inputs} new comments, {len(poll.newly_failed)} checks failed")
    return news


def fingerprint(session: Session) -> str:
    """The pull request's part of the wake fingerprint: its failing checks (a
    comment is a pending input, which always means work)."""
    pulls = session.pulls
    row = pulls.row() if pulls is not None else None
    if row is None:
        return ""
    return ",".join(sorted(f"{c.name}={c.conclusion}" for c in stored_checks(row) if c.failed))


def _publish(session: Session, events: Events, report: str, state: str) -> bool:
    """Push and write the pull request; False while the milestone has no commit."""
    pulls = session.pulls
    assert pulls is not None
    milestone = session.milestone
    tip = branch_head(session.repo, milestone.branch)
    if tip == milestone.base_commit:
        return False
    git = session.repo.git
    span = f"{milestone.base_commit}..{tip}"
    subjects = str(git.log("--format=%s", "-n", str(body.MAX_SUBJECTS), span)).splitlines()
    total = int(str(git.rev_list("--count", span)).strip() or 0)
    stat = str(git.diff("--stat=100", "--stat-count=20", milestone.base_commit, tip))
    title = session.tracker.show(milestone.root_task_id).title
    text = body.body(title, report, subjects, total, stat, state)
    return pulls.publish(tip, body.title(title), text, events) is not None
