"""A run's checkout on a worker: the clone in the worker's cache, made to agree
with the remote (the truth for code), the local record rebuilt from the
workflow's state, and the milestone branch pushed after the iteration's merges.

A fresh placement (a new worker, or an attempt that broke off) starts from the
remote: the milestone branch is reset to the remote's (a merge that never
reached the remote is dropped and made again), and the local state directory
is rebuilt: the runs and iterations the workflow remembers, its learnings and
the merges the milestone's `Soda-Iteration` trailers name.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import git
from git import Repo
from git.refs.symbolic import SymbolicReference

from soda.config import CONFIG_NAME, Config, load
from soda.contracts.outcomes import RunStatus
from soda.errors import TransientError, UserError
from soda.fleet.state import IterationSummary, RunSettings
from soda.repo.git import ensure_excluded, harden_git_environment
from soda.repo.milestone import milestone_branch
from soda.store import learnings, open_db, runs
from soda.store.db import now

PUSH_ATTEMPTS = 5
PUSH_BACKOFF = 0.5
"""Seconds before the second push attempt; doubles each time."""
CLONE_DIR = "repo"
FLEET_CONFIG = ".soda-fleet.toml"
"""The submitted soda.toml, at the top of the clone (its paths are the
repository's) and ignored by git: no commit or worktree sees it."""


@dataclass(frozen=True)
class RunCheckout:
    """Where one run lives on this worker."""

    home: Path
    """The run's directory in the worker's cache."""

    @property
    def root(self) -> Path:
        return self.home / CLONE_DIR


def run_home(cache: Path, workflow_id: str) -> RunCheckout:
    return RunCheckout(cache / re.sub(r"[^A-Za-z0-9_.-]", "_", workflow_id))


def prepare(checkout: RunCheckout, settings: RunSettings, fresh: bool) -> tuple[Config, bool]:
    """Clone (or fetch) the repository; the run's config, and whether its record
    starts afresh. When `fresh` (or on a new clone), the local state is thrown
    away and the milestone reset to the remote's."""
    harden_git_environment()
    root = checkout.root
    if not (root / ".git").exists():
        shutil.rmtree(root, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            Repo.clone_from(settings.repo_url, root)
        except git.GitCommandError as exc:
            raise TransientError(f"cannot clone {settings.repo_url}: {_first(exc)}") from exc
        fresh = True
    repo = Repo(root)
    try:
        repo.git.fetch("--prune", "origin")
    except git.GitCommandError as exc:
        raise TransientError(f"cannot fetch {settings.repo_url}: {_first(exc)}") from exc
    config = run_config(checkout, settings)
    base_tip = _tip(repo, f"refs/remotes/origin/{config.project.base_branch}")
    if base_tip is not None and base_tip != _tip(repo, "HEAD"):
        # The clone's own checkout follows the remote's base (the spec and config live there).
        repo.git.checkout("-q", "-B", config.project.base_branch, base_tip)
    if fresh:
        ensure_excluded(repo, f"/{config.project.state_dir.strip('/')}/")
        shutil.rmtree(config.state_dir, ignore_errors=True)
        branch = milestone_branch(config)
        if _remote_has(repo, branch):
            repo.git.branch("-f", branch, f"origin/{branch}")
        elif branch in {head.name for head in repo.heads}:
            repo.git.branch("-D", branch)
    return config, fresh


def run_config(checkout: RunCheckout, settings: RunSettings) -> Config:
    """The repository's soda.toml (or the submitted one), with the submitted spec
    and base branch, rooted at the clone."""
    path = checkout.root / CONFIG_NAME
    if settings.config_text is not None:
        path = checkout.root / FLEET_CONFIG
        if not path.exists() or path.read_text(encoding="utf-8") != settings.config_text:
            ensure_excluded(Repo(checkout.root), f"/{FLEET_CONFIG}")
            path.write_text(settings.config_text, encoding="utf-8")
    if not path.exists():
        raise UserError(f"{settings.repo_url}: no {CONFIG_NAME} (run `soda init` there first)")
    config = load(path)
    config.root = checkout.root
    update = {}
    if settings.spec:
        update["spec"] = settings.spec
    if settings.base:
        update["base_branch"] = settings.base
    if update:
        config = config.model_copy(update={"project": config.project.model_copy(update=update)})
        config.root = checkout.root
    return config


def rebuild(config: Config, history: list[IterationSummary], kept: list[str]) -> None:
    """A fresh state directory learns what the workflow remembers: one closed run
    holding the finished iterations (numbers go on from them), and the learnings."""
    if not history and not kept:
        return
    db = open_db(config.db_path)
    try:
        branch = milestone_branch(config)
        run = runs.start_run(
            db,
            {
                "spec_path": config.project.spec,
                "milestone": branch.removeprefix("soda/"),
                "milestone_branch": branch,
                "base_branch": config.project.base_branch,
                "provider": config.model.provider,
            },
        )
        for item in history:
            iteration = runs.start_iteration(db, run, item.number)
            columns = {
                "decision": item.decision,
                "decision_reason": item.reason,
                "outcome": item.outcome,
                "merged_commit": item.merged_commit,
                "phase": "done",
                "ended_at": now(),
            }
            runs.save_iteration(db, iteration, {k: v for k, v in columns.items() if v})
        reason = "rebuilt by soda fleet from the workflow's state"
        runs.finish_run(db, run, RunStatus.STOPPED, reason)
        if kept:
            learnings.add(db, kept, "fleet", None, config.context.max_learnings)
    finally:
        db.conn.close()


def landed(config: Config, number: int) -> str | None:
    """The newest merge on the remote's milestone branch whose `Soda-Iteration`
    trailer names iteration `number` (it landed before its worker was lost)."""
    repo = Repo(config.root)
    ref = f"origin/{milestone_branch(config)}"
    if not _remote_has(repo, milestone_branch(config)):
        return None
    log = repo.git.log(
        "--first-parent",
        "--merges",
        "--max-count=50",
        "--format=%H %(trailers:key=Soda-Iteration,valueonly,separator=%x2C)",
        ref,
        "--",
    )
    for line in log.splitlines():
        sha, _, value = line.partition(" ")
        if value.strip() == str(number):
            return str(sha)
    return None


def push(config: Config, say: Callable[[str], None] | None = None) -> str | None:
    """Push the milestone branch to the remote, retrying; its tip once the remote
    has it. A push that never succeeds is a TransientError: the merge is not
    reported as landed."""
    repo = Repo(config.root)
    branch = milestone_branch(config)
    if branch not in {head.name for head in repo.heads}:
        return None
    tip = _tip(repo, f"refs/heads/{branch}")
    if tip is not None and tip == _tip(repo, f"refs/remotes/origin/{branch}"):
        return tip  # nothing new since the last push (or the fetch)
    wait = PUSH_BACKOFF
    for attempt in range(1, PUSH_ATTEMPTS + 1):
        try:
            repo.git.push("origin", f"refs/heads/{branch}:refs/heads/{branch}")
            return tip
        except git.GitCommandError as exc:
            if attempt == PUSH_ATTEMPTS:
                raise TransientError(f"cannot push {branch}: {_first(exc)}") from exc
            if say:
                say(f"push failed ({_first(exc)}); again in {wait:g} s")
            time.sleep(wait)
            wait *= 2
    return None


def _tip(repo: Repo, ref: str) -> str | None:
    """The commit `ref` names, read from the ref files (no git process)."""
    try:
        sha = SymbolicReference.dereference_recursive(repo, ref)
    except (ValueError, OSError):
        return None
    return str(sha)


def _remote_has(repo: Repo, branch: str) -> bool:
    return _tip(repo, f"refs/remotes/origin/{branch}") is not None


def _first(exc: git.GitCommandError) -> str:
    text = str(exc.stderr or exc).strip().splitlines()
    return text[-1].strip() if text else str(exc)
