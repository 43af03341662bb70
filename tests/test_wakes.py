"""Free wakes: the fingerprint of what ORIENT would see, and a daemon that makes
no model call when a wake brings nothing new (a touch of the spec, an idle
cancel, soda's own write to the spec), yet works when something is new."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from soda.cli.demo import SCRIPT_PATH, prepare
from soda.config import load
from soda.contracts import HumanInput
from soda.human.write import write_input
from soda.llm.function import FunctionModel, submit
from soda.loop.run import Ending, run_loop
from soda.loop.session import Session
from soda.loop.wake import fingerprint, nothing_new
from soda.system.lifecycle import next_wake
from tests.conftest import git, wait_for
from tests.test_daemon import DEMO, query

VERIFIED = {
    "checks": [],
    "task_updates": [],
    "learnings": [],
    "summary": "checked",
    "learning_verdicts": [],
}
NOT_MET = {"spec_satisfied": False, "confidence": "high", "gaps": [], "summary": "not met"}
NO_WORK = {
    "actionable_work_exists": False,
    "new_tasks": [],
    "iteration_plan": None,
    "stuck_reason": "waiting for a person",
    "learnings": [],
}


def stuck_model() -> FunctionModel:
    """Finds the spec unmet and nothing to do: every iteration ends STUCK."""
    return FunctionModel.by_agent(
        {
            "verifier": lambda request: submit(VERIFIED),
            "assessor": lambda request: submit(NOT_MET),
            "planner": lambda request: submit(NO_WORK),
        }
    )


def open_session(tmp_path: Path, model: FunctionModel) -> Session:
    root = tmp_path / "project"
    prepare(root)
    return Session.open(load(root / "soda.toml"), model=model)


def test_the_fingerprint_changes_with_what_orient_would_see(tmp_path: Path) -> None:
    session = open_session(tmp_path, stuck_model())
    spec = session.config.spec_path
    first = fingerprint(session)
    assert fingerprint(session) == first

    os.utime(spec, (1, 1))  # touched, not changed
    assert fingerprint(session) == first
    text = spec.read_text()
    spec.write_text(text + "\nOne more line.\n")
    assert fingerprint(session) != first
    spec.write_text(text)
    assert fingerprint(session) == first  # the content counts, not the write

    root = session.config.root
    git(root, "commit", "-q", "--allow-empty", "-m", "moved", "--no-verify")
    git(root, "branch", "-f", session.milestone.branch, "HEAD")
    moved = fingerprint(session)
    assert moved != first

    session.tracker.start(session.milestone.root_task_id)
    started = fingerprint(session)
    assert started != moved

    write_input(session.config.state_dir, HumanInput(kind="correction", text="smaller steps"))
    session.human.ingest(settle_seconds=0)
    assert fingerprint(session) != started


def test_a_wake_is_free_only_after_a_settled_iteration_with_nothing_new(tmp_path: Path) -> None:
    model = stuck_model()
    session = open_session(tmp_path, model)
    assert nothing_new(session) is None  # no iteration yet
    result = run_loop(session, lambda line: None)
    assert result.ending is Ending.STUCK
    stored = session.db.execute("SELECT fingerprint FROM iterations").fetchone()[0]
    assert stored == fingerprint(session)
    assert nothing_new(session) == "nothing changed since iteration 1 (STUCK)"

    write_input(session.config.state_dir, HumanInput(kind="correction", text="try again"))
    session.human.ingest(settle_seconds=0)
    assert nothing_new(session) is None  # a pending input is always news

    session.human.mark_applied([i.id for i in session.human.pending()], 1, "read")
    assert nothing_new(session) is not None
    original = session.db.execute("SELECT outcome, decision FROM iterations").fetchone()
    cases = [("interrupted", "STUCK"), ("budget", "STUCK"), (original[0], "CONTINUE")]
    for outcome, decision in [*cases, original]:
        # cut short by a signal or a budget, or work left: the next wake goes on
        with session.db.conn:
            session.db.execute(
                "UPDATE iterations SET outcome = ?, decision = ?", [outcome, decision]
            )
        free = nothing_new(session)
        assert (free is not None) == ((outcome, decision) == original), (outcome, decision)


def daemon(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "soda", "daemon-run"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def assessor_met(summary: str) -> dict[str, Any]:
    verdict = {"spec_satisfied": True, "confidence": "high", "gaps": [], "summary": summary}
    return {"agent": "assessor", "tool_calls": [{"name": "submit", "input": verdict}]}


def verifier_ok() -> dict[str, Any]:
    return {"agent": "verifier", "tool_calls": [{"name": "submit", "input": VERIFIED}]}


def test_the_daemon_skips_wakes_with_nothing_new_and_works_on_news(tmp_path: Path) -> None:
    root = tmp_path / "project"
    prepare(root)
    again = [verifier_ok(), assessor_met("still met"), verifier_ok(), assessor_met("amended")]
    again += [verifier_ok(), assessor_met("resumed")]
    text = json.dumps({"responses": DEMO + again}).replace(
        "{python}", json.dumps(sys.executable)[1:-1]
    )
    (root / SCRIPT_PATH).write_text(text)
    process = daemon(root)
    try:
        wait_for(
            lambda: query(root, "SELECT 1 FROM iterations WHERE decision = 'DONE'"), 60, "DONE"
        )
        calls = query(root, "SELECT count(*) FROM agent_calls")[0][0]

        def skipped() -> int:
            return query(root, "SELECT count(*) FROM events WHERE kind = 'wake.skipped'")[0][0]

        before = skipped()
        os.utime(root / "specs" / "SPEC.md")  # a save without a change
        wait_for(lambda: skipped() > before, 15, "the touch's skipped wake")
        before = skipped()
        inbox = root / "state" / "inbox"
        (inbox / "cancel.json").write_text('{"kind": "cancel"}')  # nothing to cancel
        wait_for(lambda: skipped() > before, 15, "the idle cancel's skipped wake")
        assert query(root, "SELECT count(*) FROM agent_calls")[0][0] == calls
        assert query(root, "SELECT max(number) FROM iterations")[0][0] == 2
        idle = "when a person writes (soda tell, state/inbox/, or the spec)"
        wait_for(lambda: next_wake(root / "state") == idle, 10, "the published next wake")

        # News: a person's note makes a new run (its budgets from 0) and an iteration.
        (inbox / "note.md").write_text("is divide rounding right?\n")
        wait_for(
            lambda: query(
                root, "SELECT 1 FROM iterations WHERE number = 3 AND ended_at IS NOT NULL"
            ),
            30,
            "iteration 3",
        )
        runs = "SELECT status FROM runs ORDER BY id"  # the run closes just after its iteration
        wait_for(lambda: query(root, runs) == [("done",), ("done",)], 10, "two runs, done")
        assert query(root, "SELECT run_id FROM iterations WHERE number = 3")[0][0] == 2
        inputs = query(root, "SELECT status, applied_iteration FROM human_inputs")
        assert inputs == [("applied", 3), ("applied", 3)]  # the cancel, then the note

        # A spec change: one iteration; soda's own write to the spec wakes it for free.
        before = skipped()
        change = {"kind": "spec_change", "mode": "amend", "text": "Keep calc.py small."}
        (inbox / "change.json").write_text(json.dumps(change))
        wait_for(
            lambda: query(
                root, "SELECT 1 FROM iterations WHERE number = 4 AND ended_at IS NOT NULL"
            ),
            30,
            "iteration 4",
        )
        assert "Keep calc.py small." in (root / "specs" / "SPEC.md").read_text()
        wait_for(lambda: skipped() > before, 15, "the skipped wake of soda's own spec write")
        assert query(root, "SELECT max(number) FROM iterations")[0][0] == 4

        # A resume is a person asking for work: never a free wake.
        (inbox / "resume.json").write_text('{"kind": "resume"}')
        wait_for(
            lambda: query(
                root, "SELECT 1 FROM iterations WHERE number = 5 AND ended_at IS NOT NULL"
            ),
            30,
            "iteration 5",
        )
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert next_wake(root / "state") is None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
