"""One iteration on a worker, as plain synchronous code (the activity runs it in
a thread): prepare the checkout, rebuild the record when fresh, open a session,
run `soda.loop.run.run_iteration` unchanged, push the milestone, summarise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from soda.contracts import HumanInput
from soda.contracts.outcomes import RunStatus, TaskStatus
from soda.errors import StructuralError
from soda.fleet import approval, checkout
from soda.fleet.state import PROVENANCE, IterationReport, IterationRequest, IterationSummary
from soda.human.write import write_input
from soda.loop.asking import open_questions
from soda.loop.run import Ending, run_iteration
from soda.loop.session import Session
from soda.repo.milestone import milestone_name
from soda.store import history, learnings, tasks
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
        sha = checkout.landed(config, request.number)
        report = _landed(worker, request, sha) if sha is not None else None
        # A merge that landed before its worker could say so counts as done here too.
        done = [*request.history, report.summary] if report else request.history
        checkout.rebuild(config, done, request.learnings)
        if report is not None:
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
    started = time.monotonic()
    result = run_iteration(session, say)
    seconds = time.monotonic() - started
    progress.phase_of = None
    if result.ending is not Ending.CONTINUE:
        session.finish_run(result.ending.run_status, result.reason)
    progress.phase = "pushing"
    tip = checkout.push(session.config, say)
    row = history.iteration(session.db, result.number) or {}
    summary = IterationSummary(
        result.number,
        result.ending.value,
        result.reason,
        row.get("decision"),
        row.get("outcome"),
        tip if row.get("merged_commit") else None,
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
    )
    report.approval = approval.reported(session)
    approval.push_kept(session.config, request.approval, report.approval, say)
    return report


def _landed(worker: str, request: IterationRequest, sha: str) -> IterationReport:
    reason = "its merge reached the remote before its worker was lost"
    summary = IterationSummary(
        request.number, Ending.CONTINUE.value, reason, "CONTINUE", "merged", sha, worker=worker
    )
    return IterationReport(summary, [], request.model_position, request.learnings, 0, None)


def _open_tasks(session: Session) -> int:
    rows = tasks.of_milestone(session.db, milestone_name(session.config))
    return sum(1 for task in rows if task.status not in (TaskStatus.CLOSED,))


def _waiting_for(session: Session) -> str | None:
    asked = open_questions(session.db)
    if asked:
        return f"an answer to question {asked[0].id}: {asked[0].question}"
    return None
