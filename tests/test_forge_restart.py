"""Restarts in the middle of talking to the forge repeat nothing: a pull request
opened but not recorded is adopted, a reply posted but not recorded is counted
(simulated by undoing the record, then for real with kill -9 while the GitHub
stand-in holds its answer)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from soda.store import human_inputs
from tests.conftest import git, wait_for
from tests.fakeforge import FakeForge
from tests.test_forge import BRANCH, commit, setup

pytest_plugins = ("tests.fakeforge",)

ROOT = Path(__file__).resolve().parent.parent


def test_restart_after_open_adopts_the_pull_request(
    repo: Path, fake_forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed between opening the pull request and recording it: the next try finds it."""
    pulls, events = setup(repo, fake_forge, monkeypatch)
    tip = git(repo, "rev-parse", BRANCH)
    pulls.publish(tip, "t", "b", events)
    with pulls.db.conn:
        pulls.db.conn.execute("UPDATE forge_pulls SET number = NULL")  # the record a kill lost
    again = pulls.publish(tip, "t", "b", events)
    assert again is not None and again.number == 1
    assert len(fake_forge.pulls) == 1
    posts = [r for r in fake_forge.requests if r.method == "POST" and r.path.endswith("/pulls")]
    assert len(posts) == 1


CHILD = """
import sys
from pathlib import Path

from soda.config import Config, ForgeConfig
from soda.events import Events
from soda.forge import connect
from soda.store import open_db

repo, url, step, commit = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
forge = ForgeConfig(mode="draft", api_url=url, repository="acme/widgets")
db = open_db(repo / "state.db")
pulls = connect(Config(forge=forge, root=repo), db, "soda/spec")
events = Events(db, repo / "events.jsonl")
if step == "publish":
    pulls.publish(commit, "t", "b", events)
else:
    pulls.reply_applied(commit, events)
"""


def killed_while_held(repo: Path, forge: FakeForge, held: tuple[str, str], *args: str) -> None:
    """Run CHILD with `args`; SIGKILL it while the stand-in holds the answer to `held`
    (its effect already done on the forge, the answer not yet read)."""
    forge.held.clear()
    forge.release.clear()
    forge.hold_after = {held}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(repo), forge.url, *args], env=env, cwd=repo
    )
    try:
        wait_for(forge.held.is_set, 60, f"the child to reach {held}")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        forge.hold_after = set()
        forge.release.set()
    assert child.returncode == -signal.SIGKILL


def test_kill_9_mid_open_and_mid_reply_repeats_nothing(
    repo: Path, fake_forge: FakeForge, monkeypatch: pytest.MonkeyPatch
) -> None:
    pulls, events = setup(repo, fake_forge, monkeypatch)
    tip = git(repo, "rev-parse", BRANCH)
    killed_while_held(repo, fake_forge, ("POST", "/repos/{owner}/{repo}/pulls"), "publish", tip)
    assert list(fake_forge.pulls) == [1]  # opened on the forge, its number never recorded
    row = pulls.row()
    assert row is not None and row.number is None and row.pushed_sha == tip
    again = pulls.publish(tip, "t", "b", events)
    assert again is not None and again.number == 1 and list(fake_forge.pulls) == [1]

    inline = fake_forge.add_review_comment(1, "alice", "OWNER", "Rename x", "a.txt", 1)
    assert pulls.poll(events).new_inputs == 1
    (input_id,) = [row[0] for row in human_inputs.pending(pulls.db)]
    human_inputs.mark_applied(pulls.db, [input_id], 2, "read by ORIENT")
    merge = commit(repo, "c.txt", "fixed")
    replies = "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies"
    killed_while_held(repo, fake_forge, ("POST", replies), "reply", merge)
    assert pulls.poll(events).new_inputs == 0  # the reply read back: soda's own
    assert pulls.reply_applied(merge, events) == 0
    answers = [c for c in fake_forge.review_comments[1] if c.get("in_reply_to_id") == inline]
    assert len(answers) == 1
    assert len(human_inputs.pending(pulls.db)) == 0
