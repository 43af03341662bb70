"""A two-issue queue worked by the real daemon in its own process, killed with -9
at random points and started again, for tests/test_tracker_kill9.py (a few
trials) and bench/tracker_kill9.py (the 20-trial run).

The world: the demo's project (its failing acceptance tests removed, so DONE
can be confirmed) with pull requests and the tracker on, against the GitHub
stand-in (tests/fakeforge.py) and a local Messages-API server (tests/fakeapi.py)
where a behavioural fake answers: each issue asks for `notes/issue-N.txt`; the
planner plans it, the executor writes it, the assessor calls the spec met once
the file is on the issue's branch. Two issues by a writer (the second depends on
the first), and a writer's comment on the first before anything runs.

`check` says what must hold however the kills fell: each issue done, with
exactly one pull request (`Closes #N`), one start comment, one comment per
merged iteration and one DONE comment, no event told twice, and the writer's
comment read once, as one input.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from soda.forge.body import MARKER
from soda.llm.base import ModelRequest
from soda.llm.function import FunctionModel, Reply, submit
from tests.conftest import wait_for
from tests.fakeapi import FakeAPI
from tests.fakeforge import NAME, OWNER, TOKEN, FakeForge
from tests.plan_fakes import VERIFIED, executor, plan, planning, task
from tests.sample import sample_project
from tests.test_daemon import query
from tests.test_effectiveness import on_the_wire

KEY = "sk-ant-test-not-real"
_ISSUE = re.compile(r"\(issue (\d+)\)")
SETTINGS = {
    'provider = "scripted"': 'provider = "anthropic"',
    'strong = "scripted"': 'strong = "claude-sonnet-4-6"',
    'fast = "scripted"': 'fast = "claude-sonnet-4-6"',
    'mode = "off"': 'mode = "draft"',
    "# repository = (not set)": f'repository = "{OWNER}/{NAME}"',
    "enabled = false\n# The label that means": "enabled = true\n# The label that means",
    "model\n# call.\npoll_seconds = 60.0": "model\n# call.\npoll_seconds = 0.0",
    "tick_seconds = 5.0": "tick_seconds = 0.2",
}


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True, text=True)


def model(root: Path) -> FunctionModel:
    """The behavioural fake: each issue's spec asks for notes/issue-N.txt."""

    def issue(request: ModelRequest) -> str:
        found = _ISSUE.search(request.messages[0].text)
        assert found, "an issue's spec names its issue"
        return found.group(1)

    def assessor(request: ModelRequest) -> Reply:
        number = issue(request)
        there = git(
            root, "cat-file", "-e", f"soda/issue-{number}:notes/issue-{number}.txt", check=False
        )
        met = there.returncode == 0
        summary = "the note is there" if met else "the note is missing"
        return submit({"spec_satisfied": met, "confidence": "high", "gaps": [], "summary": summary})

    def planner(request: ModelRequest) -> Reply:
        return submit(planning(plan(task(f"issue-{issue(request)}"), intent="write the note")))

    return FunctionModel.by_agent(
        {
            "verifier": lambda request: submit(VERIFIED),
            "assessor": assessor,
            "planner": planner,
            "executor": executor,
        }
    )


@dataclass
class Trial:
    root: Path
    forge: FakeForge
    api: FakeAPI
    issues: list[int] = field(default_factory=list)
    said: int = 0
    """The writer's comment on the first issue."""
    kills: list[int] = field(default_factory=list)
    """The events count at each kill."""

    def close(self) -> None:
        self.forge.release.set()
        self.forge.server.shutdown()
        self.forge.server.server_close()
        self.api.close()


def make_trial(where: Path) -> Trial:
    """A fresh project, stand-in forge and model API; two labelled issues."""
    os.environ["GITHUB_TOKEN"] = TOKEN
    os.environ["ANTHROPIC_API_KEY"] = KEY
    bare = where / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    forge = FakeForge(bare)
    forge.thread.start()
    api = FakeAPI()
    api.start()
    settings = {
        **SETTINGS,
        'api_url = "https://api.github.com"': f'api_url = "{forge.url}"',
        "# base_url = (not set)": f'base_url = "{api.url}"',
    }
    root = sample_project(where, settings=settings)
    api.respond = on_the_wire(model(root))
    (root / "tests" / "test_acceptance.py").unlink()
    git(root, "commit", "-q", "-am", "the tracker's project")
    git(root, "remote", "add", "origin", str(bare))
    git(root, "push", "-q", "origin", "main")
    trial = Trial(root, forge, api)
    first = forge.add_issue("alice", "OWNER", "First note", "- [ ] notes/issue-101.txt", ("soda",))
    second = forge.add_issue(
        "bob", "MEMBER", "Second note", "- [ ] notes/issue-102.txt\n\nDepends on #101", ("soda",)
    )
    trial.issues = [first, second]
    trial.said = forge.add_issue_comment(first, "alice", "OWNER", "Keep the note short.")
    return trial


def start_daemon(root: Path) -> subprocess.Popen[bytes]:
    with (root / "state" / "daemon-out.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "soda", "daemon-run"], cwd=root, stdout=log, stderr=log
        )
    ready = root / "state" / "daemon.ready"
    wait_for(
        lambda: (
            (ready.exists() and ready.read_text().strip() == str(process.pid))
            or process.poll() is not None
        ),
        60,
        "the daemon's readiness",
    )
    assert process.poll() is None, "the daemon exited before it was ready"
    return process


def events(root: Path) -> int:
    return int(query(root, "SELECT count(*) FROM events")[0][0])


def all_done(root: Path) -> bool:
    states = query(root, "SELECT state FROM tracker_items")
    return len(states) == 2 and {s for (s,) in states} == {"done"}


def run_with_kills(trial: Trial, rng: random.Random, kills: int, span: int = 60) -> None:
    """Start the daemon, kill it with -9 after a random number of events (up to
    `span` more), `kills` times (fewer if the queue is done first), then let a
    last daemon finish the queue and stop it cleanly. A daemon that exits by
    itself is an AssertionError with the end of its output."""
    root = trial.root
    for _ in range(kills):
        if all_done(root):
            break
        daemon = start_daemon(root)
        target = events(root) + rng.randint(1, span)
        try:
            wait_for(
                lambda: events(root) >= target or all_done(root) or daemon.poll() is not None,  # noqa: B023
                120,
                f"event {target}",
            )
            exited(root, daemon)
        finally:
            if daemon.poll() is None:
                os.kill(daemon.pid, signal.SIGKILL)
            daemon.wait()
        trial.kills.append(events(root))
    daemon = start_daemon(root)
    try:
        wait_for(lambda: all_done(root) or daemon.poll() is not None, 180, "the queue done")
        exited(root, daemon)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(60)


def exited(root: Path, daemon: subprocess.Popen[bytes]) -> None:
    if daemon.poll() is not None:
        said = (root / "state" / "daemon-out.log").read_text(errors="replace")[-3000:]
        raise AssertionError(f"the daemon exited by itself ({daemon.returncode}): {said}")


def check(trial: Trial) -> list[str]:
    """What must hold after the trial; the problems found (none, we hope)."""
    problems: list[str] = []
    root, forge = trial.root, trial.forge
    if not all_done(root):
        problems.append(f"not all done: {query(root, 'SELECT number, state FROM tracker_items')}")
    for number in trial.issues:
        branch = f"soda/issue-{number}"
        pulls = [p for p in forge.pulls.values() if p["head"] == branch]
        if len(pulls) != 1 or not str(pulls[0]["body"]).startswith(f"Closes #{number}"):
            problems.append(f"#{number}: pull requests {[p['body'][:30] for p in pulls]}")
        ours = [c["body"] for c in forge.issue_comments.get(number, []) if MARKER in c["body"]]
        told = [re.findall(r"<!-- soda:event (\S+) -->", body)[0] for body in ours]
        if len(told) != len(set(told)):
            problems.append(f"#{number}: an event told twice: {told}")
        merged = [
            n
            for (n,) in query(
                root,
                "SELECT i.number FROM iterations i JOIN runs r ON i.run_id = r.id"
                " WHERE r.milestone_branch = ? AND i.merged_commit IS NOT NULL",
                branch,
            )
        ]
        owed = ["start", *(f"merged-{n}" for n in merged), "done"]
        if sorted(told) != sorted(owed):
            problems.append(f"#{number}: told {told}, owed {owed}")
        if told and told[0] != "start":
            problems.append(f"#{number}: the start was not first: {told}")
    inputs = query(
        root, "SELECT count(*) FROM human_inputs WHERE source_file LIKE ?", f"%comment-{trial.said}"
    )
    if inputs[0][0] != 1:
        problems.append(f"the writer's comment became {inputs[0][0]} inputs")
    return problems
