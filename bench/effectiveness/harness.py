"""Run soda on one benchmark task and judge the result with tests it never saw.

For each task: build the starting repository in a fresh directory, set soda up
there (`soda init`'s files, with the task's budget: `loop.max_iterations`,
`budget.max_cost_usd`), run soda in a worker process under a wall-clock
timeout, read what the run spent from its database, then check out the
milestone branch clean, copy the acceptance tests in, and run the project's
test command on it in soda's jail. "Solved" means that run passes, acceptance
tests included; anything else (STUCK, HALT, a timeout, a crash, DONE with the
acceptance tests failing) is recorded as unsolved with its reason, and the
suite goes on.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.effectiveness.acceptance import Acceptance, judge
from bench.effectiveness.fake import FAKE_MODEL_ID
from bench.effectiveness.suite import Task
from soda.cli.init import init_project
from soda.config import Config, ModelConfig, ProjectConfig, load
from soda.repo.git import commit_all, init_repo
from soda.system.lifecycle import kill_leftovers
from soda.system.lock import pid_alive

WORKER = Path(__file__).resolve().parent / "worker.py"
NO_PERSON_WAIT_S = 5.0
"""Nobody answers during a benchmark: a plan or merge waiting for approval is
rejected after this many seconds (`approval.timeout`), as it would be unattended."""


@dataclass(frozen=True)
class ModelChoice:
    """Who answers: the offline fake (`fake` names its behaviour), or the provider
    a person configured (`base`, their whole soda.toml, with [model] as given)."""

    label: str
    fake: str | None = None
    base: Config = field(default_factory=Config)

    @classmethod
    def offline(cls, behaviour: str = "solve") -> ModelChoice:
        suffix = "" if behaviour == "solve" else f"-{behaviour}"
        model = ModelConfig(strong=FAKE_MODEL_ID, fast=FAKE_MODEL_ID)
        return cls(f"fake{suffix}", behaviour, Config(model=model))


@dataclass
class TaskResult:
    """One row of the report."""

    task: str
    title: str
    difficulty: str
    solved: bool = False
    ending: str = "not run"
    """How soda's run ended (done, stuck, halt, transient, interrupted), or what the
    harness saw instead: timeout, crash, error (could not start), setup."""
    reason: str = ""
    iterations: int = 0
    calls: int = 0
    tokens_in: int = 0
    """Input tokens, cache writes and reads included."""
    tokens_out: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    """Seconds soda ran (setup and the acceptance run not counted)."""
    acceptance: Acceptance | None = None
    workdir: str | None = None
    """Where the task's repository and logs were kept (None: removed)."""

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "acceptance"}
        data["cost_usd"] = round(self.cost_usd, 6)
        data["wall_s"] = round(self.wall_s, 2)
        data["acceptance"] = self.acceptance.to_json() if self.acceptance else None
        return data


def task_config(task: Task, choice: ModelChoice) -> Config:
    """The person's config (or the fake's) with the task's project and limits."""
    base = choice.base
    limit = task.limits.max_cost_usd
    budget = base.budget.model_copy(
        update={
            "max_cost_usd": limit,
            "max_cost_usd_per_day": max(base.budget.max_cost_usd_per_day, limit),
        }
    )
    # Relative paths in the person's file meant their directory, not the task's.
    expose = [str((base.root / p).resolve()) for p in base.sandbox.expose]
    model = base.model
    if model.script:
        model = model.model_copy(update={"script": str((base.root / model.script).resolve())})
    return base.model_copy(
        update={
            "project": ProjectConfig(test_command=task.command()),
            "model": model,
            "loop": base.loop.model_copy(update={"max_iterations": task.limits.max_iterations}),
            "budget": budget,
            "sandbox": base.sandbox.model_copy(update={"expose": expose}),
            "approval": base.approval.model_copy(
                update={"timeout": min(base.approval.timeout, NO_PERSON_WAIT_S)}
            ),
        }
    )


def prepare(task: Task, repo_dir: Path, config: Config) -> Path:
    """The task's starting repository in `repo_dir`, committed on `main`, with the
    spec at specs/SPEC.md and soda set up; the path of its soda.toml."""
    task.build(repo_dir)
    (repo_dir / "specs").mkdir(exist_ok=True)
    (repo_dir / "specs" / "SPEC.md").write_text(task.spec, encoding="utf-8")
    repo = init_repo(repo_dir)
    init_project(repo_dir, config)
    commit_all(repo, f"Starting point: {task.title}")
    return repo_dir / "soda.toml"


def run_task(task: Task, choice: ModelChoice, workdir: Path) -> TaskResult:
    """Run soda on `task` in `workdir` (new) and judge it; never raises for a
    failure of the task itself."""
    row = TaskResult(task.name, task.title, task.difficulty)
    repo_dir = workdir / "repo"
    try:
        config_path = prepare(task, repo_dir, task_config(task, choice))
    except Exception as exc:
        row.ending, row.reason = "setup", f"{type(exc).__name__}: {exc}"
        return row
    result_path = workdir / "result.json"
    argv = [sys.executable, str(WORKER), str(repo_dir), str(result_path)]
    if choice.fake is not None:
        argv += ["--fake", choice.fake, "--task-dir", str(task.folder)]
    started = time.monotonic()
    timed_out = _run_worker(argv, workdir / "soda.log", task.limits.timeout_seconds, repo_dir)
    row.wall_s = time.monotonic() - started
    outcome = _read_result(result_path, workdir / "soda.log")
    row.ending, row.reason = outcome["ending"], outcome.get("reason", "")
    if timed_out:
        row.ending = "timeout"
        row.reason = f"no end after {task.limits.timeout_seconds:g} s (wall clock); " + row.reason
    _spent(row, repo_dir / "state" / "soda.db")
    config = load(config_path)
    branch = outcome.get("milestone_branch") or "soda/spec"
    try:
        row.acceptance = judge(task, config, repo_dir, branch, workdir / "acceptance")
    except Exception as exc:  # the judge broke, not the task: say so, go on
        row.reason = _join(row.reason, f"acceptance could not run: {type(exc).__name__}: {exc}")
        return row
    row.solved = row.acceptance.solved
    return row


def _join(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def _run_worker(argv: list[str], log: Path, timeout: float, repo_dir: Path) -> bool:
    """Run the worker; True when it had to be stopped at the timeout. Stopping
    is soda's own: SIGTERM (stop at the next safe point), a second one (stop at
    once, killing its commands), then SIGKILL of its process group and of the
    commands its activity file names."""
    with log.open("w", encoding="utf-8") as out:
        worker = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            worker.wait(timeout)
            return False
        except subprocess.TimeoutExpired:
            pass
        grace = min(10.0, max(1.0, timeout / 10))
        for _ in range(2):
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(grace)
                return True
            except subprocess.TimeoutExpired:
                continue
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    kill_leftovers(repo_dir / "state", pid_alive)
    return True


def _read_result(path: Path, log: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-3:]
        return {"ending": "crash", "reason": "the worker left no result: " + " / ".join(tail)}


def _spent(row: TaskResult, db_path: Path) -> None:
    """Iterations, calls, tokens and cost of the run, from soda's own records."""
    if not db_path.exists():
        return
    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        row.iterations = db.execute("SELECT COUNT(*) FROM iterations").fetchone()[0]
        calls, tokens_in, tokens_out, cost = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(input_tokens + cache_creation_tokens"
            " + cache_read_tokens), 0), COALESCE(SUM(output_tokens), 0),"
            " COALESCE(SUM(cost_usd), 0) FROM agent_calls"
        ).fetchone()
    finally:
        db.close()
    row.calls, row.tokens_in, row.tokens_out, row.cost_usd = calls, tokens_in, tokens_out, cost


def run_suite(
    tasks: list[Task],
    choice: ModelChoice,
    workdir: Path,
    keep: bool = False,
    say: Callable[[str], None] = lambda line: None,
) -> list[TaskResult]:
    """Every task in turn, each in `workdir/NAME` (removed afterwards unless `keep`)."""
    rows = []
    for task in tasks:
        folder = workdir / task.name
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        say(
            f"{task.name}: running ({task.difficulty}, up to {task.limits.max_iterations} "
            f"iterations, ${task.limits.max_cost_usd:g}, {task.limits.timeout_seconds:g} s)"
        )
        row = run_task(task, choice, folder)
        verdict = "solved" if row.solved else f"unsolved ({row.ending})"
        say(f"{task.name}: {verdict} in {row.wall_s:.1f} s")
        if keep:
            row.workdir = str(folder)
        else:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(row)
    return rows
