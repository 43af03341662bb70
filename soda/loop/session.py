"""The process-lifetime context of a run (see soda.loop.context for the shorter ones).

`Session.open` takes the instance lock, recovers from a crash, starts (or
resumes) the milestone: the branch `soda/<spec-slug>` from the base branch, its
base commit, and the root Trace task made from the spec; and records the run
(`start_run`: once for `soda run`, once per wake for the daemon, so a run's
budget and iteration count are one wake's). It also points soda.system.proc's observer
at `state/activity.json`, so a stop can say what it waits for.
`begin_iteration` hands out the next `Iteration`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import git
from git import Repo
from sqlite_utils import Database

from soda.agent.pricing import check_priced
from soda.agent.recorder import CallRecorder
from soda.agent.runtime import AgentRunner
from soda.config import Config, LiveConfig
from soda.contracts.outcomes import RunStatus
from soda.errors import ConfigError, UserError
from soda.events import Events
from soda.forge import PullRequests, connect
from soda.human import HumanQueue
from soda.llm import make_model
from soda.llm.base import Model
from soda.loop.context import Iteration, IterationRecord
from soda.loop.recovery import recover
from soda.loop.wall import WallLimit
from soda.repo.checkouts import Checkouts
from soda.repo.git import open_repo
from soda.repo.milestone import milestone_branch, milestone_name
from soda.store import learnings, open_db, runs
from soda.store.db import now
from soda.store.runs import IterationRef
from soda.system import proc
from soda.system.clock import Clock, SystemClock
from soda.system.jail import Jail
from soda.system.lifecycle import ActivityFile
from soda.system.lock import acquire_lock
from soda.trace import SqliteTracker, Tracker


@dataclass
class Milestone:
    name: str
    branch: str
    base_commit: str
    root_task_id: int


def check_startable(config: Config, provider: str) -> None:
    """What a config must pass before a run starts on it (and before the daemon
    takes it on a reload), besides loading: every model the run may call is
    priced, or bound by a token budget (soda.agent.pricing), so the cost budget
    never silently fails to bind. ConfigError (exit 2) otherwise."""
    check_priced(config, provider)


@dataclass
class Session:
    """What lives as long as one run of the process (`soda run`, a daemon wake).

    Per-iteration state lives in `soda.loop.context.Iteration`, what the tasks of one
    plan share in `soda.loop.act.task.PlanRun`."""

    live: LiveConfig
    """The config, read through `config`; shared with the runner and the recorder
    (and the daemon), so a reload is one swap of `live.current`."""
    repo: Repo
    db: Database
    events: Events
    model: Model
    tracker: Tracker
    recorder: CallRecorder
    runner: AgentRunner
    milestone: Milestone
    run_id: int
    checkouts: Checkouts
    """The pool of worktrees ORIENT, the executor and the gate use."""
    human: HumanQueue
    """The person's inputs: the only reader of state/inbox/."""
    pulls: PullRequests | None = None
    """The milestone's pull request ([forge]); None when forge.mode is off."""
    clock: Clock = field(default_factory=SystemClock)
    max_iterations: int | None = None
    """Overrides `loop.max_iterations` for this run (`soda run --max-iterations`)."""
    iterations_in_run: int = 0
    run_started: str = ""
    """When this run's record began (ISO-8601 UTC): a task created before it and
    closed now is progress (soda.loop.progress)."""
    stopping: threading.Event = field(default_factory=threading.Event)
    """Set by a signal (for the daemon: its own `flags.stop`, shared): stop at the
    next safe point. Read by the loop, the agent runner and the task threads."""
    wall: WallLimit = field(default_factory=WallLimit)
    """The run's `[budget] max_wall_seconds`: once it passes, `stop_requested` is
    true too (and the running command was killed), but the run ends STUCK."""
    run_ended: bool = True
    """No run is open: none started yet, or its record is closed (the daemon starts
    another at its next wake)."""
    on_landed: Callable[[str], None] | None = None
    """Called with the milestone's new tip after each merge lands, before the
    merge is reported (a host's, given to soda.loop.host's `open_run`: the fleet
    pushes it to the remote; what it raises ends the iteration, the merge not
    reported as landed). None: nothing is called (`soda run` and the daemon)."""
    latest: Iteration | None = None
    """The iteration under way, or the last one: what soda.loop.host reports to
    its host once `run_iteration` returns. Phases are handed theirs."""
    _jail: tuple[Config, Jail] | None = field(default=None, init=False, repr=False)

    @property
    def config(self) -> Config:
        """The current config (a reload swaps it in `live`)."""
        return self.live.current

    @property
    def stop_requested(self) -> bool:
        """Stop at the next safe point: a stop was asked for (`stopping` is set), or
        the run is out of time (`wall`)."""
        return self.stopping.is_set() or self.wall.passed.is_set()

    @stop_requested.setter
    def stop_requested(self, value: bool) -> None:
        if value:
            self.stopping.set()
        else:
            self.stopping.clear()

    @property
    def jail(self) -> Jail:
        """Where agent commands and test runs execute: made from the config (its
        [sandbox] and test command), and made again once a reload swapped it."""
        made = self._jail
        if made is None or made[0] is not self.config:
            made = (self.config, Jail.for_config(self.config, Path(self.repo.git_dir)))
            self._jail = made
        return made[1]

    @classmethod
    def open(
        cls,
        config: Config | LiveConfig,
        model: Model | None = None,
        start_run: bool = True,
        stopping: threading.Event | None = None,
        clock: Clock | None = None,
    ) -> Session:
        """Check that every model the run may call is priced or bound by a token
        budget (soda.agent.pricing), lock, recover, start or resume the milestone
        and (unless `start_run` is False: the daemon starts one per wake) record a
        run. A `LiveConfig` is shared: whoever swaps its config swaps the
        session's; so is `stopping`: whoever sets it stops the session at its next
        safe point."""
        live = LiveConfig.of(config)
        config = live.current
        repo = open_repo(config.root)
        acquire_lock(config.state_dir)  # one soda per repository, daemon or foreground
        db = open_db(config.db_path)
        events = Events(db, config.state_dir / "logs" / "events.jsonl")
        recover(config, db, repo, events)
        proc.observe(ActivityFile(config.state_dir))  # what `soda stop` waits for
        model = model or make_model(config, events.emit)  # a missing key is said first
        check_startable(config, model.provider)
        tracker = SqliteTracker(db, milestone_name(config))
        milestone = start_milestone(config, repo, tracker)
        recorder = CallRecorder(db, live, model.provider, events)
        runner = AgentRunner(model, live, recorder)
        session = cls(
            live,
            repo,
            db,
            events,
            model,
            tracker,
            recorder,
            runner,
            milestone,
            0,
            Checkouts(repo, config.state_dir / "worktrees"),
            HumanQueue(config.state_dir, db, events),
            stopping=stopping if stopping is not None else threading.Event(),
            clock=clock or SystemClock(),
        )
        runner.should_stop = lambda: session.stop_requested
        runner.clock = session.clock  # a wait for the provider's limit runs on it
        runner.jail = lambda: session.jail  # where agents' MCP servers run
        session.pulls = connect(config, db, milestone.branch)
        if start_run:
            session.start_run()
        return session

    def start_run(self) -> None:
        """Record a new run: `soda run` has one; the daemon starts one per wake, so
        the per-run budget and the iteration count start again from 0."""
        milestone = self.milestone
        self.run_started = now()
        self.run_id = runs.start_run(
            self.db,
            {
                "spec_path": self.config.project.spec,
                "milestone": milestone.name,
                "milestone_branch": milestone.branch,
                "base_branch": self.config.project.base_branch,
                "base_commit": milestone.base_commit,
                "provider": self.model.provider,
                "pid": os.getpid(),
            },
        )
        # The run's own services: the session (the composition root) rebinds them;
        # nothing below reads a run or iteration id off a shared object.
        self.events = self.events.for_run(self.run_id)
        self.recorder = self.recorder.for_scope(self.events)
        self.runner = self.runner.recording_to(self.recorder)
        self.human = self.human.with_events(self.events)
        self.iterations_in_run = 0
        self.run_ended = False
        self.wall.start(self.config.budget.max_wall_seconds, self.stopping.is_set())
        self.events.emit(
            "run.start", {"milestone": milestone.branch, "provider": self.model.provider}
        )

    def spec_text(self) -> str:
        return self.config.spec_path.read_text(encoding="utf-8")

    @property
    def iteration_limit(self) -> int:
        return self.max_iterations or self.config.loop.max_iterations

    def finish_run(self, status: RunStatus, reason: str) -> None:
        """Close the run's record (once: a later call, e.g. on the way out after a
        record was already closed as interrupted, changes nothing)."""
        if self.run_ended:
            return
        self.run_ended = True
        self.wall.end(self.stopping.is_set())
        self.checkouts.remove_all()
        runs.finish_run(self.db, self.run_id, status, reason)
        self.events.emit("run.end", {"status": status, "reason": reason})

    def store_learnings(self, texts: list[str], agent: str, iteration_id: int | None) -> None:
        """Keep new learnings (one already known is not stored twice); the oldest
        past [context] max_learnings are retired."""
        learnings.add(self.db, texts, agent, iteration_id, self.config.context.max_learnings)

    def next_iteration_number(self) -> int:
        return runs.next_iteration_number(self.db)

    def begin_iteration(self) -> Iteration:
        self.iterations_in_run += 1
        number = runs.next_iteration_number(self.db)
        ref = IterationRef(number, runs.start_iteration(self.db, self.run_id, number))
        events = self.events.for_iteration(ref)
        recorder = self.recorder.for_scope(events)
        events.emit("iteration.start", {"number": number})
        self.latest = Iteration(
            ref,
            IterationRecord(self.db, ref.id, number),
            events,
            recorder,
            self.runner.recording_to(recorder, number),
            self.human.with_events(events),
        )
        return self.latest


def start_milestone(config: Config, repo: Repo, tracker: Tracker) -> Milestone:
    """Create the milestone branch from the base branch if missing (resume it if
    present), and the root Trace task from the spec."""
    base = config.project.base_branch
    branch = milestone_branch(config)
    heads = {head.name for head in repo.heads}
    if base not in heads:
        raise ConfigError(
            f"soda.toml: project.base_branch: branch {base!r} does not exist in {config.root}"
        )
    if branch not in heads:
        repo.git.branch(branch, base)
    try:
        base_commit = repo.git.merge_base(base, branch)
    except git.GitCommandError as exc:
        raise UserError(
            f"{branch} and {base} share no history; delete {branch} or fix base_branch"
        ) from exc
    root = tracker.root()
    if root is None:
        spec = config.spec_path.read_text(encoding="utf-8")
        root = tracker.create(spec_title(spec, config.spec_path), description=spec)
    return Milestone(milestone_name(config), branch, base_commit, root.id)


def spec_title(text: str, path: Path) -> str:
    """The spec's first Markdown heading, or its file name."""
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or path.stem
    return path.stem
