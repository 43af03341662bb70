"""Crash recovery: what a start does after a kill -9 or a power cut.

Every phase boundary is already in the database, so recovery only has to close
what was left open: iterations without an end are marked aborted (with the phase
they died in), runs whose process is gone are marked aborted, leftover worktrees
are removed, claimed human inputs go back to pending and inbox files stranded
mid-claim are put back. The milestone branch needs nothing: soda moves it only by
compare-and-swap after a passing gate, so it never points at an ungated commit.
Call it only while holding the instance lock (or in the foreground, alone).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from git import Repo
from sqlite_utils import Database

from soda import inbox
from soda.config import Config
from soda.events import Events
from soda.store.db import now


@dataclass
class RecoveryReport:
    aborted_iterations: list[int]
    aborted_runs: list[int]
    worktrees_removed: int
    inputs_released: int
    files_recovered: int

    @property
    def anything(self) -> bool:
        return bool(
            self.aborted_iterations
            or self.aborted_runs
            or self.worktrees_removed
            or self.inputs_released
            or self.files_recovered
        )


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover(config: Config, db: Database, repo: Repo, events: Events) -> RecoveryReport:
    dead_runs = [
        run_id
        for run_id, pid in db.execute("SELECT id, pid FROM runs WHERE status = 'running'")
        if pid != os.getpid() and not pid_alive(pid)
    ]
    aborted = []
    stamp = now()
    with db.conn:
        for run_id in dead_runs:
            rows = db.execute(
                "SELECT id, number, phase FROM iterations WHERE run_id = ? AND ended_at IS NULL",
                [run_id],
            ).fetchall()
            for iteration_id, number, phase in rows:
                db["iterations"].update(
                    iteration_id,
                    {"outcome": "aborted", "error": f"aborted in phase {phase}", "ended_at": stamp},
                )
                aborted.append(number)
            db["runs"].update(
                run_id, {"status": "aborted", "ended_at": stamp, "final_reason": "process died"}
            )
    report = RecoveryReport(
        aborted_iterations=aborted,
        aborted_runs=dead_runs,
        worktrees_removed=_remove_worktrees(config, repo),
        inputs_released=inbox.release_claims(db),
        files_recovered=len(inbox.recover_claimed_files(config.state_dir, db, events)),
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
