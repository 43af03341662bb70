"""A run's context: config, repository, database, model, Trace, and the records
that make every phase durable.

`Session.open` starts (or resumes) the milestone: the branch `soda/<spec-slug>`
from the base branch, its base commit, and the root Trace task made from the
spec. `IterationRecord` writes each phase's output to its `iterations` row as the
phase completes, so a crash leaves a readable record.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import git
from git import Repo
from pydantic import BaseModel
from sqlite_utils import Database

from soda.config import Config
from soda.errors import ConfigError, UserError
from soda.events import Events
from soda.git import open_repo
from soda.llm import make_model
from soda.llm.base import Model
from soda.lock import acquire_lock
from soda.milestone import milestone_branch, milestone_name
from soda.recovery import recover
from soda.runtime import AgentRunner, CallRecorder
from soda.store import open_db
from soda.store.db import dumps, now
from soda.trace import SqliteTracker

if TYPE_CHECKING:
    from soda.act.checkouts import Checkouts
    from soda.jail import Jail


@dataclass
class Milestone:
    name: str
    branch: str
    base_commit: str
    root_task_id: int


@dataclass
class Session:
    config: Config
    repo: Repo
    db: Database
    events: Events
    model: Model
    tracker: SqliteTracker
    recorder: CallRecorder
    runner: AgentRunner
    milestone: Milestone
    run_id: int
    jail: Jail
    """Where agent commands and test runs execute."""
    checkouts: Checkouts
    """The pool of worktrees ORIENT, the executor and the gate use."""
    iterations_in_run: int = 0
    cancel_requested: bool = False
    stop_requested: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def open(cls, config: Config, model: Model | None = None) -> Session:
        repo = open_repo(config.root)
        acquire_lock(config.state_dir)  # one soda per repository, daemon or foreground
        db = open_db(config.db_path)
        events = Events(db, config.state_dir / "logs" / "events.jsonl")
        recover(config, db, repo, events)
        model = model or make_model(config, events.emit)
        tracker = SqliteTracker(db, milestone_name(config))
        milestone = start_milestone(config, repo, tracker)
        with db.conn:
            run_id = (
                db["runs"]
                .insert(
                    {
                        "started_at": now(),
                        "spec_path": config.project.spec,
                        "milestone": milestone.name,
                        "milestone_branch": milestone.branch,
                        "base_branch": config.project.base_branch,
                        "base_commit": milestone.base_commit,
                        "provider": model.provider,
                        "status": "running",
                        "pid": os.getpid(),
                    }
                )
                .last_pk
            )
        events.run_id = run_id
        recorder = CallRecorder(db, config, model.provider, events)
        recorder.run_id = run_id
        runner = AgentRunner(model, config, recorder)
        events.emit("run.start", {"milestone": milestone.branch, "provider": model.provider})
        from soda.act.checkouts import Checkouts  # soda.act imports this module
        from soda.jail import Jail

        session = cls(
            config,
            repo,
            db,
            events,
            model,
            tracker,
            recorder,
            runner,
            milestone,
            run_id,
            Jail.for_config(config, Path(repo.git_dir)),
            Checkouts(repo, config.state_dir / "worktrees"),
        )
        runner.should_stop = lambda: session.stop_requested
        return session

    def spec_text(self) -> str:
        return self.config.spec_path.read_text(encoding="utf-8")

    def finish_run(self, status: str, reason: str) -> None:
        self.checkouts.remove_all()
        with self.db.conn:
            self.db["runs"].update(
                self.run_id, {"status": status, "final_reason": reason, "ended_at": now()}
            )
        self.events.emit("run.end", {"status": status, "reason": reason})

    def store_learnings(self, learnings: list[str], agent: str, iteration_id: int | None) -> None:
        """Keep new learnings; one already active is not stored twice."""
        existing = {
            row[0] for row in self.db.execute("SELECT text FROM learnings WHERE active = 1")
        }
        fresh = list(
            dict.fromkeys(t.strip() for t in learnings if t.strip() and t.strip() not in existing)
        )
        if not fresh:
            return
        with self.db.conn:
            self.db["learnings"].insert_all(
                {
                    "text": text,
                    "source_agent": agent,
                    "iteration_id": iteration_id,
                    "active": 1,
                    "created_at": now(),
                }
                for text in fresh
            )

    def next_iteration_number(self) -> int:
        row = self.db.execute("SELECT COALESCE(MAX(number), 0) FROM iterations").fetchone()
        return int(row[0]) + 1

    def begin_iteration(self) -> IterationRecord:
        self.iterations_in_run += 1
        number = self.next_iteration_number()
        with self.db.conn:
            iteration_id = (
                self.db["iterations"]
                .insert(
                    {"run_id": self.run_id, "number": number, "started_at": now(), "phase": "sense"}
                )
                .last_pk
            )
        self.recorder.iteration_id = iteration_id
        self.recorder.reset()
        self.events.iteration_id = iteration_id
        self.events.emit("iteration.start", {"number": number})
        return IterationRecord(self.db, iteration_id, number, time.monotonic())


@dataclass
class IterationRecord:
    db: Database
    id: int
    number: int
    started: float

    def save(self, **columns: Any) -> None:
        """Write columns to this iteration's row in one transaction; pydantic
        models and other structures are stored as JSON."""
        row = {
            key: (
                dumps(value.model_dump(mode="json"))
                if isinstance(value, BaseModel)
                else dumps(value)
                if isinstance(value, dict | list)
                else value
            )
            for key, value in columns.items()
        }
        with self.db.conn:
            self.db["iterations"].update(self.id, row)

    def finish(self, recorder: CallRecorder) -> None:
        self.save(
            ended_at=now(),
            duration_s=round(time.monotonic() - self.started, 3),
            tokens_in=recorder.tokens_in,
            tokens_out=recorder.tokens_out,
            cost_usd=recorder.cost_usd,
        )


def start_milestone(config: Config, repo: Repo, tracker: SqliteTracker) -> Milestone:
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
