"""One iteration on a worker, as plain synchronous code (the activity runs it in
a thread): prepare the checkout, rebuild the record when fresh, open the loop's
run through its door (soda.loop.host; the milestone pushed after each merge, as
its `on_landed`), step it once, do what the fleet's row of soda.loop.policy says
(close the worker's run record, `notify_command` on DONE, STUCK and HALT), push
the report of an iteration that merged beside the milestone, summarise.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from sqlite_utils import Database

from soda.config import Config
from soda.contracts import HumanInput
from soda.contracts.outcomes import Ending, TaskStatus
from soda.errors import StructuralError, TransientError
from soda.events import notify
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
from soda.loop.host import MAX_OTHER_TASKS, Run, open_run
from soda.loop.policy import Host, after
from soda.repo.milestone import milestone_name
from soda.store import learnings, tasks
from soda.store.tasks import Task
from soda.system.clock import moment
from soda.system.windows import in_window, next_open, parse_windows

Printer = Callable[[str], None]


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
    """A run placed on this worker. The loop's run stays open between its
    iterations (the database, the checkout pool's worktrees, the model), as the
    daemon's does between wakes; it is closed when the run waits, ends or moves."""

    run: Run | None = None
    pusher: Pusher | None = None
    """The run's `on_landed`: the milestone to the remote after each merge."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the iteration's activity is cancelled: stop at the next safe point."""
    seen: float = 0.0
    """time.monotonic() of its last placement or iteration."""

    def close(self) -> None:
        run, self.run = self.run, None
        if run is not None:
            run.close("the run left this worker")


class OutsideWindow(Exception):
    """The run's working windows (`[daemon] windows`) are closed: no iteration
    now; the workflow waits, holding no worker, until `opens`."""

    def __init__(self, opens: float) -> None:
        super().__init__(f"outside the working windows until {moment(opens)}")
        self.opens = opens
        """Seconds since the epoch."""


def closed_until(config: Config) -> float | None:
    """When the next working window opens, if none is open now (None: one is)."""
    windows = parse_windows(config.daemon.windows)
    now = datetime.now().astimezone()
    if in_window(windows, now):
        return None
    opens = next_open(windows, now)
    return opens.timestamp() if opens is not None else now.timestamp() + 86400.0


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
    opens = closed_until(config)  # as the daemon, only inside its working windows
    if opens is not None:
        raise OutsideWindow(opens)
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
        if held.run is None or held.pusher is None:
            held.pusher = Pusher(config, say)
            held.run = open_run(
                config,
                stopping=held.stop,
                start=False,
                first_number=1,  # every iteration of the run counts, wherever it ran
                max_iterations=request.settings.max_iterations,
                on_landed=held.pusher,
            )
        return _iterate(held.run, held.pusher, worker, request, progress, say)
    except BaseException:
        held.close()  # what broke off is not trusted: the next attempt starts afresh
        raise


def _iterate(
    run: Run,
    pusher: Pusher,
    worker: str,
    request: IterationRequest,
    progress: Progress,
    say: Printer,
) -> IterationReport:
    if run.next_number != request.number:  # fail closed: never two records
        raise StructuralError(
            f"the worker's record is at iteration {run.next_number}, the run at {request.number}"
        )
    approval.agree(run, request.approval)
    progress.phase_of = run.phase
    pusher.seconds, pusher.failed = 0.0, None
    started = time.monotonic()
    step = run.step(say, number=request.number)
    seconds = time.monotonic() - started - pusher.seconds  # the pushes are the fleet's
    progress.phase_of = None
    then = after(Host.FLEET, step.ending, suspended=step.suspended)
    if then.close_run:
        run.finish(step.ending.run_status, step.reason)
    if pusher.failed is not None:  # a merge that never reached the remote is not landed
        raise pusher.failed
    if then.notify:
        notify(run.config, step.ending.name, step.number, step.reason, run.events)
    merged = step.merged_commit is not None
    summary = IterationSummary(
        step.number,
        step.ending.value,
        step.reason,
        step.decision,
        step.outcome,
        checkout.tip(run.config) if merged else None,
        step.tokens,
        step.cost_usd,
        worker,
        round(seconds, 4),
    )
    report = IterationReport(
        summary,
        progress.delivered(),
        learnings.active(run.db, run.config.context.max_learnings),
        step.open_tasks,
        step.waiting_for,
        tasks=carried_tasks(run.db, milestone_name(run.config)),
    )
    report.approval = approval.reported(run)
    # What the merges changed is on the remote already; an iteration that merged
    # leaves its report there too (with anything the milestone still lacks, at
    # once), so a worker lost before the workflow hears of it loses nothing.
    progress.phase = "pushing"
    approval.push_kept(run.config, request.approval, report.approval, say)
    checkout.publish(
        run.config, request.workflow_id, report if merged else None, request.token, say
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
