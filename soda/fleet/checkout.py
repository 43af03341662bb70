"""A run's checkout on a worker: the clone in the worker's cache, made to agree
with the remote (the truth for code), the local record rebuilt from the
workflow's state, the milestone branch pushed after each merge, and the
report of an iteration that merged pushed beside it.

A fresh placement (a new worker, or an attempt that broke off) starts from the
remote: the milestone branch is reset to the remote's (a merge that never
reached the remote is dropped and made again), and the local state directory
is rebuilt: the runs and iterations the workflow remembers, its learnings, its
Trace tasks (same ids) and what the lost worker left on the remote: the
report of the interrupted iteration (`REPORT_REF`), or else the merges its
`Soda-Iteration` trailers name.

Each run's directory in the cache carries a marker (`MARKER`): only such
directories are ever removed (`forget` when the run ends, `sweep` at a
worker's start for the ones left long ago).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

import git
from git import Repo
from git.objects.fun import tree_to_stream
from git.refs.symbolic import SymbolicReference
from gitdb import IStream

from soda.config import CONFIG_NAME, Config, load
from soda.contracts.outcomes import RunStatus, TaskStatus
from soda.errors import SodaError, TransientError, UserError
from soda.fleet.state import (
    CarriedTask,
    IterationReport,
    IterationSummary,
    RunSettings,
    report_from_json,
    report_json,
)
from soda.repo.git import ensure_excluded, harden_git_environment, write_ignored
from soda.repo.milestone import milestone_branch, milestone_name
from soda.repo.push import Retry
from soda.repo.push import push as push_refs
from soda.store import learnings, open_db, runs
from soda.store import tasks as task_rows
from soda.store.db import now

PUSH_RETRY = Retry(attempts=5, wait=0.5)
"""A push that fails is tried 5 times, 0.5 s after the first, doubling."""
REPORT_REF = "refs/soda/runs/{run}/report"
"""Where the remote keeps the report of the run's last iteration that merged
(a commit holding `report.json`), pushed atomically with the milestone."""
REPORT_FILE = "report.json"
MARKER = ".soda-fleet-run"
"""In each run's directory of the cache: made by the worker, the only sign
that lets it remove the directory; its time is the run's last iteration."""
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


def forget(cache: Path, workflow_id: str) -> bool:
    """Remove the run's directory from the cache (the run ended); whether it went."""
    return _remove(run_home(cache, workflow_id).home)


def sweep(cache: Path, max_age: float) -> list[str]:
    """Remove the run directories in `cache` whose last iteration is older than
    `max_age` seconds (call it before taking runs: none is held); their names.
    A directory without the worker's marker is never touched."""
    removed: list[str] = []
    if not cache.is_dir():
        return removed
    for home in sorted(cache.iterdir()):
        try:
            age = time.time() - (home / MARKER).stat().st_mtime
        except OSError:
            continue  # not a run's directory (or not one this worker made)
        if age > max_age and _remove(home):
            removed.append(home.name)
    return removed


def _remove(home: Path) -> bool:
    """Remove a marked run directory; the marker goes last, so a directory
    that could not all be removed is tried again by a later sweep."""
    if not (home / MARKER).is_file():
        return False
    shutil.rmtree(home / CLONE_DIR, ignore_errors=True)
    if (home / CLONE_DIR).exists():
        return False
    shutil.rmtree(home, ignore_errors=True)
    return not home.exists()


def prepare(checkout: RunCheckout, settings: RunSettings, fresh: bool) -> tuple[Config, bool]:
    """Clone (or fetch) the repository; the run's config, and whether its record
    starts afresh. When `fresh` (or on a new clone), the local state is thrown
    away and the milestone reset to the remote's."""
    harden_git_environment()
    root = checkout.root
    root.parent.mkdir(parents=True, exist_ok=True)
    marker = checkout.home / MARKER
    if not marker.exists():
        marker.write_text(settings.repo_url + "\n", encoding="utf-8")
    marker.touch()  # its time: the run's last iteration here (see `sweep`)
    if not (root / ".git").exists():
        shutil.rmtree(root, ignore_errors=True)
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
        path = write_ignored(Repo(checkout.root), FLEET_CONFIG, settings.config_text)
    if settings.spec_text is not None and settings.spec:  # an issue's, never committed
        write_ignored(Repo(checkout.root), settings.spec, settings.spec_text)
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


def rebuild(
    config: Config,
    history: list[IterationSummary],
    kept: list[str],
    carried: list[CarriedTask] | None = None,
) -> None:
    """A fresh state directory learns what the workflow remembers: one closed run
    holding the finished iterations (numbers go on from them), the learnings,
    and the Trace tasks it carries, with their ids (the root's description is
    the spec, read here again)."""
    if not history and not kept and not carried:
        return
    db = open_db(config.db_path)
    try:
        if carried:
            task_rows.restore(db, _task_rows(config, carried))
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


def _task_rows(config: Config, carried: list[CarriedTask]) -> list[task_rows.Task]:
    milestone = milestone_name(config)
    ids = {task.id for task in carried}
    root = min((task.id for task in carried if task.parent_id is None), default=None)
    stamp = now()
    rows = []
    for task in carried:
        description = task.description
        if task.id == root:
            description = config.spec_path.read_text(encoding="utf-8")
        parent = task.parent_id if task.parent_id in ids else root
        rows.append(
            task_rows.Task(
                task.id,
                milestone,
                None if task.id == root else parent,
                task.title,
                description,
                TaskStatus(task.status),
                task.reason,
                task.risk,
                stamp,
                stamp,
                stamp if task.status == TaskStatus.CLOSED else None,
            )
        )
    return rows


@dataclass(frozen=True)
class Landed:
    """What the remote's milestone holds of one iteration whose worker was lost."""

    commit: str
    """Its newest merge."""
    tasks: frozenset[int]
    """The Trace tasks its merges name (`Soda-Task`): their work landed."""


def landed(config: Config, number: int) -> Landed | None:
    """The merges on the remote's milestone branch whose `Soda-Iteration` trailer
    names iteration `number` (they landed before their worker was lost)."""
    repo = Repo(config.root)
    ref = f"origin/{milestone_branch(config)}"
    if not _remote_has(repo, milestone_branch(config)):
        return None
    trailer = "%(trailers:key={},valueonly,separator=%x2C)"
    log = repo.git.log(
        "--first-parent",
        "--merges",
        "--max-count=50",
        f"--format=%H%x1f{trailer.format('Soda-Iteration')}%x1f{trailer.format('Soda-Task')}",
        ref,
        "--",
    )
    commit, tasks = None, set()
    for line in log.splitlines():
        sha, value, task = [*line.split("\x1f"), "", ""][:3]
        if value.strip() != str(number):
            continue
        commit = commit or sha
        tasks |= {int(v) for v in task.split(",") if v.strip().isdigit()}
    return Landed(commit, frozenset(tasks)) if commit else None


def stored_report(config: Config, run: str, token: str, number: int) -> IterationReport | None:
    """The report of iteration `number` the remote keeps for this run (pushed with
    its merges by a worker lost before it could tell the workflow), if any."""
    repo = Repo(config.root)
    ref = REPORT_REF.format(run=run)
    pattern = ref.rsplit("/", 1)[0] + "/*"
    try:
        repo.git.fetch("--prune", "origin", f"+{pattern}:{pattern}")
        data = repo.git.show(f"{ref}:{REPORT_FILE}", stdout_as_string=False)
    except git.GitCommandError:
        return None  # none stored (or unreadable): the trailers say what landed
    report = report_from_json(bytes(data), token)
    return report if report is not None and report.summary.number == number else None


def push(config: Config, say: Callable[[str], None] | None = None) -> str | None:
    """Push the milestone branch to the remote (after each merge), retrying; its
    tip once the remote has it. A push that never succeeds is a TransientError:
    the merge is not reported as landed."""
    return _push(config, [], say)


def publish(
    config: Config,
    run: str,
    report: IterationReport | None,
    token: str,
    say: Callable[[str], None] | None = None,
) -> str | None:
    """Push what the milestone still lacks on the remote and, when given, the
    iteration's report (`REPORT_REF`), in one atomic push; the milestone's tip.
    A report that could not be stored while the milestone is on the remote
    is only said: the workflow hears it from this worker anyway."""
    if report is None:
        return _push(config, [], say)
    repo = Repo(config.root)
    commit = _report_commit(repo, report_json(report, token), report.summary.number)
    try:
        return _push(config, [f"+{commit}:{REPORT_REF.format(run=run)}"], say)
    except TransientError as exc:
        tip = _tip(repo, f"refs/heads/{milestone_branch(config)}")
        if tip is None or tip != _tip(repo, f"refs/remotes/origin/{milestone_branch(config)}"):
            raise
        if say:
            say(f"the report of iteration {report.summary.number} was not stored: {exc}")
        return tip


def _push(config: Config, extra: list[str], say: Callable[[str], None] | None) -> str | None:
    repo = Repo(config.root)
    branch = milestone_branch(config)
    tip = _tip(repo, f"refs/heads/{branch}")
    specs = list(extra)
    if tip is not None and tip != _tip(repo, f"refs/remotes/origin/{branch}"):
        specs.insert(0, f"refs/heads/{branch}:refs/heads/{branch}")
    if not specs:
        return tip  # nothing new since the last push (or the fetch)
    try:
        atomic = len(specs) > 1
        push_refs(
            config.root, "origin", specs, atomic=atomic, retry=PUSH_RETRY, env=os.environ, say=say
        )
    except SodaError as exc:  # rejected too: another worker moved the remote
        raise TransientError(f"cannot push {branch}: {exc}") from exc
    return tip


def _report_commit(repo: Repo, data: bytes, number: int) -> str:
    """A commit (no parent) whose tree holds the report: written to the object
    database by GitPython, no git process."""

    def write(kind: bytes, body: bytes) -> bytes:
        return bytes(repo.odb.store(IStream(kind, len(body), BytesIO(body))).binsha)

    blob = write(b"blob", data)
    tree = BytesIO()
    tree_to_stream([(blob, 0o100644, REPORT_FILE)], tree.write)
    tree_sha = write(b"tree", tree.getvalue())
    stamp = f"soda <soda@localhost> {int(time.time())} +0000"
    body = (
        f"tree {tree_sha.hex()}\nauthor {stamp}\ncommitter {stamp}\n\n"
        f"soda fleet: the report of iteration {number}\n"
    )
    return write(b"commit", body.encode()).hex()


def tip(config: Config) -> str | None:
    """The local milestone branch's tip (None before its first merge here)."""
    return _tip(Repo(config.root), f"refs/heads/{milestone_branch(config)}")


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
