"""The loop's one door for its hosts: `soda run`, the daemon and the fleet.

A host decides when and where to step, never how an iteration ends (that is
`soda.loop.policy`'s table). It opens a run with what it decides (the stop flag,
the first iteration's number when the run began elsewhere, the iteration limit,
what happens after a merge lands, the model), steps it one iteration at a time
and gets back a `StepReport` built from the iteration's record in memory, looks
for news while idle, and finishes. The `Session` behind it is the loop's own
business: outside `soda/loop/`, only this module and the policy are imported
(`tests/test_layout.py` checks it). What a face needs from the loop besides
(`soda plan`'s preview, `soda show`'s report, the ref of work held for
approval) is re-exported here too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from git import Repo
from sqlite_utils import Database

from soda.config import Config, LiveConfig
from soda.contracts.outcomes import Ending, IterationOutcome, RunStatus, TaskStatus
from soda.errors import StructuralError
from soda.events import Events
from soda.human import ControlAction
from soda.human.approval import overdue
from soda.human.files import IngestReport
from soda.llm.base import Model
from soda.loop.act.held import KEPT_REF
from soda.loop.asking import open_questions
from soda.loop.iteration_report import report_summary
from soda.loop.plan_only import Preview, preview, render_preview
from soda.loop.pr import poll_idle
from soda.loop.run import IterationResult, run_iteration, run_loop
from soda.loop.sense import MAX_OTHER_TASKS
from soda.loop.session import Milestone, Session, check_startable
from soda.loop.wake import nothing_new
from soda.store import tasks
from soda.system.lock import release_lock

__all__ = [
    "KEPT_REF",
    "MAX_OTHER_TASKS",
    "Ending",
    "IterationResult",
    "Milestone",
    "Preview",
    "Run",
    "StepReport",
    "open_run",
    "preview",
    "render_preview",
    "report_summary",
]

Printer = Callable[[str], None]


@dataclass(frozen=True)
class StepReport:
    """What one iteration did, for its host (from the record as it was written)."""

    number: int
    ending: Ending
    reason: str
    decision: str | None = None
    outcome: str | None = None
    merged_commit: str | None = None
    """The iteration's last merge onto the milestone (None: nothing merged)."""
    tokens: int = 0
    cost_usd: float = 0.0
    open_tasks: int = 0
    """The milestone's Trace tasks not closed after it."""
    waiting_for: str | None = None
    """The question a person's answer is waited for, in one line."""

    @property
    def suspended(self) -> bool:
        """It ended STUCK with a plan or merge held for a person's approval."""
        return self.outcome == IterationOutcome.AWAITING_APPROVAL


class Run:
    """A run of the loop in this process, as its host holds it (see `open_run`)."""

    def __init__(self, session: Session, first_number: int | None = None) -> None:
        self._session = session
        self._first = first_number
        self._overdue: int | None = None
        self._stepping: int | None = None
        """The number of the iteration a `step` runs now."""

    # --- what the host may read ---------------------------------------------

    @property
    def config(self) -> Config:
        return self._session.config

    @property
    def db(self) -> Database:
        return self._session.db

    @property
    def repo(self) -> Repo:
        return self._session.repo

    @property
    def events(self) -> Events:
        """The run's events (the process's until a run is recorded)."""
        return self._session.events

    @property
    def milestone(self) -> Milestone:
        return self._session.milestone

    @property
    def model(self) -> Model:
        """The model this run calls (another run in this process may share it)."""
        return self._session.model

    @property
    def has_pull_request(self) -> bool:
        """[forge] is on: the milestone has a pull request to read while idle."""
        return self._session.pulls is not None

    @property
    def is_open(self) -> bool:
        """A run is recorded and not finished."""
        return not self._session.run_ended

    @property
    def next_number(self) -> int:
        return self._session.next_iteration_number()

    @property
    def stop_requested(self) -> bool:
        """A stop at the next safe point was asked for (`stop_soon`, or the host's
        `stopping` flag)."""
        return self._session.stop_requested

    def stop_soon(self) -> None:
        """Stop at the next safe point (a signal handler may call it)."""
        self._session.stopping.set()

    def phase(self) -> str | None:
        """The phase of the iteration a `step` runs now, as recorded (None between
        steps). Safe to call from another thread."""
        latest, stepping = self._session.latest, self._stepping
        if latest is None or stepping is None or latest.number != stepping:
            return None
        return str(latest.record.saved.get("phase", "sense"))

    # --- stepping --------------------------------------------------------------

    def step(self, say: Printer, number: int | None = None) -> StepReport:
        """One iteration (a run recorded first if none is open). `number`: the
        iteration the host expects; a record at another is a StructuralError
        (fail closed: never two records of one iteration)."""
        session = self._session
        if number is not None and session.next_iteration_number() != number:
            raise StructuralError(
                f"the record here is at iteration {session.next_iteration_number()},"
                f" the run at {number}"
            )
        if session.run_ended:
            session.start_run()
        if self._first is not None:  # iterations elsewhere count toward the limit
            session.iterations_in_run = session.next_iteration_number() - self._first
        self._stepping = session.next_iteration_number()
        try:
            return self._report(run_iteration(session, say))
        finally:
            self._stepping = None

    def loop(
        self, say: Printer, once: bool = False, should_stop: Callable[[], bool] = lambda: False
    ) -> IterationResult:
        """Step until the foreground's policy ends the run (soda.loop.run.run_loop)."""
        return run_loop(self._session, say, once=once, should_stop=should_stop)

    def _report(self, result: IterationResult) -> StepReport:
        latest = self._session.latest
        saved = latest.record.saved if latest is not None else {}
        return StepReport(
            result.number,
            result.ending,
            result.reason,
            saved.get("decision"),
            saved.get("outcome"),
            saved.get("merged_commit"),
            int(saved.get("tokens_in") or 0) + int(saved.get("tokens_out") or 0),
            float(saved.get("cost_usd") or 0.0),
            self._open_tasks(),
            self._waiting_for(),
        )

    def _open_tasks(self) -> int:
        rows = tasks.of_milestone(self.db, self.milestone.name)
        return sum(1 for task in rows if task.status != TaskStatus.CLOSED)

    def _waiting_for(self) -> str | None:
        asked = open_questions(self.db, self.milestone.branch)
        if asked:
            return f"an answer to question {asked[0].id}: {asked[0].question}"
        return None

    # --- while idle --------------------------------------------------------------

    def take_inputs(self, settle_seconds: float) -> IngestReport:
        """The inbox's settled files recorded as pending inputs."""
        return self._session.human.ingest(settle_seconds=settle_seconds)

    def take_controls(self) -> list[ControlAction]:
        """Pause, resume and stop, taken while no iteration runs."""
        session = self._session
        return session.human.take_control_while_idle(session.next_iteration_number())

    def look(self, say: Printer) -> bool:
        """News for an idle host: a writer's comment or a failing check on the pull
        request (every `forge.poll_seconds`), or a plan suspended for approval past
        its deadline (once: the next iteration rejects it)."""
        if poll_idle(self._session, say):
            return True
        waiting = overdue(self.db, self._session.clock)
        if waiting is None or waiting.id == self._overdue:
            return False
        self._overdue = waiting.id
        return True

    def nothing_new(self) -> str | None:
        """Why a wake may be skipped with no model call (soda.loop.wake), or None."""
        return nothing_new(self._session)

    # --- the end ---------------------------------------------------------------

    def finish(self, status: RunStatus, reason: str) -> None:
        """Close the run's record (once; a closed one stays as it was)."""
        self._session.finish_run(status, reason)

    def check_startable(self, config: Config) -> None:
        """`config` may run here (a reload): every model it may call is priced or
        bound by a token budget (ConfigError otherwise; soda.loop.session)."""
        check_startable(config, self._session.model.provider)

    def check_jail(self) -> None:
        """The jail this run's commands need works here (UserError otherwise)."""
        self._session.jail.ensure_available()

    def close(self, reason: str, keep_lock: bool = False) -> None:
        """Finish the run as stopped and let the repository go (its database, and
        unless `keep_lock` its lock): another process, or another run here, may
        open it. `keep_lock`: this process goes on with another run (the daemon's
        next issue), so no other soda may start in between."""
        self.finish(RunStatus.STOPPED, reason)
        self.db.conn.close()
        if not keep_lock:
            release_lock(self.config.state_dir)


def open_run(
    config: Config | LiveConfig,
    *,
    stopping: threading.Event | None = None,
    start: bool = True,
    first_number: int | None = None,
    max_iterations: int | None = None,
    on_landed: Callable[[str], None] | None = None,
    model: Model | None = None,
) -> Run:
    """Lock the repository, recover from a crash, start or resume the milestone and
    (with `start`) record a run. `stopping`: set it to stop at the next safe point
    (shared with the host). `first_number`: the number of the run's first
    iteration when earlier ones ran elsewhere (the fleet: they count toward the
    limit). `max_iterations`: instead of `loop.max_iterations`. `on_landed`:
    called with the milestone's tip after each merge lands, before it is
    reported. `model`: instead of the one `[model]` names."""
    session = Session.open(config, model=model, start_run=start, stopping=stopping)
    session.max_iterations = max_iterations
    session.on_landed = on_landed
    return Run(session, first_number)
