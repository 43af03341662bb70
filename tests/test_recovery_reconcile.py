"""Crash recovery reconciles the database with the milestone branch.

A real soda process opens a session on the demo project, starts iteration 1 in
ACT, starts its tasks, commits work on the iteration's branch and (in one case)
merges it onto the milestone branch exactly as ACT does, then is SIGKILLed before
anything is recorded. A fresh `recover()` must then tell the truth: a merge that
landed is recorded as merged with its commit and its task closed; an iteration
that never merged stays aborted; unfinished tasks go back to open, and no
soda-work branch survives.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from git import Repo

from soda.cli.demo import prepare
from soda.config import load
from soda.events import Events
from soda.loop.recovery import recover
from soda.store import open_db
from tests.conftest import git

CHILD = """
import json, os, signal, sys
from pathlib import Path
from soda.repo.workspace import merge_into_milestone
from soda.config import load
from soda.loop.session import Session

root, merge = Path(sys.argv[1]), sys.argv[2] == "merge"
session = Session.open(load(root / "soda.toml"))
record = session.begin_iteration().record
record.save(phase="act")
tracker, parent = session.tracker, session.milestone.root_task_id
done = tracker.create("add divide", parent_id=parent)
untouched = tracker.create("write docs", parent_id=parent)
for task in (done, untouched):
    tracker.start(task.id)
branch = f"soda-work/{session.milestone.name}/iter-{record.number}"
ws = session.checkouts.work(session.milestone.branch, branch)
(ws.path / "divide.py").write_text("def divide(a, b):\\n    return a / b\\n")
ws.commit_all(f"add divide\\n\\nA divide function.\\n\\nSoda-Task: {done.id}")
merged = None
if merge:
    message = (
        f"soda: divide\\n\\n- add divide\\n\\n"
        f"Soda-Iteration: {record.number}\\nSoda-Run: {session.run_id}\\n"
    )
    merged = merge_into_milestone(ws, message)
print(json.dumps({"done": done.id, "untouched": untouched.id, "merged": merged,
                  "branch": branch, "number": record.number}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)  # the crash: nothing after the ref move is recorded
"""


def crash_in_act(tmp_path: Path, merge: bool) -> tuple[Path, dict[str, Any]]:
    """Run a soda process until ACT's merge (or just its commit), then SIGKILL it."""
    root = tmp_path / "project"
    prepare(root)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), "merge" if merge else "commit"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    return root, json.loads(child.stdout)


def restart(root: Path):
    """What the next start does: open the state afresh and recover."""
    config = load(root / "soda.toml")
    db = open_db(config.db_path)
    report = recover(config, db, Repo(root), Events(db))
    return report, db


def task_status(db: Any, task_id: int) -> tuple[str, str | None]:
    return db.execute("SELECT status, status_reason FROM tasks WHERE id = ?", [task_id]).fetchone()


def test_a_merge_that_landed_before_the_crash_is_recorded(tmp_path: Path) -> None:
    root, left = crash_in_act(tmp_path, merge=True)
    assert git(root, "rev-parse", "soda/spec") == left["merged"]  # the ref did move
    assert git(root, "branch", "--list", "soda-work/*")  # and the work branch is left over

    report, db = restart(root)

    row = db.execute(
        "SELECT outcome, merged_commit, ended_at IS NOT NULL FROM iterations WHERE number = ?",
        [left["number"]],
    ).fetchone()
    assert row == ("merged", left["merged"], 1)
    status, reason = task_status(db, left["done"])
    assert status == "closed" and left["merged"][:10] in reason
    assert task_status(db, left["untouched"])[0] == "open"
    assert git(root, "branch", "--list", "soda-work/*") == ""
    assert report.merges_recorded == [left["number"]]
    assert report.aborted_iterations == []  # merged, not aborted
    assert (report.tasks_closed, report.tasks_reopened, report.branches_deleted) == (1, 1, 1)
    event = db.execute("SELECT data_json FROM events WHERE kind = 'recovery'").fetchone()
    assert json.loads(event[0])["merges_recorded"] == [left["number"]]

    again, _ = restart(root)  # a second start finds nothing left to do
    assert not again.anything


def test_an_iteration_that_never_merged_stays_aborted(tmp_path: Path) -> None:
    root, left = crash_in_act(tmp_path, merge=False)
    milestone_before = git(root, "rev-parse", "soda/spec")

    report, db = restart(root)

    row = db.execute(
        "SELECT outcome, merged_commit, error FROM iterations WHERE number = ?", [left["number"]]
    ).fetchone()
    assert row == ("aborted", None, "aborted in phase act")
    for task in (left["done"], left["untouched"]):
        assert task_status(db, task)[0] == "open"
    assert git(root, "rev-parse", "soda/spec") == milestone_before
    assert git(root, "branch", "--list", "soda-work/*") == ""
    assert report.aborted_iterations == [left["number"]] and report.merges_recorded == []
    assert (report.tasks_closed, report.tasks_reopened, report.branches_deleted) == (0, 2, 1)


@pytest.mark.parametrize("trailer", ["Soda-Run: 99", None])
def test_a_merge_is_not_pinned_on_an_iteration_it_does_not_belong_to(
    tmp_path: Path, trailer: str | None
) -> None:
    """A merge naming another run, or one older than the iteration (a recreated
    database reusing the numbers), leaves the iteration as it was."""
    root, left = crash_in_act(tmp_path, merge=False)
    tip = git(root, "rev-parse", "soda/spec")
    tree = git(root, "rev-parse", f"{tip}^{{tree}}")
    side = git(root, "commit-tree", tree, "-p", tip, "-m", "side")
    lines = [f"Soda-Iteration: {left['number']}"] + ([trailer] if trailer else [])
    old = {"GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z"} if trailer is None else {}
    merge = subprocess.run(
        ["git", "commit-tree", tree, "-p", tip, "-p", side, "-m", "soda: x\n\n" + "\n".join(lines)],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **old},
    ).stdout.strip()
    git(root, "update-ref", "refs/heads/soda/spec", merge, tip)

    report, db = restart(root)

    row = db.execute(
        "SELECT outcome, merged_commit FROM iterations WHERE number = ?", [left["number"]]
    ).fetchone()
    assert row == ("aborted", None)
    assert report.merges_recorded == []
