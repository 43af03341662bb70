"""`soda status` through the real CLI: stopped or running, paused, a plan waiting
for approval, rejected inbox files with their reasons, the last error, budgets;
the same as one JSON object with --json."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from soda.events import Events
from soda.human import HumanQueue
from soda.store import open_db
from tests.conftest import soda
from tests.scripts import submit
from tests.test_cli_small import scripted_project

DEADLINE = 120.0
KEYS = {
    "running",
    "pid",
    "iteration",
    "phase",
    "agent",
    "paused",
    "last_decision",
    "last_reason",
    "pending_inputs",
    "unread_inputs",
    "pending_approval",
    "rejected_inputs",
    "last_error",
    "budgets",
    "questions",
    "next_wake",
    "pull_request",
    "provider_wait",
    "tracker",
}


def status_json(root: Path) -> dict[str, Any]:
    result = soda("status", "--json", cwd=root)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_status_of_a_fresh_project(repo: Path) -> None:
    assert soda("init", cwd=repo).returncode == 0
    found = status_json(repo)
    assert set(found) == KEYS
    assert found["running"] is False and found["pid"] is None
    assert found["paused"] is False and found["pending_approval"] is None
    assert found["rejected_inputs"] == [] and found["last_error"] is None
    assert found["questions"] == [] and found["next_wake"] is None
    assert found["pull_request"] is None and found["tracker"] is None  # [tracker] is off
    day = [b for b in found["budgets"] if b["key"] == "budget.max_cost_usd_per_day"]
    assert day and day[0]["used"] == 0 and day[0]["spent"] is False
    text = soda("status", cwd=repo).stdout.splitlines()
    assert text[0] == "soda: stopped"
    assert not [line for line in text if line.startswith(("last error", "rejected", "waiting"))]


def test_status_shows_the_last_halt_pause_and_rejected_files(tmp_path: Path) -> None:
    bad = submit(
        "verifier",
        {"checks": [], "task_updates": [], "learnings": [], "summary": 42, "learning_verdicts": []},
    )
    root = scripted_project(tmp_path / "project", [bad, bad])  # a repeated slip halts
    assert soda("run", "--once", cwd=root).returncode == 4  # HALT: a contract violation
    assert soda("pause", cwd=root).returncode == 0
    inbox = root / "state" / "inbox"
    (inbox / "notes.json").write_text("{not json")
    assert status_json(root)["unread_inputs"] == 2  # nobody has read them yet
    state = root / "state"
    db = open_db(state / "soda.db")
    HumanQueue(state, db, Events(db)).ingest(settle_seconds=0)  # what a running soda does

    found = status_json(root)
    assert found["paused"] is True and found["unread_inputs"] == 0
    error = found["last_error"]
    assert error["kind"] == "halt" and error["iteration"] == 1
    assert error["reason"].startswith("ContractViolation: ") and "summary" in error["reason"]
    assert found["last_decision"] == "HALT"
    (rejected,) = found["rejected_inputs"]
    assert rejected["file"] == "notes.json"
    assert rejected["reason"].startswith("notes.json: ")
    assert (inbox / "rejected" / "notes.json").is_file()

    text = soda("status", cwd=root).stdout
    assert "soda: stopped, PAUSED (`soda resume` lets it iterate)" in text
    assert "last error: halt in iteration 1 at " in text
    assert "rejected inbox files: 1 in state/inbox/rejected/" in text
    assert f"  {rejected['reason']}" in text.splitlines()


def test_status_names_a_plan_waiting_for_approval_while_running(tmp_path: Path) -> None:
    root = scripted_project(tmp_path / "project")
    config = root / "soda.toml"
    text = config.read_text()
    assert 'risk_threshold = "high"' in text
    config.write_text(text.replace('risk_threshold = "high"', 'risk_threshold = "low"'))
    run = subprocess.Popen(
        [sys.executable, "-m", "soda", "run", "--once"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE
        found = status_json(root)
        while found["pending_approval"] is None:
            assert run.poll() is None, run.communicate()
            assert time.monotonic() < deadline, f"no approval pending: {found}"
            time.sleep(0.1)
            found = status_json(root)
        assert found["running"] is True and found["pid"] == run.pid
        assert found["iteration"] == 1 and found["phase"] == "act"
        assert found["pending_approval"] == {"iteration": 1, "subject": "the plan is low risk"}
        lines = soda("status", cwd=root).stdout.splitlines()
        assert f"soda: running (pid {run.pid})" in lines
        assert (
            "waiting for approval: iteration 1, the plan is low risk"
            " (`soda approve 1` or `soda reject 1`)"
        ) in lines
        assert soda("reject", "1", cwd=root).returncode == 0
        out, err = run.communicate(timeout=DEADLINE)
    finally:
        if run.poll() is None:
            run.kill()
            run.communicate()
    assert run.returncode == 0, err
    assert "approval: the plan is low risk" in out
    after = status_json(root)
    assert after["running"] is False and after["pending_approval"] is None


def test_status_lists_open_questions(repo: Path) -> None:
    from soda.store import questions

    assert soda("init", cwd=repo).returncode == 0
    db = open_db(repo / "state" / "soda.db")
    asked = questions.ask(
        db,
        iteration_id=None,
        iteration=3,
        agent="executor",
        question="Which port should the server use?",
        task_key="t1",
    )
    answered = questions.ask(db, iteration_id=None, iteration=3, agent="executor", question="Old?")
    questions.answer(db, answered, "done")
    found = status_json(repo)
    assert [(q["id"], q["task"], q["question"]) for q in found["questions"]] == [
        (asked, "t1", "Which port should the server use?")
    ]
    assert (
        f"question #{asked} (iteration 3, executor, task t1): Which port should the server use?"
        f' (`soda answer {asked} "..."`)'
    ) in soda("status", cwd=repo).stdout.splitlines()
