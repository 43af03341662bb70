"""Free wakes: a fingerprint of what ORIENT would see, so that a daemon wake with
nothing new makes no model call.

The fingerprint hashes the spec's content, the milestone branch's tip, the
pending human inputs, the version of the milestone's tasks and the pull
request's failing checks (it changes with
every task added, removed or given another status). The loop
stores it on each iteration as the iteration ends (after soda's own writes: the
spec text a `spec_change` wrote, the tasks it settled, the merge it landed), so
those writes never wake it: a wake computes the fingerprint again and, when it is
the same as the last iteration's and that iteration ended waiting for a person
(DONE, STUCK or HALT, not cut short by a signal, a crash or a spent budget),
records a `wake.skipped` event instead of an iteration.
Pending inputs always mean work: ORIENT has not read them yet.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from soda.contracts.outcomes import SETTLED, UNFINISHED
from soda.human.approval import overdue
from soda.loop.pr import fingerprint as forge_fingerprint
from soda.repo.refs import branch_head
from soda.store import budgets as rows
from soda.store import tasks

if TYPE_CHECKING:
    from soda.loop.session import Session


def fingerprint(session: Session) -> str:
    """A hash of what ORIENT would see if an iteration started now."""
    digest = hashlib.sha256()
    try:
        spec = session.config.spec_path.read_bytes()
    except OSError as exc:  # a missing spec is a state too (SENSE will say so)
        spec = f"unreadable: {exc.strerror}".encode()
    digest.update(b"spec\0" + hashlib.sha256(spec).digest())
    tip = branch_head(session.repo, session.milestone.branch)  # the ref files: no git process
    digest.update(f"\0tip\0{tip}".encode())
    for item in session.human.pending():
        digest.update(f"\0input\0{item.id}".encode())
    # Not every task's status: a version the store bumps whenever a task of the
    # milestone is added or removed or changes status (one row, whatever the age).
    digest.update(f"\0tasks\0{tasks.version(session.db, session.milestone.name)}".encode())
    # The pull request's failing checks (soda.loop.pr): CI failing after DONE is work.
    forge = forge_fingerprint(session)
    if forge:  # none without a pull request: fingerprints stored before stay valid
        digest.update(f"\0forge\0{forge}".encode())
    return digest.hexdigest()


def nothing_new(session: Session) -> str | None:
    """Why this wake can be skipped ("nothing changed since iteration 7"), or None
    when ORIENT would see something new (or the last iteration left work)."""
    last = rows.last_fingerprint(session.db)
    if last is None:
        return None
    number, stored, decision, outcome = last
    if stored is None or decision not in SETTLED or outcome in UNFINISHED:
        return None
    if session.human.pending_count():
        return None
    if overdue(session.db, session.clock) is not None:  # a suspended plan's time is up: reject it
        return None
    if fingerprint(session) != stored:
        return None
    return f"nothing changed since iteration {number} ({decision})"
