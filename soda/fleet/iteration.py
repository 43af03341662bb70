"""One iteration on a worker, as plain synchronous code (the activity runs it in
a thread): prepare the checkout, rebuild the record when fresh, open a session,
run `soda.loop.run.run_iteration` unchanged (the milestone pushed after each
merge, through the session's `on_landed`), push the report of an iteration
that merged beside the milestone, summarise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus, TaskStatus
from soda.errors import StructuralError, TransientError
from soda.fleet import approval, checkout
from soda.fleet.state import (
    MAX_CARRIED_TASKS,
    MAX_TASK_TEXT,
    PROVENANCE,
    CarriedTask,
    IterationReport,
    IterationRequest,
    IterationSummary,
)
from soda.human.write import write_input
from soda.loop.asking import open_questions
from soda.loop.run import Ending, run_iteration
from soda.loop.sense import MAX_OTHER_TASKS
from soda.loop.session import Session
from soda.repo.milestone import milestone_name
from soda.store import history, learnings, tasks
from soda.store.tasks import Task
from soda.system.lock import release_lock

Printer = Callable[[str], None]


@runtime_checkable
class Positioned(Protocol):
    """A model with a place in a script (the scripted model): where it stands
    lives in the workflow, so a run moved to another worker goes on from there."""

    position: int


@dataclass
class Progress:
    """What the iteration's thread and the activity's heartbeat share."""

    phase: str = "preparing"
    phase_of: Callable[[], str | None] | None = None
    """Reads the iteration's phase from the worker's record, once it has one."""
    state_dir: Path | None = None
    """Set once the checkout is ready: inputs may be written to its inbox."""
    written: dict[int, Path] = field(default_factory=dict)
    """The person's inputs written to the inbox, by `seq`."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> str:
        """What the iteration is doing, for the heartbeat (which the server keeps:
        `soda fleet status` reads it with no worker's help)."""
        read = self.phase_of
        try:
            phase = read() if read is not None else None
        except Exception:  # a read racing the iteration's own writes: say the last
            phase = None
        if phase:
            self.phase = phase
        return self.phase

    def deliver(self, seq: int, document: dict[str, object]) -> None:
        """Write one input to the inbox, once (provenance: `fleet`)."""
        with self.lock:
            if self.state_dir is None or seq in self.written:
                return
            item = HumanInput.model_validate(document)
            self.written[seq] = write_input(self.state_dir, item, source=PROVENANCE)

    def delivered(self) -> list[int]:
        """The inputs soda took in; one still in the inbox is removed (it goes
        again with the next iteration, so it is never lost or read twice)."""
        with self.lock:
            self.state_dir = None
            taken = []
            for seq, path in self.written.items():
                if path.exists():
                    path.unlink()
                else:
                    taken.append(seq)
            return taken


@dataclass
class HeldRun:
    """A run placed on this worker. Its session stays open between its
    iterations (the database, the checkout pool's worktrees, the model), as the
    daemon's does between wakes; it is closed when the run waits, ends or moves."""

    session: Session | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the iteration's activity is cancelled: stop at the next safe point."""
    seen: float = 0.0
    """time.monotonic() of its last placement or iteration."""

    def close(self) -> None:
        session, self.session = self.session, None
        if session is None:
            return
        session.finish_run(RunStatus.STOPPED, "the run left this worker")
        session.db.conn.close()
        release_lock(session.config.state_dir)


def run_one(
    cache: Path,
    worker: str,
    request: IterationRequest,
    progress: Progress,
    say: Printer,
    held: HeldRun,
) -> IterationReport:
    """Iteration `request.number` of the run, on this worker's clone."""
    home = checkout.run_home(cache, request.workflow_id)
    if request.fresh:
        held.close()
    config, fresh = checkout.prepare(home, request.settings, request.fresh)
    config = approval.suspending(config)  # the workflow holds approval waits, not the worker
    if fresh:
        held.close()
        report = _recovered(config, worker, request)
        if report is None:
            checkout.rebuild(config, request.history, request.learnings, request.tasks)
        else:  # what landed before its worker could say so counts as done here too
            done = [*request.history, report.summary]
            checkout.rebuild(config, done, report.learnings, report.tasks)
            return report
    progress.state_dir = config.state_dir
    for item in request.pending:
        progress.deliver(item.seq, item.document)
    held.stop.clear()
    try:
        session = held.session or Session.open(config, start_run=False, stopping=held.stop)
        held.session = session
        return _iterate(session, worker, request, progress, say)
    except BaseException:
        held.close()  # what broke off is not trusted: the next attempt starts afresh
        raise


def _iterate(
    session: Session, worker: str, request: IterationRequest, progress: Progress, say: Printer
) -> IterationReport:
    if session.next_iteration_number() != request.number:  # fail closed: never two records
        raise StructuralError(
            f"the worker's record is at iteration {session.next_iteration_number()},"
            f" the run at {request.number}"
        )
    if session.run_ended:
        session.start_run()
    if request.model_position is not None and isinstance(session.model, Positioned):
        session.model.position = request.model_position
    session.iterations_in_run = request.number - 1
    session.max_iterations = request.settings.max_iterations
    approval.agree(session, request.approval)
    number = request.number
    progress.phase_of = lambda: (history.iteration(session.db, number) or {}).get("phase")
    pusher = Pusher(session.config, say)
    session.on_landed = pusher
    started = time.monotonic()
    try:
        result = run_iteration(session, say)
    finally:
        session.on_landed = None
    seconds = time.monotonic() - started - pusher.seconds  # the pushes are the fleet's
    progress.phase_of = None
    if result.ending is not Ending.CONTINUE:
        session.finish_run(result.ending.run_status, result.reason)
    if pusher.failed is not None:  # a merge that never reached the remote is not landed
        raise pusher.failed
    row = history.iteration(session.db, result.number) or {}
    merged = bool(row.get("merged_commit"))
    summary = IterationSummary(
        result.number,
        result.ending.value,
        result.reason,
        row.get("decision"),
        row.get("outcome"),
        checkout.tip(session.config) if merged else None,
        int(row.get("tokens_in") or 0) + int(row.get("tokens_out") or 0),
        float(row.get("cost_usd") or 0.0),
        worker,
        round(seconds, 4),
    )
    position = session.model.position if isinstance(session.model, Positioned) else None
    report = IterationReport(
        summary,
        progress.delivered(),
        position,
        learnings.active(session.db, session.config.context.max_learnings),
        _open_tasks(session),
        _waiting_for(session),
        tasks=carried_tasks(session.db, milestone_name(session.config)),
    )
    report.approval = approval.reported(session)
    # What the merges changed is on the remote already; an iteration that merged
    # leaves its report there too (with anything the milestone still lacks, at
    # once), so a worker lost before the workflow hears of it loses nothing.
    progress.phase = "pushing"
    approval.push_kept(session.config, request.approval, report.approval, say)
    checkout.publish(
        session.config, request.workflow_id, report if merged else None, request.token, say
    )
    return report


class Pusher:
    """The session's `on_landed` on a worker: the milestone goes to the remote
    after each merge (retried); one that never gets there fails the iteration
    (transient: it runs again from the remote)."""

    def __init__(self, config: Config, say: Printer) -> None:
        self.config = config
        self.say = say
        self.failed: TransientError | None = None
        self.seconds = 0.0
        """Spent pushing: the fleet's part of the iteration, not `run_iteration`'s."""

    def __call__(self, tip: str) -> None:
        started = time.monotonic()
        try:
            checkout.push(self.config, self.say)
        except TransientError as exc:
            self.failed = exc
            raise
        finally:
            self.seconds += time.monotonic() - started


def _recovered(config: Config, worker: str, request: IterationRequest) -> IterationReport | None:
    """What the remote says of iteration `request.number`, which a lost worker
    ran: its report (it merged, and pushed the report with the milestone), or
    else the merges that name it (it was lost between its merges and its
    report: recorded as soda's crash recovery records them); None when the
    remote has nothing of it (it runs here from its start)."""
    stored = checkout.stored_report(config, request.workflow_id, request.token, request.number)
    if stored is not None:
        return stored
    found = checkout.landed(config, request.number)
    if found is None:
        return None
    reason = "its merges reached the remote before its worker was lost"
    summary = IterationSummary(
        request.number,
        Ending.CONTINUE.value,
        reason,
        "CONTINUE",
        "merged",
        found.commit,
        worker=worker,
    )
    closed = TaskStatus.CLOSED.value
    carried = [
        replace(task, status=closed, reason=f"merged in {found.commit[:10]}")
        if task.id in found.tasks and task.status != closed
        else task
        for task in request.tasks
    ]
    still_open = sum(1 for task in carried if task.status != closed)
    return IterationReport(
        summary,
        [],
        request.model_position,
        request.learnings,
        still_open,
        None,
        tasks=carried,
    )


def carried_tasks(db: Database, milestone: str) -> list[CarriedTask]:
    """The Trace tasks a run carries to its next worker, bounded: the root, the
    unfinished ones (lowest ids first) and the few last closed."""
    root = tasks.root(db, milestone)
    chosen: dict[int, Task] = {root.id: root} if root else {}
    for status in (TaskStatus.IN_PROGRESS, TaskStatus.OPEN, TaskStatus.BLOCKED):
        for task in tasks.of_milestone(db, milestone, status, MAX_CARRIED_TASKS):
            chosen.setdefault(task.id, task)
    # The root has the lowest id (a task's parent is older than the task).
    picked = sorted(chosen.values(), key=lambda t: t.id)[: MAX_CARRIED_TASKS - MAX_OTHER_TASKS]
    for task in tasks.recently_closed(db, milestone, MAX_OTHER_TASKS):
        if task.id not in {t.id for t in picked}:
            picked.append(task)
    return [
        CarriedTask(
            task.id,
            task.title[:200],
            task.status.value,
            task.parent_id,
            "" if root is not None and task.id == root.id else task.description[:MAX_TASK_TEXT],
            (task.status_reason or "")[:300] or None,
            task.risk,
        )
        for task in sorted(picked, key=lambda t: t.id)
    ]


def _open_tasks(session: Session) -> int:
    rows = tasks.of_milestone(session.db, milestone_name(session.config))
    return sum(1 for task in rows if task.status not in (TaskStatus.CLOSED,))


def _waiting_for(session: Session) -> str | None:
    asked = open_questions(session.db)
    if asked:
        return f"an answer to question {asked[0].id}: {asked[0].question}"
    return None
