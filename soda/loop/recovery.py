"""Crash recovery: what a start does after a kill -9 or a power cut.

Every phase boundary is already in the database, so recovery only has to close
what was left open: iterations without an end are marked aborted (with the phase
they died in), runs whose process is gone are marked aborted, leftover worktrees
are removed, claimed human inputs go back to pending and inbox files stranded
mid-claim are put back, and the commands the dead process still had running
(its `state/activity.json`) are killed.

The milestone branch itself needs nothing: soda moves it only by compare-and-swap
after a passing gate, so it never points at an ungated commit. But the database
can lag behind it: a crash after the ref moved and before the iteration was
recorded leaves a merge on the branch that the database calls aborted (or knows
nothing of). So the branch is the truth for merges: every merge commit on its
first-parent history carrying `Soda-Iteration: N` makes iteration N `merged`, and
the tasks its commits name (`Soda-Task: <id>`) are closed; an iteration lands
one merge per task, its newest one is the iteration's `merged_commit`. What recovery can
prove unfinished is undone instead: tasks left `in_progress` go back to open (only
ACT starts a task, and no ACT runs while recovery holds the lock), and every
`soda-work/*` branch is deleted (each belongs to an iteration that has ended;
what it merged is on the milestone branch).

Call it only while holding the instance lock (or in the foreground, alone).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from datetime import datetime

import git
from git import Repo
from sqlite_utils import Database

from soda.config import Config
from soda.contracts.outcomes import IterationOutcome, TaskStatus
from soda.errors import InputError
from soda.events import Events
from soda.human import HumanQueue
from soda.repo.git import SODA_IDENTITY
from soda.store import runs
from soda.store import tasks as task_rows
from soda.store.db import now
from soda.system.lifecycle import kill_leftovers
from soda.system.lock import pid_alive
from soda.trace import SqliteTracker

MAX_MERGES_SCANNED = 1000
"""Merge commits read per milestone branch, newest first: far more than the
iterations a crash can leave unrecorded, and it keeps start-up bounded."""

CLOCK_SLACK_S = 2.0
"""A merge commit's time (whole seconds) may precede its iteration's start by this
much; an older one belongs to an earlier database that reused the numbers."""

WORK_BRANCHES = "refs/heads/soda-work/"


@dataclass
class RecoveryReport:
    aborted_iterations: list[int]
    aborted_runs: list[int]
    worktrees_removed: int
    inputs_released: int
    files_recovered: int
    merges_recorded: list[int]
    """Iterations whose merge was on the milestone branch but not in the database."""
    tasks_closed: int
    """Tasks closed because a recorded merge carried their work."""
    tasks_reopened: int
    """Tasks left in_progress by an iteration that did not finish, back to open."""
    branches_deleted: int
    """soda-work/* branches of ended iterations."""
    processes_killed: int = 0
    """Process groups of commands (test runs, agents' commands) a dead soda left running."""

    @property
    def anything(self) -> bool:
        return bool(
            self.aborted_iterations
            or self.aborted_runs
            or self.worktrees_removed
            or self.inputs_released
            or self.files_recovered
            or self.merges_recorded
            or self.tasks_closed
            or self.tasks_reopened
            or self.branches_deleted
            or self.processes_killed
        )


def recover(config: Config, db: Database, repo: Repo, events: Events) -> RecoveryReport:
    # Merges first: an iteration whose merge landed is recorded as merged (and
    # ended), so the next step does not call it aborted.
    processes_killed = kill_leftovers(config.state_dir, pid_alive)  # before their worktrees go
    merges_recorded, tasks_closed = record_landed_merges(db, repo)
    dead_runs = [
        run_id for run_id, pid in runs.running(db) if pid != os.getpid() and not pid_alive(pid)
    ]
    aborted = runs.abort_runs(db, dead_runs, "process died")
    worktrees_removed = _remove_worktrees(config, repo)  # before: a checked-out branch stays
    queue = HumanQueue(config.state_dir, db, events)
    report = RecoveryReport(
        aborted_iterations=aborted,
        aborted_runs=dead_runs,
        worktrees_removed=worktrees_removed,
        inputs_released=queue.release_claims(),
        files_recovered=len(queue.recover_claimed_files()),
        merges_recorded=merges_recorded,
        tasks_closed=tasks_closed,
        tasks_reopened=_reopen_stuck_tasks(db),
        branches_deleted=_delete_work_branches(repo),
        processes_killed=processes_killed,
    )
    if report.anything:
        events.emit("recovery", report.__dict__)
    return report


def _remove_worktrees(config: Config, repo: Repo) -> int:
    root = config.state_dir / "worktrees"
    if not root.is_dir():
        return 0
    removed = 0
    for path in root.iterdir():
        try:
            repo.git.worktree("remove", "--force", str(path))
        except Exception:  # not registered any more: just the directory is left
            shutil.rmtree(path, ignore_errors=True)
        removed += 1
    repo.git.worktree("prune")
    return removed


def record_landed_merges(db: Database, repo: Repo) -> tuple[list[int], int]:
    """Make the database agree with each milestone branch about which iterations
    merged; returns (iteration numbers recorded as merged, tasks closed).

    A merge counts for iteration N only if iteration N belongs to a run on that
    branch, the merge's `Soda-Run` trailer (when present) names that run, and the
    merge is not older than the iteration: numbers restart when the database is
    recreated, and an old merge must not be pinned on a new iteration."""
    recorded: list[int] = []
    closed = 0
    for branch in runs.milestone_branches(db):
        # An iteration lands one merge per task; merges are read newest first,
        # so its last merge is recorded and the older ones only close tasks.
        settled: set[int] = set()
        for merge in _soda_merges(repo, branch):
            row = runs.iteration_on_branch(db, merge.iteration, branch)
            if row is None:
                continue
            iteration_id, run_id, outcome, _merged, started_at, ended_at, phase, ms = row
            if merge.run is not None and merge.run != str(run_id):
                continue
            if merge.time + CLOCK_SLACK_S < datetime.fromisoformat(started_at).timestamp():
                continue
            if merge.iteration in settled:
                closed += _close_merged_tasks(db, repo, ms, merge.sha)
                continue
            if outcome == IterationOutcome.MERGED:  # ACT recorded it (merged_commit: its last)
                continue
            runs.save_iteration(
                db,
                iteration_id,
                {
                    "outcome": IterationOutcome.MERGED,
                    "merged_commit": merge.sha,
                    "ended_at": ended_at or now(),
                    "error": f"recorded by crash recovery: the merge landed; the record "
                    f"stopped in phase {phase} ({outcome or 'unfinished'})",
                },
            )
            recorded.append(merge.iteration)
            settled.add(merge.iteration)
            closed += _close_merged_tasks(db, repo, ms, merge.sha)
    return recorded, closed


@dataclass(frozen=True)
class _Merge:
    sha: str
    iteration: int
    run: str | None
    time: float


def _soda_merges(repo: Repo, branch: str) -> list[_Merge]:
    """Merge commits on `branch`'s first-parent history with a `Soda-Iteration`
    trailer, newest first; none when the branch does not exist."""
    if not _git(repo, "rev-parse", "--verify", "-q", f"refs/heads/{branch}", check=False):
        return []
    trailer = "%(trailers:key={},valueonly,separator=%x2C)"
    fields = ["%H", "%ct", trailer.format("Soda-Iteration"), trailer.format("Soda-Run")]
    log = _git(
        repo,
        "log",
        "--first-parent",
        "--merges",
        f"--max-count={MAX_MERGES_SCANNED}",
        f"--format={'%x1f'.join(fields)}",
        f"refs/heads/{branch}",
        "--",
    )
    merges = []
    for line in log.splitlines():
        sha, time, iteration, run = [*line.split("\x1f"), "", "", ""][:4]
        if iteration.strip().isdigit():
            merges.append(_Merge(sha, int(iteration), run.strip() or None, float(time)))
    return merges


def _close_merged_tasks(db: Database, repo: Repo, milestone: str, merge: str) -> int:
    """Close the tasks named by `Soda-Task` trailers on the merged side of `merge`
    (the work branch's own commits: `merge^1..merge^2`)."""
    log = _git(
        repo,
        "log",
        "--format=%(trailers:key=Soda-Task,valueonly,separator=%x2C)",
        f"{merge}^1..{merge}^2",
        "--",
    )
    ids = {int(v) for v in log.replace(",", "\n").split() if v.strip().isdigit()}
    tracker = SqliteTracker(db, milestone)
    closed = 0
    for task_id in sorted(ids):
        try:
            if tracker.show(task_id).status == TaskStatus.CLOSED:
                continue
        except InputError:
            continue  # not a task of this milestone (or not one at all)
        tracker.close(task_id, f"merged in {merge[:10]} (recorded by crash recovery)")
        closed += 1
    return closed


def _reopen_stuck_tasks(db: Database) -> int:
    """Tasks still in_progress go back to open: only ACT starts a task and settles
    it before the iteration ends, so under the lock each one was left by an
    iteration that died."""
    rows = task_rows.in_progress(db)
    for task_id, milestone in rows:
        SqliteTracker(db, milestone).reopen(
            task_id, "back to open: the iteration working on it did not finish"
        )
    return len(rows)


def _delete_work_branches(repo: Repo) -> int:
    """Delete every soda-work/* branch; each belongs to an iteration that ended."""
    names = _git(repo, "for-each-ref", "--format=%(refname:lstrip=2)", WORK_BRANCHES)
    deleted = 0
    for name in names.splitlines():
        with contextlib.suppress(git.GitCommandError):  # e.g. checked out by hand elsewhere
            _git(repo, "branch", "-D", name)
            deleted += 1
    return deleted


def _git(repo: Repo, *args: str, check: bool = True) -> str:
    """git with soda's options (no hooks: see soda.repo.git), whatever opened `repo`."""
    return str(repo.git.execute(["git", *SODA_IDENTITY, *args], with_exceptions=check))
